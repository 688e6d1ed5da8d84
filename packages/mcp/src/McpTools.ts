/**
 * Tools from MCP servers: the servers are connected when the layer is built and closed when its
 * scope closes; their tools become an `Executor` (alone, or merged with local tools), and each
 * call goes to the server that has the tool.
 *
 * - **Definitions**: each server tool is offered as `<server>__<tool>` (see `Naming.ts`), its
 *   description and input JSON Schema passed on as the server gave them.
 * - **Arguments** are checked against the tool's input schema with ajv before anything is sent; a
 *   call that does not match is answered with an error result naming each field, and the server
 *   is not called.
 * - **Results** whose text is longer than the server's `maxOutputChars` (default
 *   `MCP_MAX_OUTPUT_CHARS`) are cut as `bash` output is, the whole text kept in the `OutputStore`
 *   of the layer's context when there is one (see `limitResult`); every image of a result goes
 *   through `McpToolsOptions.prepareImage`.
 * - **Progress** notifications become `tool_progress` events (`{ progress, total?, message? }`); at
 *   most `MCP_PROGRESS_BUFFER` wait to be reported, older ones are dropped when a server floods.
 * - **Abort, timeout, interruption** of a call send MCP's `notifications/cancelled` for it; the loop
 *   answers the call as interrupted (or timed out).
 * - **A server that crashes or disconnects** answers the calls it had in flight with error results
 *   (`details.disconnected: true`); the next call to it starts (or reconnects to) it again.
 * - **`notifications/tools/list_changed`**: the list is fetched again, and the new definitions are
 *   used from the next time the loop reads the executor's definitions, which it does when it builds
 *   a model request: at a turn boundary, never in the middle of a batch. A change announced before
 *   a call's result is in place before that result is handed back.
 * - **Resources**: a server that declares them also gets `<server>__list_resources` and
 *   `<server>__read_resource` (read-only), whose answers are capped and fitted like results
 *   (`internal/resources.ts`).
 * - **What a server asks of the client** is answered by the services in the layer's context, and
 *   declared only when they are there: `Elicitation` (questions), `Sampling` (completions), and
 *   the `roots` option (the workspace); prompts are the library's to get (`Prompts.ts`).
 *
 * @since 0.1.0
 */
import { errorResult, Executor, makeToolExecutor } from "@agentloop/core"
import type {
  AnyTool,
  AssistantMessage,
  ExecutorShape,
  Tool,
  ToolCall,
  ToolContext,
  ToolDefinition,
  ToolOutput,
  ToolResultMessage,
  ToolServices,
  UserMessage
} from "@agentloop/core"
import { fitImageContent, OutputStore } from "@agentloop/tools"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import {
  CancelledNotificationSchema,
  ElicitRequestSchema,
  ErrorCode,
  ListRootsRequestSchema,
  McpError,
  ToolListChangedNotificationSchema
} from "@modelcontextprotocol/sdk/types.js"
import type { ServerCapabilities, Tool as SdkTool } from "@modelcontextprotocol/sdk/types.js"
import {
  Cause,
  Context,
  Deferred,
  Effect,
  Exit,
  Fiber,
  FiberSet,
  Layer,
  Queue,
  Schema,
  Scope,
  Semaphore,
  Stream
} from "effect"
import type { ChildProcessSpawner } from "effect/process"
import { MCP_MAX_OUTPUT_CHARS } from "./Config.ts"
import type { HttpServerConfig, McpServerConfig } from "./Config.ts"
import { Elicitation } from "./Elicitation.ts"
import { McpAuthError, McpConfigError, McpConnectError, McpRequestError } from "./Errors.ts"
import { askSafely, requestOf } from "./internal/elicitation.ts"
import { AuthFailure, makeOAuth } from "./internal/oauth.ts"
import type { OAuthSession } from "./internal/oauth.ts"
import { orderedDelivery } from "./internal/ordered.ts"
import { checkPromptArguments, promptMessages, promptOf } from "./internal/prompts.ts"
import {
  LIST_RESOURCES,
  listResourcesDefinition,
  listResult,
  parseCursor,
  READ_RESOURCE,
  readResourceDefinition,
  readResult,
  resourceCursor
} from "./internal/resources.ts"
import type { ListedTemplate } from "./internal/resources.ts"
import { answerSampling, RpcFailure } from "./internal/sampling.ts"
import { makeStdioTransport } from "./internal/stdio.ts"
import type { StdioTransport } from "./internal/stdio.ts"
import { argumentCheck } from "./internal/validate.ts"
import type { ArgumentCheck } from "./internal/validate.ts"
import { serverPrefix, toolNameFor } from "./Naming.ts"
import type { McpPrompt } from "./Prompts.ts"
import { limitResult, toToolResult } from "./Results.ts"
import type { PrepareImage } from "./Results.ts"
import { checkRoots } from "./Roots.ts"
import type { McpRoot } from "./Roots.ts"
import { Sampling } from "./Sampling.ts"

