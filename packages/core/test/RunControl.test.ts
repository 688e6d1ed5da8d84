/**
 * What a consumer meets at the edges of a run: a tool's signal fires before its own cleanup, an
 * approval that never comes, a run bounded by time that keeps its transcript, a run without a
 * sink, a callback sink that uses the application's services, and a transcript that already ends
 * with the model's answer.
 */
import {
  ask,
  callbackSinkLayer,
  defineTool,
  Executor,
  makeToolExecutor,
  ModelError,
  runAgentLoop,
  toolExecutorLayer
} from "@agentloop/core"
import type { LoopEvent, ToolContext } from "@agentloop/core"
import {
  assistant,
  echoTool,
  makeScriptedModel,
  probeTool,
  scriptedModelLayer,
  sleepingTool,
  startScripted,
  toolCall,
  turn,
  user
} from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer, Schema } from "effect"
import { TestClock } from "effect/testing"
import { results, textOf } from "./helpers.ts"

describe("a tool's AbortSignal", () => {
  it.effect("fires before the tool's own interrupt finalizers run", () =>
    Effect.gen(function*() {
      const entered = Deferred.makeUnsafe<ToolContext>()
      const seenInFinalizer: Array<boolean> = []
      const tool = defineTool({
        name: "stuck",
        description: "",
        parameters: Schema.Struct({}),
        execute: (_, ctx) =>
          Effect.andThen(Deferred.succeed(entered, ctx), Effect.never).pipe(
            Effect.onInterrupt(() => Effect.sync(() => void seenInFinalizer.push(ctx.signal.aborted)))
          )
      })
      const controller = new AbortController()
      const run = yield* startScripted([turn.toolCalls([toolCall("a", "stuck")])], {
        tools: [tool],
        signal: controller.signal
      })
      yield* Deferred.await(entered)
      controller.abort()
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "aborted")
      assert.deepStrictEqual(seenInFinalizer, [true])
    }))
})

describe("approval timeout", () => {
  it.effect(
    "an ask whose answer never comes is denied \"approval timed out\" when the timeout passes, not " +
      "before",
    () =>
      Effect.gen(function*() {
        const write = probeTool(echoTool("write"))
        const requests: Array<LoopEvent> = []
        const run = yield* startScripted(
          [turn.toolCalls([toolCall("a", "write"), toolCall("b", "write")]), turn.text("ok")],
          {
            tools: [write.tool],
            policy: () => ask,
            approvalTimeout: "10 minutes",
            onEvent: (event) => event.type === "approval_request" && void requests.push(event)
          }
        )
        yield* run.awaitEvent((e) => e.type === "approval_request")
        yield* TestClock.adjust("9 minutes")
        yield* Effect.repeat(Effect.yieldNow, { times: 100 })
        assert.isFalse(run.events.some((e) => e.type === "tool_end"), "denied before the timeout")
        yield* TestClock.adjust("1 minute")
        const { result, violations } = yield* run.finish
        assert.deepStrictEqual(violations, [])
        assert.strictEqual(result.reason, "stop")
        const [a, b] = results(result.messages)
        for (const r of [a!, b!]) {
          assert.strictEqual(textOf(r), "Tool call was not executed because it was denied: approval timed out")
          assert.deepStrictEqual(r.details, { skipped: true, reason: "denied", denial: "approval timed out" })
        }
        assert.strictEqual(yield* write.executions, 0)
        // the request itself was answered, so a UI still showing it sees it is over
        for (const event of requests) {
          if (event.type === "approval_request") {
            assert.deepStrictEqual(yield* Deferred.await(event.answer), {
              approved: false,
              reason: "approval timed out"
            })
          }
        }
      })
  )

  it.effect("an answer given in time wins", () =>
    Effect.gen(function*() {
      const write = probeTool(echoTool("write"))
      const run = yield* startScripted([turn.toolCalls([toolCall("a", "write")]), turn.text("ok")], {
        tools: [write.tool],
        policy: () => ask,
        approvalTimeout: "10 minutes",
        onEvent: (event) => {
          if (event.type === "approval_request") Deferred.doneUnsafe(event.answer, Effect.succeed({ approved: true }))
        }
      })
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.isFalse(results(result.messages)[0]!.isError)
      assert.strictEqual(yield* write.executions, 1)
    }))
})

