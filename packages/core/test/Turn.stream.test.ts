/**
 * How a model turn consumes the model's stream: events up to the first `done` reach the sink, in
 * order, whatever the chunking; nothing after `done` is emitted and the stream is not pulled again;
 * the stream's resources are released when the turn ends, however it ends (done, failure, abort),
 * before the next request.
 */
import {
  callbackSinkLayer,
  EventSink,
  Model,
  ModelError,
  noopSinkLayer,
  runAgentLoop,
  toolExecutorLayer
} from "@agentloop/core"
import type { AssistantMessage, LoopEvent, ModelEvent } from "@agentloop/core"
import { user } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Stream } from "effect"

const answer = (text: string): AssistantMessage => ({
  role: "assistant",
  content: [{ type: "text", text }],
  stopReason: "stop"
})
const delta = (text: string): ModelEvent => ({ type: "text_delta", delta: text })
const done = (text: string): ModelEvent => ({ type: "done", message: answer(text) })

/** A model whose one stream is `stream`, recording when the stream's finalizer ran. */
const modelOf = (stream: (log: Array<string>) => Stream.Stream<ModelEvent, ModelError>) => {
  const log: Array<string> = []
  const layer = Layer.succeed(
    Model,
    Model.of({
      stream: () => {
        log.push("request")
        return stream(log).pipe(Stream.ensuring(Effect.sync(() => log.push("released"))))
      }
    })
  )
  return { log, layer }
}

const run = (model: Layer.Layer<Model>, events: Array<LoopEvent>, signal?: AbortSignal) =>
  runAgentLoop({ messages: [user("go")], ...(signal === undefined ? {} : { signal }) }).pipe(
    Effect.provide(Layer.mergeAll(
      model,
      toolExecutorLayer([]),
      callbackSinkLayer((event) => {
        events.push(event)
      })
    ))
  )

const deltas = (events: ReadonlyArray<LoopEvent>) =>
  events.flatMap((e) => e.type === "model_event" && e.event.type === "text_delta" ? [e.event.delta] : [])

describe("a model turn's stream", () => {
  it.effect("emits the events before done in order, across chunks, and nothing after done", () =>
    Effect.gen(function*() {
      const { layer, log } = modelOf((log) =>
        Stream.concat(
          Stream.fromIterable([delta("a"), delta("b")]),
          Stream.concat(
            Stream.fromIterable([delta("c"), done("abc"), delta("after done, same chunk")]),
            Stream.fromEffect(Effect.sync(() => {
              log.push("pulled after done")
              return delta("after done, next pull")
            }))
          )
        )
      )
      const events: Array<LoopEvent> = []
      const result = yield* run(layer, events)
      assert.strictEqual(result.reason, "stop")
      assert.deepStrictEqual(deltas(events), ["a", "b", "c"])
      assert.deepStrictEqual(result.messages.at(-1), answer("abc"))
      // the stream was not pulled past the chunk that held done, and it was released once
      assert.deepStrictEqual(log, ["request", "released"])
    }))

  it.effect("a sink whose emit is an effect still sees the events in order", () =>
    Effect.gen(function*() {
      const { layer } = modelOf(() => Stream.fromIterable([delta("a"), delta("b"), delta("c"), done("abc")]))
      const seen: Array<string> = []
      const result = yield* runAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provide(Layer.mergeAll(
          layer,
          toolExecutorLayer([]),
          Layer.succeed(
            EventSink,
            EventSink.of({
              emit: (event) =>
                Effect.sync(() => {
                  if (event.type === "model_event" && event.event.type === "text_delta") seen.push(event.event.delta)
                })
            })
          )
        ))
      )
      assert.strictEqual(result.reason, "stop")
      assert.deepStrictEqual(seen, ["a", "b", "c"])
    }))

  it.effect("a stream that fails is released, and the turn ends with its error", () =>
    Effect.gen(function*() {
      const { layer, log } = modelOf(() =>
        Stream.concat(Stream.fromIterable([delta("a")]), Stream.fail(new ModelError({ message: "connection reset" })))
      )
      const events: Array<LoopEvent> = []
      const result = yield* run(layer, events)
      assert.strictEqual(result.reason, "error")
      assert.include(result.error, "connection reset")
      assert.deepStrictEqual(deltas(events), ["a"])
      assert.deepStrictEqual(log, ["request", "released"])
    }))

  it.effect("a stream that ends without done is released, and the turn says so", () =>
    Effect.gen(function*() {
      const { layer, log } = modelOf(() => Stream.fromIterable([delta("a")]))
      const result = yield* run(layer, [])
      assert.strictEqual(result.error, "model stream ended without a final message")
      assert.deepStrictEqual(log, ["request", "released"])
    }))

  it.effect("an abort while the stream waits releases it before the run ends", () =>
    Effect.gen(function*() {
      const waiting = Deferred.makeUnsafe<void>()
      const { layer, log } = modelOf(() =>
        Stream.concat(
          Stream.fromIterable([delta("a")]),
          Stream.fromEffect(Effect.andThen(Deferred.succeed(waiting, undefined), Effect.never))
        )
      )
      const controller = new AbortController()
      const events: Array<LoopEvent> = []
      const fiber = yield* Effect.forkChild(run(layer, events, controller.signal))
      yield* Deferred.await(waiting)
      controller.abort()
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.reason, "aborted")
      assert.deepStrictEqual(deltas(events), ["a"])
      assert.deepStrictEqual(log, ["request", "released"])
    }))

  it.effect("each turn's stream is released before the next request", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      let turn = 0
      const layer = Layer.succeed(
        Model,
        Model.of({
          stream: () => {
            const n = ++turn
            log.push(`request ${n}`)
            const events: Array<ModelEvent> = n === 1 ?
              [{
                type: "done",
                message: {
                  role: "assistant",
                  content: [{ type: "toolCall", id: "c1", name: "missing", arguments: {} }],
                  stopReason: "toolUse"
                }
              }] :
              [done("end")]
            return Stream.fromIterable(events).pipe(Stream.ensuring(Effect.sync(() => log.push(`released ${n}`))))
          }
        })
      )
      const result = yield* runAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provide(Layer.mergeAll(layer, toolExecutorLayer([]), noopSinkLayer))
      )
      assert.strictEqual(result.reason, "stop")
      assert.deepStrictEqual(log, ["request 1", "released 1", "request 2", "released 2"])
    }))
})
