/**
 * agentloop as an MCP server: the tools of an `Executor` (the coding tools confined to a workspace,
 * sub-agents, any agentloop tools) offered to other agents over MCP, on stdio (`serveMcpStdio`) or
 * Streamable HTTP on the loopback interface (`serveMcpHttp`).
 *
 * Built on the official SDK's low-level `Server`, the same SDK this package's client speaks
 * through: one implementation of the protocol (versions, sessions, cancellation, progress) for
 * both halves, tool definitions passed on as the JSON Schemas they already are, and the SDK's
 * Streamable HTTP transport, which the conformance suite's server scenarios are written against.
 *
 * - **Definitions**: each tool's name, description and parameters' JSON Schema, with
 *   `annotations.readOnlyHint` from its `readOnly`.
 * - **Calls** run through the executor (which checks the arguments against the tool's schema)
 *   after the server's **policy**: nobody can be asked here, so a call the policy would ask about
 *   is denied, saying how to allow it. The default, `readOnlyPolicy()`, runs read-only tools only;
 *   `allowAll` (the CLI's `--yes`) or `readOnlyPolicy(names)` (an allow list) run more.
 * - **Results** become MCP content (`toMcpResult`: text and images); a tool's error result, a
 *   denied call, a failed tool (`ToolError`), a defect or a timeout (the definition's `timeoutMs`)
 *   is a result with `isError: true`. An unknown tool is a protocol error (invalid params), as MCP
 *   asks.
 * - **Logging**: a denied call is also logged (`warning`, logger `agentloop`) for the client's
 *   user, at the level the client set with `logging/setLevel`.
 * - **Progress** (`reportProgress`) becomes `notifications/progress` when the request has a
 *   progress token (see `progressNotice`).
 * - **Cancellation**: `notifications/cancelled` fires the call's `AbortSignal` and interrupts its
 *   fiber (so `bash` kills its process group); closing the connection or the server's scope does
 *   the same to every call still running. Nothing a call started outlives it.
 *
 * @since 0.1.0
 */
import { decide, errorResult, Executor, readOnlyPolicy } from "@agentloop/core"
import type {
  ExecutorShape,
  ToolCall,
  ToolContext,
  ToolDefinition,
  ToolPolicy,
  ToolResultMessage
} from "@agentloop/core"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import {
  CallToolRequestSchema,
  ErrorCode,
  isInitializeRequest,
  ListToolsRequestSchema,
  McpError
} from "@modelcontextprotocol/sdk/types.js"
import type { CallToolResult, Tool as SdkTool } from "@modelcontextprotocol/sdk/types.js"
import { Cause, Deferred, Duration, Effect, Exit, FiberSet, Option } from "effect"
import type { Scope } from "effect"
import { randomUUID } from "node:crypto"
import { createServer } from "node:http"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { McpServeError } from "./Errors.ts"
import { toMcpResult } from "./Results.ts"

/**
 * Options of `serveMcpStdio` and `serveMcpHttp`.
 *
 * @since 0.1.0
 * @category models
 */
export interface McpServeOptions {
  /** The server's name in its `initialize` answer (default `agentloop`). */
  readonly name?: string | undefined
  /** The server's version in its `initialize` answer (default `0.1.0`). */
  readonly version?: string | undefined
  /**
   * Which calls run (default `readOnlyPolicy()`: read-only tools only). A call the policy asks
   * about is denied: the server has nobody to ask.
   */
  readonly policy?: ToolPolicy | undefined
  /** Text for the client's model about how to use the tools (MCP's `instructions`). */
  readonly instructions?: string | undefined
}

/**
 * Options of `serveMcpHttp`.
 *
 * @since 0.1.0
 * @category models
 */
export interface McpHttpServeOptions extends McpServeOptions {
  /** The port on 127.0.0.1 (default 0: any free one). */
  readonly port?: number | undefined
  /** The endpoint's path (default `/mcp`). */
  readonly path?: string | undefined
}

/**
 * A running HTTP server.
 *
 * @since 0.1.0
 * @category models
 */
export interface McpHttpServer {
  /** The endpoint, e.g. `http://127.0.0.1:3000/mcp`. */
  readonly url: string
  readonly port: number
}

/** The most a request body may be. */
const MAX_BODY_BYTES = 4 * 1024 * 1024

