import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { fileURLToPath } from "node:url"

const bin = fileURLToPath(new URL("../bin/agentloop.js", import.meta.url))

const run = (args: ReadonlyArray<string>, env: Record<string, string | undefined> = {}) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ["--conditions=agentloop-source", bin, ...args], {
      env: { ...process.env, ...env }
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

const sse = (chunks: ReadonlyArray<unknown>) =>
  chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + "data: [DONE]\n\n"

/** Two answers in OpenAI's streaming format: a tool call, then text. */
const answers = [
  sse([
    {
      choices: [{
        index: 0,
        delta: {
          role: "assistant",
          tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "read", arguments: "" } }]
        },
        finish_reason: null
      }]
    },
    {
      choices: [{
        index: 0,
        delta: { tool_calls: [{ index: 0, function: { arguments: "{\"path\":\"src/math.js\"}" } }] },
        finish_reason: null
      }]
    },
    { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] }
  ]),
  sse([
    { choices: [{ index: 0, delta: { role: "assistant", content: "add subtracts; " }, finish_reason: null }] },
    { choices: [{ index: 0, delta: { content: "that is the bug." }, finish_reason: "stop" }] }
  ])
]

describe("agentloop demo --provider (against a server on loopback)", () => {
  it("runs the session against an OpenAI-compatible server", async () => {
    const bodies: Array<Record<string, unknown>> = []
    const server = createServer((req, res) => {
      let body = ""
      req.on("data", (d) => (body += d))
      req.on("end", () => {
        bodies.push(JSON.parse(body) as Record<string, unknown>)
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.end(answers[bodies.length - 1] ?? "")
      })
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const { port } = server.address() as AddressInfo
    try {
      const result = await run([
        "demo",
        "--provider",
        "openai-compat",
        "--base-url",
        `http://127.0.0.1:${port}/v1`,
        "--model",
        "local-model"
      ])
      assert.strictEqual(result.code, 0, result.stderr + result.stdout)
      assert.include(result.stdout, "openai-compat local-model at http://127.0.0.1:")
      assert.include(result.stdout, "✓ read src/math.js")
      assert.include(result.stdout, "assistant add subtracts; that is the bug.")
      assert.include(result.stdout, "invariants   all three hold")
      assert.notInclude(result.stdout, "Next: the same session on a real model", "on a real model already")
      assert.strictEqual(bodies.length, 2)
      assert.strictEqual(bodies[0]!["model"], "local-model")
      assert.deepStrictEqual(
        (bodies[0]!["tools"] as Array<{ function: { name: string } }>).map((t) => t.function.name),
        ["read", "write", "edit", "bash", "grep", "find", "ls"]
      )
      const second = bodies[1]!["messages"] as Array<{ role: string; tool_call_id?: string }>
      assert.deepStrictEqual(second.map((m) => m.role), ["system", "user", "assistant", "tool"])
      assert.strictEqual(second[3]!.tool_call_id, "call_1")
    } finally {
      server.close()
    }
  }, 120_000)

  it("a missing API key is a clear error before anything runs", async () => {
    const result = await run(["demo", "--provider", "anthropic", "--model", "claude-sonnet-4-5"], {
      ANTHROPIC_API_KEY: ""
    })
    assert.strictEqual(result.code, 1)
    assert.include(result.stderr, "missing API key")
    assert.include(result.stderr, "ANTHROPIC_API_KEY")
    assert.strictEqual(result.stdout, "", "nothing ran")
  }, 120_000)

  it("a named key variable that is not set is a clear error", async () => {
    const result = await run([
      "demo",
      "--provider",
      "openai-compat",
      "--model",
      "m",
      "--api-key-env",
      "AGENTLOOP_TEST_NO_SUCH_KEY"
    ])
    assert.strictEqual(result.code, 1)
    assert.include(result.stderr, "AGENTLOOP_TEST_NO_SUCH_KEY (--api-key-env) is not set")
  }, 120_000)

  it("--model is required with a real provider", async () => {
    const result = await run(["demo", "--provider", "openai-compat"])
    assert.strictEqual(result.code, 1)
    assert.include(result.stderr, "--model is required with --provider openai-compat")
  }, 120_000)

  it("a server that is not there is a clear error naming it", async () => {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const { port } = server.address() as AddressInfo
    await new Promise<void>((resolve) => server.close(() => resolve()))
    const result = await run([
      "demo",
      "--provider",
      "openai-compat",
      "--base-url",
      `http://127.0.0.1:${port}/v1`,
      "--model",
      "m"
    ])
    assert.strictEqual(result.code, 1)
    assert.include(result.stdout, `No answer from http://127.0.0.1:${port}/v1`)
    assert.include(result.stdout, "Is the server running")
  }, 120_000)
})
