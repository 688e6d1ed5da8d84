import { callbackSinkLayer, Executor, runAgentLoop, ToolError, toolExecutorLayer } from "@agentloop/core"
import type { LoopEvent, ToolResultMessage } from "@agentloop/core"
import {
  checkInvariants,
  dyingTool,
  echoTool,
  failingTool,
  fakeTool,
  interruptingTool,
  makeGatedTool,
  makeScriptedModel,
  progressTool,
  runScripted,
  throwingTool,
  toolCall,
  turn,
  user
} from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer } from "effect"
import { assertSound, results, textOf } from "./helpers.ts"

describe("concurrent tools", () => {
  it.effect("all calls of one message run at the same time (both start before either is released)", () =>
    Effect.gen(function*() {
      const gate = makeGatedTool("slow")
      const fiber = yield* runScripted([
        turn.toolCalls([toolCall("a", "slow"), toolCall("b", "slow"), toolCall("c", "slow")]),
        turn.text("done")
      ], { tools: [gate.tool] }).pipe(Effect.forkChild)
      yield* gate.started("a")
      yield* gate.started("b")
      yield* gate.started("c")
      yield* gate.release("c")
      yield* gate.release("b")
      yield* gate.release("a")
      const run = yield* Fiber.join(fiber)
      assertSound(run)
      assert.strictEqual(run.result.reason, "stop")
    }))

  it.effect("tool_end in completion order, results in call order", () =>
    Effect.gen(function*() {
      const gate = makeGatedTool("slow")
      const model = yield* makeScriptedModel([
        turn.toolCalls([toolCall("a", "slow"), toolCall("b", "slow"), toolCall("c", "slow")]),
        turn.text("done")
      ])
      const events: Array<LoopEvent> = []
      const ended = new Map(["a", "b", "c"].map((id) => [id, Deferred.makeUnsafe<void>()]))
      const sink = callbackSinkLayer((event) => {
        events.push(event)
        if (event.type === "tool_end") Deferred.doneUnsafe(ended.get(event.result.toolCallId)!, Exit.void)
      })
      const fiber = yield* runAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provide(Layer.mergeAll(model.layer, sink, toolExecutorLayer([gate.tool]))),
        Effect.forkChild
      )
      // release one call at a time and wait for its tool_end: completion order is b, c, a
      for (const [id, text] of [["b", "B"], ["c", "C"], ["a", "A"]] as const) {
        yield* gate.started(id)
        yield* gate.release(id, text)
        yield* Deferred.await(ended.get(id)!)
      }
      const result = yield* Fiber.join(fiber)
      const requests = yield* model.requests
      assert.deepStrictEqual(checkInvariants({ result, events, requests }), [])
      const ends = events.flatMap((e) => e.type === "tool_end" ? [e.result.toolCallId] : [])
      assert.deepStrictEqual(ends, ["b", "c", "a"])
      assert.deepStrictEqual(results(result.messages).map((r) => r.toolCallId), ["a", "b", "c"])
      assert.deepStrictEqual(results(result.messages).map(textOf), ["A", "B", "C"])
      // the next request already has them in call order
      assert.deepStrictEqual(
        requests[1]!.messages.flatMap((m) => m.role === "toolResult" ? [m.toolCallId] : []),
        ["a", "b", "c"]
      )
    }))

  it.effect("results stay paired when the gate completes calls with failures and defects", () =>
    Effect.gen(function*() {
      const gate = makeGatedTool("g")
      const fiber = yield* runScripted([
        turn.toolCalls([toolCall("a", "g"), toolCall("b", "g"), toolCall("c", "g")]),
        turn.text("done")
      ], { tools: [gate.tool] }).pipe(Effect.forkChild)
      yield* gate.started("a")
      yield* gate.die("c", new Error("boom"))
      yield* gate.fail("a", "nope")
      yield* gate.release("b")
      const run = yield* Fiber.join(fiber)
      assertSound(run)
      const [a, b, c] = results(run.result.messages)
      assert.isTrue(a!.isError)
      assert.isFalse(b!.isError)
      assert.isTrue(c!.isError)
    }))

  const failures = [
    { name: "typed failure", tool: failingTool("bad", "disk full"), text: /failed: disk full/ },
    { name: "defect", tool: dyingTool("bad", new Error("kaboom")), text: /crashed: kaboom/ },
    {
      name: "synchronous throw from execute",
      tool: throwingTool("bad", new TypeError("cannot read x")),
      text: /crashed: cannot read x/
    },
    { name: "self-interruption", tool: interruptingTool("bad"), text: /interrupted/ }
  ]
  for (const f of failures) {
    it.effect(`a ${f.name} becomes an error result; siblings finish normally; the run goes on`, () =>
      Effect.gen(function*() {
        const run = yield* runScripted([
          turn.toolCalls([toolCall("ok1", "ok"), toolCall("x", "bad"), toolCall("ok2", "ok")]),
          turn.text("recovered")
        ], { tools: [echoTool("ok", "fine"), f.tool] })
        assertSound(run)
        assert.strictEqual(run.result.reason, "stop")
        assert.strictEqual(run.result.steps, 2)
        const [ok1, x, ok2] = results(run.result.messages)
        assert.deepStrictEqual([ok1!.isError, x!.isError, ok2!.isError], [false, true, false])
        assert.strictEqual(x!.toolCallId, "x")
        assert.strictEqual(x!.toolName, "bad")
        assert.match(textOf(x!), f.text)
        assert.notMatch(textOf(x!), /\n\s+at /, "no stack trace in a message sent to the model")
      }))
  }

  it.effect("reportProgress becomes tool_progress between tool_start and tool_end", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.toolCalls([toolCall("p", "prog")]), turn.text("ok")], {
        tools: [progressTool("prog", [{ pct: 50 }, { pct: 100 }])]
      })
      assertSound(run)
      const toolEvents = run.events.filter((e) => e.type.startsWith("tool"))
      assert.deepStrictEqual(toolEvents.map((e) => e.type), [
        "tool_start",
        "tool_progress",
        "tool_progress",
        "tool_end"
      ])
      assert.deepStrictEqual(toolEvents[1], { type: "tool_progress", toolCallId: "p", progress: { pct: 50 } })
    }))
  it.effect("reportProgress after the call has ended is ignored", () =>
    Effect.gen(function*() {
      let late: ((p: unknown) => Effect.Effect<void>) | undefined
      const tool = fakeTool("leaky", (_, ctx) => {
        late = ctx.reportProgress
        return Effect.succeed("done")
      })
      const model = yield* makeScriptedModel([turn.toolCalls([toolCall("a", "leaky")]), turn.text("ok")])
      const events: Array<LoopEvent> = []
      yield* runAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provide(
          Layer.mergeAll(model.layer, callbackSinkLayer((e) => void events.push(e)), toolExecutorLayer([tool]))
        )
      )
      const before = events.length
      yield* late!("too late")
      assert.strictEqual(events.length, before)
    }))
})

