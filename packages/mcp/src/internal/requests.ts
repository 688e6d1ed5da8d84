/**
 * A request to a server: the SDK's promise as an effect, and what its failure means (sent again
 * once when the server never took it; else a message naming the server, secrets redacted, and a
 * flag for a result's `details`).
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Exit } from "effect"
import { McpRequestError } from "../Errors.ts"
import { messageOf, secretsOfServer } from "./connection.ts"
import type { Connections, ServerState } from "./connection.ts"
import { AuthFailure } from "./oauth.ts"
import { redact } from "./secrets.ts"

/** The SDK's per-request timeout is turned off (its largest value): time limits are the loop's. */
const NO_SDK_TIMEOUT = 2_147_483_647

/** A request of the SDK's client as an effect (interrupting it sends `notifications/cancelled`). */
export const request = <A>(f: (options: { signal: AbortSignal; timeout: number }) => Promise<A>) =>
  Effect.tryPromise({ try: (signal) => f({ signal, timeout: NO_SDK_TIMEOUT }), catch: (error) => error })

/**
 * A call that provably never reached a server: the connection was already closed, or the HTTP
 * server answered 404 for the session (it restarted and forgot it; MCP then asks for a new one).
 */
const neverSent = (error: unknown): boolean =>
  (error instanceof StreamableHTTPError && error.code === 404) ||
  (error instanceof Error && !(error instanceof McpError) && error.message === "Not connected")

const isZodError = (error: unknown): boolean =>
  typeof error === "object" && error !== null && Array.isArray((error as { issues?: unknown }).issues)

/** What a failed request means: send it again, or this message and flag for a result's `details`. */
export type Failure = { readonly retry: true } | { readonly text: string; readonly flag: Record<string, unknown> }

/**
 * What a failed request means: sent again once when the server never took it (a closed
 * connection, an HTTP session the server no longer knows, as after a restart), or a message
 * naming the server and a flag for `details`. A lost connection is dropped (the next request
 * connects again). `answer` names what a valid answer would have been.
 */
export const classify = Effect.fnUntraced(function*(
  connections: Connections,
  server: ServerState,
  client: Client,
  error: unknown,
  answer: string,
  retried: boolean
): Effect.fn.Return<Failure> {
  const name = server.config.name
  const secrets = secretsOfServer(server)
  if (!retried && neverSent(error)) {
    yield* connections.drop(server, client)
    return { retry: true } as const
  }
  if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) {
    yield* connections.drop(server, client)
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
  yield* connections.drop(server, client)
  return {
    text: redact(
      `Lost the connection to MCP server "${name}": ${messageOf(error)} (it is connected again on the next call).`,
      secrets
    ),
    flag: { disconnected: true }
  }
})

/** A request of the library's own (prompts), connecting first; its failure as an `McpRequestError`. */
export const requestServer = <A>(
  connections: Connections,
  server: ServerState,
  answer: string,
  f: (client: Client) => Effect.Effect<A, unknown>,
  retried = false
): Effect.Effect<A, McpRequestError> =>
  Effect.gen(function*() {
    const name = server.config.name
    const connected = yield* Effect.result(connections.connect(server))
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
    const outcome = yield* classify(connections, server, client, error, answer, retried)
    if ("retry" in outcome) return yield* requestServer(connections, server, answer, f, true)
    return yield* new McpRequestError({ server: name, message: outcome.text })
  })
