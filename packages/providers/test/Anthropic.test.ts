/**
 * The Anthropic provider on the wire: the exact requests it sends, the streams it understands
 * (cases the recorded fixtures lack are written from the Messages streaming reference), and
 * every failure, each through the whole loop against a loopback server.
 */
import type { Message } from "@agentloop/core"
import { anthropicFetchLayer } from "@agentloop/providers"
import type { AnthropicOptions } from "@agentloop/providers"
import { echoTool, probeTool } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { makeSleepWatch } from "./helpers/clock.ts"
import { assistants, deltas, runLoop, toolResults } from "./helpers/loop.ts"
import { makeServer, namedSse, sentHeaders } from "./helpers/server.ts"
import type { Reply } from "./helpers/server.ts"
import { noTimeouts } from "./helpers/usage.ts"

const layer = (url: string, options: Partial<AnthropicOptions> = {}) =>
  anthropicFetchLayer({ model: "claude-test", baseUrl: url, apiKey: "sk-ant-secret", ...options })

type Event = { readonly type: string; readonly [key: string]: unknown }

const start: Event = {
  type: "message_start",
  message: { model: "claude-test-1", usage: { input_tokens: 10, output_tokens: 1 } }
}
const textBlock = (index: number, text: string): ReadonlyArray<Event> => [
  { type: "content_block_start", index, content_block: { type: "text", text: "" } },
  { type: "content_block_delta", index, delta: { type: "text_delta", text } },
  { type: "content_block_stop", index }
]
const toolStart = (index: number, id: string, name: string): Event => ({
  type: "content_block_start",
  index,
  content_block: { type: "tool_use", id, name, input: {} }
})
const json = (index: number, partial: string): Event => ({
  type: "content_block_delta",
  index,
  delta: { type: "input_json_delta", partial_json: partial }
})
const end = (stopReason: string, output = 5): ReadonlyArray<Event> => [
  { type: "message_delta", delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: output } },
  { type: "message_stop" }
]
const sse = (...events: ReadonlyArray<Event | ReadonlyArray<Event>>): Reply => ({
  kind: "sse",
  body: namedSse(events.flat())
})
const stopReply = sse(start, textBlock(0, "ok"), end("end_turn"))

