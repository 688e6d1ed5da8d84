/**
 * The OpenAI-compatible provider on the wire: the exact requests it sends, the streams it
 * understands (cases the recorded fixtures lack are written from the Chat Completions API
 * reference), and every failure, each through the whole loop against a loopback server.
 */
import type { AssistantMessage, Message } from "@agentloop/core"
import { openAiCompatFetchLayer } from "@agentloop/providers"
import type { OpenAiCompatOptions } from "@agentloop/providers"
import { echoTool, probeTool } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { makeSleepWatch } from "./helpers/clock.ts"
import { assistants, deltas, modelEvents, runLoop, toolResults } from "./helpers/loop.ts"
import { chatSse, makeServer, sentHeaders } from "./helpers/server.ts"
import type { Reply } from "./helpers/server.ts"
import { noTimeouts } from "./helpers/usage.ts"

const layer = (url: string, options: Partial<OpenAiCompatOptions> = {}) =>
  openAiCompatFetchLayer({ model: "test-model", baseUrl: `${url}/v1`, apiKey: "sk-test-123", ...options })

const text = (content: string, finish: string | null = null) => ({
  choices: [{ index: 0, delta: { content }, finish_reason: finish }]
})
const stopReply: Reply = { kind: "sse", body: chatSse([text("ok", "stop")]) }

const toolDelta = (index: number, fragment: string, start?: { id: string; name: string }) => ({
  choices: [{
    index: 0,
    delta: {
      tool_calls: [{
        index,
        ...(start === undefined ? {} : { id: start.id, type: "function" }),
        function: { ...(start === undefined ? {} : { name: start.name }), arguments: fragment }
      }]
    },
    finish_reason: null
  }]
})
const finish = (reason: string) => ({ choices: [{ index: 0, delta: {}, finish_reason: reason }] })

