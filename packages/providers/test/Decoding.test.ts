/**
 * Decoding the event stream whatever the network does to it: the providers decode a network
 * chunk at a time (all the events a chunk completes at once), so an event may begin in one chunk
 * and end in the next at any byte — in the middle of `data:`, between the CR and the LF of a CRLF,
 * inside a multi-byte UTF-8 character. These streams are served by an `HttpClient` double that
 * hands the body over in exactly the chunks given (a loopback server may merge them), and each
 * split must give the same events and the same final message as the whole body in one chunk.
 */
import type { AssistantMessage, ModelEvent } from "@agentloop/core"
import { defaultRetryPolicy, defaultTimeouts, makeAnthropic, makeOpenAiCompat } from "@agentloop/providers"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Stream } from "effect"
import { HttpClient, HttpClientResponse } from "effect/http"
import { messagesProtocol } from "../src/internal/anthropicWire.ts"
import { chatProtocol } from "../src/internal/openAiWire.ts"
import { makeCleaner } from "../src/internal/text.ts"
import { modelEvents } from "../src/internal/transport.ts"

/** An `HttpClient` answering every request with a 200 event stream made of `chunks()`, one read each. */
const chunkedClient = (chunks: () => ReadonlyArray<Uint8Array>) =>
  HttpClient.make((request) =>
    Effect.sync(() => {
      const pieces = chunks()
      let next = 0
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (next < pieces.length) controller.enqueue(pieces[next++]!)
          else controller.close()
        }
      })
      return HttpClientResponse.fromWeb(
        request,
        new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } })
      )
    })
  )

type Provider = "anthropic" | "openai"

/** Streams one request through the provider's `Model`, the body cut into `chunks()`. */
const makeStreamer = (provider: Provider, chunks: () => ReadonlyArray<Uint8Array>) =>
  Effect.gen(function*() {
    const options = { model: "m", baseUrl: "http://127.0.0.1:9", apiKey: "sk-test", prices: false as const }
    const model = yield* (provider === "anthropic" ? makeAnthropic(options) : makeOpenAiCompat(options)).pipe(
      Effect.provideService(HttpClient.HttpClient, chunkedClient(chunks))
    )
    return Effect.exit(Stream.runCollect(model.stream({ messages: [{ role: "user", content: "hi" }], tools: [] })))
  })

const utf8 = (text: string) => new TextEncoder().encode(text)

/** The body cut at byte `at` (two chunks). */
const splitAt = (body: Uint8Array, at: number): ReadonlyArray<Uint8Array> => [body.slice(0, at), body.slice(at)]

/**
 * The decoder alone (what the `Model` runs between the HTTP response and the retry logic), for the
 * thousands of runs of the every-byte test: the `Model` path costs a request's setup each time.
 */
const decodeChunks = (provider: Provider, chunks: ReadonlyArray<Uint8Array>) => {
  const clean = makeCleaner([])
  const context = { provider: "P", model: "m", timestamp: 0, idPrefix: "call_x", clean }
  const protocol = provider === "anthropic" ? messagesProtocol(context) : chatProtocol(context)
  const call = {
    provider: "P",
    model: "m",
    url: "http://127.0.0.1:9",
    headers: {},
    body: "",
    secrets: [],
    retry: defaultRetryPolicy,
    timeouts: defaultTimeouts,
    prices: false as const
  }
  return Effect.exit(
    Stream.runCollect(modelEvents(call, clean, protocol, Stream.fromIterable(chunks), { finished: false }))
  )
}

/**
 * A Messages stream with everything a parser can trip on: CRLF, CR and LF line ends, comments, an `id:` and a
 * `retry:` line, data split over several `data:` lines, multi-byte characters, a ping.
 */
const anthropicBody = [
  ": a comment, then a retry directive that must be ignored\r\n",
  "retry: 10\r\n",
  "event: message_start\r\n",
  "data: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",\"usage\":{\"input_tokens\":10," +
  "\"output_tokens\":1}}}\r\n",
  "\r\n",
  "id: 7\n",
  "event: content_block_start\n",
  "data: {\"type\":\"content_block_start\",\"index\":0,\n",
  "data: \"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n",
  "\n",
  "event: ping\rdata: {\"type\": \"ping\"}\r\r",
  "event: content_block_delta\r\n",
  "data:{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"héllo " +
  "日本 🙂\"}}\r\n\r\n",
  ":keep-alive\n\n",
  "event: content_block_delta\n",
  "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\", " +
  "wörld\"}}   \n\n",
  "event: content_block_start\r\n",
  "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\"," +
  "\"id\":\"toolu_1\",\"name\":\"write\",\"input\":{}}}\r\n\r\n",
  "event: content_block_delta\r\n",
  "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\"," +
  "\"partial_json\":\"{\\\"path\\\": \\\"ä\"}}\r\n\r\n",
  "event: content_block_delta\r\n",
  "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\"," +
  "\"partial_json\":\".ts\\\"}\"}}\r\n\r\n",
  "event: message_delta\r\n",
  "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"}," +
  "\"usage\":{\"output_tokens\":42}}\r\n\r\n",
  "event: message_stop\r\n",
  "data: {\"type\":\"message_stop\"}\r\n\r\n",
  "event: content_block_delta\r\n",
  "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"after the " +
  "end\"}}\r\n\r\n"
].join("")

