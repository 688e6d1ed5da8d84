/**
 * OAuth against a server of our own (`fixtures/oauth-server.ts`) that behaves as an attacker
 * would: it quotes the bearer token in its errors and results, and its authorization server
 * quotes the refresh token when it refuses one. The token must reach the store's 0600 file and
 * nowhere else; without anyone to approve, the error says to log in.
 */
import {
  fileTokenStoreLayer,
  headlessAuthorizationLayer,
  loginMcpServer,
  logoutMcpServer,
  loopbackAuthorizationLayer,
  McpTokenStore,
  memoryTokenStoreLayer,
  tokenFile
} from "@agentloop/mcp"
import type { HttpServerConfig } from "@agentloop/mcp"
import { toolCall, turn } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startOAuthServer } from "./fixtures/oauth-server.ts"
import { resultsOf, runWithMcp, serversLayer, textOf } from "./helpers.ts"

const config = (url: string): HttpServerConfig => ({ name: "secure", transport: "http", url })

const everything = (value: unknown): string => JSON.stringify(value)

describe("OAuth", () => {
  it.effect("authorizes, keeps the token in a 0600 file only, and never hands it on", () =>
    Effect.gen(function*() {
      const server = yield* startOAuthServer()
      const directory = mkdtempSync(join(tmpdir(), "agentloop-oauth-"))
      const run = yield* runWithMcp([
        turn.toolCalls([toolCall("c1", "secure__leak_error", {}), toolCall("c2", "secure__leak_result", {})]),
        turn.text("done")
      ]).pipe(
        Effect.provide(
          serversLayer([config(server.url)]).pipe(
            Layer.provide(Layer.mergeAll(headlessAuthorizationLayer, fileTokenStoreLayer(directory)))
          )
        )
      )
      const token = server.issued[0]!
      assert.strictEqual(server.authorizations, 1)
      const [error, result] = resultsOf(run.result.messages)
      assert.isTrue(error!.isError)
      assert.include(textOf(error!), "<redacted>")
      assert.include(textOf(result!), "you sent <redacted>")
      // nowhere in the transcript, the events, the results' details
      assert.notInclude(everything(run.result), token)
      assert.notInclude(everything(run.events), token)

      const [file, ...others] = readdirSync(directory)
      assert.deepStrictEqual(others, [])
      assert.strictEqual(join(directory, file!), tokenFile(directory, { server: "secure", url: server.url }))
      assert.strictEqual(statSync(join(directory, file!)).mode & 0o777, 0o600)
      assert.strictEqual(statSync(directory).mode & 0o777, 0o700)
      assert.include(readFileSync(join(directory, file!), "utf8"), token)
    }))

  it.effect("without anyone to approve, fails the layer saying to log in", () =>
    Effect.gen(function*() {
      const server = yield* startOAuthServer()
      const error = yield* Effect.flip(
        Layer.build(serversLayer([config(server.url)]).pipe(Layer.provide(memoryTokenStoreLayer())))
      )
      assert.strictEqual(error._tag, "McpConnectError")
      assert.include(error.message, "needs authorization")
      assert.include(error.message, "agentloop mcp login secure")
      assert.strictEqual(server.authorizations, 0)
    }))

  it.effect("uses stored tokens without asking again, and refreshes one that expired", () =>
    Effect.gen(function*() {
      const server = yield* startOAuthServer({ expiresIn: 120 })
      const store = memoryTokenStoreLayer()
      const storeContext = yield* Layer.build(store)
      const login = loginMcpServer({ name: "secure", transport: "http", url: server.url }).pipe(
        Effect.provide(headlessAuthorizationLayer)
      )
      yield* Effect.provide(login, storeContext)
      assert.strictEqual(server.authorizations, 1)
      // a later session: no one to approve, the stored token is enough
      const call = runWithMcp([turn.toolCalls([toolCall("c1", "secure__leak_result", {})]), turn.text("done")])
      const first = yield* call.pipe(Effect.provide(serversLayer([config(server.url)])), Effect.provide(storeContext))
      assert.isFalse(resultsOf(first.result.messages)[0]!.isError)
      assert.strictEqual(server.refreshes, 0)
      // past expires_in: refreshed before the request, still without asking
      yield* TestClock.adjust("10 minutes")
      const second = yield* call.pipe(Effect.provide(serversLayer([config(server.url)])), Effect.provide(storeContext))
      assert.isFalse(resultsOf(second.result.messages)[0]!.isError)
      assert.strictEqual(server.refreshes, 1)
      assert.strictEqual(server.authorizations, 1)
    }))

  it.effect("an authorization server that quotes the refresh token in its refusal does not get it shown", () =>
    Effect.gen(function*() {
      const server = yield* startOAuthServer({ expiresIn: 120 })
      const storeContext = yield* Layer.build(memoryTokenStoreLayer())
      yield* loginMcpServer({ name: "secure", transport: "http", url: server.url }).pipe(
        Effect.provide(headlessAuthorizationLayer),
        Effect.provide(storeContext)
      )
      const stored = yield* Effect.gen(function*() {
        const store = yield* McpTokenStore
        return yield* store.load({ server: "secure", url: server.url })
      }).pipe(Effect.provide(storeContext))
      const refresh = String(stored?.tokens?.["refresh_token"])
      server.refuseRefresh = true
      yield* TestClock.adjust("10 minutes")
      const error = yield* Effect.flip(
        Layer.build(serversLayer([config(server.url)])).pipe(Effect.provide(storeContext))
      )
      assert.notInclude(error.message, refresh)
      assert.notInclude(error.message, server.issued[0]!)
    }))

  it.effect("logout forgets the server", () =>
    Effect.gen(function*() {
      const server = yield* startOAuthServer()
      const directory = mkdtempSync(join(tmpdir(), "agentloop-oauth-"))
      const stores = fileTokenStoreLayer(directory)
      yield* loginMcpServer({ name: "secure", transport: "http", url: server.url }).pipe(
        Effect.provide(Layer.mergeAll(headlessAuthorizationLayer, stores))
      )
      assert.strictEqual(readdirSync(directory).length, 1)
      yield* logoutMcpServer({ server: "secure", url: server.url }).pipe(Effect.provide(stores))
      assert.deepStrictEqual(readdirSync(directory), [])
    }))

  describe("loopbackAuthorizationLayer", () => {
    /** The browser's part, done by the test: what it was shown, and what the redirect page said. */
    const browser = (visit: (url: URL) => Promise<string>) => {
      const shown: Array<{ readonly url: string; readonly server: string }> = []
      const pages: Array<string> = []
      const layer = loopbackAuthorizationLayer({
        open: (url, server) =>
          Effect.promise(async () => {
            shown.push({ url, server: server.server })
            pages.push(await visit(new URL(url)))
          })
      })
      return { shown, pages, layer }
    }
    const redirectOf = (url: URL) => new URL(url.searchParams.get("redirect_uri") ?? "")
    const text = (response: Response) => response.text()

    it.effect("shows the URL, takes the code the browser brings back to 127.0.0.1, and stops listening", () =>
      Effect.gen(function*() {
        const server = yield* startOAuthServer()
        const storeContext = yield* Layer.build(memoryTokenStoreLayer())
        const user = browser(async (url) => {
          // a request for something else is not the callback
          const other = await fetch(new URL("/favicon.ico", redirectOf(url)))
          assert.strictEqual(other.status, 404)
          // the authorization server approves and sends the browser back to the redirect URL
          return text(await fetch(url))
        })
        yield* loginMcpServer(config(server.url)).pipe(Effect.provide(user.layer), Effect.provide(storeContext))
        assert.strictEqual(server.authorizations, 1)
        assert.strictEqual(user.shown.length, 1)
        assert.strictEqual(user.shown[0]!.server, "secure")
        const redirect = redirectOf(new URL(user.shown[0]!.url))
        assert.strictEqual(redirect.hostname, "127.0.0.1")
        assert.strictEqual(redirect.pathname, "/callback")
        assert.include(user.pages[0], "Authorized. You can close this tab.")
        const stored = yield* Effect.gen(function*() {
          return yield* (yield* McpTokenStore).load({ server: "secure", url: server.url })
        }).pipe(Effect.provide(storeContext))
        assert.strictEqual(stored?.tokens?.["access_token"], server.issued[0])
        // the listener is closed once the login is done
        const after = yield* Effect.promise(() => fetch(redirect).then(() => "answered", () => "refused"))
        assert.strictEqual(after, "refused")
      }))

    it.effect("a refusal brought back to the redirect URL fails the login, saying so", () =>
      Effect.gen(function*() {
        const server = yield* startOAuthServer()
        const user = browser(async (url) => {
          const back = redirectOf(url)
          back.searchParams.set("error", "access_denied")
          back.searchParams.set("state", url.searchParams.get("state") ?? "")
          return text(await fetch(back))
        })
        const error = yield* Effect.flip(
          loginMcpServer(config(server.url)).pipe(Effect.provide(Layer.merge(user.layer, memoryTokenStoreLayer())))
        )
        assert.strictEqual(error._tag, "McpAuthError")
        assert.include(error.message, "the authorization server refused: access_denied")
        assert.include(user.pages[0], "Not authorized")
        assert.strictEqual(server.issued.length, 0)
      }))
  })
})