/** The text of a call the policy would ask about. */
const needsApproval = (name: string): string =>
  `Tool call was not executed: "${name}" needs approval, and this MCP server cannot ask anyone. ` +
  `Start the server with --yes (every tool runs) or allow the tool by name.`

/**
 * The `notifications/progress` parameters for the `count`-th progress report of a call: a report
 * of the shape MCP's own progress has (`{ progress: number, total?, message? }`, what this
 * package's client makes of a server's notifications) is passed on; any other counts up, with a
 * message when it has text (a string, or a `text` field: `bash`'s output) or is a sub-agent's
 * event (the event's type, and the tool of a `tool_start`).
 *
 * @since 0.1.0
 * @category converting
 */
export const progressNotice = (
  progress: unknown,
  count: number
): { progress: number; total?: number; message?: string } => {
  if (typeof progress === "string") return { progress: count, message: progress }
  if (typeof progress !== "object" || progress === null) return { progress: count }
  const p = progress as Record<string, unknown>
  if (typeof p["progress"] === "number") {
    return {
      progress: p["progress"],
      ...(typeof p["total"] === "number" ? { total: p["total"] } : {}),
      ...(typeof p["message"] === "string" ? { message: p["message"] } : {})
    }
  }
  if (typeof p["text"] === "string") return { progress: count, message: p["text"] }
  if (p["type"] === "subagent_event" && typeof p["event"] === "object" && p["event"] !== null) {
    const event = p["event"] as { type?: unknown; call?: { name?: unknown } }
    const tool = event.type === "tool_start" && typeof event.call?.name === "string" ? ` ${event.call.name}` : ""
    return { progress: count, message: `sub-agent: ${String(event.type)}${tool}` }
  }
  return { progress: count }
}

/** The MCP tool for an agentloop tool definition. */
const sdkTool = (definition: ToolDefinition): SdkTool => ({
  name: definition.name,
  description: definition.description,
  inputSchema: definition.parameters as SdkTool["inputSchema"],
  annotations: { readOnlyHint: definition.readOnly === true }
})

type RunPromise = <A, E>(
  effect: Effect.Effect<A, E, never>,
  options?: Effect.RunOptions | undefined
) => Promise<A>

interface CallRequest {
  readonly name: string
  readonly arguments?: Record<string, unknown> | undefined
  readonly _meta?: { readonly progressToken?: string | number | undefined } | undefined
}

interface CallExtra {
  readonly signal: AbortSignal
  readonly requestId: string | number
  readonly sendNotification: (notification: {
    method: "notifications/progress"
    params: { progressToken: string | number; progress: number; total?: number; message?: string }
  }) => Promise<void>
}

/**
 * One call: the policy, then the executor, the outcome as an agentloop result (never a failure).
 * The call's signal fires when the request is cancelled and when the call is interrupted.
 */
const runCall = (
  executor: ExecutorShape,
  policy: ToolPolicy,
  definition: ToolDefinition,
  request: CallRequest,
  extra: CallExtra
): Effect.Effect<ToolResultMessage> =>
  Effect.gen(function*() {
    const call: ToolCall = {
      type: "toolCall",
      id: `mcp-${String(extra.requestId)}`,
      name: request.name,
      arguments: request.arguments ?? {}
    }
    const decision = yield* Effect.exit(decide(policy, call, definition))
    if (decision._tag === "Failure") {
      return errorResult(
        call,
        `Tool call was not executed: the server's policy failed (${Cause.pretty(decision.cause)})`
      )
    }
    if (decision.value._tag === "Deny") {
      return errorResult(call, `Tool call was not executed: ${decision.value.reason}`, { denied: true })
    }
    if (decision.value._tag === "Ask") return errorResult(call, needsApproval(call.name), { denied: true })

    const controller = new AbortController()
    const onCancel = () => controller.abort()
    extra.signal.addEventListener("abort", onCancel, { once: true })
    const token = request._meta?.progressToken
    let count = 0
    const context: ToolContext = {
      signal: controller.signal,
      toolCallId: call.id,
      toolName: call.name,
      reportProgress: (progress) =>
        token === undefined ?
          Effect.void :
          Effect.promise(() =>
            extra.sendNotification({
              method: "notifications/progress",
              params: { progressToken: token, ...progressNotice(progress, ++count) }
            }).catch(() => undefined)
          )
    }
    const executed = Effect.suspend(() => executor.execute(call, context))
    const limited = definition.timeoutMs === undefined ?
      executed :
      Effect.map(
        Effect.timeoutOption(executed, Duration.millis(definition.timeoutMs)),
        Option.getOrElse(() =>
          errorResult(call, `Tool call timed out after ${Duration.format(Duration.millis(definition.timeoutMs!))}`)
        )
      )
    return yield* limited.pipe(
      Effect.map((result): ToolResultMessage => ({ ...result, toolCallId: call.id, toolName: call.name })),
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause) ?
          Effect.failCause(cause) :
          Effect.succeed(errorResult(call, messageOfCause(cause)))
      ),
      Effect.onInterrupt(() => Effect.sync(() => controller.abort())),
      Effect.ensuring(Effect.sync(() => extra.signal.removeEventListener("abort", onCancel)))
    ) as Effect.Effect<ToolResultMessage>
  })