/** A Chat Completions stream with the same traps (OpenRouter's comments, CRLF, data over two lines). */
const openAiBody = [
  ": OPENROUTER PROCESSING\r\n\r\n",
  "data: {\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\r\n\r\n",
  "data: {\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\n",
  "data: \"delta\":{\"content\":\"héllo 日本 🙂\"}}]}\n\n",
  "data: {\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\", wörld\"}}]}\r\r",
  "data: {\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0," +
  "\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"write\",\"arguments\":\"\"}}]}}]}\r\n\r\n",
  "data: {\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0," +
  "\"function\":{\"arguments\":\"{\\\"path\\\": \\\"ä\"}}]}}]}\r\n\r\n",
  ": keep-alive\r\n",
  "data: {\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0," +
  "\"function\":{\"arguments\":\".ts\\\"}\"}}]}}]}\r\n\r\n",
  "data: {\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\r\n\r\n",
  "data: {\"model\":\"gpt-x\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":42}}\r\n\r\n",
  "data: [DONE]\r\n\r\n",
  "data: {\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"after the end\"}}]}\r\n\r\n"
].join("")

const expectedEvents = (provider: Provider): Exit.Exit<ReadonlyArray<ModelEvent>, unknown> => {
  const id = provider === "anthropic" ? "toolu_1" : "call_1"
  const message: AssistantMessage = {
    role: "assistant",
    content: [{ type: "text", text: "héllo 日本 🙂, wörld" }, {
      type: "toolCall",
      id,
      name: "write",
      arguments: { path: "ä.ts" }
    }],
    stopReason: "toolUse",
    usage: { input: 10, output: 42 },
    model: provider === "anthropic" ? "claude-x" : "gpt-x",
    timestamp: 0
  }
  return Exit.succeed([
    { type: "text_delta", delta: "héllo 日本 🙂" },
    { type: "text_delta", delta: ", wörld" },
    { type: "toolcall_delta", id, name: "write", delta: "" },
    { type: "toolcall_delta", id, delta: "{\"path\": \"ä" },
    { type: "toolcall_delta", id, delta: ".ts\"}" },
    { type: "done", message }
  ])
}

const bodies: Record<Provider, Uint8Array> = { anthropic: utf8(anthropicBody), openai: utf8(openAiBody) }

describe("decoding the event stream", () => {
  it.effect("an event growing past 10 MiB without ending is a protocol failure, not a heap that grows", () =>
    Effect.gen(function*() {
      const piece = utf8("x".repeat(64 * 1024))
      const chunks = [utf8("data: "), ...Array.from({ length: 161 }, () => piece)]
      const exit = yield* decodeChunks("openai", chunks)
      assert.deepStrictEqual(
        exit,
        Exit.fail({
          message: "malformed event stream from P: Pending SSE event exceeded the maximum size of 10485760",
          reason: "protocol",
          retryable: false
        })
      )
    }))

  for (const provider of ["anthropic", "openai"] as const) {
    const body = bodies[provider]

    it.effect(
      `${provider}: the whole body in one chunk gives the exact events (comments, CRLF, CR, multi-line ` +
        `data, retry ignored, nothing after the end)`,
      () =>
        Effect.gen(function*() {
          const stream = yield* makeStreamer(provider, () => [body])
          const exit = yield* stream
          assert.deepStrictEqual(exit, expectedEvents(provider))
        })
    )

    it.effect(`${provider}: cut in two at every byte, the same events and final message`, () =>
      Effect.gen(function*() {
        const expected = yield* decodeChunks(provider, [body])
        assert.deepStrictEqual(expected, expectedEvents(provider), "the decoder alone, the whole body")
        const expectedJson = JSON.stringify(expected)
        let at = 0
        for (; at <= body.length; at++) {
          const exit = yield* decodeChunks(provider, splitAt(body, at))
          // compared as JSON first (fast), in full when they differ (a readable failure)
          if (JSON.stringify(exit) !== expectedJson) assert.deepStrictEqual(exit, expected, `cut at byte ${at}`)
        }
        assert.strictEqual(at, body.length + 1)
      }))

    it.effect(`${provider}: one byte per chunk, the same events and final message`, () =>
      Effect.gen(function*() {
        const stream = yield* makeStreamer(provider, () => Array.from(body, (byte) => Uint8Array.of(byte)))
        assert.deepStrictEqual(yield* stream, expectedEvents(provider))
      }))

    it.effect(`${provider}: an empty chunk, half the body at once, then the rest byte by byte`, () =>
      Effect.gen(function*() {
        const half = body.length >> 1
        const stream = yield* makeStreamer(provider, () => [
          new Uint8Array(0),
          body.slice(0, half),
          ...Array.from(body.slice(half), (byte) => Uint8Array.of(byte))
        ])
        assert.deepStrictEqual(yield* stream, expectedEvents(provider))
      }))
  }
})
