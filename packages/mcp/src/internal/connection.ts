/**
 * The connections to the servers: each server's state, its connection opened (stdio or Streamable
 * HTTP, with OAuth when it needs it) when the layer is built and again by the next request after
 * it was lost, its tool list fetched again when the server says it changed, and the connection
 * dropped when it closes, breaks, or an HTTP server whose event stream broke does not answer a ping.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import type { ServerCapabilities, Tool as SdkTool } from "@modelcontextprotocol/sdk/types.js"
import { Deferred, Effect, Exit, FiberSet, Scope, Semaphore } from "effect"
import type { ChildProcessSpawner } from "effect/process"
import type { HttpServerConfig, McpServerConfig } from "../Config.ts"
import { McpAuthError, McpConfigError, McpConnectError, McpRequestError } from "../Errors.ts"
import type { McpToolsOptions } from "../McpTools.ts"
import { serverPrefix } from "../Naming.ts"
import type { ClientFeatures } from "./clientFeatures.ts"
import { makeOAuth } from "./oauth.ts"
import type { OAuthSession } from "./oauth.ts"
import { orderedDelivery } from "./ordered.ts"
import { redact, secretsOf } from "./secrets.ts"
import { makeStdioTransport } from "./stdio.ts"
import type { StdioTransport } from "./stdio.ts"

/** `MCP_PING_TIMEOUT_MS` of `McpTools.ts`. */
export const PING_TIMEOUT_MS = 5000

/** The SDK's messages for an HTTP event stream that broke or could not be resumed. */
const lostStream = /SSE stream disconnected|Maximum reconnection attempts|Failed to reconnect/

export interface ServerState {
  readonly config: McpServerConfig
  readonly prefix: string
  readonly lock: Semaphore.Semaphore
  /** OAuth for an HTTP server that may need it (none with a static `Authorization` header). */
  readonly oauth: OAuthSession | undefined
  client: Client | undefined
  transport: Transport | undefined
  scope: Scope.Closeable | undefined
  listed: ReadonlyArray<SdkTool>
  /** What the server said it offers when it was last connected. */
  capabilities: ServerCapabilities | undefined
  refreshing: Deferred.Deferred<void> | undefined
  refreshAgain: boolean
}

export const messageOf = (error: unknown): string => error instanceof Error ? error.message : String(error)

/** Where an HTTP server is, without credentials or query (which may hold a token). */
const displayUrl = (url: string): string => {
  if (!URL.canParse(url)) return "(invalid URL)"
  const parsed = new URL(url)
  return `${parsed.origin}${parsed.pathname}`
}

const where = (config: McpServerConfig) =>
  config.transport === "stdio" ? `\`${config.command}\`` : displayUrl(config.url)

/**
 * The URL and headers an HTTP server is reached with: credentials in the URL (`user:pw@`) move to
 * a basic `Authorization` header (fetch refuses them, and its error would show them).
 */
const httpTarget = (url: string, headers: Readonly<Record<string, string>> | undefined) => {
  const parsed = new URL(url)
  const all: Record<string, string> = { ...headers }
  if (parsed.username !== "" || parsed.password !== "") {
    const user = decodeURIComponent(parsed.username)
    const password = decodeURIComponent(parsed.password)
    if (!Object.keys(all).some((k) => k.toLowerCase() === "authorization")) {
      all["Authorization"] = `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`
    }
    parsed.username = ""
    parsed.password = ""
  }
  return { url: parsed, headers: all }
}

/** Whether OAuth is used for a server: HTTP, not turned off, no `Authorization` header of its own. */
const usesOAuth = (config: McpServerConfig): config is HttpServerConfig =>
  config.transport === "http" && config.oauth !== false &&
  !Object.keys(config.headers ?? {}).some((k) => k.toLowerCase() === "authorization") &&
  !(URL.canParse(config.url) && new URL(config.url).username !== "")

/** The secrets of a server: its config's and, with OAuth, its tokens and client secret as they are now. */
export const secretsOfServer = (server: ServerState): Array<string> => [
  ...secretsOf(server.config),
  ...(server.oauth?.secrets() ?? [])
]