describe("OpenAI-compatible requests", () => {
  it.effect("sends the transcript as Chat Completions messages, tools as functions, and the options", () =>
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
            { type: "thinking", thinking: "hmm", signature: "sig" },
            { type: "text", text: "Let me " },
            { type: "text", text: "check." },
            { type: "toolCall", id: "c1", name: "echo", arguments: { a: 1 } },
            { type: "toolCall", id: "c2", name: "shot", arguments: {} }
          ],
          stopReason: "toolUse"
        },
        {
          role: "toolResult",
          toolCallId: "c1",
          toolName: "echo",
          content: [{ type: "text", text: "one" }],
          isError: false
        },
        {
          role: "toolResult",
          toolCallId: "c2",
          toolName: "shot",
          content: [{ type: "image", data: "cGlj", mimeType: "image/jpeg" }],
          isError: true
        },
        { role: "assistant", content: [], stopReason: "length" },
        { role: "user", content: "thanks" }
      ]
      const run = yield* runLoop(
        layer(server.url, {
          maxTokens: 321,
          temperature: 0.5,
          headers: { "X-Title": "agentloop", "OpenAI-Organization": "org-1" }
        }),
        { messages, systemPrompt: "be brief", tools: [echoTool("echo"), echoTool("shot")] }
      )
      assert.deepStrictEqual(run.violations, [])
      const [request] = yield* server.requests
      assert.strictEqual(request!.method, "POST")
      assert.strictEqual(request!.path, "/v1/chat/completions")
      assert.deepStrictEqual(sentHeaders(request!), {
        accept: "text/event-stream",
        authorization: "Bearer sk-test-123",
        "content-type": "application/json",
        "x-title": "agentloop",
        "openai-organization": "org-1"
      })
      const fakeToolParameters = echoTool("echo").definition.parameters
      const body = yield* server.bodyOf(0)
      assert.deepStrictEqual(body, {
        model: "test-model",
        messages: [
          { role: "system", content: "be brief" },
          {
            role: "user",
            content: [
              { type: "text", text: "look" },
              { type: "image_url", image_url: { url: "data:image/png;base64,aGk=" } }
            ]
          },
          {
            role: "assistant",
            content: "Let me check.",
            tool_calls: [
              { id: "c1", type: "function", function: { name: "echo", arguments: "{\"a\":1}" } },
              { id: "c2", type: "function", function: { name: "shot", arguments: "{}" } }
            ]
          },
          { role: "tool", tool_call_id: "c1", content: "one" },
          { role: "tool", tool_call_id: "c2", content: "(the result is the attached image)" },
          {
            role: "user",
            content: [
              { type: "text", text: "Images from the result of tool call \"c2\" (shot):" },
              { type: "image_url", image_url: { url: "data:image/jpeg;base64,cGlj" } }
            ]
          },
          { role: "user", content: "thanks" }
        ],
        tools: [
          {
            type: "function",
            function: { name: "echo", description: "fake tool echo", parameters: fakeToolParameters }
          },
          {
            type: "function",
            function: { name: "shot", description: "fake tool shot", parameters: fakeToolParameters }
          }
        ],
        max_tokens: 321,
        temperature: 0.5,
        stream: true,
        stream_options: { include_usage: true }
      })
    }))

  it.effect("leaves out what is not set: no tools, no budget, no usage option, no key", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([stopReply])
      yield* runLoop(
        openAiCompatFetchLayer({ model: "llama3.1", baseUrl: `${server.url}/v1`, includeUsage: false }),
        { messages: [{ role: "user", content: "hi" }] }
      )
      const [request] = yield* server.requests
      assert.deepStrictEqual(sentHeaders(request!), { accept: "text/event-stream", "content-type": "application/json" })
      assert.deepStrictEqual(yield* server.bodyOf(0), {
        model: "llama3.1",
        messages: [{ role: "user", content: "hi" }],
        stream: true
      })
    }))

  it.effect("sends the budget as max_completion_tokens when asked", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([stopReply])
      yield* runLoop(layer(server.url, { maxTokens: 50, maxTokensField: "max_completion_tokens" }))
      const body = (yield* server.bodyOf(0)) as Record<string, unknown>
      assert.strictEqual(body["max_completion_tokens"], 50)
      assert.isFalse("max_tokens" in body)
    }))

  it.effect("never sends OPENAI_API_KEY to a server other than OpenAI's", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([stopReply])
      const env = ConfigProvider.fromEnv({ env: { OPENAI_API_KEY: "sk-from-env" } })
      yield* runLoop(
        openAiCompatFetchLayer({ model: "m", baseUrl: server.url }).pipe(
          Layer.provide(Layer.succeed(ConfigProvider.ConfigProvider, env))
        )
      )
      const [request] = yield* server.requests
      assert.isUndefined(request!.headers["authorization"])
      assert.notInclude(request!.body, "sk-from-env")
    }))
})