const messageOfCause = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string") {
    return error.message
  }
  return String(error)
}

/**
 * An SDK `Server` offering `executor`'s tools, its calls run with `runPromise` (so a cancelled
 * request interrupts its call, and closing the runtime's scope interrupts them all).
 */
const makeServer = (executor: ExecutorShape, options: McpServeOptions, runPromise: RunPromise): Server => {
  const policy = options.policy ?? readOnlyPolicy()
  const server = new Server(
    { name: options.name ?? "agentloop", version: options.version ?? "0.1.0" },
    {
      capabilities: { tools: { listChanged: false }, logging: {} },
      ...(options.instructions === undefined ? {} : { instructions: options.instructions })
    }
  )
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: executor.definitions.map(sdkTool) }))
  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const definition = executor.definitions.find((d) => d.name === request.params.name)
    // an unknown tool is the request's error (a protocol error), not a tool result
    if (definition === undefined) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`)
    const run = runCall(executor, policy, definition, request.params, extra)
    const result = await runPromise(run, { signal: extra.signal })
    // the client's user learns of a denied call too, not only its model (at the level they chose)
    if ((result.details as { denied?: boolean } | undefined)?.denied === true) {
      const data = result.content.map((part) => (part.type === "text" ? part.text : "")).join("")
      await server.sendLoggingMessage({ level: "warning", logger: "agentloop", data }, extra.sessionId)
        .catch(() => undefined)
    }
    return toMcpResult(result)
  })
  return server
}

/**
 * Serves the tools of the `Executor` in context on one connection of any SDK transport (an
 * `InMemoryTransport`, a socket of your own) until the client closes it or the scope closes; then
 * every call still running is interrupted. Succeeds once connected, with an effect that waits for
 * the connection to close.
 *
 * @since 0.1.0
 * @category servers
 */
export const connectMcpServer = (
  transport: Transport,
  options: McpServeOptions = {}
): Effect.Effect<Effect.Effect<void>, McpServeError, Executor | Scope.Scope> =>
  Effect.gen(function*() {
    const executor = yield* Executor
    const runPromise = yield* FiberSet.makeRuntimePromise<never>()
    const server = makeServer(executor, options, runPromise)
    const closed = yield* Deferred.make<void>()
    server.onclose = () => Deferred.doneUnsafe(closed, Exit.void)
    yield* Effect.tryPromise({
      try: () => server.connect(transport),
      catch: (error) => new McpServeError({ message: `cannot serve MCP: ${String(error)}` })
    })
    yield* Effect.addFinalizer(() => Effect.promise(() => server.close().catch(() => undefined)))
    return Deferred.await(closed)
  })

/**
 * Serves the tools of the `Executor` in context over stdio (the process's stdin and stdout) until
 * stdin ends or the effect is interrupted; then every call still running is interrupted (and its
 * processes stopped) before it returns. Nothing else may write to stdout meanwhile.
 *
 * @since 0.1.0
 * @category servers
 */
export const serveMcpStdio = (options: McpServeOptions = {}): Effect.Effect<void, McpServeError, Executor> =>
  Effect.scoped(Effect.gen(function*() {
    const ended = yield* Deferred.make<void>()
    const end = () => Deferred.doneUnsafe(ended, Exit.void)
    // the SDK's stdio transport does not notice stdin ending: the client went away
    process.stdin.once("end", end)
    process.stdin.once("close", end)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        process.stdin.off("end", end)
        process.stdin.off("close", end)
      })
    )
    const closed = yield* connectMcpServer(new StdioServerTransport(), options)
    yield* Effect.raceFirst(closed, Deferred.await(ended))
  }))

/** Whether a `Host` or `Origin` names this machine's loopback interface (localhost, 127.0.0.1, [::1]). */
const isLoopback = (value: string, withScheme: boolean): boolean => {
  const url = withScheme ? value : `http://${value}`
  if (!URL.canParse(url)) return false
  const host = new URL(url).hostname
  return host === "localhost" || host === "127.0.0.1" || host === "[::1]"
}

