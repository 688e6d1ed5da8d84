/**
 * Typed failures: every `ModelError` says why (`reason`), with the HTTP status and whether it was
 * retried; each retry is a log line and a span event; answers that are not event streams fail
 * once naming their content type; long error texts are clipped; unknown finish reasons are errors.
 */
import type { ModelErrorReason } from "@agentloop/core"
import { anthropicFetchLayer, openAiCompatFetchLayer } from "@agentloop/providers"
import type { OpenAiCompatOptions } from "@agentloop/providers"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { assistants, deltas, runLoop } from "./helpers/loop.ts"
import { makeRecorder, modelErrorOf, streamOnce } from "./helpers/model.ts"
import { chatSse, makeServer, namedSse } from "./helpers/server.ts"
import type { Reply } from "./helpers/server.ts"

const openAi = (url: string, options: Partial<OpenAiCompatOptions> = {}) =>
  openAiCompatFetchLayer({ model: "m", baseUrl: `${url}/v1`, ...options })
const noWait = { initialDelay: 0, maxDelay: 0 }

const status = (code: number, body: string, headers?: Record<string, string>): Reply => ({
  kind: "status",
  status: code,
  body,
  ...(headers === undefined ? {} : { headers })
})
const openAiError = (message: string, type = "invalid_request_error", code: string | null = null) =>
  JSON.stringify({ error: { message, type, code } })
const text = (content: string, finish: string | null = null) => ({
  choices: [{ index: 0, delta: { content }, finish_reason: finish }]
})

describe("the reason of a failed request", () => {
  const cases: ReadonlyArray<{ readonly name: string; readonly reply: Reply; readonly reason: ModelErrorReason }> = [
    { name: "401", reply: status(401, openAiError("Incorrect API key provided")), reason: "auth" },
    { name: "403", reply: status(403, openAiError("not allowed")), reason: "auth" },
    { name: "404", reply: status(404, "{\"error\":\"model 'llama9' not found\"}"), reason: "not_found" },
    {
      name: "400 context length (OpenAI)",
      reply: status(
        400,
        openAiError(
          "This model's maximum context length is 128000 tokens.",
          "invalid_request_error",
          "context_length_exceeded"
        )
      ),
      reason: "context_length"
    },
    {
      name: "400 context length (Anthropic)",
      reply: status(
        400,
        "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: " +
          "210000 tokens > 200000 maximum\"}}"
      ),
      reason: "context_length"
    },
    {
      name: "400 content filter (Azure)",
      reply: status(
        400,
        openAiError(
          "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
          "invalid_request_error",
          "content_filter"
        )
      ),
      reason: "content_filter"
    },
    { name: "400 other", reply: status(400, openAiError("Invalid 'temperature'")), reason: "invalid_request" },
    { name: "422", reply: status(422, "{\"detail\":\"bad field\"}"), reason: "invalid_request" }
  ]
  for (const c of cases) {
    it.effect(`${c.name} → ${c.reason}, with the status, not retried`, () =>
      Effect.gen(function*() {
        const server = yield* makeServer([c.reply, c.reply])
        const error = modelErrorOf(yield* streamOnce(openAi(server.url, { retry: noWait })))
        assert.deepStrictEqual(
          { reason: error.reason, status: error.status, retried: error.retried, attempts: error.attempts },
          { reason: c.reason, status: (c.reply as { status: number }).status, retried: false, attempts: 1 }
        )
        assert.strictEqual((yield* server.requests).length, 1)
      }))
  }

  const retried: ReadonlyArray<{ readonly code: number; readonly reason: ModelErrorReason }> = [
    { code: 429, reason: "rate_limit" },
    { code: 503, reason: "overloaded" },
    { code: 529, reason: "overloaded" },
    { code: 500, reason: "server" },
    { code: 504, reason: "timeout" }
  ]
  for (const c of retried) {
    it.effect(`${c.code} → ${c.reason}, retried, with the attempt count`, () =>
      Effect.gen(function*() {
        const reply = status(c.code, openAiError("busy", "server_error"))
        const server = yield* makeServer([reply, reply, reply])
        const error = modelErrorOf(yield* streamOnce(openAi(server.url, { retry: { maxRetries: 2, ...noWait } })))
        assert.deepStrictEqual(
          { reason: error.reason, status: error.status, retried: error.retried, attempts: error.attempts },
          { reason: c.reason, status: c.code, retried: true, attempts: 3 }
        )
        assert.match(error.message, /\(gave up after 3 attempts\)$/)
      }))
  }

  it.effect("a server that is not running → network, retried", () =>
    Effect.gen(function*() {
      const url = yield* Effect.scoped(Effect.map(makeServer([]), (server) => server.url))
      const error = modelErrorOf(yield* streamOnce(openAi(url, { retry: { maxRetries: 1, ...noWait } })))
      assert.deepStrictEqual([error.reason, error.retried, error.attempts], ["network", true, 2])
      assert.isUndefined(error.status)
    }))

  it.effect("Anthropic's overloaded error event before any output → overloaded, retried", () =>
    Effect.gen(function*() {
      const overloaded: Reply = {
        kind: "sse",
        body: namedSse([{ type: "error", error: { type: "overloaded_error", message: "Overloaded" } }])
      }
      const server = yield* makeServer([overloaded, overloaded])
      const error = modelErrorOf(
        yield* streamOnce(
          anthropicFetchLayer({
            model: "claude-test",
            baseUrl: server.url,
            apiKey: "k",
            retry: { maxRetries: 1, ...noWait }
          })
        )
      )
      assert.deepStrictEqual([error.reason, error.retried, error.attempts], ["overloaded", true, 2])
    }))
})

