import { assert, describe, it } from "@effect/vitest"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { jsonLines, makeWorkspace, providerFlags, scriptServer, sessionFiles, startCli, testEnv } from "./helpers/agent.ts"

const SCHEMA = {
  type: "object",
  properties: { title: { type: "string" }, count: { type: "integer", minimum: 0 } },
  required: ["title", "count"],
  additionalProperties: false
}

const ESC = "\u001b"

describe("agentloop run --output-schema", () => {
  it("an invalid answer goes back to the model; the valid one is printed alone as JSON on stdout, exit 0", async () => {
    const ws = makeWorkspace()
    writeFileSync(join(ws, "answer.schema.json"), JSON.stringify(SCHEMA))
    const server = await scriptServer([
      { text: "Looking.", calls: [{ id: "f1", name: "final_answer", args: { title: "calc", count: "two" } }] },
      { calls: [{ id: "f2", name: "final_answer", args: { title: "calc", count: 2 } }] }
    ])
    try {
      const cli = startCli(["run", ...providerFlags(server), "--output-schema", "answer.schema.json", "summarise"], {
        cwd: ws,
        env: testEnv(ws)
      })
      const { code } = await cli.exited
      assert.strictEqual(code, 0, cli.output() + cli.stderr())
      assert.strictEqual(cli.output(), `${JSON.stringify({ title: "calc", count: 2 }, null, 2)}\n`, "stdout holds the answer only")
      assert.include(cli.stderr(), "assistant Looking.", "the run is shown on stderr")
      assert.notInclude(cli.stderr(), ESC)
      const tools = server.bodies[0]!.body["tools"] as Array<{ function: { name: string; parameters: unknown } }>
      const finalAnswer = tools.find((t) => t.function.name === "final_answer")
      assert.deepStrictEqual(finalAnswer?.function.parameters, SCHEMA, "the model is given the file's schema")
      const second = JSON.stringify(server.bodies[1]!.body["messages"])
      assert.include(second, "Invalid final answer", "the problem goes back to the model")
      assert.strictEqual(server.bodies.length, 2, "no request after the accepted answer")
      const [file] = sessionFiles(ws)
      const end = jsonLines(file!).find((l) => l["type"] === "run_end")!
      assert.deepStrictEqual([end["reason"], end["output"]], ["stop", { title: "calc", count: 2 }])
    } finally {
      await server.close()
    }
  }, 120_000)

  it("no valid answer within the bound: non-zero exit naming why, nothing on stdout", async () => {
    const ws = makeWorkspace()
    writeFileSync(join(ws, "answer.schema.json"), JSON.stringify(SCHEMA))
    const server = await scriptServer((_body, index) => ({
      calls: [{ id: `f${index}`, name: "final_answer", args: { title: 7, count: -1 } }]
    }))
    try {
      const cli = startCli(["run", ...providerFlags(server), "--output-schema", "answer.schema.json", "summarise"], {
        cwd: ws,
        env: testEnv(ws)
      })
      const { code } = await cli.exited
      assert.strictEqual(code, 1, cli.stderr())
      assert.strictEqual(cli.output(), "")
      assert.match(cli.stderr(), /agentloop: run ended: error \(the model gave no valid final answer after 3 attempt\(s\): /)
      assert.strictEqual(server.bodies.length, 3)
    } finally {
      await server.close()
    }
  }, 120_000)

  it("a bad schema file is a clear error (exit 2) before any request", async () => {
    const ws = makeWorkspace()
    writeFileSync(join(ws, "broken.json"), "{ not json")
    writeFileSync(join(ws, "ref.json"), JSON.stringify({ type: "object", properties: { a: { $ref: "#/$defs/a" } } }))
    writeFileSync(join(ws, "ok.json"), JSON.stringify(SCHEMA))
    const server = await scriptServer([])
    try {
      const run = async (...args: Array<string>) => {
        const cli = startCli(["run", ...providerFlags(server), ...args, "task"], { cwd: ws, env: testEnv(ws) })
        const { code } = await cli.exited
        return { code, out: cli.output(), err: cli.stderr() }
      }
      const [broken, ref, missing, durable] = await Promise.all([
        run("--output-schema", "broken.json"),
        run("--output-schema", "ref.json"),
        run("--output-schema", "missing.json"),
        run("--durable", "--output-schema", "ok.json")
      ])
      assert.strictEqual(broken.code, 2)
      assert.match(broken.err, /^agentloop: --output-schema broken\.json: not valid JSON \(.+\)\n$/)
      assert.strictEqual(ref.code, 2)
      assert.match(ref.err, /^agentloop: --output-schema ref\.json: unsupported JSON Schema at [^\n]*properties\/a[^\n]*\$ref[^\n]*\n$/)
      assert.strictEqual(missing.code, 2)
      assert.strictEqual(missing.err, "agentloop: --output-schema missing.json: cannot read it (ENOENT)\n")
      assert.strictEqual(durable.code, 2)
      assert.include(durable.err, "--output-schema cannot be used with --durable")
      for (const r of [broken, ref, missing, durable]) assert.strictEqual(r.out, "")
      assert.strictEqual(server.bodies.length, 0, "no request was made")
      assert.deepStrictEqual(sessionFiles(ws), [], "no session was started")
    } finally {
      await server.close()
    }
  }, 120_000)
})
