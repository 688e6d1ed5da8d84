import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { startOAuthServer } from "../../mcp/test/fixtures/oauth-server.ts"
import {
  jsonLines,
  makeWorkspace,
  providerFlags,
  scriptServer,
  sessionFiles,
  startCli,
  testEnv
} from "./helpers/agent.ts"

describe("agentloop mcp login / logout", () => {
  it(
    "login prints the URL, completes on the loopback redirect, keeps the token in a 0600 file only; a run then " +
      "uses it; logout forgets it; an unknown server is one line, exit 2",
    async () => {
      const scope = Effect.runSync(Scope.make())
      try {
        const oauth = await Effect.runPromise(Scope.provide(startOAuthServer(), scope))
        const ws = makeWorkspace()
        mkdirSync(join(ws, ".agentloop"))
        writeFileSync(
          join(ws, ".agentloop", "config.json"),
          JSON.stringify({ mcpServers: { secure: { url: oauth.url } } })
        )
        const env = testEnv(ws)
        const tokens = join(ws, ".no-user-state", "agentloop", "mcp-oauth")

        const login = startCli(["mcp", "login", "secure"], { cwd: ws, env })
        await login.waitFor(/http:\/\/127\.0\.0\.1:\d+\/authorize\?\S+/, 90_000)
        const url = /(http:\/\/127\.0\.0\.1:\d+\/authorize\?\S+)/.exec(login.output())![1]!
        // the "browser": the fixture's authorization server approves at once and redirects to the CLI
        const back = await fetch(url, { redirect: "follow" })
        assert.include(await back.text(), "Authorized")
        assert.strictEqual((await login.exitedWithin(90_000)).code, 0, login.stderr())
        assert.include(login.output(), `logged in to "secure"`)
        const token = oauth.issued[0]!
        const [file, ...others] = readdirSync(tokens)
        assert.deepStrictEqual(others, [])
        assert.strictEqual(statSync(join(tokens, file!)).mode & 0o777, 0o600)
        assert.include(readFileSync(join(tokens, file!), "utf8"), token)
        assert.notInclude(login.output() + login.stderr(), token)

        // a run uses the stored token: the server's tools are offered, no login asked
        const model = await scriptServer([{ text: "done" }])
        try {
          const run = startCli(["run", ...providerFlags(model), "hello"], { cwd: ws, env })
          assert.strictEqual((await run.exitedWithin(120_000)).code, 0, run.stderr())
          const tools = JSON.stringify(model.bodies[0]!.body["tools"])
          assert.include(tools, "secure__")
          assert.strictEqual(oauth.authorizations, 1, "no second authorization")
          for (const f of sessionFiles(ws)) assert.notInclude(JSON.stringify(jsonLines(f)), token)
        } finally {
          await model.close()
        }

        const logout = startCli(["mcp", "logout", "secure"], { cwd: ws, env })
        assert.strictEqual((await logout.exitedWithin(90_000)).code, 0, logout.stderr())
        assert.notInclude(readdirSync(tokens).map((f) => readFileSync(join(tokens, f), "utf8")).join(""), token)

        const unknown = startCli(["mcp", "login", "nope"], { cwd: ws, env })
        assert.strictEqual((await unknown.exitedWithin(90_000)).code, 2)
        assert.include(unknown.stderr(), `no MCP server "nope" in the config's mcpServers (there are: secure)`)
      } finally {
        await Effect.runPromise(Scope.close(scope, Exit.void))
      }
    },
    240_000
  )
})