describe("Anthropic requests", () => {
  it.effect(
    "sends system, messages with tool_result blocks, replayable thinking, images, tools, options and " +
      "cache breakpoints",
    () =>
      Effect.gen(function*() {
        const server = yield* makeServer([stopReply])
        const messages: ReadonlyArray<Message> = [
          {
            role: "user",
            content: [{ type: "text", text: "look" }, { type: "image", data: "aGk=", mimeType: "image/png" }]
          },
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "signed", signature: "sig-1" },
              { type: "thinking", thinking: "from another provider" },
              { type: "thinking", thinking: "", signature: "opaque", redacted: true },
              { type: "text", text: "Checking." },
              { type: "toolCall", id: "t1", name: "echo", arguments: { a: 1 } },
              { type: "toolCall", id: "t2", name: "shot", arguments: {} }
            ],
            stopReason: "toolUse"
          },
          {
            role: "toolResult",
            toolCallId: "t1",
            toolName: "echo",
            content: [{ type: "text", text: "one" }],
            isError: false
          },
          {
            role: "toolResult",
            toolCallId: "t2",
            toolName: "shot",
            content: [{ type: "text", text: "" }, { type: "image", data: "cGlj", mimeType: "image/jpeg" }],
            isError: true
          },
          { role: "assistant", content: [{ type: "text", text: "" }], stopReason: "length" },
          { role: "user", content: "thanks" }
        ]
        const run = yield* runLoop(
          layer(server.url, {
            maxTokens: 4000,
            thinking: { budgetTokens: 2048 },
            headers: { "anthropic-beta": "interleaved-thinking-2025-05-14" }
          }),
          { messages, systemPrompt: "be brief", tools: [echoTool("echo"), echoTool("shot")] }
        )
        assert.deepStrictEqual(run.violations, [])
        const [request] = yield* server.requests
        assert.strictEqual(request!.path, "/v1/messages")
        assert.deepStrictEqual(sentHeaders(request!), {
          accept: "text/event-stream",
          "anthropic-version": "2023-06-01",
          "anthropic-beta": "interleaved-thinking-2025-05-14",
          "content-type": "application/json",
          "x-api-key": "sk-ant-secret"
        })
        const parameters = echoTool("echo").definition.parameters
        assert.deepStrictEqual(yield* server.bodyOf(0), {
          model: "claude-test",
          max_tokens: 4000,
          system: [{ type: "text", text: "be brief", cache_control: { type: "ephemeral" } }],
          messages: [
            {
              role: "user",
              content: [
                { type: "text", text: "look" },
                { type: "image", source: { type: "base64", media_type: "image/png", data: "aGk=" } }
              ]
            },
            {
              role: "assistant",
              content: [
                { type: "thinking", thinking: "signed", signature: "sig-1" },
                { type: "redacted_thinking", data: "opaque" },
                { type: "text", text: "Checking." },
                { type: "tool_use", id: "t1", name: "echo", input: { a: 1 } },
                { type: "tool_use", id: "t2", name: "shot", input: {} }
              ]
            },
            {
              role: "user",
              content: [
                { type: "tool_result", tool_use_id: "t1", content: [{ type: "text", text: "one" }] },
                {
                  type: "tool_result",
                  tool_use_id: "t2",
                  content: [{ type: "image", source: { type: "base64", media_type: "image/jpeg", data: "cGlj" } }],
                  is_error: true,
                  // a breakpoint on each of the two latest user turns
                  cache_control: { type: "ephemeral" }
                }
              ]
            },
            { role: "user", content: [{ type: "text", text: "thanks", cache_control: { type: "ephemeral" } }] }
          ],
          tools: [
            { name: "echo", description: "fake tool echo", input_schema: parameters },
            {
              name: "shot",
              description: "fake tool shot",
              input_schema: parameters,
              cache_control: { type: "ephemeral" }
            }
          ],
          thinking: { type: "enabled", budget_tokens: 2048 },
          stream: true
        })
      })
  )

  it.effect("defaults: max_tokens 4096, no system, no tools, temperature when set", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([stopReply])
      yield* runLoop(layer(server.url, { temperature: 0.2 }), { messages: [{ role: "user", content: "hi" }] })
      assert.deepStrictEqual(yield* server.bodyOf(0), {
        model: "claude-test",
        max_tokens: 4096,
        messages: [{ role: "user", content: [{ type: "text", text: "hi", cache_control: { type: "ephemeral" } }] }],
        temperature: 0.2,
        stream: true
      })
    }))

  it.effect("promptCaching: false sends no cache_control and plain text content", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([stopReply])
      yield* runLoop(layer(server.url, { promptCaching: false }), {
        messages: [{ role: "user", content: "hi" }],
        systemPrompt: "be brief",
        tools: [echoTool("echo")]
      })
      const body = yield* server.bodyOf(0)
      assert.notInclude(JSON.stringify(body), "cache_control")
      assert.deepStrictEqual(body, {
        model: "claude-test",
        max_tokens: 4096,
        system: "be brief",
        messages: [{ role: "user", content: "hi" }],
        tools: [{ name: "echo", description: "fake tool echo", input_schema: echoTool("echo").definition.parameters }],
        stream: true
      })
    }))
})