/** The default `prepareImage`: the image as `read` would send it. */
const fitServerImage: PrepareImage = (image, source) =>
  fitImageContent(
    image,
    `the image from ${source.server} (${
      source.uri !== undefined
        ? `resource ${source.uri}`
        : source.tool.includes("/")
        ? source.tool
        : `tool ${source.tool}`
    })`
  )

/**
 * How many progress notifications of one call may wait to become `tool_progress` events; when a
 * server sends them faster than they are reported, the oldest are dropped.
 *
 * @since 0.1.0
 * @category constants
 */
export const MCP_PROGRESS_BUFFER = 64

/**
 * How long an HTTP server whose event stream broke gets to answer a ping before its connection is
 * closed (its calls in flight then end with a `disconnected` error).
 *
 * @since 0.1.0
 * @category constants
 */
export const MCP_PING_TIMEOUT_MS = 5000

/** The SDK's messages for an HTTP event stream that broke or could not be resumed. */
const lostStream = /SSE stream disconnected|Maximum reconnection attempts|Failed to reconnect/

/** The SDK's per-request timeout is turned off (its largest value): time limits are the loop's. */
const NO_SDK_TIMEOUT = 2_147_483_647

/**
 * Options of `mcpToolsLayer`.
 *
 * @since 0.1.0
 * @category models
 */
export interface McpToolsOptions {
  /**
   * Believe the servers' tool annotations: a tool with `readOnlyHint: true` is marked `readOnly`
   * (so `readOnlyPolicy` runs it without asking). Off by default: MCP says annotations from an
   * untrusted server must not decide anything.
   */
  readonly trustAnnotations?: boolean | undefined
  /** The client name sent to the servers (default `agentloop`). */
  readonly clientName?: string | undefined
  /**
   * What every image of a result (an `image` part, or an embedded `image/*` resource) becomes
   * before the model sees it. Default: `fitImageContent` from `@agentloop/tools`, as `read` sends
   * images (recognised by its bytes, checked, resized, with a note; left out, saying why, when it
   * is no image or cannot be sent).
   */
  readonly prepareImage?: PrepareImage | undefined
  /**
   * The https URL of this client's OAuth client ID metadata document, used as its client ID by
   * authorization servers that support it (a server's `oauth.clientMetadataUrl` wins).
   */
  readonly clientMetadataUrl?: string | undefined
  /**
   * The roots to offer the servers (the workspace, say: `rootOfDirectory(path)`): with them the
   * client declares `roots` (with `listChanged`) and answers `roots/list` with them; `setRoots`
   * changes them. Each is a `file://` URI. Without them (the default) no roots are offered.
   */
  readonly roots?: ReadonlyArray<McpRoot> | undefined
}

/**
 * The state of one server.
 *
 * @since 0.1.0
 * @category models
 */
export interface McpServerStatus {
  readonly name: string
  readonly prefix: string
  readonly transport: "stdio" | "http"
  readonly connected: boolean
  /** The server's process id (stdio, while connected). */
  readonly pid: number | undefined
  readonly tools: ReadonlyArray<string>
  /** Whether it offers resources (then its `list_resources` and `read_resource` tools are offered). */
  readonly resources: boolean
  /** Whether it offers prompts (see `listMcpPrompts`). */
  readonly prompts: boolean
}

/**
 * The loaded MCP servers and their tools.
 *
 * - `executor`: an `Executor` for the servers' tools (its `definitions` follow list changes at the
 *   boundaries described above).
 * - `definitions`: the current definitions (taking any fetched change into use).
 * - `tools`: the current tools as core `Tool`s, to list beside local tools in `toolExecutorLayer`
 *   (a snapshot: a later list change is not seen; `mcpExecutorLayer` follows changes).
 * - `servers`: each server's state.
 * - `setRoots`: new roots for every server (those connected are told with
 *   `notifications/roots/list_changed`); fails with an `McpConfigError` for a root that is not a
 *   `file://` URI, or when the layer was built without `roots` (none were offered).
 * - `prompts` / `getPrompt`: see `listMcpPrompts` and `getMcpPrompt`.
 *
 * @since 0.1.0
 * @category services
 */
export interface McpToolsShape {
  readonly executor: ExecutorShape
  readonly definitions: Effect.Effect<ReadonlyArray<ToolDefinition>>
  readonly tools: Effect.Effect<ReadonlyArray<Tool<Record<string, unknown>>>>
  readonly servers: Effect.Effect<ReadonlyArray<McpServerStatus>>
  readonly setRoots: (roots: ReadonlyArray<McpRoot>) => Effect.Effect<void, McpConfigError>
  readonly prompts: (server?: string) => Effect.Effect<ReadonlyArray<McpPrompt>, McpRequestError>
  readonly getPrompt: (
    server: string,
    name: string,
    args?: Readonly<Record<string, string>>
  ) => Effect.Effect<ReadonlyArray<UserMessage | AssistantMessage>, McpRequestError>
}

