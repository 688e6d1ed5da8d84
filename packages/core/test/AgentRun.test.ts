import {
  callbackSinkLayer,
  EventSink,
  noopSinkLayer,
  pubSubSinkLayer,
  queueSinkLayer,
  runAgentLoop,
  runAgentLoopStream,
  startAgentLoop,
  toolExecutorLayer
} from "@agentloop/core"
import type { LoopEvent } from "@agentloop/core"
import {
  checkInvariants,
  echoTool,
  makeGatedTool,
  makeScriptedModel,
  neverTool,
  probeTool,
  scriptedModelLayer,
  toolCall,
  turn,
  user
} from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, PubSub, Queue, Stream } from "effect"
import { eventTypes, results } from "./helpers.ts"

const script = () => [turn.toolCalls([toolCall("a", "e")]), turn.streamed(["do", "ne"])]
const layers = Layer.mergeAll(scriptedModelLayer(script()), toolExecutorLayer([echoTool("e")]))

describe("runAgentLoopStream", () => {
  it.effect("streams every event and ends right after turn_end", () =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(runAgentLoopStream({ messages: [user("go")] })).pipe(
        Effect.provide(layers)
      )
      assert.deepStrictEqual(eventTypes(events), [
        "model_event",
        "assistant_message",
        "tool_start",
        "tool_end",
        "model_event",
        "model_event",
        "assistant_message",
        "turn_end"
      ])
      assert.deepStrictEqual(checkInvariants({ events }), [])
    }))

  it.effect("stopping the stream early interrupts the run: running tools are interrupted", () =>
    Effect.gen(function*() {
      const gate = makeGatedTool("g")
      const probe = probeTool(gate.tool)
      const events = yield* runAgentLoopStream({ messages: [user("go")] }).pipe(
        Stream.takeUntil((e) => e.type === "tool_start"),
        Stream.runCollect,
        Effect.provide(
          Layer.mergeAll(scriptedModelLayer([turn.toolCalls([toolCall("a", "g")])]), toolExecutorLayer([probe.tool]))
        )
      )
      assert.strictEqual(events[events.length - 1]!.type, "tool_start")
      assert.deepStrictEqual(yield* probe.interruptedIds, ["a"])
    }))
})

describe("startAgentLoop (live events and the final result from one run)", () => {
  it.effect("gives the events and the result of the same run", () =>
    Effect.scoped(Effect.gen(function*() {
      const run = yield* startAgentLoop({ messages: [user("go")] })
      const events = yield* Stream.runCollect(run.events)
      const result = yield* run.result
      assert.strictEqual(result.reason, "stop")
      assert.deepStrictEqual(checkInvariants({ result, events }), [])
    })).pipe(Effect.provide(layers)))

  it.effect("also forwards events to an EventSink in the context", () =>
    Effect.gen(function*() {
      const seen: Array<LoopEvent> = []
      const result = yield* Effect.scoped(
        Effect.flatMap(startAgentLoop({ messages: [user("go")] }), (run) => run.result)
      ).pipe(
        Effect.provide(Layer.mergeAll(layers, callbackSinkLayer((e) => void seen.push(e))))
      )
      assert.deepStrictEqual(checkInvariants({ result, events: seen }), [])
    }))

  it.effect("abort interrupts the run; the result is still there, every call paired", () =>
    Effect.scoped(Effect.gen(function*() {
      const gate = makeGatedTool("g")
      const model = yield* makeScriptedModel([turn.toolCalls([toolCall("a", "g"), toolCall("b", "g")])])
      const run = yield* startAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provide(Layer.mergeAll(model.layer, toolExecutorLayer([gate.tool])))
      )
      yield* gate.started("a")
      yield* gate.started("b")
      yield* run.abort
      const result = yield* run.result
      const events = yield* Stream.runCollect(run.events)
      assert.strictEqual(result.reason, "aborted")
      assert.deepStrictEqual(results(result.messages).map((r) => r.details), [{ interrupted: true }, {
        interrupted: true
      }])
      assert.deepStrictEqual(checkInvariants({ result, events, requests: yield* model.requests }), [])
    })))
})