describe("Anthropic streams", () => {
  it.effect("a response truncated in the middle of tool input ends length; nothing runs", () =>
    Effect.gen(function*() {
      const probe = probeTool(echoTool("write_file"))
      const server = yield* makeServer([
        sse(
          start,
          toolStart(0, "toolu_w", "write_file"),
          json(0, ""),
          json(0, "{\"path\": \"a.txt\", \"con"),
          end("max_tokens")
        )
      ])
      const run = yield* runLoop(layer(server.url), { tools: [probe.tool] })
      assert.deepStrictEqual(run.violations, [])
      assert.strictEqual(run.result.reason, "length")
      assert.strictEqual(yield* probe.executions, 0)
      assert.deepStrictEqual(assistants(run.result.messages), [{
        role: "assistant",
        content: [{ type: "toolCall", id: "toolu_w", name: "write_file", arguments: {} }],
        stopReason: "length",
        usage: { input: 10, output: 5 },
        model: "claude-test-1",
        timestamp: 0
      }])
      assert.deepStrictEqual(toolResults(run.result.messages)[0]!.details, { skipped: true, reason: "length" })
    }))

  it.effect("tool input that is not valid JSON ends the message error naming the call; nothing runs", () =>
    Effect.gen(function*() {
      const probe = probeTool(echoTool("echo"))
      const server = yield* makeServer([
        sse(
          start,
          toolStart(0, "toolu_ok", "echo"),
          json(0, "{}"),
          toolStart(1, "toolu_bad", "echo"),
          json(1, "{\"a\":"),
          end("tool_use")
        )
      ])
      const run = yield* runLoop(layer(server.url), { tools: [probe.tool] })
      assert.deepStrictEqual(run.violations, [])
      assert.strictEqual(yield* probe.executions, 0)
      const first = assistants(run.result.messages)[0]!
      assert.strictEqual(first.stopReason, "error")
      assert.match(
        first.errorMessage!,
        /^the arguments of tool call "toolu_bad" \(echo\) are not valid JSON \(.+\); no tool was run$/
      )
      assert.strictEqual(run.result.reason, "error")
      assert.deepStrictEqual(toolResults(run.result.messages).map((r) => r.toolCallId), ["toolu_ok", "toolu_bad"])
    }))

  it.effect("refusal ends the message error", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([sse(start, textBlock(0, "I can't"), end("refusal"))])
      const run = yield* runLoop(layer(server.url))
      const first = assistants(run.result.messages)[0]!
      assert.strictEqual(first.stopReason, "error")
      assert.strictEqual(first.errorMessage, "Anthropic: the model refused to answer (stop reason \"refusal\")")
      assert.strictEqual(run.result.reason, "error")
    }))

  it.effect("stop_sequence is stop; pings and unknown events are ignored; cache usage is kept", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([sse(
        {
          type: "message_start",
          message: {
            model: "claude-test-1",
            usage: { input_tokens: 3, cache_read_input_tokens: 100, cache_creation_input_tokens: 7, output_tokens: 1 }
          }
        },
        { type: "ping" },
        { type: "some_future_event", payload: { anything: true } },
        textBlock(0, "hi"),
        end("stop_sequence", 2)
      )])
      const run = yield* runLoop(layer(server.url))
      assert.deepStrictEqual(assistants(run.result.messages)[0], {
        role: "assistant",
        content: [{ type: "text", text: "hi" }],
        stopReason: "stop",
        usage: { input: 3, output: 2, cacheRead: 100, cacheWrite: 7 },
        model: "claude-test-1",
        timestamp: 0
      })
    }))

  it.effect("an overloaded error event before any output is retried; the retry's answer counts", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        sse(start, { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }),
        stopReply
      ])
      const run = yield* runLoop(layer(server.url, { retry: { initialDelay: 0, maxDelay: 0 } }))
      assert.deepStrictEqual(run.violations, [])
      assert.strictEqual(run.result.reason, "stop")
      assert.deepStrictEqual(assistants(run.result.messages)[0]!.content, [{ type: "text", text: "ok" }])
      assert.strictEqual((yield* server.requests).length, 2)
    }))

  it.effect("an invalid_request_error event is not retried", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        sse(start, { type: "error", error: { type: "invalid_request_error", message: "bad" } }),
        stopReply
      ])
      const run = yield* runLoop(layer(server.url))
      assert.strictEqual(run.result.error, "Anthropic reported an error in the stream: invalid_request_error: bad")
      assert.strictEqual((yield* server.requests).length, 1)
    }))
})

