/**
 * Authorization for HTTP servers: OAuth 2.1 as the MCP specification describes it. A server that
 * answers `401` (or `403` with `insufficient_scope`) is authorized with the SDK's `auth()`:
 * protected-resource and authorization-server metadata discovery, dynamic client registration or a
 * client ID metadata document (or pre-registered credentials), PKCE, the `resource` indicator,
 * scope selection and step-up, and token refresh. The request is then sent again.
 *
 * Two services decide what a program can do:
 *
 * - `McpTokenStore`: where each server's client registration and tokens are kept. Default: a file
 *   per server in `$XDG_STATE_HOME/agentloop/mcp-oauth/` (`~/.local/state/…`), mode 0600, written
 *   atomically (`fileTokenStoreLayer`). Tokens never appear anywhere else: not in errors, events,
 *   logs, results or session files (a server that echoes one gets `<redacted>`).
 * - `McpAuthorization`: how the user approves access when a new authorization is needed (no
 *   tokens, or ones that cannot be refreshed). Default: nobody can (`needsLoginLayer`): the server
 *   fails with an `McpAuthError` that says to log in, while stored tokens are still used and
 *   refreshed. `loopbackAuthorizationLayer` opens the browser (or prints the URL) and listens on a
 *   loopback redirect; `headlessAuthorizationLayer` follows the redirects itself, for
 *   authorization servers that approve without a person (tests, CI).
 *
 * `loginMcpServer` and `logoutMcpServer` are the verbs a CLI's `mcp login NAME` / `mcp logout NAME`
 * are made of.
 *
 * @since 0.1.0
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Context, Deferred, Effect, Layer, Schema, Scope } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { constants, promises as fs } from "node:fs"
import { createServer } from "node:http"
import { homedir } from "node:os"
import { join } from "node:path"
import type { HttpServerConfig } from "./Config.ts"
import { McpAuthError } from "./Errors.ts"
import { makeOAuth } from "./internal/oauth.ts"

// --- the token store ---------------------------------------------------------------------------

/**
 * What is kept for one server: the OAuth client it is registered as (from dynamic registration or
 * a client ID metadata document) and the tokens, as the SDK gave them (with the `issuer` they are
 * bound to), plus when they were obtained.
 *
 * @since 0.1.0
 * @category schemas
 */
export const StoredAuth = Schema.Struct({
  server: Schema.String,
  url: Schema.String,
  client: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown)),
  tokens: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown)),
  obtainedAt: Schema.optionalKey(Schema.Number)
})
/**
 * @since 0.1.0
 * @category models
 */
export type StoredAuth = typeof StoredAuth.Type

/**
 * Which entry of the store a server uses: its name and URL (a name that now points somewhere else
 * does not get the tokens of the old URL).
 *
 * @since 0.1.0
 * @category models
 */
export interface McpAuthKey {
  readonly server: string
  readonly url: string
}

/**
 * @since 0.1.0
 * @category services
 */
export interface McpTokenStoreShape {
  readonly load: (key: McpAuthKey) => Effect.Effect<StoredAuth | undefined>
  readonly save: (key: McpAuthKey, auth: StoredAuth) => Effect.Effect<void, McpAuthError>
  readonly remove: (key: McpAuthKey) => Effect.Effect<void, McpAuthError>
}

/**
 * Where servers' OAuth registrations and tokens are kept. Default: `fileTokenStoreLayer()`.
 *
 * @since 0.1.0
 * @category services
 */
export class McpTokenStore extends Context.Reference<McpTokenStoreShape>("@agentloop/mcp/McpTokenStore", {
  defaultValue: () => makeFileTokenStore(defaultTokenDirectory(process.env))
}) {}

/**
 * The default folder of the token store: `$XDG_STATE_HOME/agentloop/mcp-oauth` (default
 * `~/.local/state/agentloop/mcp-oauth`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const defaultTokenDirectory = (env: NodeJS.ProcessEnv): string => {
  const state = env["XDG_STATE_HOME"] !== undefined && env["XDG_STATE_HOME"].length > 0 ?
    env["XDG_STATE_HOME"] :
    join(homedir(), ".local", "state")
  return join(state, "agentloop", "mcp-oauth")
}

/**
 * The file of a server in a token store folder: a hash of its name and URL, so no name can lead
 * outside the folder.
 *
 * @since 0.1.0
 * @category constructors
 */
