/**
 * Credentials never leave a provider in a string: the API key and every header value not marked
 * public are scrubbed (before any clipping) from errors, `errorMessage`, events, log lines and
 * spans, in-band stream errors included; and redirects are refused, so nothing is sent to
 * another address.
 */
import { anthropicFetchLayer, openAiCompatFetchLayer } from "@agentloop/providers"
import type { OpenAiCompatOptions } from "@agentloop/providers"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { assistants, runLoop } from "./helpers/loop.ts"
import { makeRecorder, modelErrorOf, streamOnce } from "./helpers/model.ts"
import { chatSse, makeServer, namedSse } from "./helpers/server.ts"
import type { Reply } from "./helpers/server.ts"

const apiKey = "sk-live-0123456789abcdefghijklmnopqrstuv"
const azureKey = "azure-3f9c2b7e8d1a4c6f9b0e2d4a6c8e0f1a"
const gatewayToken = "gw-tok-9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d"

const openAi = (url: string, options: Partial<OpenAiCompatOptions> = {}) =>
  openAiCompatFetchLayer({ model: "m", baseUrl: `${url}/v1`, retry: { maxRetries: 0 }, ...options })

const errorBody = (message: string) => JSON.stringify({ error: { message, type: "invalid_request_error" } })
const status = (code: number, body: string, headers?: Record<string, string>): Reply => ({
  kind: "status",
  status: code,
  body,
  ...(headers === undefined ? {} : { headers })
})

/** Every string of a run: result, transcript and events. */
const everything = (run: unknown) => JSON.stringify(run)

describe("credentials passed as headers", () => {
  it.effect("an Azure api-key header echoed by a 401 is scrubbed from the result", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([status(401, errorBody(`Access denied: invalid subscription key ${azureKey}.`))])
      const run = yield* runLoop(openAi(server.url, { headers: { "api-key": azureKey } }))
      assert.strictEqual(
        run.result.error,
        "model error: the OpenAI-compatible server answered HTTP 401 (check the API key): " +
          "invalid_request_error: Access denied: invalid subscription key [redacted]."
      )
      assert.notInclude(everything(run), azureKey)
      // the header was sent: scrubbing is about what comes back
      assert.strictEqual((yield* server.requests)[0]!.headers["api-key"], azureKey)
    }))

  it.effect("a gateway's authorization header is scrubbed whole and as its bare token", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        status(403, errorBody(`token ${gatewayToken} is not allowed; header was "Bearer ${gatewayToken}"`))
      ])
      const run = yield* runLoop(openAi(server.url, { headers: { authorization: `Bearer ${gatewayToken}` } }))
      assert.include(run.result.error!, "token [redacted] is not allowed; header was \"[redacted]\"")
      assert.notInclude(everything(run), gatewayToken)
    }))

  it.effect("a header marked public is not redacted; the others still are", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([status(400, errorBody(`app agentloop-bench, key ${azureKey}`))])
      const run = yield* runLoop(
        openAi(server.url, {
          headers: { "X-Title": "agentloop-bench", "api-key": azureKey },
          publicHeaders: ["x-title"]
        })
      )
      assert.include(run.result.error!, "app agentloop-bench, key [redacted]")
    }))

  it.effect("an unmarked header value is treated as a secret", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([status(400, errorBody("app agentloop-bench"))])
      const run = yield* runLoop(openAi(server.url, { headers: { "X-Title": "agentloop-bench" } }))
      assert.include(run.result.error!, "app [redacted]")
    }))
})

