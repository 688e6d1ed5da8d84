import { callbackSinkLayer, DEFAULT_MAX_STEPS, runAgentLoop, toolExecutorLayer } from "@agentloop/core"
import type { AgentLoopOptions, AnyTool, LoopEvent, ModelEvent } from "@agentloop/core"
import {
  assistant,
  checkInvariants,
  echoTool,
  makeGatedTool,
  makeScriptedModel,
  neverTool,
  probeTool,
  runScripted,
  sleepingTool,
  startScripted,
  toolCall,
  turn,
  user
} from "@agentloop/testkit"
import type { ScriptedTurn } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Stream } from "effect"
import { TestClock } from "effect/testing"
import { assertSound, results, roles, settle, textOf } from "./helpers.ts"

/** Starts a scripted run in the background; `onEvent` may abort. */
const start = (
  script: ReadonlyArray<ScriptedTurn>,
  tools: ReadonlyArray<AnyTool>,
  options: Partial<AgentLoopOptions> = {},
  onEvent: (event: LoopEvent) => void = () => {}
) => startScripted(script, { ...options, tools, onEvent })

describe("cancellation", () => {
  it.effect("aborted before the run starts: the model is never called, steps 0, reason aborted", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      controller.abort()
      const run = yield* runScripted([turn.text("never")], { signal: controller.signal })
      assertSound(run)
      assert.strictEqual(run.requests.length, 0)
      assert.strictEqual(run.result.steps, 0)
      assert.strictEqual(run.result.reason, "aborted")
      assert.deepStrictEqual(run.events, [{ type: "turn_end", reason: "aborted", steps: 0 }])
    }))

  it.effect("abort while tools run: finished results kept, running calls interrupted and paired, no new request", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      const gate = makeGatedTool("g")
      const probe = probeTool(gate.tool)
      const run = yield* start(
        [turn.toolCalls([toolCall("a", "g"), toolCall("b", "g")]), turn.text("never asked")],
        [probe.tool],
        { signal: controller.signal }
      )
      yield* gate.started("a")
      yield* gate.started("b")
      yield* gate.release("a", "A finished")
      yield* run.awaitEvent((e) => e.type === "tool_end")
      controller.abort()
      const result = yield* Fiber.join(run.fiber)
      assert.deepStrictEqual(yield* run.check(result), [])
      assert.strictEqual(result.reason, "aborted")
      assert.strictEqual(result.steps, 1, "no model request after the abort")
      const [a, b] = results(result.messages)
      assert.strictEqual(textOf(a!), "A finished")
      assert.isFalse(a!.isError)
      assert.isTrue(b!.isError)
      assert.deepStrictEqual(b!.details, { interrupted: true })
      assert.deepStrictEqual(yield* probe.interruptedIds, ["b"])
      assert.deepStrictEqual(yield* probe.abortedSignalIds, ["b"], "the call's AbortSignal fired")
    }))

  it.effect("calls not yet started never start once the abort is seen", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      const probe = probeTool(neverTool("n"))
      const run = yield* start(
        [turn.toolCalls([toolCall("a", "n"), toolCall("b", "n"), toolCall("c", "n")])],
        [probe.tool],
        { signal: controller.signal },
        (event) => {
          if (event.type === "tool_start" && event.call.id === "a") controller.abort()
        }
      )
      const result = yield* Fiber.join(run.fiber)
      assert.deepStrictEqual(yield* run.check(result), [])
      assert.strictEqual(result.reason, "aborted")
      assert.deepStrictEqual(yield* probe.executedIds, ["a"])
      const [a, b, c] = results(result.messages)
      assert.deepStrictEqual(a!.details, { interrupted: true })
      assert.deepStrictEqual(b!.details, { skipped: true, reason: "aborted" })
      assert.deepStrictEqual(c!.details, { skipped: true, reason: "aborted" })
    }))

  it.effect("abort while the model streams: stream interrupted, nothing partial appended, reason aborted", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      const run = yield* start([turn.never(["partial "])], [], { signal: controller.signal }, (event) => {
        if (event.type === "model_event") controller.abort()
      })
      const result = yield* Fiber.join(run.fiber)
      assert.deepStrictEqual(yield* run.check(result), [])
      assert.strictEqual(result.reason, "aborted")
      assert.strictEqual(result.steps, 1)
      assert.deepStrictEqual(roles(result.messages), ["user"])
    }))

  it.effect("abort after a batch: checked before the next request", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      const run = yield* start(
        [turn.toolCalls([toolCall("a", "e")]), turn.text("never asked")],
        [echoTool("e")],
        { signal: controller.signal },
        (event) => {
          if (event.type === "tool_end") controller.abort()
        }
      )
      const result = yield* Fiber.join(run.fiber)
      assert.deepStrictEqual(yield* run.check(result), [])
      assert.strictEqual(result.reason, "aborted")
      assert.strictEqual(result.steps, 1)
      assert.isFalse(results(result.messages)[0]!.isError, "the finished result is kept")
    }))

  it.effect("interrupting the run's fiber from outside: tools interrupted, exactly one turn_end aborted", () =>
    Effect.gen(function*() {
      const gate = makeGatedTool("g")
      const probe = probeTool(gate.tool)
      const run = yield* start([turn.toolCalls([toolCall("a", "g"), toolCall("b", "g")])], [probe.tool])
      yield* gate.started("a")
      yield* gate.started("b")
      yield* gate.release("b")
      yield* run.awaitEvent((e) => e.type === "tool_end")
      const exit = yield* Fiber.interrupt(run.fiber).pipe(Effect.andThen(Fiber.await(run.fiber)))
      assert.isTrue(Exit.hasInterrupts(exit), "the interruption goes on to the caller")
      assert.deepStrictEqual(yield* run.check(), [])
      const turnEnds = run.events.filter((e) => e.type === "turn_end")
      assert.deepStrictEqual(turnEnds, [{ type: "turn_end", reason: "aborted", steps: 1 }])
      assert.deepStrictEqual(yield* probe.interruptedIds, ["a"])
      assert.deepStrictEqual(yield* probe.abortedSignalIds, ["a"])
      // the interrupted call was still answered (tool_end), so the events rebuild a paired transcript
      const ends = run.events.flatMap((e) => e.type === "tool_end" ? [e.result.toolCallId] : [])
      assert.sameMembers(ends, ["a", "b"])
    }))

  it.effect(
    "an interruption landing between appending a toolUse message and starting its batch still pairs " +
      "every call",
    () =>
      Effect.gen(function*() {
        const probe = probeTool(neverTool("n"))
        const model = yield* makeScriptedModel([turn.toolCalls([toolCall("a", "n"), toolCall("b", "n")])])
        const events: Array<LoopEvent> = []
        let self: Fiber.Fiber<unknown> | undefined
        const sink = callbackSinkLayer((event) => {
          events.push(event)
          // delivered while the loop appends the message (uninterruptibly): it lands right after
          if (event.type === "assistant_message") self?.interruptUnsafe()
        })
        const fiber = yield* runAgentLoop({ messages: [user("go")] }).pipe(
          Effect.provide(Layer.mergeAll(model.layer, sink, toolExecutorLayer([probe.tool]))),
          Effect.forkChild({ startImmediately: false })
        )
        self = fiber
        const exit = yield* Fiber.await(fiber)
        assert.isTrue(Exit.hasInterrupts(exit))
        assert.strictEqual(yield* probe.executions, 0, "no call started")
        assert.deepStrictEqual(checkInvariants({ events, requests: yield* model.requests }), [])
        const ends = events.flatMap((e) => e.type === "tool_end" ? [e.result] : [])
        assert.deepStrictEqual(ends.map((r) => [r.toolCallId, r.details]), [
          ["a", { skipped: true, reason: "aborted" }],
          ["b", { skipped: true, reason: "aborted" }]
        ])
      })
  )

  it.effect("Effect.timeout under TestClock aborts the run through interruption", () =>
    Effect.gen(function*() {
      const probe = probeTool(sleepingTool("sleep", "10 seconds"))
      const model = yield* makeScriptedModel([turn.toolCalls([toolCall("s", "sleep")]), turn.text("late")])
      const events: Array<LoopEvent> = []
      const fiber = yield* runAgentLoop({ messages: [user("go")] }).pipe(
        Effect.timeout("5 seconds"),
        Effect.provide(
          Layer.mergeAll(model.layer, callbackSinkLayer((e) => void events.push(e)), toolExecutorLayer([probe.tool]))
        ),
        Effect.exit,
        Effect.forkChild
      )
      yield* TestClock.adjust("5 seconds")
      const exit = yield* Fiber.join(fiber)
      assert.isTrue(Exit.isFailure(exit))
      assert.deepStrictEqual(events.filter((e) => e.type === "turn_end"), [{
        type: "turn_end",
        reason: "aborted",
        steps: 1
      }])
      assert.deepStrictEqual(yield* probe.interruptedIds, ["s"])
      assert.deepStrictEqual(checkInvariants({ events, requests: yield* model.requests }), [])
    }))

  it.effect("a tool that finishes in time under TestClock is not cut", () =>
    Effect.gen(function*() {
      const model = yield* makeScriptedModel([turn.toolCalls([toolCall("s", "sleep")]), turn.text("ok")])
      const fiber = yield* runAgentLoop({ messages: [user("go")] }).pipe(
        Effect.timeout("5 seconds"),
        Effect.provide(Layer.mergeAll(
          model.layer,
          callbackSinkLayer(() => {}),
          toolExecutorLayer([sleepingTool("sleep", "3 seconds")])
        )),
        Effect.forkChild
      )
      yield* TestClock.adjust("3 seconds")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.reason, "stop")
    }))
})

