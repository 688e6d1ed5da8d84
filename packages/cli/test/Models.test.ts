import { assert, describe, it } from "@effect/vitest"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { answer, makeWorkspace, providerFlags, scriptServer, startCli, testEnv } from "./helpers/agent.ts"

describe("models in chat (in a pseudo-terminal)", () => {
  it(
    "/model lists the server's models and the known ones; /thinking high reaches the request; /model " +
      "anthropic:NAME switches provider to where the config says; the usage line shows the context used",
    async () => {
      const ws = makeWorkspace()
      const server = await scriptServer([
        { text: "first", usage: { input: 1200, output: 34 } },
        { text: "second" },
        { text: "third from anthropic" }
      ])
      mkdirSync(join(ws, ".agentloop"))
      writeFileSync(
        join(ws, ".agentloop", "config.json"),
        JSON.stringify({ providers: { anthropic: { baseUrl: server.url, apiKeyEnv: "AGENTLOOP_TEST_KEY" } } })
      )
      try {
        const cli = startCli(["chat", "--context-window", "10000", ...providerFlags(server)], {
          cwd: ws,
          env: testEnv(ws, { AGENTLOOP_TEST_KEY: "k-test" }),
          pty: true
        })
        let at = await answer(cli, "/help for commands", "/model")
        await cli.waitFor(/lists 2 model\(s\):\s+other-model {2}test-model/, 90_000, at)
        await cli.waitFor("anthropic:claude-sonnet-4-5", 90_000, at)
        at = await answer(cli, "/thinking off|low|medium|high", "hello", at)
        await cli.waitFor("first", 90_000, at)
        // 1200 in + 34 out of the 10,000-token window
        await cli.waitFor("context: 1234 of 10.0k (12%)", 90_000, at)
        at = await answer(cli, "context:", "/thinking high", at)
        at = await answer(cli, "thinking: high", "again", at)
        await cli.waitFor("second", 90_000, at)
        at = await answer(cli, "usage:", "/model anthropic:claude-test", at)
        at = await answer(cli, "model: anthropic:claude-test", "and now", at)
        await cli.waitFor("third from anthropic", 90_000, at)
        cli.write("/exit\r")
        assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())
        assert.notProperty(server.bodies[0]!.body, "reasoning_effort")
        assert.strictEqual(server.bodies[1]!.body["reasoning_effort"], "high")
        assert.strictEqual(server.bodies[2]!.path, "/v1/messages", "the third request went to the anthropic API")
        assert.strictEqual(server.bodies[2]!.body["model"], "claude-test")
        assert.deepStrictEqual(server.bodies[2]!.body["thinking"], { type: "enabled", budget_tokens: 24576 })
      } finally {
        await server.close()
      }
    },
    240_000
  )
})