describe("retries leave a trace", () => {
  it.effect("each retry is a warning log line and an event on the provider's span", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        status(429, openAiError("slow down", "rate_limit_error"), { "retry-after-ms": "0" }),
        status(503, openAiError("busy", "server_error")),
        { kind: "sse", body: chatSse([text("ok", "stop")]) }
      ])
      const recorder = makeRecorder()
      const run = yield* recorder.record(runLoop(openAi(server.url, { retry: { maxRetries: 3, ...noWait } })))
      assert.strictEqual(run.result.reason, "stop")
      assert.deepStrictEqual(recorder.logs(), [
        "the OpenAI-compatible server: attempt 1 of 4 failed (the OpenAI-compatible server answered HTTP 429: " +
        "rate_limit_error: slow down); retrying in 0",
        "the OpenAI-compatible server: attempt 2 of 4 failed (the OpenAI-compatible server answered HTTP 503: " +
        "server_error: busy); retrying in 0"
      ])
      const span = recorder.spans().find((s) => s.name === "agentloop.provider.stream")!
      assert.deepStrictEqual(
        span.events.map(([name, , attributes]) => [
          name,
          attributes["agentloop.attempt"],
          attributes["agentloop.error.reason"],
          attributes["http.response.status_code"]
        ]),
        [["agentloop.provider.retry", 1, "rate_limit", 429], ["agentloop.provider.retry", 2, "overloaded", 503]]
      )
      assert.strictEqual(span.attributes.get("agentloop.model"), "m")
    }))
})

describe("answers that are not event streams", () => {
  it.effect("a 200 text/html login page fails once, naming the content type", () =>
    Effect.gen(function*() {
      const page: Reply = status(200, "<html><body><h1>Sign in</h1></body></html>", {
        "content-type": "text/html; charset=utf-8"
      })
      const server = yield* makeServer([page, page, page, page])
      const exit = yield* streamOnce(openAi(server.url))
      const error = modelErrorOf(exit)
      assert.strictEqual(
        error.message,
        "the OpenAI-compatible server answered HTTP 200 with content type \"text/html; charset=utf-8\" instead of an " +
          "event stream (a login page or a proxy in the way? check the base URL): <html><body><h1>Sign " +
          "in</h1></body></html>"
      )
      assert.deepStrictEqual([error.reason, error.status, error.attempts], ["protocol", 200, 1])
      assert.strictEqual((yield* server.requests).length, 1)
    }))

  it.effect("a 200 text/plain \"Ollama is running\" fails once, naming the content type and the text", () =>
    Effect.gen(function*() {
      const plain: Reply = status(200, "Ollama is running", { "content-type": "text/plain; charset=utf-8" })
      const server = yield* makeServer([plain, plain])
      const run = yield* runLoop(openAi(server.url))
      assert.strictEqual(
        run.result.error,
        "model error: the OpenAI-compatible server answered HTTP 200 with content type \"text/plain; charset=utf-8\" " +
          "instead of an event stream: Ollama is running"
      )
      assert.strictEqual((yield* server.requests).length, 1)
    }))
})

describe("long error texts", () => {
  it.effect("a 1 MB JSON error message becomes a short error", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([status(400, openAiError("y".repeat(1_000_000)))])
      const run = yield* runLoop(openAi(server.url))
      assert.isBelow(run.result.error!.length, 700)
      assert.match(
        run.result.error!,
        /^model error: the OpenAI-compatible server answered HTTP 400: invalid_request_error: y+…$/
      )
    }))

  it.effect("a 1 MB in-band error message becomes a short errorMessage", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "sse",
        body: chatSse([text("a"), { error: { message: "z".repeat(1_000_000), type: "invalid_request_error" } }])
      }])
      const run = yield* runLoop(openAi(server.url))
      assert.isBelow(assistants(run.result.messages)[0]!.errorMessage!.length, 700)
    }))
})

describe("finish reasons", () => {
  it.effect("an unknown finish reason after partial output ends error, naming it", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "sse",
        body: chatSse([text("Part of an ans"), text("", "recitation")])
      }])
      const run = yield* runLoop(openAi(server.url))
      assert.deepStrictEqual(run.violations, [])
      const [message] = assistants(run.result.messages)
      assert.strictEqual(message!.stopReason, "error")
      assert.strictEqual(
        message!.errorMessage,
        "the OpenAI-compatible server ended the turn with an unknown finish reason \"recitation\""
      )
      assert.deepStrictEqual(message!.content, [{ type: "text", text: "Part of an ans" }])
      assert.strictEqual(run.result.reason, "error")
    }))

  for (const reason of ["stop", "eos", "eos_token", "end_turn", "stop_sequence"]) {
    it.effect(`"${reason}" is a clean stop`, () =>
      Effect.gen(function*() {
        const server = yield* makeServer([{ kind: "sse", body: chatSse([text("Done", reason)]) }])
        const run = yield* runLoop(openAi(server.url))
        assert.strictEqual(assistants(run.result.messages)[0]!.stopReason, "stop")
        assert.strictEqual(deltas(run.events, "text_delta"), "Done")
      }))
  }

  it.effect("\"max_tokens\" is length", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "sse", body: chatSse([text("Do", "max_tokens")]) }])
      const run = yield* runLoop(openAi(server.url))
      assert.strictEqual(assistants(run.result.messages)[0]!.stopReason, "length")
    }))
})