export const tokenFile = (directory: string, key: McpAuthKey): string =>
  join(directory, `${createHash("sha256").update(`${key.server}\n${key.url}`).digest("hex").slice(0, 32)}.json`)

const decodeStored = Schema.decodeUnknownOption(Schema.fromJsonString(StoredAuth))

const storeError = (key: McpAuthKey, what: string) => (error: unknown) =>
  new McpAuthError({
    server: key.server,
    message: `MCP server "${key.server}": could not ${what} its tokens: ${
      typeof error === "object" && error !== null && "code" in error ? String(error.code) : "failed"
    }`
  })

/**
 * A token store in `directory` (created with mode 0700): one file per server, mode 0600, replaced
 * atomically (a temporary file in the same folder, then a rename); never read through a symbolic
 * link. A file that does not decode is treated as absent.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeFileTokenStore = (directory: string): McpTokenStoreShape => ({
  load: (key) =>
    Effect.promise(async () => {
      const handle = await fs.open(tokenFile(directory, key), constants.O_RDONLY | constants.O_NOFOLLOW).catch(
        () => undefined
      )
      if (handle === undefined) return undefined
      const text = await handle.readFile("utf8").finally(() => handle.close())
      const stored = decodeStored(text)
      return stored._tag === "Some" && stored.value.server === key.server && stored.value.url === key.url ?
        stored.value :
        undefined
    }),
  save: (key, auth) =>
    Effect.tryPromise({
      try: async () => {
        await fs.mkdir(directory, { recursive: true, mode: 0o700 })
        const file = tokenFile(directory, key)
        const temporary = `${file}.${randomBytes(6).toString("hex")}.tmp`
        const handle = await fs.open(temporary, "wx", 0o600)
        try {
          await handle.writeFile(JSON.stringify(auth))
          await handle.sync()
        } finally {
          await handle.close()
        }
        await fs.rename(temporary, file).catch(async (error: unknown) => {
          await fs.rm(temporary, { force: true })
          throw error
        })
      },
      catch: storeError(key, "save")
    }),
  remove: (key) =>
    Effect.tryPromise({
      try: () => fs.rm(tokenFile(directory, key), { force: true }),
      catch: storeError(key, "remove")
    })
})

/**
 * The file token store in `directory` (default `defaultTokenDirectory(process.env)`).
 *
 * @since 0.1.0
 * @category layers
 */
export const fileTokenStoreLayer = (directory?: string): Layer.Layer<never> =>
  Layer.succeed(McpTokenStore, makeFileTokenStore(directory ?? defaultTokenDirectory(process.env)))

/**
 * A token store in memory (lost when the process ends): for tests, and programs that must not
 * write a file.
 *
 * @since 0.1.0
 * @category layers
 */
export const memoryTokenStoreLayer = (): Layer.Layer<never> =>
  Layer.sync(McpTokenStore, () => {
    const entries = new Map<string, StoredAuth>()
    const id = (key: McpAuthKey) => `${key.server}\n${key.url}`
    return {
      load: (key) => Effect.sync(() => entries.get(id(key))),
      save: (key, auth) => Effect.sync(() => void entries.set(id(key), auth)),
      remove: (key) => Effect.sync(() => void entries.delete(id(key)))
    }
  })

// --- authorizing -------------------------------------------------------------------------------

/**
 * What an authorization server sent back to the redirect URL.
 *
 * @since 0.1.0
 * @category models
 */
export interface AuthorizationCallback {
  readonly code: string
  readonly state: string | undefined
}

/**
 * One authorization in progress: the redirect URL to give the authorization server, and how to
 * get the code once the user is sent to `authorizationUrl`.
 *
 * @since 0.1.0
 * @category models
 */
export interface AuthorizationSession {
  readonly redirectUrl: string
  readonly complete: (authorizationUrl: URL) => Effect.Effect<AuthorizationCallback, McpAuthError>
}

/**
 * @since 0.1.0
 * @category services
 */
export interface McpAuthorizationShape {
  /** Starts an authorization for a server (a loopback listener, say), until the scope closes. */
  readonly start: (server: McpAuthKey) => Effect.Effect<AuthorizationSession, McpAuthError, Scope.Scope>
}