/**
 * @since 0.1.0
 * @category services
 */
export class McpTools extends Context.Service<McpTools, McpToolsShape>()("@agentloop/mcp/McpTools") {}

interface ServerState {
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

interface Entry {
  readonly name: string
  readonly server: ServerState
  /** `details.mcp.tool` of its results: the server's name of the tool, or the MCP method of a resource tool. */
  readonly tool: string
  /** What a valid answer is, for the error when it is not one. */
  readonly answer: string
  readonly definition: ToolDefinition
  readonly check: ArgumentCheck | undefined
  /** Sends the call and converts the answer (before the caps); fails with what the SDK threw. */
  readonly send: (client: Client, call: ToolCall, onprogress: (p: unknown) => void) => Effect.Effect<
    ToolResultMessage,
    unknown
  >
}

interface Snapshot {
  readonly definitions: ReadonlyArray<ToolDefinition>
  readonly byName: ReadonlyMap<string, Entry>
}

const messageOf = (error: unknown): string => error instanceof Error ? error.message : String(error)

/** Where an HTTP server is, without credentials or query (which may hold a token). */
const displayUrl = (url: string): string => {
  if (!URL.canParse(url)) return "(invalid URL)"
  const parsed = new URL(url)
  return `${parsed.origin}${parsed.pathname}`
}

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

/** The values of a server's config that must never appear in a message. */
const secretsOf = (config: McpServerConfig): Array<string> => {
  if (config.transport === "stdio") return Object.values(config.env ?? {}).filter((v) => v.length >= 4)
  const secrets = Object.values(config.headers ?? {})
  if (config.oauth !== undefined && config.oauth !== false) {
    if (config.oauth.clientSecret !== undefined) secrets.push(config.oauth.clientSecret)
    if (config.oauth.privateKey !== undefined) secrets.push(config.oauth.privateKey)
  }
  if (URL.canParse(config.url)) {
    const parsed = new URL(config.url)
    secrets.push(parsed.username, parsed.password)
    secrets.push(decodeURIComponent(parsed.username), decodeURIComponent(parsed.password))
    for (const value of parsed.searchParams.values()) secrets.push(value)
    if (parsed.search.length > 1) secrets.push(parsed.search.slice(1))
  }
  return secrets.filter((v) => v.length >= 2)
}

/** The secrets of a server: its config's and, with OAuth, its tokens and client secret as they are now. */
const secretsOfServer = (server: ServerState): Array<string> => [
  ...secretsOf(server.config),
  ...(server.oauth?.secrets() ?? [])
]

const redact = (text: string, secrets: ReadonlyArray<string>): string =>
  [...secrets].sort((a, b) => b.length - a.length).reduce((t, secret) => t.split(secret).join("<redacted>"), text)

/** A value with every secret in its strings (not in image data) replaced by `<redacted>`. */
const redactDeep = <A>(value: A, secrets: ReadonlyArray<string>): A => {
  const walk = (v: unknown, key: string | undefined): unknown => {
    if (typeof v === "string") return key === "data" || key === "blob" ? v : redact(v, secrets)
    if (Array.isArray(v)) return v.map((item) => walk(item, undefined))
    if (typeof v === "object" && v !== null) {
      return Object.fromEntries(Object.entries(v).map(([k, item]) => [k, walk(item, k)]))
    }
    return v
  }
  return walk(value, undefined) as A
}

/**
 * A call that provably never reached a server: the connection was already closed, or the HTTP
 * server answered 404 for the session (it restarted and forgot it; MCP then asks for a new one).
 */
const neverSent = (error: unknown): boolean =>
  (error instanceof StreamableHTTPError && error.code === 404) ||
  (error instanceof Error && !(error instanceof McpError) && error.message === "Not connected")

const isZodError = (error: unknown): boolean =>
  typeof error === "object" && error !== null && Array.isArray((error as { issues?: unknown }).issues)

/**
 * Connects to the servers and builds the service. The servers stay connected until the scope
 * closes (stdio servers' process groups are then stopped).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMcpTools = (
  servers: ReadonlyArray<McpServerConfig>,
  options: McpToolsOptions = {}
): Effect.Effect<
  McpToolsShape,
  McpConfigError | McpConnectError,
  Scope.Scope | ChildProcessSpawner.ChildProcessSpawner
> =>
  Effect.gen(function*() {
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
    const layerScope = yield* Effect.scope
    const runPromise = yield* FiberSet.makeRuntimePromise<ChildProcessSpawner.ChildProcessSpawner>()
    const runFork = yield* FiberSet.makeRuntime<never>()
    const clientName = options.clientName ?? "agentloop"
    // where cut results are kept whole: the one in the layer's context (none by default)
    const store = yield* OutputStore
    // who answers the servers' questions: elicitation and sampling are offered only when someone
    // can answer; roots only when the layer was given some
    const elicitation = yield* Effect.serviceOption(Elicitation)
    const sampling = yield* Effect.serviceOption(Sampling)
    let roots = options.roots === undefined ? undefined : yield* checkRoots(options.roots)
    const capabilities = {
      ...(elicitation._tag === "Some" ? { elicitation: { form: { applyDefaults: true } } } : {}),
      ...(sampling._tag === "Some" ? { sampling: {} } : {}),
      ...(roots === undefined ? {} : { roots: { listChanged: true } })
    }
    const prepareImage = options.prepareImage ?? fitServerImage

    /** A request of the SDK's client as an effect (interrupting it sends `notifications/cancelled`). */
    const request = <A>(f: (options: { signal: AbortSignal; timeout: number }) => Promise<A>) =>
      Effect.tryPromise({ try: (signal) => f({ signal, timeout: NO_SDK_TIMEOUT }), catch: (error) => error })