describe("limits", () => {
  const loopingTurn: ScriptedTurn = (request) =>
    Stream.make<Array<ModelEvent>>({
      type: "done",
      message: assistant("toolUse", { calls: [toolCall(`c${request.messages.length}`, "e")] })
    })

  it.effect("maxSteps: the last allowed toolUse turn executes its tools, then the run ends maxSteps", () =>
    Effect.gen(function*() {
      const probe = probeTool(echoTool("e"))
      const run = yield* runScripted([loopingTurn, loopingTurn, loopingTurn], { tools: [probe.tool], maxSteps: 2 })
      assertSound(run)
      assert.strictEqual(run.result.reason, "maxSteps")
      assert.strictEqual(run.result.steps, 2)
      assert.strictEqual(run.requests.length, 2)
      assert.strictEqual(yield* probe.executions, 2)
      assert.deepStrictEqual(roles(run.result.messages), ["user", "assistant", "toolResult", "assistant", "toolResult"])
    }))

  it.effect("maxSteps never invents a message: a stop on the last allowed step ends stop", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.toolCalls([toolCall("a", "e")]), turn.text("done")], {
        tools: [echoTool("e")],
        maxSteps: 2
      })
      assertSound(run)
      assert.strictEqual(run.result.reason, "stop")
      assert.strictEqual(run.result.steps, 2)
    }))

  it.effect(`the default limit is finite (${DEFAULT_MAX_STEPS} requests)`, () =>
    Effect.gen(function*() {
      const script = Array.from({ length: DEFAULT_MAX_STEPS + 5 }, () => loopingTurn)
      const run = yield* runScripted(script, { tools: [echoTool("e")] })
      assertSound(run)
      assert.strictEqual(run.result.reason, "maxSteps")
      assert.strictEqual(run.result.steps, DEFAULT_MAX_STEPS)
    }))

  it.effect("steps count a request whose stream then failed", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.toolCalls([toolCall("a", "e")]), turn.failing("connection reset")], {
        tools: [echoTool("e")]
      })
      assertSound(run)
      assert.strictEqual(run.result.steps, 2)
      assert.strictEqual(run.result.reason, "error")
    }))

  for (const maxSteps of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "3"]) {
    it.effect(`maxSteps ${String(maxSteps)} is bad input: error, steps 0, model never called`, () =>
      Effect.gen(function*() {
        const run = yield* runScripted([turn.text("never")], { maxSteps: maxSteps as number })
        assertSound(run)
        assert.strictEqual(run.result.reason, "error")
        assert.strictEqual(run.result.steps, 0)
        assert.strictEqual(run.requests.length, 0)
        assert.match(run.result.error!, /bad input.*maxSteps/s)
        assert.strictEqual(run.events.length, 1)
      }))
  }

  it.effect("a gate completes under a real Deferred, not a timer (sanity for the gated tool)", () =>
    Effect.gen(function*() {
      const gate = makeGatedTool("g")
      const done = yield* Deferred.make<string>()
      const fiber = yield* runScripted([turn.toolCalls([toolCall("a", "g")]), turn.text("ok")], {
        tools: [gate.tool]
      }).pipe(Effect.tap((run) => Deferred.succeed(done, run.result.reason)), Effect.forkChild)
      yield* gate.started("a")
      yield* settle()
      assert.isFalse(yield* Deferred.isDone(done), "the run waits for the gated call")
      yield* gate.release("a")
      assert.strictEqual(yield* Deferred.await(done), "stop")
      yield* Fiber.join(fiber)
    }))
})

describe("the timeout option, where the deadline meets other endings", () => {
  it.effect("with a caller's signal that never fires, a passed deadline is still reported as the timeout", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      const run = yield* start([turn.never(["thinking"])], [], { timeout: "5 minutes", signal: controller.signal })
      yield* TestClock.adjust("5 minutes")
      const result = yield* Fiber.join(run.fiber)
      assert.deepStrictEqual(yield* run.check(result), [])
      assert.strictEqual(result.reason, "aborted")
      assert.strictEqual(result.error, "run timed out after 5m")
    }))

  it.effect("a run that ends otherwise after its deadline passed keeps its own ending", () =>
    Effect.gen(function*() {
      // transformContext is not raced with the signal: it outlives the deadline, then fails
      const run = yield* start([turn.text("never")], [], {
        timeout: "5 minutes",
        transformContext: () => Effect.andThen(Effect.sleep("10 minutes"), Effect.die(new Error("compactor broke")))
      })
      yield* TestClock.adjust("10 minutes")
      const result = yield* Fiber.join(run.fiber)
      assert.deepStrictEqual(yield* run.check(result), [])
      assert.strictEqual(result.reason, "error")
      assert.match(result.error!, /^transformContext failed: compactor broke/)
    }))
})