const reply = (res: ServerResponse, status: number, message: string, code = ErrorCode.InvalidRequest) => {
  res.writeHead(status, { "content-type": "application/json" })
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }))
}

const readBody = (req: IncomingMessage): Promise<unknown> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    let size = 0
    req.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > MAX_BODY_BYTES) {
        reject(new Error("request body too large"))
        req.destroy()
      } else chunks.push(chunk)
    })
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      if (text.length === 0) return resolve(undefined)
      try {
        resolve(JSON.parse(text))
      } catch {
        reject(new Error("request body is not JSON"))
      }
    })
    req.on("error", reject)
  })

/**
 * Serves the tools of the `Executor` in context over Streamable HTTP on 127.0.0.1 (stateful: a
 * session per `initialize`, its id in `Mcp-Session-Id`) until the scope closes; then every
 * session and every call still running ends. Requests whose `Host` or `Origin` is not a loopback
 * name are refused with 403 (DNS rebinding: a web page must not reach it).
 *
 * @since 0.1.0
 * @category servers
 */
export const serveMcpHttp = (
  options: McpHttpServeOptions = {}
): Effect.Effect<McpHttpServer, McpServeError, Executor | Scope.Scope> =>
  Effect.gen(function*() {
    const executor = yield* Executor
    const runPromise = yield* FiberSet.makeRuntimePromise<never>()
    const path = options.path ?? "/mcp"
    const sessions = new Map<string, { readonly server: Server; readonly transport: StreamableHTTPServerTransport }>()

    const handle = async (req: IncomingMessage, res: ServerResponse) => {
      const host = req.headers.host
      const origin = req.headers.origin
      if (host === undefined || !isLoopback(host, false) || (origin !== undefined && !isLoopback(origin, true))) {
        return reply(res, 403, "Forbidden: not a loopback Host or Origin")
      }
      if (new URL(req.url ?? "/", "http://localhost").pathname !== path) return reply(res, 404, "Not found")
      const body = req.method === "POST" ?
        await readBody(req).catch((error: Error) => error) :
        undefined
      if (body instanceof Error) return reply(res, 400, `Bad request: ${body.message}`, ErrorCode.ParseError)
      const header = req.headers["mcp-session-id"]
      const sessionId = Array.isArray(header) ? header[0] : header
      if (sessionId !== undefined) {
        const session = sessions.get(sessionId)
        if (session === undefined) return reply(res, 404, "Session not found")
        return session.transport.handleRequest(req, res, body)
      }
      if (req.method !== "POST" || !isInitializeRequest(body)) {
        return reply(res, 400, "Bad request: no session (send initialize first)")
      }
      const server = makeServer(executor, options, runPromise)
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          sessions.set(id, { server, transport })
        }
      })
      transport.onclose = () => {
        if (transport.sessionId !== undefined) sessions.delete(transport.sessionId)
      }
      await server.connect(transport)
      return transport.handleRequest(req, res, body)
    }

    const http = createServer((req, res) => {
      handle(req, res).catch((error: unknown) => {
        if (!res.headersSent) reply(res, 500, `Internal error: ${String(error)}`, ErrorCode.InternalError)
        else res.end()
      })
    })
    const port = yield* Effect.callback<number, McpServeError>((resume) => {
      const onError = (error: Error) =>
        resume(
          Effect.fail(
            new McpServeError({ message: `cannot listen on 127.0.0.1:${options.port ?? 0}: ${error.message}` })
          )
        )
      http.once("error", onError)
      http.listen(options.port ?? 0, "127.0.0.1", () => {
        http.off("error", onError)
        resume(Effect.succeed((http.address() as AddressInfo).port))
      })
    })
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        for (const session of sessions.values()) await session.server.close().catch(() => undefined)
        sessions.clear()
        http.closeAllConnections()
        await new Promise<void>((resolve) => http.close(() => resolve()))
      })
    )
    return { url: `http://127.0.0.1:${port}${path}`, port }
  })
