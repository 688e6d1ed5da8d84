import { assert, describe, it } from "@effect/vitest"
import { existsSync } from "node:fs"
import { join } from "node:path"
import {
  jsonLines,
  makeWorkspace,
  providerFlags,
  scriptServer,
  sessionFiles,
  startCli,
  testEnv
} from "./helpers/agent.ts"

describe("provider and approval flags", () => {
  it("--no-prompt-cache: Anthropic requests carry no cache_control breakpoints (they do by default)", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer(() => ({ text: "hi" }))
    const env = testEnv(ws, { AGENTLOOP_TEST_KEY: "test-key" })
    try {
      const run = async (...extra: Array<string>) => {
        const cli = startCli(["run", ...providerFlags(server, "anthropic"), ...extra, "say hi"], { cwd: ws, env })
        const { code } = await cli.exited
        assert.strictEqual(code, 0, cli.stderr())
      }
      await Promise.all([run(), run("--no-prompt-cache")])
      const cached = server.bodies.filter((b) => JSON.stringify(b.body).includes("cache_control"))
      assert.strictEqual(server.bodies.length, 2)
      assert.strictEqual(cached.length, 1, "only the default run marks breakpoints")
    } finally {
      await server.close()
    }
  }, 120_000)

  it(
    "--approval-timeout on a durable run: an unanswered call is denied when the time is up and the run goes on; " +
      "a bad value is exit 2",
    async () => {
      const ws = makeWorkspace()
      const server = await scriptServer([
        { calls: [{ id: "b1", name: "bash", args: { command: "touch never" } }] },
        { text: "understood" }
      ])
      try {
        const bad = startCli(["run", "--durable", "--approval-timeout", "soon", ...providerFlags(server), "x"], {
          cwd: ws,
          env: testEnv(ws)
        })
        assert.strictEqual((await bad.exited).code, 2)
        assert.include(
          bad.stderr(),
          `--approval-timeout must be a positive duration (seconds, or e.g. "3 days", "90 minutes"), got "soon"`
        )

        const cli = startCli([
          "run",
          "--durable",
          "--approval-timeout",
          "2",
          ...providerFlags(server),
          "needs approval"
        ], {
          cwd: ws,
          env: testEnv(ws)
        })
        cli.endInput()
        const { code } = await cli.exited
        assert.strictEqual(code, 0, cli.output() + cli.stderr())
        assert.include(cli.output(), "waiting for an answer: agentloop approve")
        assert.include(cli.output(), "⊘ bash denied: no answer to the approval request within 2s")
        assert.include(cli.output(), "understood")
        assert.isFalse(existsSync(join(ws, "never")))
        const messages = JSON.stringify(server.bodies[1]!.body["messages"])
        assert.include(messages, "no answer to the approval request within 2s", "the model is told why")
        const [file] = sessionFiles(ws)
        const approvals = jsonLines(file!).filter((l) => l["type"] === "approval")
        assert.deepStrictEqual(
          approvals.map((a) => [a["toolCallId"], a["decision"], a["by"], a["reason"]]),
          [["b1", "denied", "timeout", "no answer to the approval request within 2s"]]
        )
      } finally {
        await server.close()
      }
    },
    240_000
  )
})
