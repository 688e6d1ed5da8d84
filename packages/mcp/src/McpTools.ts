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
import { Executor, makeToolExecutor } from "@agentloop/core"
import type {
  AnyTool,
  AssistantMessage,
  ExecutorShape,
  Tool,
  ToolDefinition,
  ToolServices,
  UserMessage
} from "@agentloop/core"
import { fitImageContent } from "@agentloop/tools"
import { Context, Effect, Layer } from "effect"
import type { Scope } from "effect"
import type { ChildProcessSpawner } from "effect/process"
import type { McpServerConfig } from "./Config.ts"
import { McpConfigError } from "./Errors.ts"
import type { McpConnectError, McpRequestError } from "./Errors.ts"
import { makeClientFeatures } from "./internal/clientFeatures.ts"
import { makeConnections, makeServerStates, PING_TIMEOUT_MS } from "./internal/connection.ts"
import { makeServerPrompts } from "./internal/prompts.ts"
import { makeOfferedRoots } from "./internal/roots.ts"
import type { StdioTransport } from "./internal/stdio.ts"
import { makeCatalog, makeServerTools, PROGRESS_BUFFER } from "./internal/tools.ts"
import type { McpPrompt } from "./Prompts.ts"
import type { PrepareImage } from "./Results.ts"
import type { McpRoot } from "./Roots.ts"

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
export const MCP_PROGRESS_BUFFER = PROGRESS_BUFFER

/**
 * How long an HTTP server whose event stream broke gets to answer a ping before its connection is
 * closed (its calls in flight then end with a `disconnected` error).
 *
 * @since 0.1.0
 * @category constants
 */
export const MCP_PING_TIMEOUT_MS = PING_TIMEOUT_MS

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
    const states = yield* makeServerStates(servers, options)
    const roots = yield* makeOfferedRoots(options.roots)
    const prepareImage = options.prepareImage ?? fitServerImage
    // who answers the servers' questions: elicitation and sampling are offered only when someone
    // can answer; roots only when the layer was given some
    const features = yield* makeClientFeatures(roots, prepareImage)
    const catalog = makeCatalog(states, options.trustAnnotations === true)
    const connections = yield* makeConnections({
      clientName: options.clientName ?? "agentloop",
      features,
      onListed: catalog.changed
    })
    const serverTools = yield* makeServerTools(catalog, connections, prepareImage)
    // every server connected and listed (one that cannot be fails the layer), its tools then taken into use
    yield* Effect.forEach(states, connections.connect, { concurrency: "unbounded", discard: true })
    catalog.current()
    const { getPrompt, prompts } = makeServerPrompts(states, connections, prepareImage)
    return McpTools.of({
      executor: serverTools.executor,
      setRoots: (next) => roots.set(next, states),
      prompts,
      getPrompt,
      definitions: Effect.sync(() => catalog.current().definitions),
      tools: Effect.sync(serverTools.tools),
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
    })
  })

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