/**
 * The state of each server, none connected yet. Fails with an `McpConfigError` when two servers
 * would give their tools the same prefix.
 */
export const makeServerStates = Effect.fnUntraced(function*(
  servers: ReadonlyArray<McpServerConfig>,
  options: McpToolsOptions
): Effect.fn.Return<Array<ServerState>, McpConfigError> {
  const states: Array<ServerState> = []
  const prefixes = new Map<string, string>()
  for (const config of servers) {
    const prefix = serverPrefix(config.name)
    const other = prefixes.get(prefix)
    if (other !== undefined) {
      return yield* new McpConfigError({
        message: `MCP servers "${other}" and "${config.name}" would both name their tools "${prefix}__…"; ` +
          `rename one`
      })
    }
    prefixes.set(prefix, config.name)
    const oauth = usesOAuth(config) && URL.canParse(config.url) ?
      yield* makeOAuth(config, {
        clientName: options.clientName ?? "agentloop",
        clientMetadataUrl: options.clientMetadataUrl
      }) :
      undefined
    states.push({
      config,
      prefix,
      lock: yield* Semaphore.make(1),
      oauth,
      client: undefined,
      transport: undefined,
      scope: undefined,
      listed: [],
      capabilities: undefined,
      refreshing: undefined,
      refreshAgain: false
    })
  }
  return states
})

/** The server of a configured name (or tool prefix), or an `McpRequestError` listing the servers. */
export const serverNamed = (
  states: ReadonlyArray<ServerState>,
  name: string
): Effect.Effect<ServerState, McpRequestError> => {
  const found = states.find((s) => s.config.name === name) ?? states.find((s) => s.prefix === name)
  return found !== undefined ? Effect.succeed(found) : Effect.fail(
    new McpRequestError({
      server: name,
      message: `There is no MCP server "${name}" (servers: ${states.map((s) => s.config.name).join(", ") || "none"}).`
    })
  )
}

/** Every tool a client lists (all pages). */
const listAll = (client: Client): Effect.Effect<Array<SdkTool>, unknown> =>
  Effect.gen(function*() {
    const all: Array<SdkTool> = []
    let cursor: string | undefined
    do {
      const params = cursor === undefined ? undefined : { cursor }
      const page = yield* Effect.tryPromise({
        try: (signal) => client.listTools(params, { signal }),
        catch: (error) => error
      })
      all.push(...page.tools)
      cursor = page.nextCursor
    } while (cursor !== undefined)
    return all
  })

export interface Connections {
  /** The server's client, connecting (again) when it has none. */
  readonly connect: (server: ServerState) => Effect.Effect<Client, McpConnectError>
  /** Forgets `client` as the server's connection and closes its scope (nothing if it is no longer the server's). */
  readonly drop: (server: ServerState, client: Client) => Effect.Effect<void>
}

/**
 * Connections opened in the scope of the layer (each in a scope of its own, closed when it is
 * dropped). `onListed` is told whenever a server's tool list or capabilities are new.
 */