describe("OpenAI-compatible streams", () => {
  it.effect("parallel calls whose argument fragments interleave are assembled by index", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        {
          kind: "sse",
          body: chatSse([
            { choices: [{ index: 0, delta: { role: "assistant", content: null }, finish_reason: null }] },
            toolDelta(0, "", { id: "call_a", name: "weather" }),
            toolDelta(1, "", { id: "call_b", name: "time" }),
            toolDelta(0, "{\"city\":"),
            toolDelta(1, "{\"zone\":"),
            toolDelta(1, "\"UTC\"}"),
            toolDelta(0, "\"Paris\"}"),
            finish("tool_calls"),
            { choices: [], usage: { prompt_tokens: 12, completion_tokens: 7 } }
          ])
        },
        stopReply
      ])
      const run = yield* runLoop(layer(server.url), { tools: [echoTool("weather"), echoTool("time")] })
      assert.deepStrictEqual(run.violations, [])
      assert.strictEqual(run.result.reason, "stop")
      const first = assistants(run.result.messages)[0]!
      assert.deepStrictEqual(first.content, [
        { type: "toolCall", id: "call_a", name: "weather", arguments: { city: "Paris" } },
        { type: "toolCall", id: "call_b", name: "time", arguments: { zone: "UTC" } }
      ])
      assert.deepStrictEqual(first.usage, { input: 12, output: 7 })
      // the deltas keep the wire order, each tagged with its call
      const firstTurn = run.events.slice(0, run.events.findIndex((e) => e.type === "assistant_message"))
      assert.deepStrictEqual(modelEvents(firstTurn), [
        { type: "toolcall_delta", id: "call_a", name: "weather", delta: "" },
        { type: "toolcall_delta", id: "call_b", name: "time", delta: "" },
        { type: "toolcall_delta", id: "call_a", delta: "{\"city\":" },
        { type: "toolcall_delta", id: "call_b", delta: "{\"zone\":" },
        { type: "toolcall_delta", id: "call_b", delta: "\"UTC\"}" },
        { type: "toolcall_delta", id: "call_a", delta: "\"Paris\"}" }
      ])
      assert.deepStrictEqual(toolResults(run.result.messages).map((r) => r.toolCallId), ["call_a", "call_b"])
    }))

  it.effect("calls sent whole at one index with different ids (Gemini-style) stay separate calls", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        {
          kind: "sse",
          body: chatSse([
            toolDelta(0, "{\"n\":1}", { id: "x1", name: "echo" }),
            toolDelta(0, "{\"n\":2}", { id: "x2", name: "echo" }),
            finish("tool_calls")
          ])
        },
        stopReply
      ])
      const run = yield* runLoop(layer(server.url), { tools: [echoTool("echo")] })
      assert.deepStrictEqual(run.violations, [])
      assert.deepStrictEqual(assistants(run.result.messages)[0]!.content, [
        { type: "toolCall", id: "x1", name: "echo", arguments: { n: 1 } },
        { type: "toolCall", id: "x2", name: "echo", arguments: { n: 2 } }
      ])
    }))

  it.effect("a response truncated in the middle of tool arguments ends length; nothing runs", () =>
    Effect.gen(function*() {
      const probe = probeTool(echoTool("write_file"))
      const server = yield* makeServer([{
        kind: "sse",
        body: chatSse([
          text("Writing it."),
          toolDelta(0, "", { id: "call_w", name: "write_file" }),
          toolDelta(0, "{\"path\":\"a.txt\",\"content\":\"hel"),
          finish("length"),
          { choices: [], usage: { prompt_tokens: 30, completion_tokens: 16 } }
        ])
      }])
      const run = yield* runLoop(layer(server.url), { tools: [probe.tool] })
      assert.deepStrictEqual(run.violations, [])
      assert.strictEqual(run.result.reason, "length")
      assert.strictEqual(yield* probe.executions, 0)
      const first = assistants(run.result.messages)[0]!
      assert.strictEqual(first.stopReason, "length")
      assert.deepStrictEqual(first.content, [
        { type: "text", text: "Writing it." },
        { type: "toolCall", id: "call_w", name: "write_file", arguments: {} }
      ])
      const [skipped] = toolResults(run.result.messages)
      assert.deepStrictEqual(skipped!.details, { skipped: true, reason: "length" })
      assert.strictEqual(deltas(run.events, "toolcall_delta", "call_w"), "{\"path\":\"a.txt\",\"content\":\"hel")
    }))

  it.effect("arguments that are not a JSON object end the message error naming the call; nothing runs", () =>
    Effect.gen(function*() {
      const probe = probeTool(echoTool("echo"))
      const server = yield* makeServer([{
        kind: "sse",
        body: chatSse([
          toolDelta(0, "{\"ok\":true}", { id: "call_good", name: "echo" }),
          toolDelta(1, "{\"broken\": ", { id: "call_bad", name: "echo" }),
          toolDelta(2, "[1,2]", { id: "call_list", name: "echo" }),
          finish("tool_calls")
        ])
      }])
      const run = yield* runLoop(layer(server.url), { tools: [probe.tool] })
      assert.deepStrictEqual(run.violations, [])
      assert.strictEqual(run.result.reason, "error")
      assert.strictEqual(yield* probe.executions, 0)
      const first = assistants(run.result.messages)[0]!
      assert.strictEqual(first.stopReason, "error")
      assert.match(first.errorMessage!, /^the arguments of tool call "call_bad" \(echo\) are not valid JSON \(.+\); /)
      assert.include(first.errorMessage!, "the arguments of tool call \"call_list\" (echo) are JSON but not an object")
      assert.notInclude(first.errorMessage!, "call_good")
      assert.strictEqual(run.result.error, first.errorMessage)
      assert.deepStrictEqual(
        toolResults(run.result.messages).map((r) => [r.toolCallId, r.details]),
        [
          ["call_good", { skipped: true, reason: "error" }],
          ["call_bad", { skipped: true, reason: "error" }],
          ["call_list", { skipped: true, reason: "error" }]
        ]
      )
    }))

  it.effect("content_filter ends the message error", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "sse", body: chatSse([text("Part"), finish("content_filter")]) }])
      const run = yield* runLoop(layer(server.url))
      const first = assistants(run.result.messages)[0]!
      assert.strictEqual(first.stopReason, "error")
      assert.strictEqual(
        first.errorMessage,
        "the OpenAI-compatible server stopped the response with its content filter"
      )
      assert.strictEqual(run.result.reason, "error")
    }))

  it.effect("a tool call ending with finish_reason stop (older local servers) is still toolUse", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        { kind: "sse", body: chatSse([toolDelta(0, "{}", { id: "c", name: "echo" }), finish("stop")]) },
        stopReply
      ])
      const run = yield* runLoop(layer(server.url), { tools: [echoTool("echo")] })
      assert.strictEqual(assistants(run.result.messages)[0]!.stopReason, "toolUse")
      assert.strictEqual(run.result.reason, "stop")
      assert.strictEqual((yield* server.requests).length, 2)
    }))

  it.effect("an error chunk in the middle of the stream ends the message error, keeping what came before", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "sse",
        body: chatSse([text("Hel"), { error: { message: "upstream model crashed", type: "server_error", code: 500 } }])
      }])
      const run = yield* runLoop(layer(server.url))
      assert.deepStrictEqual(run.violations, [])
      const expectedMessage: AssistantMessage = {
        role: "assistant",
        content: [{ type: "text", text: "Hel" }],
        stopReason: "error",
        errorMessage: "the OpenAI-compatible server reported an error in the stream: upstream model crashed (code 500)",
        model: "test-model",
        timestamp: 0
      }
      assert.deepStrictEqual(assistants(run.result.messages), [expectedMessage])
      assert.strictEqual(run.result.error, expectedMessage.errorMessage)
      assert.strictEqual((yield* server.requests).length, 1)
    }))

  it.effect("an overload error chunk before any output is retried", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        { kind: "sse", body: chatSse([{ error: { message: "overloaded", code: 503 } }]) },
        stopReply
      ])
      const run = yield* runLoop(layer(server.url, { retry: { initialDelay: 0, maxDelay: 0 } }))
      assert.strictEqual(run.result.reason, "stop")
      assert.strictEqual((yield* server.requests).length, 2)
    }))
})