describe("credentials echoed inside a 200 stream", () => {
  it.effect("an OpenAI error chunk after partial output: errorMessage, result and events are scrubbed", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "sse",
        body: chatSse([
          { choices: [{ index: 0, delta: { content: "Hel" }, finish_reason: null }] },
          { error: { message: `upstream refused key ${apiKey}`, type: "invalid_request_error", code: "bad_key" } }
        ])
      }])
      const run = yield* runLoop(openAi(server.url, { apiKey }))
      const [message] = assistants(run.result.messages)
      assert.strictEqual(
        message!.errorMessage,
        "the OpenAI-compatible server reported an error in the stream: upstream refused key [redacted] (code bad_key)"
      )
      assert.strictEqual(run.result.error, message!.errorMessage)
      assert.notInclude(everything(run), apiKey)
    }))

  it.effect("an Anthropic error event: errorMessage, result and events are scrubbed", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "sse",
        body: namedSse([
          { type: "message_start", message: { model: "claude-test", usage: { input_tokens: 1, output_tokens: 1 } } },
          { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
          { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hi" } },
          { type: "error", error: { type: "invalid_request_error", message: `key ${apiKey} revoked` } }
        ])
      }])
      const run = yield* runLoop(anthropicFetchLayer({ model: "claude-test", baseUrl: server.url, apiKey }))
      assert.strictEqual(
        assistants(run.result.messages)[0]!.errorMessage,
        "Anthropic reported an error in the stream: invalid_request_error: key [redacted] revoked"
      )
      assert.notInclude(everything(run), apiKey)
    }))

  it.effect("a key in a malformed event is scrubbed, even where the event is clipped", () =>
    Effect.gen(function*() {
      // the event data is clipped at 200 characters: the key starts at 185
      const data = `{"oops": "${"x".repeat(175)}${apiKey}"`
      const server = yield* makeServer([{ kind: "sse", body: `data: ${data}\n\n` }])
      const run = yield* runLoop(openAi(server.url, { apiKey }))
      assert.include(run.result.error!, `event data is not JSON: {"oops": "${"x".repeat(175)}[redacted]"`)
      assert.notInclude(everything(run), apiKey.slice(0, 8))
    }))
})

describe("scrubbing happens before clipping", () => {
  it.effect("a plain-text error body whose key straddles the clipping point leaves no part of it", () =>
    Effect.gen(function*() {
      // a proxy's plain-text error: 490 characters, then the key; clipping at 500 first would keep 10 of them
      const server = yield* makeServer([
        status(502, `${"x".repeat(490)}${apiKey} upstream failed`, { "content-type": "text/plain" })
      ])
      const run = yield* runLoop(openAi(server.url, { apiKey }))
      assert.notInclude(run.result.error!, apiKey.slice(0, 8))
      assert.include(run.result.error!, `${"x".repeat(490)}[redacted]`)
    }))

  it.effect("a key that straddles the clipping point leaves no part of itself", () =>
    Effect.gen(function*() {
      // "invalid_request_error: " and 460 characters, then the key: clipping the text at 500 characters
      // before scrubbing would keep the key's first 17 characters, which no longer match the key
      const server = yield* makeServer([status(400, errorBody(`${"x".repeat(460)}${apiKey} and more`))])
      const run = yield* runLoop(openAi(server.url, { apiKey }))
      assert.notInclude(run.result.error!, apiKey.slice(0, 8))
      assert.include(run.result.error!, `${"x".repeat(460)}[redacted] and`)
    }))
})

