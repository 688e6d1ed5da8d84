import { decodeSessionRecord, loadTranscript, pairingViolations } from "@agentloop/core"
import type { Message, TranscriptRecord } from "@agentloop/core"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import {
  jsonLines,
  makeWorkspace,
  providerFlags,
  scriptServer,
  sessionFiles,
  startCli,
  testEnv
} from "./helpers/agent.ts"

const load = (file: string) => Effect.runPromise(loadTranscript(file).pipe(Effect.provide(NodeServices.layer)))

const ESC = "\u001b"

describe("agentloop run (in a pipe)", () => {
  it("runs the task with --yes: plain text, the session saved and paired, exit 0 on stop", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([
      {
        calls: [{ id: "c1", name: "write", args: { path: "hello.txt", content: "hi\n" } }],
        usage: { input: 100, output: 10 }
      },
      {
        calls: [{
          id: "c2",
          name: "bash",
          args: { command: "cat hello.txt; env; printf '\\033]52;c;ZXZpbA==\\007\\033[2J'" }
        }],
        usage: { input: 120, output: 12 }
      },
      { text: `done \u001b[2Jcleared? \u001b]0;title\u0007no.`, usage: { input: 130, output: 5, cached: 100 } }
    ])
    try {
      const cli = startCli([
        "run",
        "--yes",
        ...providerFlags(server),
        "--api-key-env",
        "AGENTLOOP_TEST_KEY",
        "write hello.txt"
      ], {
        cwd: ws,
        env: testEnv(ws, { AGENTLOOP_TEST_KEY: "sk-secret-4242", OPENAI_API_KEY: "sk-openai-4242" })
      })
      const { code } = await cli.exited
      const out = cli.output()
      assert.strictEqual(code, 0, out + cli.stderr())
      assert.include(out, "✓ write hello.txt")
      assert.include(out, "✓ bash cat hello.txt")
      const third = JSON.stringify(server.bodies[2]!.body["messages"])
      assert.include(third, "PATH=", "bash ran env")
      assert.notInclude(third, "sk-secret-4242", "bash does not see the key named by --api-key-env")
      assert.notInclude(third, "sk-openai-4242", "nor the known provider keys")
      assert.include(out, "done cleared? no.")
      assert.notInclude(out, ESC, "no escape sequence reaches a pipe (model text, tool output, our own colours)")
      assert.include(out, "usage: 250 tokens in (100 cached), 27 out", out)
      assert.strictEqual(readFileSync(join(ws, "hello.txt"), "utf8"), "hi\n")
      const [file] = sessionFiles(ws)
      const lines = jsonLines(file!)
      assert.strictEqual(lines[0]!["type"], "session")
      assert.strictEqual(lines[0]!["cwd"], ws)
      assert.strictEqual(lines[0]!["model"], "test-model")
      const types = lines.map((l) => (l["type"] ?? l["role"]) as string)
      assert.deepStrictEqual(types.filter((t) => t === "run_start" || t === "run_end"), ["run_start", "run_end"])
      assert.deepStrictEqual(types.filter((t) => t === "turn_start").length, 3)
      // every record the CLI wrote is one of core's session records, as written
      for (const l of lines) {
        if (typeof l["type"] === "string") {
          assert.isTrue(decodeSessionRecord(l as TranscriptRecord)?.ok, JSON.stringify(l))
        }
      }
      const approvals = lines.filter((l) => l["type"] === "approval")
      // --yes is the yes mode, and the records say so
      assert.deepStrictEqual(approvals.map((a) => [a["name"], a["decision"], a["by"], a["mode"]]), [
        ["write", "approved", "mode", "yes"],
        ["bash", "approved", "mode", "yes"]
      ])
      const loaded = await load(file!)
      assert.deepStrictEqual(loaded.messages.map((m: Message) => m.role), [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "toolResult",
        "assistant"
      ])
      assert.deepStrictEqual(pairingViolations(loaded.messages), [])
      const end = lines.find((l) => l["type"] === "run_end")!
      assert.strictEqual(end["reason"], "stop")
      // OpenAI counts cached tokens in prompt_tokens
      assert.deepStrictEqual((end["usage"] as { input: number })["input"], 250)
    } finally {
      await server.close()
    }
  }, 120_000)

  it("without a terminal and without --yes, calls needing approval are denied with a reason saying so", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([
      {
        calls: [{ id: "r1", name: "read", args: { path: "a.txt" } }, {
          id: "b1",
          name: "bash",
          args: { command: "touch pwned" }
        }]
      },
      { text: "ok" }
    ])
    writeFileSync(join(ws, "a.txt"), "content of a\n")
    try {
      const cli = startCli(["run", ...providerFlags(server), "try"], { cwd: ws, env: testEnv(ws) })
      cli.endInput()
      const { code } = await cli.exited
      assert.strictEqual(code, 0, cli.output() + cli.stderr())
      assert.isFalse(existsSync(join(ws, "pwned")), "the denied command did not run")
      assert.include(cli.output(), "⊘ bash  denied: needs approval, but agentloop is not running in a terminal")
      const second = server.bodies[1]!.body["messages"] as Array<
        { role: string; content: string; tool_call_id?: string }
      >
      const results = second.filter((m) => m.role === "tool")
      assert.include(results[0]!.content, "content of a", "read-only calls run without asking")
      assert.include(results[1]!.content, "not running in a terminal")
      assert.include(results[1]!.content, "--yes")
    } finally {
      await server.close()
    }
  }, 120_000)

  it("exit codes name the reason: maxSteps (4), error (1); a usage error is 2 with one line on stderr", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer((_body, index) => ({
      calls: [{ id: `r${index}`, name: "read", args: { path: "nope" } }]
    }))
    const broken = await scriptServer([])
    await broken.close()
    try {
      const steps = startCli(["run", "--max-steps", "2", ...providerFlags(server), "loop"], {
        cwd: ws,
        env: testEnv(ws)
      })
      const error = startCli(["run", ...providerFlags(broken), "x"], { cwd: ws, env: testEnv(ws) })
      const usage = startCli(["run", "x"], { cwd: ws, env: testEnv(ws) })
      const [a, b, c] = await Promise.all([steps.exited, error.exited, usage.exited])
      assert.strictEqual(a.code, 4, steps.stderr())
      assert.include(steps.stderr(), "run ended: maxSteps")
      assert.strictEqual(b.code, 1, error.stderr())
      assert.include(error.stderr(), "run ended: error")
      assert.strictEqual(c.code, 2)
      assert.match(usage.stderr(), /^agentloop: no model configured: pass --provider[^\n]*\n$/)
      assert.strictEqual(usage.output(), "")
    } finally {
      await server.close()
    }
  }, 120_000)

  it("--mcp starts an MCP server whose tools the model can call next to the coding tools", async () => {
    const ws = makeWorkspace()
    const fixture = fileURLToPath(new URL("../../mcp/test/fixtures/misbehaving-server.ts", import.meta.url))
    let echo = ""
    const server = await scriptServer((body, index) => {
      if (index === 0) {
        const names = (body["tools"] as Array<{ function: { name: string } }>).map((t) => t.function.name)
        echo = names.find((n) => n.endsWith("__echo")) ?? "missing"
        return { calls: [{ id: "m1", name: echo, args: { text: "hello over mcp" } }] }
      }
      return { text: "ok" }
    })
    try {
      const cli = startCli([
        "run",
        "--yes",
        ...providerFlags(server),
        "--mcp",
        `${process.execPath} ${fixture}`,
        "use mcp"
      ], { cwd: ws, env: testEnv(ws) })
      const { code } = await cli.exited
      assert.strictEqual(code, 0, cli.output() + cli.stderr())
      const names = (server.bodies[0]!.body["tools"] as Array<{ function: { name: string } }>).map((t) =>
        t.function.name
      )
      assert.includeMembers(names, ["read", "write", "edit", "bash", echo])
      const second = server.bodies[1]!.body["messages"] as Array<{ role: string; content: string }>
      assert.include(second[second.length - 1]!.content, "hello over mcp", cli.output())
    } finally {
      await server.close()
    }
  }, 120_000)
})
