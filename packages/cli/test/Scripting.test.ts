import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { JsonLine } from "../src/JsonOutput.ts"
import { makeWorkspace, providerFlags, scriptServer, startCli, testEnv } from "./helpers/agent.ts"

const decodeLine = Schema.decodeUnknownSync(JsonLine)

/** Every stdout line, decoded with the documented schema (a line that does not decode fails the test). */
const linesOf = (stdout: string) =>
  stdout.split("\n").filter((l) => l.length > 0).map((l, i) => {
    try {
      return decodeLine(JSON.parse(l))
    } catch (e) {
      throw new Error(`stdout line ${i + 1} is not a JsonLine: ${l.slice(0, 300)}\n${String(e)}`)
    }
  })

describe("scripting: run --json, --quiet, run -", () => {
  it("--json: every stdout line decodes with JsonLine: the session first, the events, the result last", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([
      { calls: [{ id: "b1", name: "bash", args: { command: "echo from-bash" } }], usage: { input: 10, output: 2 } },
      { text: "all done", usage: { input: 20, output: 3 } }
    ])
    try {
      const cli = startCli(["run", "--json", "--yes", ...providerFlags(server), "say hi"], {
        cwd: ws,
        env: testEnv(ws)
      })
      const { code } = await cli.exitedWithin(120_000)
      assert.strictEqual(code, 0, cli.stderr())
      const lines = linesOf(cli.output())
      assert.strictEqual(lines[0]!.type, "session")
      const last = lines.at(-1)!
      assert.deepInclude(last, { type: "result", reason: "stop", steps: 2, exitCode: 0 })
      assert.deepInclude((last as { usage: object }).usage, { input: 30, output: 5 })
      const types = lines.map((l) => l.type)
      for (const t of ["turn_start", "model_event", "assistant_message", "tool_start", "tool_end", "turn_end"]) {
        assert.include(types, t)
      }
      assert.isTrue(types.indexOf("turn_start") < types.indexOf("model_event"), "turn_start before the stream")
      const end = lines.find((l) => l.type === "tool_end")
      assert.include(JSON.stringify(end), "from-bash")
      // nothing but JSON lines on stdout: the header and the usage line went to stderr
      assert.include(cli.stderr(), "usage:")
    } finally {
      await server.close()
    }
  }, 180_000)

  it("--json on a run that ends maxSteps: the result line carries the reason and the exit code, 4", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([{ calls: [{ id: "b1", name: "bash", args: { command: "true" } }] }])
    try {
      const cli = startCli(["run", "--json", "--yes", "--max-steps", "1", ...providerFlags(server), "loop"], {
        cwd: ws,
        env: testEnv(ws)
      })
      const { code } = await cli.exitedWithin(120_000)
      assert.strictEqual(code, 4)
      assert.deepInclude(linesOf(cli.output()).at(-1)!, { type: "result", reason: "maxSteps", exitCode: 4 })
    } finally {
      await server.close()
    }
  }, 180_000)

  it("run - reads the task from stdin; --quiet prints only the final answer", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([{ text: "the answer\nin two lines" }])
    try {
      const cli = startCli(["run", "--quiet", ...providerFlags(server), "-"], { cwd: ws, env: testEnv(ws) })
      cli.write("a task\nfrom stdin, over lines\n")
      cli.endInput()
      const { code } = await cli.exitedWithin(120_000)
      assert.strictEqual(code, 0, cli.stderr())
      assert.strictEqual(cli.output(), "the answer\nin two lines\n")
      assert.strictEqual(cli.stderr(), "")
      const messages = server.bodies[0]!.body["messages"] as Array<{ role: string; content: unknown }>
      assert.include(JSON.stringify(messages.at(-1)), "a task\\nfrom stdin, over lines\\n")
      const empty = startCli(["run", ...providerFlags(server), "-"], { cwd: ws, env: testEnv(ws) })
      empty.endInput()
      assert.strictEqual((await empty.exitedWithin(120_000)).code, 2)
      assert.include(empty.stderr(), "the task is empty")
    } finally {
      await server.close()
    }
  }, 180_000)
})