describe("a misbehaving executor cannot break pairing", () => {
  const call = toolCall("c1", "t")
  const good: ToolResultMessage = {
    role: "toolResult",
    toolCallId: "c1",
    toolName: "t",
    content: [{ type: "text", text: "ok" }],
    isError: false
  }
  const executors: ReadonlyArray<{ name: string; execute: () => unknown; text: RegExp }> = [
    {
      name: "a result for another call id",
      execute: () => Effect.succeed({ ...good, toolCallId: "zzz" }),
      text: /another call/
    },
    {
      name: "a result naming another tool",
      execute: () => Effect.succeed({ ...good, toolName: "other" }),
      text: /another call/
    },
    {
      name: "a result that fails the schema",
      execute: () => Effect.succeed({ role: "toolResult", toolCallId: "c1" }),
      text: /malformed result/
    },
    { name: "a value that is not an Effect", execute: () => "ok", text: /not an Effect/ },
    {
      name: "a synchronous throw",
      execute: () => {
        throw new Error("executor blew up")
      },
      text: /executor blew up/
    },
    { name: "a ToolError", execute: () => Effect.fail(new ToolError({ message: "denied" })), text: /failed: denied/ }
  ]
  for (const e of executors) {
    it.effect(`${e.name} is replaced by an error result for the call`, () =>
      Effect.gen(function*() {
        const executor = Layer.succeed(Executor, Executor.of({ definitions: [], execute: e.execute as never }))
        const run = yield* runScripted([turn.toolCalls([call]), turn.text("ok")], { executor })
        assertSound(run)
        const [result] = results(run.result.messages)
        assert.strictEqual(result!.toolCallId, "c1")
        assert.strictEqual(result!.toolName, "t")
        assert.isTrue(result!.isError)
        assert.match(textOf(result!), e.text)
      }))
  }
})