describe("Anthropic failures", () => {
  const modelError = (run: { readonly result: { readonly reason: string; readonly error?: string | undefined } }) => {
    assert.strictEqual(run.result.reason, "error")
    assert.match(run.result.error!, /^model error: /)
    return run.result.error!.slice("model error: ".length)
  }
  const overloaded = (headers: Record<string, string> = {}): Reply => ({
    kind: "status",
    status: 529,
    headers,
    body: "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"
  })

  it.effect("529 overloaded then success: retried after the Retry-After delay", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([overloaded({ "retry-after": "3" }), stopReply])
      const sleeps = yield* makeSleepWatch
      const fiber = yield* Effect.forkChild(sleeps.watch(runLoop(layer(server.url, { timeouts: noTimeouts }))))
      yield* sleeps.started(1)
      assert.deepStrictEqual(yield* sleeps.durations, [3000])
      yield* TestClock.adjust("2999 millis")
      assert.strictEqual((yield* server.requests).length, 1)
      yield* TestClock.adjust("1 millis")
      const run = yield* Fiber.join(fiber)
      assert.strictEqual(run.result.reason, "stop")
      assert.strictEqual((yield* server.requests).length, 2)
    }))

  it.effect("retries stop at maxRetries; the last answer is the ModelError", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([overloaded(), overloaded(), stopReply])
      const run = yield* runLoop(layer(server.url, { retry: { maxRetries: 1, initialDelay: 0, maxDelay: 0 } }))
      assert.strictEqual(
        modelError(run),
        "Anthropic answered HTTP 529: overloaded_error: Overloaded (gave up after 2 attempts)"
      )
      assert.strictEqual((yield* server.requests).length, 2)
    }))

  it.effect("x-should-retry: false is obeyed", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([overloaded({ "x-should-retry": "false" }), stopReply])
      const run = yield* runLoop(layer(server.url, { retry: { initialDelay: 0, maxDelay: 0 } }))
      assert.strictEqual(modelError(run), "Anthropic answered HTTP 529: overloaded_error: Overloaded")
      assert.strictEqual((yield* server.requests).length, 1)
    }))

  it.effect("a Retry-After longer than maxRetryAfter fails at once", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "status",
        status: 429,
        headers: { "retry-after": "600" },
        body: "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Rate limited\"}}"
      }])
      const run = yield* runLoop(layer(server.url, { retry: { maxRetryAfter: "60 seconds" } }))
      assert.strictEqual(
        modelError(run),
        "Anthropic answered HTTP 429: rate_limit_error: Rate limited (the server asked to wait 10m, longer than " +
          "retry.maxRetryAfter)"
      )
      assert.strictEqual((yield* server.requests).length, 1)
    }))

  it.effect("a 400 fails at once with Anthropic's message", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "status",
        status: 400,
        body: JSON.stringify({
          type: "error",
          error: {
            type: "invalid_request_error",
            message: "messages.1.content.0.tool_use.id: String should match pattern"
          }
        })
      }, stopReply])
      const run = yield* runLoop(layer(server.url))
      assert.strictEqual(
        modelError(run),
        "Anthropic answered HTTP 400: invalid_request_error: messages.1.content.0.tool_use.id: String should " +
          "match pattern"
      )
      assert.strictEqual((yield* server.requests).length, 1)
      assert.deepStrictEqual(run.violations, [])
    }))

  it.effect("a 401 never repeats the API key", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "status",
        status: 401,
        body: "{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"invalid x-api-key " +
          "sk-ant-secret\"}}"
      }])
      const run = yield* runLoop(layer(server.url))
      assert.strictEqual(
        modelError(run),
        "Anthropic answered HTTP 401 (check the API key): authentication_error: invalid x-api-key [redacted]"
      )
    }))

  it.effect("a connection dropped mid-stream is a ModelError; nothing partial is appended", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "drop", body: namedSse([start, ...textBlock(0, "Hello")]) }])
      const run = yield* runLoop(layer(server.url))
      assert.match(modelError(run), /^the connection to Anthropic was lost while streaming the response \(.+\)$/)
      assert.strictEqual(deltas(run.events, "text_delta"), "Hello")
      assert.deepStrictEqual(assistants(run.result.messages), [])
      assert.deepStrictEqual(run.violations, [])
    }))

  it.effect("a stream that ends without a stop reason is a ModelError", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([sse(start, textBlock(0, "Hel"))])
      const run = yield* runLoop(layer(server.url))
      assert.strictEqual(modelError(run), "the stream from Anthropic ended before the response was complete")
    }))

  it.effect("malformed SSE is a ModelError, not retried", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        { kind: "sse", body: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":\n\n" },
        stopReply
      ])
      const run = yield* runLoop(layer(server.url))
      assert.strictEqual(
        modelError(run),
        "malformed event stream from Anthropic: event data is not JSON: {\"type\":\"message_start\",\"message\":"
      )
      assert.strictEqual((yield* server.requests).length, 1)
    }))

  it.effect("an event missing a required field is a ModelError", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        sse(start, { type: "content_block_delta", delta: { type: "text_delta", text: "x" } })
      ])
      const run = yield* runLoop(layer(server.url))
      assert.match(modelError(run), /^malformed event stream from Anthropic: unexpected event shape: .*index/s)
    }))

  it.effect("aborting the run while the model streams cancels the HTTP request", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "hang", body: namedSse([start, ...textBlock(0, "Hel")]) }])
      const controller = new AbortController()
      const fiber = yield* Effect.forkChild(runLoop(layer(server.url), { signal: controller.signal }))
      yield* server.awaitRequests(1)
      controller.abort()
      const run = yield* Fiber.join(fiber)
      yield* server.clientClosed
      assert.strictEqual(run.result.reason, "aborted")
      assert.deepStrictEqual(run.violations, [])
    }))
})
