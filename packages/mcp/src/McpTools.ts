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
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import type { Tool as SdkTool } from "@modelcontextprotocol/sdk/types.js"
import { Cause, Context, Deferred, Effect, Exit, Fiber, Layer, Queue, Schema, Scope, Stream } from "effect"
import type { ChildProcessSpawner } from "effect/process"
import { MCP_MAX_OUTPUT_CHARS } from "./Config.ts"
import type { McpServerConfig } from "./Config.ts"
import { McpConfigError, McpConnectError, McpRequestError } from "./Errors.ts"
import { makeClientFeatures } from "./internal/clientFeatures.ts"
import {
  makeConnections,
  makeServerStates,
  messageOf,
  PING_TIMEOUT_MS,
  secretsOfServer,
  serverNamed
} from "./internal/connection.ts"
import type { ServerState } from "./internal/connection.ts"
import { AuthFailure } from "./internal/oauth.ts"
import { checkPromptArguments, promptMessages, promptOf } from "./internal/prompts.ts"
import { request } from "./internal/requests.ts"
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
import { makeOfferedRoots } from "./internal/roots.ts"
import { redact, redactDeep } from "./internal/secrets.ts"
import type { StdioTransport } from "./internal/stdio.ts"
import { argumentCheck } from "./internal/validate.ts"
import type { ArgumentCheck } from "./internal/validate.ts"
import { toolNameFor } from "./Naming.ts"
import type { McpPrompt } from "./Prompts.ts"
import { limitResult, toToolResult } from "./Results.ts"
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
export const MCP_PROGRESS_BUFFER = 64

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
    const states = yield* makeServerStates(servers, options)
    // where cut results are kept whole: the one in the layer's context (none by default)
    const store = yield* OutputStore
    const roots = yield* makeOfferedRoots(options.roots)
    const prepareImage = options.prepareImage ?? fitServerImage
    // who answers the servers' questions: elicitation and sampling are offered only when someone
    // can answer; roots only when the layer was given some
    const features = yield* makeClientFeatures(roots, prepareImage)

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
    const connections = yield* makeConnections({
      clientName: options.clientName ?? "agentloop",
      features,
      onListed: () => {
        changed = true
      }
    })
    const connect = connections.connect
    const dropConnection = connections.drop

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
    const setRoots = (next: ReadonlyArray<McpRoot>): Effect.Effect<void, McpConfigError> => roots.set(next, states)

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
        Effect.flatMap(serverNamed(states, name), promptsOf)

    const getPrompt = (
      serverName: string,
      name: string,
      args: Readonly<Record<string, string>> = {}
    ): Effect.Effect<ReadonlyArray<UserMessage | AssistantMessage>, McpRequestError> =>
      Effect.gen(function*() {
        const server = yield* serverNamed(states, serverName)
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