export const makeConnections = Effect.fnUntraced(function*(options: {
  readonly clientName: string
  readonly features: ClientFeatures
  readonly onListed: () => void
}): Effect.fn.Return<Connections, never, Scope.Scope | ChildProcessSpawner.ChildProcessSpawner> {
  const { clientName, features, onListed } = options
  const layerScope = yield* Effect.scope
  const runPromise = yield* FiberSet.makeRuntimePromise<ChildProcessSpawner.ChildProcessSpawner>()
  const runFork = yield* FiberSet.makeRuntime<never>()

  /** Fetches the list again (once more when another change is announced meanwhile). */
  const refresh = (server: ServerState, client: Client): void => {
    if (server.refreshing !== undefined) {
      server.refreshAgain = true
      return
    }
    const done = Deferred.makeUnsafe<void>()
    server.refreshing = done
    const fetchLists: Effect.Effect<void> = Effect.gen(function*() {
      do {
        server.refreshAgain = false
        const listed = yield* Effect.result(listAll(client))
        if (listed._tag === "Success" && server.client === client) {
          server.listed = listed.success
          onListed()
        }
      } while (server.refreshAgain)
    })
    runFork(Effect.ensuring(
      fetchLists,
      Effect.sync(() => {
        server.refreshing = undefined
        Deferred.doneUnsafe(done, Exit.void)
      })
    ))
  }

  const drop = (server: ServerState, client: Client): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (server.client !== client) return Effect.void
      const scope = server.scope
      server.client = undefined
      server.transport = undefined
      server.scope = undefined
      return scope === undefined ? Effect.void : Scope.close(scope, Exit.void)
    })

  /** Closes an HTTP connection whose server does not answer a ping (rejecting the calls in flight). */
  const closeIfGone = (server: ServerState, client: Client): Effect.Effect<void> =>
    Effect.tryPromise({
      try: () => client.ping({ timeout: PING_TIMEOUT_MS }),
      catch: (error) => error
    }).pipe(
      Effect.catch(() =>
        server.client === client ?
          Effect.andThen(
            Effect.promise(() => client.close().catch(() => undefined)),
            drop(server, client)
          ) :
          Effect.void
      ),
      Effect.asVoid
    )

  const open = (server: ServerState): Effect.Effect<Client, McpConnectError> =>
    Effect.gen(function*() {
      const config = server.config
      const scope = yield* Scope.fork(layerScope)
      const transport: Transport = config.transport === "stdio" ?
        makeStdioTransport(config, scope, runPromise) :
        ((target) =>
          new StreamableHTTPClientTransport(target.url, {
            requestInit: { headers: target.headers },
            ...(server.oauth === undefined ? {} : { fetch: server.oauth.fetch })
          }))(
            httpTarget(config.url, config.headers)
          )
      const ordered = orderedDelivery(transport)
      const client = new Client({ name: clientName, version: "0.1.0" }, { capabilities: features.capabilities })
      // protocol-level noise (a progress notification for a finished call, a malformed line) is
      // not an error of any call. Over HTTP, a lost event stream may mean the server is gone, and
      // the SDK would then leave the calls in flight waiting forever: a ping tells, and a server
      // that does not answer it is disconnected, which answers those calls (see `closeIfGone`).
      client.onerror = (error) => {
        if (config.transport === "http" && lostStream.test(error.message)) runFork(closeIfGone(server, client))
      }
      client.onclose = () => {
        runFork(drop(server, client))
      }
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => refresh(server, client))
      features.install(client, config.name, runPromise)
      if (config.transport === "http") {
        const http = transport as StreamableHTTPClientTransport
        // end the session (HTTP DELETE; a server that does not answer gets PING_TIMEOUT_MS), then close
        yield* Scope.addFinalizer(
          scope,
          Effect.promise(() => http.terminateSession().catch(() => undefined)).pipe(
            Effect.timeoutOption(PING_TIMEOUT_MS),
            Effect.andThen(Effect.promise(() => client.close().catch(() => undefined)))
          )
        )
      }
      const failed = (what: string) => (error: unknown) => {
        const stderr = config.transport === "stdio" ? (transport as StdioTransport).stderrTail().trim() : ""
        const cause = server.oauth?.cause(error) ?? error
        return new McpConnectError({
          server: config.name,
          message: redact(
            cause instanceof McpAuthError ?
              `${cause.message} (${where(config)})` :
              `MCP server "${config.name}" (${where(config)}): ${what}: ${messageOf(error)}${
                stderr.length === 0 ? "" : `\nits stderr ends with:\n${stderr.slice(-1000)}`
              }`,
            secretsOfServer(server)
          )
        })
      }
      const tools = yield* Effect.tryPromise({
        try: () => client.connect(ordered),
        catch: failed("could not connect")
      }).pipe(
        Effect.andThen(Effect.mapError(listAll(client), failed("could not list its tools"))),
        Effect.onError(() => Scope.close(scope, Exit.void))
      )
      server.client = client
      server.transport = transport
      server.scope = scope
      server.listed = tools
      server.capabilities = client.getServerCapabilities()
      onListed()
      return client
    })

  const connect = (server: ServerState): Effect.Effect<Client, McpConnectError> =>
    server.lock.withPermits(1)(
      Effect.suspend(() => server.client === undefined ? open(server) : Effect.succeed(server.client))
    )

  return { connect, drop }
})