describe("OpenAI-compatible failures", () => {
  const modelError = (run: { readonly result: { readonly reason: string; readonly error?: string | undefined } }) => {
    assert.strictEqual(run.result.reason, "error")
    assert.match(run.result.error!, /^model error: /)
    return run.result.error!.slice("model error: ".length)
  }

  it.effect("429 then success: waits exactly what Retry-After says, then streams", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        {
          kind: "status",
          status: 429,
          headers: { "retry-after": "2" },
          body: "{\"error\":{\"message\":\"slow down\"}}"
        },
        stopReply
      ])
      const sleeps = yield* makeSleepWatch
      const fiber = yield* Effect.forkChild(sleeps.watch(runLoop(layer(server.url, { timeouts: noTimeouts }))))
      yield* sleeps.started(1)
      assert.deepStrictEqual(yield* sleeps.durations, [2000])
      yield* TestClock.adjust("1999 millis")
      assert.strictEqual((yield* server.requests).length, 1)
      yield* TestClock.adjust("1 millis")
      const run = yield* Fiber.join(fiber)
      assert.deepStrictEqual(run.violations, [])
      assert.strictEqual(run.result.reason, "stop")
      assert.deepStrictEqual(assistants(run.result.messages)[0]!.content, [{ type: "text", text: "ok" }])
      const requests = yield* server.requests
      assert.strictEqual(requests.length, 2)
      assert.strictEqual(requests[0]!.body, requests[1]!.body)
    }))

  it.effect("5xx is retried with exponential backoff a bounded number of times, then a ModelError", () =>
    Effect.gen(function*() {
      const unavailable: Reply = { kind: "status", status: 503, body: "{\"error\":{\"message\":\"try later\"}}" }
      const server = yield* makeServer([unavailable, unavailable, unavailable, stopReply])
      const sleeps = yield* makeSleepWatch
      const fiber = yield* Effect.forkChild(
        sleeps.watch(runLoop(layer(server.url, {
          retry: { maxRetries: 2, initialDelay: "100 millis", jitter: 0 },
          timeouts: noTimeouts
        })))
      )
      yield* sleeps.started(1)
      yield* TestClock.adjust("99 millis")
      assert.strictEqual((yield* server.requests).length, 1)
      yield* TestClock.adjust("1 millis")
      yield* sleeps.started(2)
      assert.strictEqual((yield* server.requests).length, 2)
      yield* TestClock.adjust("199 millis")
      assert.strictEqual((yield* server.requests).length, 2)
      yield* TestClock.adjust("1 millis")
      const run = yield* Fiber.join(fiber)
      assert.deepStrictEqual(yield* sleeps.durations, [100, 200])
      assert.strictEqual(
        modelError(run),
        "the OpenAI-compatible server answered HTTP 503: try later (gave up after 3 attempts)"
      )
      assert.strictEqual((yield* server.requests).length, 3)
      assert.deepStrictEqual(run.violations, [])
      assert.deepStrictEqual(assistants(run.result.messages), [])
    }))

  it.effect("a 400 fails at once with the provider's message, not retried", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "status",
        status: 400,
        body: JSON.stringify({
          error: {
            message: "Invalid 'messages[0].content': string too long.",
            type: "invalid_request_error",
            code: null
          }
        })
      }, stopReply])
      const run = yield* runLoop(layer(server.url))
      assert.strictEqual(
        modelError(run),
        "the OpenAI-compatible server answered HTTP 400: invalid_request_error: Invalid 'messages[0].content': " +
          "string too long."
      )
      assert.strictEqual((yield* server.requests).length, 1)
      assert.deepStrictEqual(run.violations, [])
    }))

  it.effect("a 401 never repeats the API key, even when the server echoes it", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "status",
        status: 401,
        body: "{\"error\":{\"message\":\"Incorrect API key provided: sk-test-123.\"}}"
      }])
      const run = yield* runLoop(layer(server.url))
      assert.strictEqual(
        modelError(run),
        "the OpenAI-compatible server answered HTTP 401 (check the API key): Incorrect API key provided: [redacted]."
      )
      assert.notInclude(JSON.stringify(run), "sk-test-123")
    }))

  it.effect("Ollama's string error body is the message", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "status",
        status: 404,
        body: "{\"error\":\"model 'llama9' not found\"}"
      }])
      const run = yield* runLoop(layer(server.url))
      assert.strictEqual(
        modelError(run),
        "the OpenAI-compatible server answered HTTP 404 (check the base URL and the model name): model 'llama9' " +
          "not found"
      )
    }))

  it.effect("a connection dropped mid-stream is a ModelError; nothing partial is appended", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "drop", body: chatSse([text("Hello"), text(" wor")], false) }])
      const run = yield* runLoop(layer(server.url))
      assert.match(
        modelError(run),
        /^the connection to the OpenAI-compatible server was lost while streaming the response \(.+\)$/
      )
      assert.strictEqual(deltas(run.events, "text_delta"), "Hello wor")
      assert.deepStrictEqual(assistants(run.result.messages), [])
      assert.deepStrictEqual(run.violations, [])
      assert.strictEqual((yield* server.requests).length, 1)
    }))

  it.effect("a stream that ends without finish_reason or [DONE] is a ModelError", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "sse", body: chatSse([text("Hello")], false) }])
      const run = yield* runLoop(layer(server.url))
      assert.strictEqual(
        modelError(run),
        "the stream from the OpenAI-compatible server ended before the response was complete"
      )
    }))

  it.effect("malformed SSE data is a ModelError, not retried", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        { kind: "sse", body: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}\n\n" },
        stopReply
      ])
      const run = yield* runLoop(layer(server.url))
      assert.strictEqual(
        modelError(run),
        "malformed event stream from the OpenAI-compatible server: event data is not JSON: " +
          "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}"
      )
      assert.strictEqual((yield* server.requests).length, 1)
    }))

  it.effect("a chunk of the wrong shape is a ModelError", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "sse",
        body: chatSse([{ choices: [{ index: 0, delta: { content: 42 } }] }])
      }])
      const run = yield* runLoop(layer(server.url))
      assert.match(
        modelError(run),
        /^malformed event stream from the OpenAI-compatible server: unexpected event shape: /
      )
    }))

  it.effect("a JSON answer to a streaming request is a ModelError", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "status", status: 200, body: "{\"choices\":[]}" }])
      const run = yield* runLoop(layer(server.url))
      assert.strictEqual(
        modelError(run),
        "the OpenAI-compatible server answered with JSON instead of an event stream; does it support \"stream\": true?"
      )
    }))

  it.effect("a server that is not running is a ModelError naming where it was looked for", () =>
    Effect.gen(function*() {
      const url = yield* Effect.scoped(Effect.map(makeServer([]), (server) => server.url)) // closed again
      const run = yield* runLoop(openAiCompatFetchLayer({ model: "m", baseUrl: `${url}/v1`, retry: { maxRetries: 0 } }))
      assert.match(
        modelError(run),
        new RegExp(`^could not reach the OpenAI-compatible server at ${url}/v1/chat/completions: .+`)
      )
    }))

  it.effect("aborting the run while the model streams cancels the HTTP request", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "hang", body: chatSse([text("Hel")], false) }])
      const controller = new AbortController()
      const fiber = yield* Effect.forkChild(runLoop(layer(server.url), { signal: controller.signal }))
      yield* server.awaitRequests(1)
      controller.abort()
      const run = yield* Fiber.join(fiber)
      yield* server.clientClosed
      assert.strictEqual(run.result.reason, "aborted")
      assert.deepStrictEqual(assistants(run.result.messages), [])
      assert.deepStrictEqual(run.violations, [])
    }))

  it.effect("interrupting the run's fiber cancels the HTTP request", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "hang", body: chatSse([text("Hel")], false) }])
      const fiber = yield* Effect.forkChild(runLoop(layer(server.url)))
      yield* server.awaitRequests(1)
      const exit = yield* Fiber.interrupt(fiber).pipe(Effect.andThen(Fiber.await(fiber)))
      assert.isTrue(Exit.isFailure(exit))
      yield* server.clientClosed
    }))
})