describe("a run bounded by time (the timeout option)", () => {
  it.effect(
    "stops the running tools when the time passes and returns the paired transcript, with the limit " +
      "named",
    () =>
      Effect.gen(function*() {
        const slow = probeTool(sleepingTool("slow", "1 hour"))
        const run = yield* startScripted(
          [turn.toolCalls([toolCall("a", "echo"), toolCall("b", "slow")]), turn.text("never asked")],
          { tools: [echoTool("echo"), slow.tool], timeout: "5 minutes" }
        )
        yield* run.awaitEvent((e) => e.type === "tool_start" && e.call.id === "b")
        yield* TestClock.adjust("4 minutes")
        yield* Effect.repeat(Effect.yieldNow, { times: 100 })
        assert.isFalse(run.events.some((e) => e.type === "turn_end"), "ended before its time")
        yield* TestClock.adjust("1 minute")
        const { requests, result, violations } = yield* run.finish
        assert.deepStrictEqual(violations, [])
        assert.strictEqual(result.reason, "aborted")
        assert.strictEqual(result.error, "run timed out after 5m")
        assert.strictEqual(requests.length, 1)
        const [a, b] = results(result.messages)
        assert.isFalse(a!.isError)
        assert.deepStrictEqual(b!.details, { interrupted: true })
        assert.deepStrictEqual(yield* slow.interruptedIds, ["b"])
      })
  )

  it.effect("a run that ends in time is not touched, and its timer does not outlive it", () =>
    Effect.gen(function*() {
      const run = yield* startScripted([turn.text("quick")], { tools: [], timeout: "5 minutes" })
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "stop")
      assert.isFalse("error" in result)
    }))

  it.effect("an abort by the caller's signal is still reported as the caller's abort", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      controller.abort()
      const run = yield* startScripted([], { tools: [], timeout: "5 minutes", signal: controller.signal })
      const { result } = yield* run.finish
      assert.strictEqual(result.reason, "aborted")
      assert.isFalse("error" in result)
    }))

  it.effect("when the caller aborts and the deadline passes too, the first of the two names the ending", () =>
    Effect.gen(function*() {
      // the tool's cleanup takes time (a finalizer on the Clock), so the second stop comes during it
      const cleanupTakes = (name: string) =>
        defineTool({
          name,
          description: "",
          parameters: Schema.Struct({}),
          execute: () => Effect.never.pipe(Effect.onInterrupt(() => Effect.sleep("10 minutes")))
        })
      // the deadline first, then the caller
      const callerLate = new AbortController()
      const first = yield* startScripted([turn.toolCalls([toolCall("a", "slow")])], {
        tools: [cleanupTakes("slow")],
        timeout: "5 minutes",
        signal: callerLate.signal
      })
      yield* first.awaitEvent((e) => e.type === "tool_start")
      yield* TestClock.adjust("5 minutes")
      callerLate.abort()
      yield* TestClock.adjust("10 minutes")
      const a = yield* first.finish
      assert.deepStrictEqual(a.violations, [])
      assert.strictEqual(a.result.error, "run timed out after 5m")
      // the caller first, then the deadline (passing while the tool cleans up)
      const callerFirst = new AbortController()
      const second = yield* startScripted([turn.toolCalls([toolCall("a", "slow")])], {
        tools: [cleanupTakes("slow")],
        timeout: "5 minutes",
        signal: callerFirst.signal
      })
      yield* second.awaitEvent((e) => e.type === "tool_start")
      callerFirst.abort()
      yield* TestClock.adjust("20 minutes")
      const b = yield* second.finish
      assert.deepStrictEqual(b.violations, [])
      assert.strictEqual(b.result.reason, "aborted")
      assert.isFalse("error" in b.result, "the caller's abort came first")
    }))

  it.effect("a timeout that is not a positive duration is bad input", () =>
    Effect.gen(function*() {
      for (const timeout of [0, -5, "soon"]) {
        const run = yield* startScripted([], { tools: [], timeout: timeout as number })
        const { result } = yield* run.finish
        assert.strictEqual(result.reason, "error")
        assert.match(result.error ?? "", /bad input: .*a positive duration/)
      }
    }))
})

describe("sinks", () => {
  it.effect("runAgentLoop works without an EventSink", () =>
    Effect.gen(function*() {
      const result = yield* runAgentLoop({ messages: [user("hi")] }).pipe(
        Effect.provide(Layer.merge(scriptedModelLayer([turn.text("hello")]), toolExecutorLayer([])))
      )
      assert.strictEqual(result.reason, "stop")
      assert.strictEqual(result.messages.length, 2)
    }))

  it.effect("callbackSinkLayer's callback may use the application's services", () =>
    Effect.gen(function*() {
      class Audit extends Context.Service<Audit, { readonly lines: Array<string> }>()("test/Audit") {}
      const lines: Array<string> = []
      const sink = callbackSinkLayer((event) => Effect.map(Audit, (audit) => void audit.lines.push(event.type)))
      const model = yield* makeScriptedModel([turn.text("hello")])
      yield* runAgentLoop({ messages: [user("hi")] }).pipe(
        Effect.provide(
          Layer.mergeAll(model.layer, toolExecutorLayer([]), sink.pipe(Layer.provide(Layer.succeed(Audit, { lines }))))
        )
      )
      assert.deepStrictEqual(lines.slice(-2), ["assistant_message", "turn_end"])
    }))
})