    // --- definitions ---------------------------------------------------------------------------
    const toolEntry = (server: ServerState, tool: SdkTool, name: string): Entry => {
      const parameters = tool.inputSchema as Record<string, unknown>
      const readOnly = options.trustAnnotations === true && tool.annotations?.readOnlyHint === true
      return {
        name,
        server,
        tool: tool.name,
        answer: "MCP tool result",
        definition: {
          name,
          description: tool.description ?? tool.title ?? "",
          parameters,
          ...(readOnly ? { readOnly: true } : {}),
          ...(server.config.timeoutMs === undefined ? {} : { timeoutMs: server.config.timeoutMs })
        },
        check: argumentCheck(parameters),
        send: (client, call, onprogress) =>
          Effect.map(
            request((sdk) =>
              client.callTool({ name: tool.name, arguments: call.arguments }, undefined, {
                ...sdk,
                onprogress
              })
            ),
            (result) => toToolResult(call, server.config.name, tool.name, result)
          )
      }
    }

    /** The first page of templates (none from a server that does not list them). */
    const templatesPage = (client: Client, cursor: string | undefined) =>
      request((sdk) => client.listResourceTemplates(cursor === undefined ? undefined : { cursor }, sdk)).pipe(
        Effect.catchIf(
          (error) => error instanceof McpError && error.code === ErrorCode.MethodNotFound,
          () => Effect.succeed({ resourceTemplates: [] as Array<ListedTemplate>, nextCursor: undefined })
        )
      )

    /** `<server>__list_resources` and `<server>__read_resource`, named by `toolNameFor`. */
    const resourceEntries = (server: ServerState): Array<Entry> => {
      const listName = toolNameFor(server.prefix, LIST_RESOURCES)
      const readName = toolNameFor(server.prefix, READ_RESOURCE)
      const serverName = server.config.name
      const timeoutMs = server.config.timeoutMs
      const list = listResourcesDefinition(listName, serverName, readName, timeoutMs)
      const read = readResourceDefinition(readName, serverName, listName, timeoutMs)
      return [{
        name: listName,
        server,
        tool: "resources/list",
        answer: "resources/list result",
        definition: list,
        check: argumentCheck(list.parameters),
        send: (client, call) =>
          Effect.gen(function*() {
            const start = parseCursor(call.arguments["cursor"])
            if (start === undefined) {
              return errorResult(
                call,
                `Invalid cursor for tool "${call.name}": pass the cursor a page ended with (none for the first page).`,
                { mcp: { server: serverName, tool: "resources/list" }, invalidArguments: true }
              )
            }
            if (start.list === "resources") {
              const cursor = start.cursor
              const page = yield* request((sdk) =>
                client.listResources(cursor === undefined ? undefined : { cursor }, sdk)
              )
              if (page.nextCursor !== undefined) {
                return listResult(call, serverName, {
                  resources: page.resources,
                  templates: [],
                  nextCursor: resourceCursor("resources", page.nextCursor)
                })
              }
              const templates = yield* templatesPage(client, undefined)
              return listResult(call, serverName, {
                resources: page.resources,
                templates: templates.resourceTemplates,
                nextCursor: templates.nextCursor === undefined
                  ? undefined
                  : resourceCursor("templates", templates.nextCursor)
              })
            }
            const templates = yield* templatesPage(client, start.cursor)
            return listResult(call, serverName, {
              resources: [],
              templates: templates.resourceTemplates,
              nextCursor: templates.nextCursor === undefined
                ? undefined
                : resourceCursor("templates", templates.nextCursor)
            })
          })
      }, {
        name: readName,
        server,
        tool: "resources/read",
        answer: "resources/read result",
        definition: read,
        check: argumentCheck(read.parameters),
        send: (client, call) => {
          const uri = String(call.arguments["uri"])
          return Effect.map(
            request((sdk) => client.readResource({ uri }, sdk)),
            (result) => readResult(call, serverName, uri, result.contents)
          )
        }
      }]
    }