const PLACEHOLDER_REDIRECT = "http://127.0.0.1/callback"

const needsLogin: McpAuthorizationShape = {
  start: (server) =>
    Effect.succeed({
      redirectUrl: PLACEHOLDER_REDIRECT,
      complete: () =>
        Effect.fail(
          new McpAuthError({
            server: server.server,
            message: `MCP server "${server.server}" needs authorization: log in to it first ` +
              `(\`agentloop mcp login ${server.server}\`)`
          })
        )
    })
}

/**
 * How the user approves access to a server. Default: nobody can (`needsLoginLayer`).
 *
 * @since 0.1.0
 * @category services
 */
export class McpAuthorization extends Context.Reference<McpAuthorizationShape>("@agentloop/mcp/McpAuthorization", {
  defaultValue: () => needsLogin
}) {}

/**
 * No one to approve access: a server that needs a new authorization fails with an `McpAuthError`
 * saying to log in (stored tokens are still used and refreshed). The default.
 *
 * @since 0.1.0
 * @category layers
 */
export const needsLoginLayer: Layer.Layer<never> = Layer.succeed(McpAuthorization, needsLogin)

const MAX_REDIRECTS = 10

/** The code (or the error) in a redirect to the redirect URL. */
const callbackOf = (server: string, redirect: URL): Effect.Effect<AuthorizationCallback, McpAuthError> => {
  const error = redirect.searchParams.get("error")
  const code = redirect.searchParams.get("code")
  if (error !== null || code === null) {
    return Effect.fail(
      new McpAuthError({
        server,
        message: `MCP server "${server}": the authorization server refused: ${
          error === null ? "no code in its answer" : /^[\w.-]{1,64}$/.test(error) ? error : "(an unreadable error)"
        }`
      })
    )
  }
  return Effect.succeed({ code, state: redirect.searchParams.get("state") ?? undefined })
}

const sameEndpoint = (a: URL, b: URL) => a.origin === b.origin && a.pathname === b.pathname

/**
 * Approves access without a person: requests the authorization URL and follows its redirects
 * until one goes to the redirect URL, and takes the code from it. Only for authorization servers
 * that approve at once (test servers, CI): one that shows a page fails with an `McpAuthError`.
 *
 * @since 0.1.0
 * @category layers
 */
export const headlessAuthorizationLayer: Layer.Layer<never> = Layer.succeed(McpAuthorization, {
  start: (server) =>
    Effect.succeed({
      redirectUrl: PLACEHOLDER_REDIRECT,
      complete: (authorizationUrl) =>
        Effect.gen(function*() {
          const redirect = new URL(PLACEHOLDER_REDIRECT)
          let url = authorizationUrl
          for (let hop = 0; hop < MAX_REDIRECTS; hop++) {
            if (sameEndpoint(url, redirect)) return yield* callbackOf(server.server, url)
            const current = url
            const response = yield* Effect.tryPromise({
              try: (signal) => fetch(current, { redirect: "manual", signal }),
              catch: () =>
                new McpAuthError({
                  server: server.server,
                  message: `MCP server "${server.server}": could not reach its authorization server`
                })
            })
            yield* Effect.promise(() => response.body?.cancel() ?? Promise.resolve())
            const location = response.headers.get("location")
            if (response.status < 300 || response.status >= 400 || location === null) break
            url = new URL(location, current)
          }
          return yield* new McpAuthError({
            server: server.server,
            message: `MCP server "${server.server}": its authorization server did not approve without a person; ` +
              "authorize interactively"
          })
        })
    })
})

/**
 * Options of `loopbackAuthorizationLayer`.
 *
 * @since 0.1.0
 * @category models
 */
export interface LoopbackAuthorizationOptions {
  /** Shows the user the authorization URL: opens the browser, or prints it. */
  readonly open: (authorizationUrl: string, server: McpAuthKey) => Effect.Effect<void>
  /** The loopback port to listen on (default: a free one). */
  readonly port?: number | undefined
}

const page = (title: string) =>
  `<!doctype html><meta charset="utf-8"><title>${title}</title><p>${title}. You can close this tab.</p>`