describe("a transcript that ends with the model's answer", () => {
  it.effect("is bad input naming the last message: the model is never asked to answer itself", () =>
    Effect.gen(function*() {
      for (const stopReason of ["stop", "length", "error"] as const) {
        const run = yield* startScripted([], {
          tools: [],
          messages: [user("hi"), assistant(stopReason, { text: "done" })]
        })
        const { requests, result } = yield* run.finish
        assert.strictEqual(result.reason, "error")
        assert.strictEqual(
          result.error,
          `bad input: the messages end with the model's answer (messages[1], stopReason "${stopReason}"): ` +
            "there is nothing to answer; append a user message to go on"
        )
        assert.strictEqual(requests.length, 0)
      }
    }))

  it.effect("with a user message after it, the run goes on", () =>
    Effect.gen(function*() {
      const fiber = yield* startScripted([turn.text("again")], {
        tools: [],
        messages: [user("hi"), assistant("stop", { text: "done" }), user("more")]
      })
      const { result, violations } = yield* fiber.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "stop")
      void Fiber
    }))
})

describe("namespaces for names that collide", () => {
  it("Policy.ask and friends are the flat exports, under a namespace", async () => {
    const core = await import("@agentloop/core")
    const testkit = await import("@agentloop/testkit")
    assert.strictEqual(core.Policy.ask, core.ask)
    assert.strictEqual(core.Policy.deny, core.deny)
    assert.strictEqual(core.Policy.allow, core.allow)
    assert.strictEqual(core.Policy.decide, core.decide)
    assert.strictEqual(core.Decision.decideTurn, core.decideTurn)
    assert.strictEqual(core.Transcript.skippedResult, core.skippedResult)
    assert.deepStrictEqual(testkit.Script.user("hi"), testkit.user("hi"))
    assert.strictEqual(testkit.Script.turn, testkit.turn)
  })
})

describe("what a caller learns from the result and the events", () => {
  it.effect("a run ended by a typed ModelError carries its reason (a rate limit is not a bad key)", () =>
    Effect.gen(function*() {
      const run = yield* startScripted(
        [turn.failing(new ModelError({ message: "slow down", reason: "rate_limit", status: 429 }))],
        { tools: [] }
      )
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "error")
      assert.strictEqual(result.errorReason, "rate_limit")
      const plain = yield* startScripted([turn.failing("no reason given")], { tools: [] })
      assert.isFalse("errorReason" in (yield* plain.finish).result)
    }))

  it.effect("an approval request carries a serializable id (the call's id in an in-memory run)", () =>
    Effect.gen(function*() {
      const ids: Array<string | undefined> = []
      const run = yield* startScripted([turn.toolCalls([toolCall("a", "echo")]), turn.text("ok")], {
        tools: [echoTool("echo")],
        policy: () => ask,
        onEvent: (event) => {
          if (event.type !== "approval_request") return
          ids.push(event.id)
          Deferred.doneUnsafe(event.answer, Effect.succeed({ approved: true }))
        }
      })
      yield* run.finish
      assert.deepStrictEqual(ids, ["a"])
    }))
})

describe("tool definitions that change between turns", () => {
  it.effect("are read once per turn: the next request offers the new tools and the batch uses their traits", () =>
    Effect.gen(function*() {
      const echo = echoTool("echo")
      const later = { ...echoTool("later"), definition: { ...echoTool("later").definition, exclusive: true } }
      let offered: ReadonlyArray<typeof echo.definition> = [echo.definition]
      const inner = yield* makeToolExecutor([echo, later])
      const executor = Layer.succeed(
        Executor,
        Executor.of({
          get definitions() {
            return offered
          },
          execute: (call, context) => {
            offered = [echo.definition, later.definition] // changes during the batch: not seen until the next turn
            return inner.execute(call, context)
          }
        })
      )
      const run = yield* startScripted(
        [turn.toolCalls([toolCall("a", "echo")]), turn.toolCalls([toolCall("b", "later")]), turn.text("ok")],
        { executor }
      )
      const { requests, result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "stop")
      assert.deepStrictEqual(requests.map((r) => r.tools.map((t) => t.name)), [["echo"], ["echo", "later"], [
        "echo",
        "later"
      ]])
    }))

  it.effect("new definitions that are invalid end the run with an error naming them", () =>
    Effect.gen(function*() {
      const echo = echoTool("echo")
      let offered: ReadonlyArray<typeof echo.definition> = [echo.definition]
      const inner = yield* makeToolExecutor([echo])
      const executor = Layer.succeed(
        Executor,
        Executor.of({
          get definitions() {
            return offered
          },
          execute: (call, context) => {
            offered = [echo.definition, echo.definition]
            return inner.execute(call, context)
          }
        })
      )
      const run = yield* startScripted([turn.toolCalls([toolCall("a", "echo")]), turn.text("never")], { executor })
      const { requests, result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "error")
      assert.match(result.error ?? "", /echo/)
      assert.strictEqual(requests.length, 1)
    }))
})