    const build = (): Snapshot => {
      const byName = new Map<string, Entry>()
      for (const server of states) {
        for (const tool of server.listed) {
          // a tool that can only run as an MCP task (call now, fetch the result later) is not offered
          if (tool.execution?.taskSupport === "required") continue
          const name = toolNameFor(server.prefix, tool.name)
          if (byName.has(name)) continue // a name the server itself repeats: the first one wins
          byName.set(name, toolEntry(server, tool, name))
        }
        // the resource tools, unless the server has tools of those names itself
        if (server.capabilities?.resources !== undefined) {
          for (const entry of resourceEntries(server)) if (!byName.has(entry.name)) byName.set(entry.name, entry)
        }
      }
      return { definitions: [...byName.values()].map((e) => e.definition), byName }
    }
    let snapshot: Snapshot = { definitions: [], byName: new Map() }
    let changed = false
    /** The definitions, taking a fetched list change into use: called at turn boundaries only. */
    const current = (): Snapshot => {
      if (changed) {
        changed = false
        snapshot = build()
      }
      return snapshot
    }

    // --- connections ---------------------------------------------------------------------------
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
            changed = true
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

    const dropConnection = (server: ServerState, client: Client): Effect.Effect<void> =>
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
        try: () => client.ping({ timeout: MCP_PING_TIMEOUT_MS }),
        catch: (error) => error
      }).pipe(
        Effect.catch(() =>
          server.client === client ?
            Effect.andThen(
              Effect.promise(() => client.close().catch(() => undefined)),
              dropConnection(server, client)
            ) :
            Effect.void
        ),
        Effect.asVoid
      )

    const where = (config: McpServerConfig) =>
      config.transport === "stdio" ? `\`${config.command}\`` : displayUrl(config.url)

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
        const client = new Client({ name: clientName, version: "0.1.0" }, { capabilities })
        // protocol-level noise (a progress notification for a finished call, a malformed line) is
        // not an error of any call. Over HTTP, a lost event stream may mean the server is gone, and
        // the SDK would then leave the calls in flight waiting forever: a ping tells, and a server
        // that does not answer it is disconnected, which answers those calls (see `closeIfGone`).
        client.onerror = (error) => {
          if (config.transport === "http" && lostStream.test(error.message)) runFork(closeIfGone(server, client))
        }
        client.onclose = () => {
          runFork(dropConnection(server, client))
        }
        client.setNotificationHandler(ToolListChangedNotificationSchema, () => refresh(server, client))
        // The server's requests this client takes time to answer (a question, a completion), each
        // with an abort of its own: the SDK's handler of `notifications/cancelled` skips a falsy
        // request id, so it never cancels the first request a server sends (id 0). Cancellation
        // is handled here instead, for these requests (the others are answered at once).
        const answering = new Map<string | number, AbortController>()
        const cancellable = <A>(
          id: string | number,
          signal: AbortSignal,
          answer: (signal: AbortSignal) => Promise<A>
        ): Promise<A> => {
          const own = new AbortController()
          answering.set(id, own)
          return answer(AbortSignal.any([signal, own.signal])).finally(() => answering.delete(id))
        }
        client.setNotificationHandler(CancelledNotificationSchema, (notification) => {
          const id = notification.params.requestId
          if (id !== undefined) answering.get(id)?.abort(notification.params.reason)
        })
        if (elicitation._tag === "Some") {
          const service = elicitation.value
          // form mode only (the capability declares no URL mode); interrupted when the server
          // cancels the question or the layer closes
          client.setRequestHandler(ElicitRequestSchema, (request, extra) => {
            const params = request.params
            if (params.mode === "url") return Promise.resolve({ action: "decline" as const })
            return cancellable(
              extra.requestId,
              extra.signal,
              (signal) => runPromise(askSafely(service, requestOf(config.name, params)), { signal })
            )
              .then((answer) =>
                answer.action === "accept" ? { action: "accept" as const, content: { ...answer.content } } : answer
              )
          })
        }
        if (roots !== undefined) {
          // the roots as they are when the server asks (`setRoots` tells it when they change)
          client.setRequestHandler(ListRootsRequestSchema, () => ({
            roots: (roots ?? []).map((root) => ({
              uri: root.uri,
              ...(root.name === undefined ? {} : { name: root.name })
            }))
          }))
        }
        if (sampling._tag === "Some") {
          const service = sampling.value
          // the fallback handler, not `setRequestHandler`: the SDK would check the request with its
          // schema first and answer a malformed one with the schema library's dump as an internal
          // error; `answerSampling` checks it with the same schema and names each wrong field
          // (invalid params). Interrupted when the server cancels the request or the layer closes.
          client.fallbackRequestHandler = (request, extra) =>
            request.method === "sampling/createMessage" ?
              cancellable(
                request.id,
                extra.signal,
                (signal) => runPromise(answerSampling(service, config.name, request, prepareImage), { signal })
              ) :
              Promise.reject(new RpcFailure(ErrorCode.MethodNotFound, "Method not found"))
        }
        if (config.transport === "http") {
          const http = transport as StreamableHTTPClientTransport
          // end the session (HTTP DELETE; a server that does not answer gets MCP_PING_TIMEOUT_MS), then close
          yield* Scope.addFinalizer(
            scope,
            Effect.promise(() => http.terminateSession().catch(() => undefined)).pipe(
              Effect.timeoutOption(MCP_PING_TIMEOUT_MS),
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
        changed = true
        return client
      })

    /** The server's client, connecting (again) when it has none. */
    const connect = (server: ServerState): Effect.Effect<Client, McpConnectError> =>
      server.lock.withPermits(1)(
        Effect.suspend(() => server.client === undefined ? open(server) : Effect.succeed(server.client))
      )

    yield* Effect.forEach(states, connect, { concurrency: "unbounded", discard: true })
    current()

    // --- requests ------------------------------------------------------------------------------
    /**
     * What a failed request means: sent again once when the server never took it (a closed
     * connection, an HTTP session the server no longer knows, as after a restart), or a message
     * naming the server and a flag for `details`. A lost connection is dropped (the next request
     * connects again). `answer` names what a valid answer would have been.
     */
    const classify = (
      server: ServerState,
      client: Client,
      error: unknown,
      answer: string,
      retried: boolean
    ): Effect.Effect<{ readonly retry: true } | { readonly text: string; readonly flag: Record<string, unknown> }> =>
      Effect.gen(function*() {
        const name = server.config.name
        const secrets = secretsOfServer(server)
        if (!retried && neverSent(error)) {
          yield* dropConnection(server, client)
          return { retry: true } as const
        }
        if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) {
          yield* dropConnection(server, client)
          return {
            text: `MCP server "${name}" disconnected before answering (it is started again on the next call).`,
            flag: { disconnected: true }
          }
        }
        if (error instanceof AuthFailure) {
          return { text: redact(error.error.message, secrets), flag: { unauthorized: true } }
        }
        if (error instanceof StreamableHTTPError && (error.code === 401 || error.code === 403)) {
          return {
            text: `MCP server "${name}" refused the call (HTTP ${error.code}): not authorized for it.`,
            flag: { unauthorized: true }
          }
        }
        if (error instanceof McpError) {
          return {
            text: redact(`MCP server "${name}" answered with an error: ${error.message}`, secrets),
            flag: { mcpError: { code: error.code } }
          }
        }
        if (isZodError(error)) {
          return {
            text: `MCP server "${name}" returned a result that is not a valid ${answer}.`,
            flag: { invalidResult: true }
          }
        }
        yield* dropConnection(server, client)
        return {
          text: redact(
            `Lost the connection to MCP server "${name}": ${
              messageOf(error)
            } (it is connected again on the next call).`,
            secrets
          ),
          flag: { disconnected: true }
        }
      })

    /** A request of the library's own (prompts), connecting first; its failure as an `McpRequestError`. */
    const requestServer = <A>(
      server: ServerState,
      answer: string,
      f: (client: Client) => Effect.Effect<A, unknown>,
      retried = false
    ): Effect.Effect<A, McpRequestError> =>
      Effect.gen(function*() {
        const name = server.config.name
        const connected = yield* Effect.result(connect(server))
        if (connected._tag === "Failure") {
          return yield* new McpRequestError({
            server: name,
            message: `MCP server "${name}" is not available: ${connected.failure.message}`
          })
        }
        const client = connected.success
        const exit = yield* Effect.exit(f(client))
        if (Exit.isSuccess(exit)) return exit.value
        const error = exit.cause.reasons.find((r) => r._tag === "Fail")?.error
        const outcome = yield* classify(server, client, error, answer, retried)
        if ("retry" in outcome) return yield* requestServer(server, answer, f, true)
        return yield* new McpRequestError({ server: name, message: outcome.text })
      })

    // --- calls ---------------------------------------------------------------------------------
    const failure = (call: ToolCall, entry: Entry, text: string, extra: Record<string, unknown> = {}) =>
      errorResult(call, text, { mcp: { server: entry.server.config.name, tool: entry.tool }, ...extra })

    const callServer = (
      entry: Entry,
      call: ToolCall,
      context: ToolContext,
      retried = false
    ): Effect.Effect<ToolResultMessage> =>
      Effect.gen(function*() {
        const server = entry.server
        const name = server.config.name
        const connected = yield* Effect.result(connect(server))
        if (connected._tag === "Failure") {
          return failure(call, entry, `MCP server "${name}" is not available: ${connected.failure.message}`, {
            unavailable: true
          })
        }
        const client = connected.success
        const progress = yield* Queue.sliding<unknown, Cause.Done>(MCP_PROGRESS_BUFFER)
        const pump = yield* Effect.forkChild(
          Stream.runForEach(Stream.fromQueue(progress), (p) => context.reportProgress(p))
        )
        const exit = yield* Effect.exit(entry.send(client, call, (p) => {
          Queue.offerUnsafe(progress, p)
        }))
        // the notifications that came before the result are reported before it
        yield* Queue.end(progress)
        yield* Fiber.join(pump)
        if (Exit.isFailure(exit)) {
          const error = exit.cause.reasons.find((r) => r._tag === "Fail")?.error
          const outcome = yield* classify(server, client, error, entry.answer, retried)
          if ("retry" in outcome) return yield* callServer(entry, call, context, true)
          return failure(call, entry, outcome.text, outcome.flag)
        }
        // a tool-list change announced before this result is fetched before the result is handed back
        const refreshing = server.refreshing
        if (refreshing !== undefined) yield* Deferred.await(refreshing)
        // a server may echo the token it was sent: it is not handed on (transcript, events, files)
        const secrets = server.oauth === undefined ? [] : secretsOfServer(server)
        const result = exit.value
        return yield* limitResult(
          secrets.length === 0 ? result : redactDeep(result, secrets),
          server.config.maxOutputChars ?? MCP_MAX_OUTPUT_CHARS,
          prepareImage
        ).pipe(Effect.provideService(OutputStore, store))
      })

    const execute = (call: ToolCall, context: ToolContext): Effect.Effect<ToolResultMessage> =>
      Effect.suspend(() => {
        const entry = snapshot.byName.get(call.name)
        if (entry === undefined) {
          const available = snapshot.definitions.map((d) => d.name).join(", ")
          return Effect.succeed(errorResult(
            call,
            `Unknown tool "${call.name}". Available tools: ${available.length === 0 ? "(none)" : available}.`,
            { unknownTool: true }
          ))
        }
        const problems = entry.check?.(call.arguments)
        if (problems !== undefined) {
          return Effect.succeed(failure(call, entry, `Invalid arguments for tool "${call.name}": ${problems.text}`, {
            invalidArguments: true,
            fields: problems.fields
          }))
        }
        return callServer(entry, call, context)
      })

    const executor: ExecutorShape = {
      get definitions() {
        return current().definitions
      },
      execute
    }

    const toOutput = (result: ToolResultMessage): ToolOutput => ({
      content: result.content,
      ...(result.details === undefined ? {} : { details: result.details }),
      isError: result.isError
    })

    const asTool = (entry: Entry): Tool<Record<string, unknown>> => ({
      name: entry.name,
      description: entry.definition.description,
      parameters: Arguments,
      definition: entry.definition,
      execute: (args, context) =>
        Effect.map(
          execute({ type: "toolCall", id: context.toolCallId, name: entry.name, arguments: args }, context),
          toOutput
        )
    })

    // --- roots and prompts ---------------------------------------------------------------------
    const setRoots = (next: ReadonlyArray<McpRoot>): Effect.Effect<void, McpConfigError> =>
      Effect.gen(function*() {
        if (roots === undefined) {
          return yield* new McpConfigError({
            message: "no roots were offered to the MCP servers (mcpToolsLayer has no roots option), so none can change"
          })
        }
        roots = yield* checkRoots(next)
        const clients = states.flatMap((s) => (s.client === undefined ? [] : [s.client]))
        // a server that is gone is told when it connects again (it then asks for the roots)
        yield* Effect.forEach(clients, (client) => Effect.ignore(request(() => client.sendRootsListChanged())), {
          concurrency: "unbounded",
          discard: true
        })
      })

    const serverNamed = (name: string): Effect.Effect<ServerState, McpRequestError> => {
      const found = states.find((s) => s.config.name === name) ?? states.find((s) => s.prefix === name)
      return found !== undefined ? Effect.succeed(found) : Effect.fail(
        new McpRequestError({
          server: name,
          message: `There is no MCP server "${name}" (servers: ${
            states.map((s) => s.config.name).join(", ") || "none"
          }).`
        })
      )
    }

    /** Every prompt of a server (all pages); none from a server that does not offer prompts. */
    const promptsOf = (server: ServerState): Effect.Effect<Array<McpPrompt>, McpRequestError> =>
      requestServer(server, "prompts/list result", (client) =>
        Effect.gen(function*() {
          if (client.getServerCapabilities()?.prompts === undefined) return []
          const all: Array<McpPrompt> = []
          let cursor: string | undefined
          do {
            const params = cursor === undefined ? undefined : { cursor }
            const page = yield* request((sdk) => client.listPrompts(params, sdk))
            all.push(...page.prompts.map((prompt) => promptOf(server.config.name, prompt)))
            cursor = page.nextCursor
          } while (cursor !== undefined)
          return all
        }))

    const prompts = (name?: string): Effect.Effect<ReadonlyArray<McpPrompt>, McpRequestError> =>
      name === undefined ?
        Effect.map(Effect.forEach(states, promptsOf, { concurrency: "unbounded" }), (lists) => lists.flat()) :
        Effect.flatMap(serverNamed(name), promptsOf)

    const getPrompt = (
      serverName: string,
      name: string,
      args: Readonly<Record<string, string>> = {}
    ): Effect.Effect<ReadonlyArray<UserMessage | AssistantMessage>, McpRequestError> =>
      Effect.gen(function*() {
        const server = yield* serverNamed(serverName)
        const listed = yield* promptsOf(server)
        if (server.capabilities?.prompts === undefined) {
          return yield* new McpRequestError({
            server: server.config.name,
            message: `MCP server "${server.config.name}" offers no prompts.`
          })
        }
        const prompt = listed.find((p) => p.name === name)
        if (prompt === undefined) {
          return yield* new McpRequestError({
            server: server.config.name,
            message: `MCP server "${server.config.name}" has no prompt "${name}" (its prompts: ${
              listed.map((p) => p.name).join(", ") || "none"
            }).`
          })
        }
        const problem = checkPromptArguments(prompt, args)
        if (problem !== undefined) return yield* new McpRequestError({ server: server.config.name, message: problem })
        const result = yield* requestServer(
          server,
          "prompts/get result",
          (client) => request((sdk) => client.getPrompt({ name, arguments: { ...args } }, sdk))
        )
        const secrets = server.oauth === undefined ? [] : secretsOfServer(server)
        return yield* promptMessages(
          server.config.name,
          secrets.length === 0 ? result.messages : redactDeep(result.messages, secrets),
          prepareImage
        )
      })

    return {
      executor,
      setRoots,
      prompts,
      getPrompt,
      definitions: Effect.sync(() => current().definitions),
      tools: Effect.sync(() => [...current().byName.values()].map(asTool)),
      servers: Effect.sync(() =>
        states.map((s): McpServerStatus => ({
          name: s.config.name,
          prefix: s.prefix,
          transport: s.config.transport,
          connected: s.client !== undefined,
          pid: s.transport !== undefined && "pid" in s.transport ? (s.transport as StdioTransport).pid() : undefined,
          tools: s.listed.map((t) => t.name),
          resources: s.capabilities?.resources !== undefined,
          prompts: s.capabilities?.prompts !== undefined
        }))
      )
    }
  })