describe("startAgentLoop interrupted between a toolUse message and its batch", () => {
  it.effect("the result still has every call of that message paired (skipped, aborted); nothing ran", () =>
    Effect.scoped(Effect.gen(function*() {
      const probe = probeTool(neverTool("n"))
      const model = yield* makeScriptedModel([turn.toolCalls([toolCall("a", "n"), toolCall("b", "n")])])
      // delivered to the run's own fiber while it appends the message (uninterruptibly): it lands right after
      const sink = callbackSinkLayer((event) =>
        event.type === "assistant_message" ?
          Effect.withFiber((fiber) => {
            fiber.interruptUnsafe()
            return Effect.void
          }) :
          undefined
      )
      const run = yield* startAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provide(Layer.mergeAll(model.layer, sink, toolExecutorLayer([probe.tool])))
      )
      const result = yield* run.result
      const events = yield* Stream.runCollect(run.events)
      assert.strictEqual(result.reason, "aborted")
      assert.strictEqual(yield* probe.executions, 0)
      assert.deepStrictEqual(results(result.messages).map((r) => [r.toolCallId, r.details]), [
        ["a", { skipped: true, reason: "aborted" }],
        ["b", { skipped: true, reason: "aborted" }]
      ])
      assert.deepStrictEqual(checkInvariants({ result, events, requests: yield* model.requests }), [])
    })))
})

describe("startAgentLoop aborted at once", () => {
  it.effect("abort right after start still gives a result and a turn_end", () =>
    Effect.scoped(Effect.gen(function*() {
      const run = yield* startAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provide(Layer.mergeAll(scriptedModelLayer([turn.never(["thinking about it"])]), toolExecutorLayer([])))
      )
      yield* run.abort
      const result = yield* run.result
      const events = yield* Stream.runCollect(run.events)
      assert.strictEqual(result.reason, "aborted")
      assert.deepStrictEqual(checkInvariants({ result, events }), [])
    })))
})

describe("event sinks", () => {
  it.effect("queueSinkLayer and pubSubSinkLayer deliver every event", () =>
    Effect.gen(function*() {
      const queue = yield* Queue.unbounded<LoopEvent>()
      yield* runAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provide(Layer.mergeAll(layers, queueSinkLayer(queue)))
      )
      const fromQueue = yield* Queue.takeAll(queue)
      assert.strictEqual(fromQueue[fromQueue.length - 1]!.type, "turn_end")
      assert.deepStrictEqual(checkInvariants({ events: fromQueue }), [])

      const pubsub = yield* PubSub.unbounded<LoopEvent>()
      const subscription = yield* PubSub.subscribe(pubsub)
      yield* runAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provide(
          Layer.mergeAll(scriptedModelLayer(script()), toolExecutorLayer([echoTool("e")]), pubSubSinkLayer(pubsub))
        )
      )
      const fromPubSub = yield* PubSub.takeAll(subscription)
      assert.deepStrictEqual(eventTypes(fromPubSub), eventTypes(fromQueue))
    }))

  it.effect("the no-op sink drops events and the run is unaffected", () =>
    Effect.gen(function*() {
      const result = yield* runAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provide(Layer.mergeAll(layers, noopSinkLayer))
      )
      assert.strictEqual(result.reason, "stop")
    }))

  it.effect("a sink that dies does not end the run: the defect is logged, invariants hold for the rest", () =>
    Effect.gen(function*() {
      const seen: Array<LoopEvent> = []
      const dyingSink = Layer.succeed(
        EventSink,
        EventSink.of({
          emit: (event) =>
            event.type === "tool_start" || event.type === "assistant_message" ?
              Effect.die(new Error("ui crashed")) :
              Effect.sync(() => void seen.push(event))
        })
      )
      const result = yield* runAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provide(Layer.mergeAll(layers, dyingSink))
      )
      assert.strictEqual(result.reason, "stop")
      assert.strictEqual(result.steps, 2)
      assert.deepStrictEqual(results(result.messages).map((r) => r.isError), [false])
      assert.deepStrictEqual(seen.filter((e) => e.type === "turn_end").length, 1)
    }))

  it.effect("a sink that throws synchronously does not end the run either", () =>
    Effect.gen(function*() {
      const result = yield* runAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provide(Layer.mergeAll(
          layers,
          callbackSinkLayer(() => {
            throw new Error("listener bug")
          })
        ))
      )
      assert.strictEqual(result.reason, "stop")
    }))
})