/**
 * Approves access with the user's browser: listens on `http://127.0.0.1:<port>/callback`, shows
 * the authorization URL with `open`, and waits for the authorization server to send the browser
 * back (wrap the login in `Effect.timeout` to give up).
 *
 * @since 0.1.0
 * @category layers
 */
export const loopbackAuthorizationLayer = (options: LoopbackAuthorizationOptions): Layer.Layer<never> =>
  Layer.succeed(McpAuthorization, {
    start: (server) =>
      Effect.gen(function*() {
        const callback = yield* Deferred.make<AuthorizationCallback, McpAuthError>()
        const listener = createServer((request, response) => {
          const url = new URL(request.url ?? "/", "http://127.0.0.1")
          if (url.pathname !== "/callback") {
            response.writeHead(404).end()
            return
          }
          const result = Effect.runSync(Effect.exit(callbackOf(server.server, url)))
          response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
          response.end(page(result._tag === "Success" ? "Authorized" : "Not authorized"))
          Deferred.doneUnsafe(callback, result)
        })
        const port = yield* Effect.acquireRelease(
          Effect.callback<number, McpAuthError>((resume) => {
            listener.once("error", () =>
              resume(Effect.fail(
                new McpAuthError({ server: server.server, message: "could not listen on the loopback redirect port" })
              )))
            listener.listen(options.port ?? 0, "127.0.0.1", () => {
              const address = listener.address()
              resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : 0))
            })
          }),
          () => Effect.callback<void>((resume) => void listener.close(() => resume(Effect.void)))
        )
        const redirectUrl = `http://127.0.0.1:${port}/callback`
        return {
          redirectUrl,
          complete: (authorizationUrl) =>
            Effect.andThen(options.open(authorizationUrl.href, server), Deferred.await(callback))
        }
      })
  })

// --- login and logout --------------------------------------------------------------------------

/**
 * Options of `loginMcpServer`.
 *
 * @since 0.1.0
 * @category models
 */
export interface LoginOptions {
  /** The client name sent to the server and registered with its authorization server. */
  readonly clientName?: string | undefined
  /** The URL of this client's client ID metadata document (an https URL), when it has one. */
  readonly clientMetadataUrl?: string | undefined
}

/**
 * Authorizes a server anew (`mcp login NAME`): forgets its tokens, connects and lists its tools,
 * authorizing with the `McpAuthorization` in context; the tokens are then in the `McpTokenStore`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const loginMcpServer = (
  server: HttpServerConfig,
  options: LoginOptions = {}
): Effect.Effect<void, McpAuthError> =>
  Effect.scoped(Effect.gen(function*() {
    const store = yield* McpTokenStore
    const key = { server: server.name, url: server.url }
    const stored = yield* store.load(key)
    if (stored?.tokens !== undefined) {
      const { tokens: _tokens, obtainedAt: _obtainedAt, ...rest } = stored
      yield* store.save(key, rest)
    }
    const oauth = yield* makeOAuth(server, {
      clientName: options.clientName ?? "agentloop",
      clientMetadataUrl: options.clientMetadataUrl
    })
    const failed = (error: unknown) =>
      error instanceof McpAuthError ? error : new McpAuthError({
        server: server.name,
        message: oauth.redact(
          `MCP server "${server.name}": could not log in: ${error instanceof Error ? error.message : String(error)}`
        )
      })
    yield* Effect.tryPromise({
      try: async () => {
        const client = new Client({ name: options.clientName ?? "agentloop", version: "0.1.0" })
        const transport = new StreamableHTTPClientTransport(new URL(server.url), {
          fetch: oauth.fetch,
          ...(server.headers === undefined ? {} : { requestInit: { headers: { ...server.headers } } })
        })
        try {
          await client.connect(transport)
          await client.listTools()
        } finally {
          await transport.terminateSession().catch(() => undefined)
          await client.close().catch(() => undefined)
        }
      },
      catch: (error) => failed(oauth.cause(error))
    })
  }))

/**
 * Forgets a server's registration and tokens (`mcp logout NAME`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const logoutMcpServer = (server: McpAuthKey): Effect.Effect<void, McpAuthError> =>
  Effect.gen(function*() {
    const store = yield* McpTokenStore
    yield* store.remove(server)
  })
