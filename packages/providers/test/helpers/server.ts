/**
 * A scripted HTTP server on 127.0.0.1 for provider tests: each request gets the next reply of
 * the script, and every request (method, path, headers, body) is recorded.
 */
import { Deferred, Effect } from "effect"
import type { Scope } from "effect"
import { createServer } from "node:http"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

/**
 * What the server answers one request with.
 *
 * - `sse`: a 200 event stream with `body`, written in pieces of `chunkSize` characters, then ended.
 * - `status`: any status with a body (an error body, a 429 with `Retry-After`...).
 * - `drop`: a 200 event stream that writes `body`, then destroys the socket (a dropped connection).
 * - `hang`: a 200 event stream that writes `body` and never ends; `clientClosed` resolves when the
 *   client goes away.
 * - `silent`: reads the request and never answers, not even with headers.
 * - `drip`: a 200 event stream that writes `body` one character every `everyMillis` (real time),
 *   over and over, until the client goes away.
 */
export type Reply =
  | { readonly kind: "sse"; readonly body: string; readonly chunkSize?: number }
  | {
    readonly kind: "status"
    readonly status: number
    readonly body: string
    readonly headers?: Readonly<Record<string, string>>
  }
  | { readonly kind: "drop"; readonly body: string }
  | { readonly kind: "hang"; readonly body: string }
  | { readonly kind: "silent" }
  | { readonly kind: "drip"; readonly body: string; readonly everyMillis: number }

export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

export interface TestServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  /** Every request so far. */
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** The parsed JSON body of request `index`. */
  readonly bodyOf: (index: number) => Effect.Effect<unknown>
  /** Waits until `count` requests have arrived (their bodies read). */
  readonly awaitRequests: (count: number) => Effect.Effect<void>
  /** Resolves when the client closed the connection of a `hang`, `silent` or `drip` reply. */
  readonly clientClosed: Effect.Effect<void>
}

const sseHeaders = { "content-type": "text/event-stream", "cache-control": "no-cache" }

const flatHeaders = (request: IncomingMessage): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(request.headers)) {
    if (typeof value === "string") out[name] = value
    else if (Array.isArray(value)) out[name] = value.join(", ")
  }
  return out
}

const writeInPieces = (response: ServerResponse, body: string, size: number) => {
  for (let i = 0; i < body.length; i += size) response.write(body.slice(i, i + size))
}

/** Starts the server for the current scope. */
export const makeServer = (script: ReadonlyArray<Reply>): Effect.Effect<TestServer, never, Scope.Scope> =>
  Effect.gen(function*() {
    const recorded: Array<RecordedRequest> = []
    const arrivals: Array<Deferred.Deferred<void>> = []
    const arrival = (count: number) => {
      while (arrivals.length < count) arrivals.push(Deferred.makeUnsafe<void>())
      return arrivals[count - 1]!
    }
    const closed = Deferred.makeUnsafe<void>()
    const answer = (reply: Reply | undefined, response: ServerResponse) => {
      if (reply === undefined) {
        response.writeHead(500, { "content-type": "text/plain" }).end("test server: unscripted request")
        return
      }
      switch (reply.kind) {
        case "sse":
          response.writeHead(200, sseHeaders)
          writeInPieces(response, reply.body, reply.chunkSize ?? 256)
          response.end()
          return
        case "status":
          response.writeHead(reply.status, { "content-type": "application/json", ...reply.headers }).end(reply.body)
          return
        case "drop":
          response.writeHead(200, sseHeaders)
          response.write(reply.body, () => response.socket?.destroy())
          return
        case "hang":
          response.writeHead(200, sseHeaders)
          response.write(reply.body)
          response.on("close", () => Deferred.doneUnsafe(closed, Effect.void))
          return
        case "silent":
          response.on("close", () => Deferred.doneUnsafe(closed, Effect.void))
          return
        case "drip": {
          response.writeHead(200, sseHeaders)
          let position = 0
          const timer = setInterval(() => {
            response.write(reply.body[position % reply.body.length]!)
            position++
          }, reply.everyMillis)
          response.on("close", () => {
            clearInterval(timer)
            Deferred.doneUnsafe(closed, Effect.void)
          })
          return
        }
      }
    }
    const server = createServer((request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        recorded.push({
          method: request.method ?? "",
          path: request.url ?? "",
          headers: flatHeaders(request),
          body: Buffer.concat(chunks).toString("utf8")
        })
        const count = recorded.length
        answer(script[count - 1], response)
        Deferred.doneUnsafe(arrival(count), Effect.void)
      })
    })
    yield* Effect.acquireRelease(
      Effect.callback<void>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.void))
      }),
      () =>
        Effect.callback<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )
    const port = (server.address() as AddressInfo).port
    return {
      url: `http://127.0.0.1:${port}`,
      requests: Effect.sync(() => recorded.slice()),
      bodyOf: (index) => Effect.sync((): unknown => JSON.parse(recorded[index]?.body ?? "null")),
      awaitRequests: (count) => Deferred.await(arrival(count)),
      clientClosed: Deferred.await(closed)
    }
  })

/** Headers every HTTP client adds; left out of exact header assertions. */
const transportHeaders = new Set([
  "host",
  "connection",
  "content-length",
  "user-agent",
  "accept-encoding",
  "accept-language",
  "sec-fetch-mode"
])

/** The headers the provider chose to send (transport headers left out). */
export const sentHeaders = (request: RecordedRequest): Record<string, string> =>
  Object.fromEntries(Object.entries(request.headers).filter(([name]) => !transportHeaders.has(name)))

/** An SSE body of `data:` events (Chat Completions style), ending in `[DONE]` unless `done` is false. */
export const chatSse = (chunks: ReadonlyArray<unknown>, done = true): string =>
  chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`).join("") + (done ? "data: [DONE]\n\n" : "")

/** An SSE body of named events (Anthropic style). */
export const namedSse = (events: ReadonlyArray<{ readonly type: string; readonly [key: string]: unknown }>): string =>
  events.map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`).join("")
