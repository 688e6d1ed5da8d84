/**
 * The three time limits of a request (first byte, idle between events, the whole request), each
 * ending the turn with an error that names the limit and its length, driven by the `TestClock`;
 * abort still cancels at once; a complete answer whose stream then stalls or drops is kept.
 */
import { anthropicFetchLayer, defaultTimeouts, openAiCompatFetchLayer } from "@agentloop/providers"
import type { OpenAiCompatOptions } from "@agentloop/providers"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { Duration } from "effect"
import { TestClock } from "effect/testing"
import { makeSleepWatch } from "./helpers/clock.ts"
import { assistants, deltas, runLoop } from "./helpers/loop.ts"
import { modelErrorOf, streamOnce } from "./helpers/model.ts"
import { chatSse, makeServer, namedSse } from "./helpers/server.ts"

const openAi = (url: string, options: Partial<OpenAiCompatOptions> = {}) =>
  openAiCompatFetchLayer({ model: "m", baseUrl: `${url}/v1`, ...options })

const text = (content: string, finish: string | null = null) => ({
  choices: [{ index: 0, delta: { content }, finish_reason: finish }]
})

const limits = { firstByte: "10 seconds", idle: "30 seconds", request: "1 hour" } as const

describe("defaults", () => {
  it("first byte 2 minutes, idle 3 minutes, whole request 20 minutes", () => {
    assert.deepStrictEqual(
      [defaultTimeouts.firstByte, defaultTimeouts.idle, defaultTimeouts.request].map(Duration.toMillis),
      [120_000, 180_000, 1_200_000]
    )
  })
})

describe("time to first byte", () => {
  it.effect("a server that accepts and never answers ends the turn when timeouts.firstByte runs out", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "silent" }, { kind: "silent" }])
      const sleeps = yield* makeSleepWatch
      const fiber = yield* Effect.forkChild(sleeps.watch(runLoop(openAi(server.url, { timeouts: limits }))))
      yield* server.awaitRequests(1)
      yield* sleeps.startedOf(10_000, 1)
      yield* TestClock.adjust("9999 millis")
      yield* Effect.yieldNow
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      const run = yield* Fiber.join(fiber)
      assert.strictEqual(
        run.result.error,
        "model error: the OpenAI-compatible server sent no response within 10s (timeouts.firstByte)"
      )
      assert.deepStrictEqual(run.violations, [])
      // the request was cancelled and not retried
      yield* server.clientClosed
      assert.strictEqual((yield* server.requests).length, 1)
    }))

  it.effect("the error is a ModelError with reason timeout, not retried", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "silent" }])
      const sleeps = yield* makeSleepWatch
      const fiber = yield* Effect.forkChild(sleeps.watch(streamOnce(openAi(server.url, { timeouts: limits }))))
      yield* sleeps.startedOf(10_000, 1)
      yield* TestClock.adjust("10 seconds")
      const error = modelErrorOf(yield* Fiber.join(fiber))
      assert.deepStrictEqual(
        { reason: error.reason, retried: error.retried, attempts: error.attempts },
        { reason: "timeout", retried: false, attempts: 1 }
      )
    }))

  it.effect("abort cancels at once while waiting for the first byte", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "silent" }])
      const controller = new AbortController()
      const fiber = yield* Effect.forkChild(runLoop(openAi(server.url), { signal: controller.signal }))
      yield* server.awaitRequests(1)
      controller.abort()
      const run = yield* Fiber.join(fiber)
      yield* server.clientClosed
      assert.strictEqual(run.result.reason, "aborted")
      assert.deepStrictEqual(run.violations, [])
    }))
})

describe("idle time between events", () => {
  it.effect("headers, then silence: ends when timeouts.idle runs out", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "hang", body: "" }])
      const sleeps = yield* makeSleepWatch
      const fiber = yield* Effect.forkChild(sleeps.watch(runLoop(openAi(server.url, { timeouts: limits }))))
      yield* sleeps.startedOf(30_000, 1)
      yield* TestClock.adjust("29999 millis")
      yield* Effect.yieldNow
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      const run = yield* Fiber.join(fiber)
      assert.strictEqual(
        run.result.error,
        "model error: the OpenAI-compatible server sent no event within 30s (timeouts.idle)"
      )
      yield* server.clientClosed
      assert.strictEqual((yield* server.requests).length, 1)
    }))

  it.effect("silence after some output: the limit counts from the last event", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "hang", body: chatSse([text("Hel")], false) }])
      const sleeps = yield* makeSleepWatch
      const fiber = yield* Effect.forkChild(sleeps.watch(runLoop(openAi(server.url, { timeouts: limits }))))
      // the first pull got "Hel"; the second waits
      yield* sleeps.startedOf(30_000, 2)
      yield* TestClock.adjust("30 seconds")
      const run = yield* Fiber.join(fiber)
      assert.strictEqual(deltas(run.events, "text_delta"), "Hel")
      assert.strictEqual(
        run.result.error,
        "model error: the OpenAI-compatible server sent no event within 30s (timeouts.idle)"
      )
      assert.deepStrictEqual(assistants(run.result.messages), [])
      assert.deepStrictEqual(run.violations, [])
    }))

  it.live(
    "a byte at a time that never completes an event does not reset the limit (real time, tiny limits)",
    () =>
      Effect.gen(function*() {
        const server = yield* makeServer([{ kind: "drip", body: "data: {\"choices\":[]}", everyMillis: 15 }])
        const run = yield* runLoop(openAi(server.url, { timeouts: { idle: "250 millis" } }))
        assert.strictEqual(
          run.result.error,
          "model error: the OpenAI-compatible server sent no event within 250ms (timeouts.idle)"
        )
        yield* server.clientClosed
      }),
    { timeout: 5000 }
  )
})