describe("logs and spans", () => {
  it.effect("retry log lines and span events and attributes never carry the key", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        status(503, errorBody(`busy, key ${apiKey}`)),
        status(503, errorBody(`busy, key ${apiKey}`))
      ])
      const recorder = makeRecorder()
      const exit = yield* recorder.record(
        streamOnce(openAi(server.url, { apiKey, retry: { maxRetries: 1, initialDelay: 0, maxDelay: 0 } }))
      )
      assert.strictEqual(modelErrorOf(exit).attempts, 2)
      const logs = recorder.logs()
      assert.strictEqual(logs.length, 1)
      assert.include(logs[0]!, "busy, key [redacted]")
      const spans = recorder.spans().filter((span) => span.name === "agentloop.provider.stream")
      assert.strictEqual(spans.length, 1)
      const recorded = JSON.stringify({
        attributes: [...spans[0]!.attributes],
        events: spans[0]!.events.map(([name, , attributes]) => [name, attributes]),
        status: spans[0]!.status._tag === "Ended" ? String(spans[0]!.status.exit) : ""
      })
      assert.include(recorded, "agentloop.provider.retry")
      assert.notInclude(recorded, apiKey)
      assert.notInclude(logs.join("\n"), apiKey)
    }))

  it.effect("a traced run: each turn is `chat {model}` with the GenAI provider name, and no span carries the key", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "sse",
        body: chatSse([
          { choices: [{ index: 0, delta: { role: "assistant", content: "hi" }, finish_reason: null }] },
          { choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
          { choices: [], usage: { prompt_tokens: 12, completion_tokens: 3 } }
        ])
      }])
      const recorder = makeRecorder()
      const run = yield* recorder.record(runLoop(openAi(server.url, { apiKey })))
      assert.strictEqual(run.result.reason, "stop")
      const spans = recorder.spans()
      const chat = spans.find((span) => span.attributes.get("agentloop.span") === "agentloop.turn")!
      assert.strictEqual(chat.name, "chat m")
      assert.strictEqual(chat.attributes.get("gen_ai.provider.name"), "openai")
      assert.strictEqual(chat.attributes.get("gen_ai.request.model"), "m")
      assert.strictEqual(chat.attributes.get("gen_ai.usage.input_tokens"), 12)
      // the provider's request is inside the turn, the HTTP request inside that
      const stream = spans.find((span) => span.name === "agentloop.provider.stream")!
      assert.strictEqual(stream.parent._tag === "Some" && stream.parent.value.spanId, chat.spanId)
      const recorded = JSON.stringify(spans.map((span) => [span.name, [...span.attributes], span.events]))
      assert.include(recorded, "url.full", "the HTTP request's span is there")
      assert.notInclude(recorded, apiKey)
    }))
})

describe("redirects are never followed", () => {
  for (const code of [301, 302, 303, 307, 308]) {
    it.effect(`HTTP ${code} to another origin: a clear redirect error, nothing sent there, not retried`, () =>
      Effect.gen(function*() {
        const elsewhere = yield* makeServer([{ kind: "sse", body: chatSse([]) }])
        const server = yield* makeServer([
          status(code, "", { location: `${elsewhere.url}/v1/chat/completions?token=abc` }),
          status(code, "", { location: `${elsewhere.url}/v1/chat/completions` })
        ])
        const exit = yield* streamOnce(openAi(server.url, {
          apiKey,
          headers: { "api-key": azureKey },
          retry: { maxRetries: 3, initialDelay: 0, maxDelay: 0 }
        }))
        const error = modelErrorOf(exit)
        assert.strictEqual(error.reason, "redirect")
        assert.strictEqual(error.status, code)
        assert.strictEqual(error.retried, false)
        assert.strictEqual(
          error.message,
          `the OpenAI-compatible server answered HTTP ${code}, a redirect to ${elsewhere.url}; redirects are not ` +
            "followed, so credentials are never sent to another address: set baseUrl to the address the provider " +
            "expects"
        )
        assert.notInclude(error.message, "token=abc")
        assert.strictEqual((yield* server.requests).length, 1)
        assert.deepStrictEqual(yield* elsewhere.requests, [])
      }))
  }

  it.effect("Anthropic's x-api-key is not re-sent to the redirect target", () =>
    Effect.gen(function*() {
      const elsewhere = yield* makeServer([{ kind: "sse", body: "" }])
      const server = yield* makeServer([status(302, "", { location: `${elsewhere.url}/v1/messages` })])
      const run = yield* runLoop(anthropicFetchLayer({ model: "claude-test", baseUrl: server.url, apiKey }))
      assert.match(
        run.result.error!,
        /^model error: Anthropic answered HTTP 302, a redirect to http:\/\/127\.0\.0\.1:\d+;/
      )
      assert.deepStrictEqual(yield* elsewhere.requests, [])
    }))
})