/** What a `Tool` from an MCP server decodes its arguments with: any object (ajv checks them). */
const Arguments = Schema.Record(Schema.String, Schema.Unknown)

/**
 * The MCP servers as a layer: `McpTools`, and an `Executor` with only their tools. The servers are
 * connected when the layer is built (one that cannot be started or listed fails it with an
 * `McpConnectError`) and closed with the layer's scope. Needs a `ChildProcessSpawner` (for
 * instance `NodeServices.layer` from `@effect/platform-node`) to start stdio servers.
 *
 * @since 0.1.0
 * @category layers
 */
export const mcpToolsLayer = (
  servers: ReadonlyArray<McpServerConfig>,
  options: McpToolsOptions = {}
): Layer.Layer<McpTools | Executor, McpConfigError | McpConnectError, ChildProcessSpawner.ChildProcessSpawner> => {
  const tools = Layer.effect(McpTools, makeMcpTools(servers, options))
  const executor = Layer.effect(
    Executor,
    Effect.gen(function*() {
      return (yield* McpTools).executor
    })
  )
  return Layer.provideMerge(executor, tools)
}

/**
 * An `Executor` with local tools and the tools of `McpTools` (provide `mcpToolsLayer`). Local
 * tools keep their names; a server tool whose name is taken by a local tool fails the layer with
 * an `McpConfigError` (and one that appears later, through a list change, is left out). The
 * definitions follow the servers' list changes at turn boundaries.
 *
 * @since 0.1.0
 * @category layers
 */
export const mcpExecutorLayer = <const Tools extends ReadonlyArray<AnyTool>>(
  localTools: Tools
): Layer.Layer<Executor, McpConfigError, McpTools | ToolServices<Tools[number]>> =>
  Layer.effect(
    Executor,
    Effect.gen(function*() {
      const local = yield* makeToolExecutor(localTools)
      const mcp = yield* McpTools
      const localNames = new Set(local.definitions.map((d) => d.name))
      const clash = mcp.executor.definitions.find((d) => localNames.has(d.name))
      if (clash !== undefined) {
        return yield* new McpConfigError({
          message: `the MCP tool "${clash.name}" has the name of a local tool; rename the server`
        })
      }
      let seen: ReadonlyArray<ToolDefinition> | undefined
      let merged: ReadonlyArray<ToolDefinition> = local.definitions
      const executor: ExecutorShape = {
        get definitions() {
          const fromServers = mcp.executor.definitions
          if (fromServers !== seen) {
            seen = fromServers
            merged = [...local.definitions, ...fromServers.filter((d) => !localNames.has(d.name))]
          }
          return merged
        },
        execute: (call, context) =>
          localNames.has(call.name) ? local.execute(call, context) : mcp.executor.execute(call, context)
      }
      return executor
    })
  )