describe("the whole request", () => {
  it.effect("a stream that keeps sending but never ends stops at timeouts.request", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "hang", body: chatSse([text("a"), text("b")], false) }])
      const sleeps = yield* makeSleepWatch
      const fiber = yield* Effect.forkChild(
        sleeps.watch(runLoop(openAi(server.url, { timeouts: { request: "5 minutes", idle: "1 hour" } })))
      )
      yield* sleeps.startedOf(300_000, 1)
      yield* server.awaitRequests(1)
      yield* TestClock.adjust("5 minutes")
      const run = yield* Fiber.join(fiber)
      assert.strictEqual(
        run.result.error,
        "model error: the OpenAI-compatible server did not finish the response within 5m (timeouts.request)"
      )
      yield* server.clientClosed
    }))

  it.live(
    "events that keep coming (real time, tiny limits) still end at timeouts.request",
    () =>
      Effect.gen(function*() {
        // an event every few tens of milliseconds: the idle limit never runs out, though the request
        // outlasts it more than twice (margins wide enough for a loaded machine: at 200 ms the idle
        // limit ran out under a load average of 14 on 2 cores)
        const server = yield* makeServer([{
          kind: "drip",
          body: ": ping\n\ndata: {\"choices\":[]}\n\n",
          everyMillis: 1
        }])
        const run = yield* runLoop(openAi(server.url, { timeouts: { idle: "600 millis", request: "1500 millis" } }))
        assert.strictEqual(
          run.result.error,
          "model error: the OpenAI-compatible server did not finish the response within 1s 500ms (timeouts.request)"
        )
      }),
    { timeout: 5000 }
  )
})

describe("a complete answer is kept", () => {
  it.effect("finish_reason, then the stream is held open: kept after the finish grace", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "hang", body: chatSse([text("Hi"), text("!", "stop")], false) }])
      const sleeps = yield* makeSleepWatch
      const fiber = yield* Effect.forkChild(sleeps.watch(runLoop(openAi(server.url, { timeouts: limits }))))
      yield* sleeps.startedOf(5_000, 1)
      yield* TestClock.adjust("5 seconds")
      const run = yield* Fiber.join(fiber)
      assert.strictEqual(run.result.reason, "stop")
      assert.deepStrictEqual(assistants(run.result.messages)[0]!.content, [{ type: "text", text: "Hi!" }])
      assert.deepStrictEqual(run.violations, [])
      yield* server.clientClosed
    }))

  it.effect("finish_reason, then the connection drops: the answer is kept", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "drop", body: chatSse([text("Hi"), text("!", "stop")], false) }])
      const run = yield* runLoop(openAi(server.url))
      assert.strictEqual(run.result.reason, "stop")
      assert.deepStrictEqual(assistants(run.result.messages)[0]!.content, [{ type: "text", text: "Hi!" }])
      assert.deepStrictEqual(run.violations, [])
    }))

  it.effect("Anthropic: stop_reason received, then the connection drops before message_stop: kept", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "drop",
        body: namedSse([
          { type: "message_start", message: { model: "claude-test", usage: { input_tokens: 3, output_tokens: 1 } } },
          { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
          { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Done." } },
          { type: "content_block_stop", index: 0 },
          { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 2 } }
        ])
      }])
      const run = yield* runLoop(anthropicFetchLayer({ model: "claude-test", baseUrl: server.url, apiKey: "k" }))
      assert.strictEqual(run.result.reason, "stop")
      assert.deepStrictEqual(assistants(run.result.messages)[0]!.content, [{ type: "text", text: "Done." }])
      assert.deepStrictEqual(assistants(run.result.messages)[0]!.usage, { input: 3, output: 2 })
    }))

  it.effect("no finish reason, then the connection drops: still a ModelError", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{ kind: "drop", body: chatSse([text("Hi")], false) }])
      const run = yield* runLoop(openAi(server.url))
      assert.match(run.result.error!, /^model error: the connection to the OpenAI-compatible server was lost/)
    }))
})
