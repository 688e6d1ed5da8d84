/**
 * The loop's cheap paths keep the guarantees of the paths they replace: the calls of a concurrent
 * batch run without a fiber each but still see their signal fire before their own interrupt
 * finalizers (on an abort, the run's interruption or a time limit); a request over a long
 * transcript copies its messages when they are first read, and they are still the transcript as it
 * was when the request was made; the callback sink, called directly, still sees every event once,
 * in order, and a callback that throws does not break the run; without a tracing backend a run
 * makes no span; the in-memory journal's turns, run inline in the loop's generator, give the same
 * runs as the plain path through `RunJournal.step`.
 */
import {
  callbackSinkLayer,
  defineTool,
  memoryJournal,
  Model,
  runAgentLoop,
  RunJournal,
  toolExecutorLayer
} from "@agentloop/core"
import type { LoopEvent, Message, ModelRequest, ToolContext } from "@agentloop/core"
import {
  checkInvariants,
  faultSeed,
  generateFaultPlan,
  runFaultPlan,
  startScripted,
  toolCall,
  turn,
  user
} from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"

/** A tool that waits forever and records, in its interrupt finalizer, whether its signal had fired. */
const stuckTool = (name: string, timeoutMs?: number) => {
  const entered: Array<string> = []
  const seenInFinalizer: Array<[string, boolean]> = []
  const all = Deferred.makeUnsafe<void>()
  const tool = defineTool({
    name,
    description: "",
    parameters: Schema.Struct({}),
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
    execute: (_, ctx: ToolContext) =>
      Effect.andThen(
        Effect.sync(() => {
          entered.push(ctx.toolCallId)
          if (entered.length === 2) Deferred.doneUnsafe(all, Effect.void)
        }),
        Effect.never
      ).pipe(
        Effect.onInterrupt(() => Effect.sync(() => void seenInFinalizer.push([ctx.toolCallId, ctx.signal.aborted])))
      )
  })
  return { tool, bothEntered: Deferred.await(all), seenInFinalizer }
}

describe("a concurrent batch's calls (no fiber of their own)", () => {
  it.effect("an abort fires each running call's signal before its interrupt finalizers run", () =>
    Effect.gen(function*() {
      const stuck = stuckTool("stuck")
      const controller = new AbortController()
      const run = yield* startScripted([turn.toolCalls([toolCall("a", "stuck"), toolCall("b", "stuck")])], {
        tools: [stuck.tool],
        signal: controller.signal
      })
      yield* stuck.bothEntered
      controller.abort()
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "aborted")
      assert.sameDeepMembers(stuck.seenInFinalizer, [["a", true], ["b", true]])
    }))

  it.effect("the run's interruption fires each running call's signal before its interrupt finalizers run", () =>
    Effect.gen(function*() {
      const stuck = stuckTool("stuck")
      const run = yield* startScripted([turn.toolCalls([toolCall("a", "stuck"), toolCall("b", "stuck")])], {
        tools: [stuck.tool]
      })
      yield* stuck.bothEntered
      yield* Fiber.interrupt(run.fiber)
      assert.deepStrictEqual(yield* run.check(), [])
      assert.sameDeepMembers(stuck.seenInFinalizer, [["a", true], ["b", true]])
      const ends = run.events.filter((e) => e.type === "turn_end")
      assert.deepStrictEqual(ends, [{ type: "turn_end", reason: "aborted", steps: 1 }])
    }))

  it.effect("a call over its time limit has its signal fired before its interrupt finalizers run", () =>
    Effect.gen(function*() {
      const stuck = stuckTool("slow", 1_000)
      const run = yield* startScripted(
        [turn.toolCalls([toolCall("a", "slow"), toolCall("b", "slow")]), turn.text("done")],
        { tools: [stuck.tool] }
      )
      yield* stuck.bothEntered
      yield* TestClock.adjust("1 second")
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "stop")
      assert.sameDeepMembers(stuck.seenInFinalizer, [["a", true], ["b", true]])
    }))
})

describe("a request over a long transcript", () => {
  /** A resumed conversation of `size` messages (user, then assistant answers), ending with a user turn. */
  const history = (size: number): Array<Message> => {
    const out: Array<Message> = []
    for (let i = 0; out.length < size - 1; i++) {
      out.push(user(`question ${i}`))
      out.push({ role: "assistant", content: [{ type: "text", text: `answer ${i}` }], stopReason: "stop" })
    }
    out.push(user("go on"))
    return out
  }

  it.effect("keeps its messages as they were when it was made, even when they are first read after the run", () =>
    Effect.gen(function*() {
      const input = history(1_001)
      const kept: Array<ModelRequest> = []
      const turns = [
        turn.toolCalls([toolCall("a", "echo")]),
        turn.toolCalls([toolCall("b", "echo")]),
        turn.text("done")
      ]
      let next = 0
      const model = Layer.succeed(
        Model,
        Model.of({
          // keeps each request without reading its messages
          stream: (request) => {
            kept.push(request)
            return turns[next++]!(request)
          }
        })
      )
      const echo = defineTool({
        name: "echo",
        description: "",
        parameters: Schema.Struct({}),
        execute: () => Effect.succeed("ok")
      })
      const events: Array<LoopEvent> = []
      const result = yield* runAgentLoop({ messages: input }).pipe(
        Effect.provide(Layer.mergeAll(model, toolExecutorLayer([echo]), callbackSinkLayer((e) => void events.push(e))))
      )
      assert.strictEqual(result.reason, "stop")
      assert.strictEqual(kept.length, 3)
      // read only now: each is the transcript as it was sent, 1,001, then 1,003, then 1,005 messages
      assert.deepStrictEqual(kept.map((r) => r.messages.length), [1_001, 1_003, 1_005])
      for (const request of kept) {
        assert.deepStrictEqual(request.messages, result.messages.slice(0, request.messages.length))
        assert.notStrictEqual(request.messages, result.messages)
      }
      // a second read is the same array; spreads and serialisers see the messages as a plain field
      assert.strictEqual(kept[0]!.messages, kept[0]!.messages)
      assert.strictEqual({ ...kept[1]! }.messages, kept[1]!.messages)
      assert.strictEqual(JSON.parse(JSON.stringify(kept[2]!)).messages.length, 1_005)
      assert.deepStrictEqual(Object.keys(kept[0]!), ["messages", "tools"])
      assert.deepStrictEqual(checkInvariants({ input, result, events, requests: kept }), [])
    }))

  it.effect("a request frozen before its messages are read still answers with one snapshot", () =>
    Effect.gen(function*() {
      const reads: Array<ReadonlyArray<Message>> = []
      const model = Layer.succeed(
        Model,
        Model.of({
          stream: (request) => {
            Object.freeze(request)
            reads.push(request.messages, request.messages)
            return turn.text("done")(request)
          }
        })
      )
      const input = history(401)
      const result = yield* runAgentLoop({ messages: input }).pipe(
        Effect.provide(Layer.mergeAll(model, toolExecutorLayer([])))
      )
      assert.strictEqual(result.reason, "stop")
      assert.strictEqual(reads[0], reads[1])
      assert.deepStrictEqual(reads[0], input)
    }))

  it.effect("a request whose messages are replaced keeps the new ones", () =>
    Effect.gen(function*() {
      let seen: ReadonlyArray<Message> | undefined
      const model = Layer.succeed(
        Model,
        Model.of({
          stream: (request) => {
            const replaced = request as { messages: ReadonlyArray<Message> }
            replaced.messages = [user("replaced")]
            seen = request.messages
            return turn.text("done")(request)
          }
        })
      )
      const result = yield* runAgentLoop({ messages: history(501) }).pipe(
        Effect.provide(Layer.mergeAll(model, toolExecutorLayer([])))
      )
      assert.strictEqual(result.reason, "stop")
      assert.deepStrictEqual(seen, [user("replaced")])
    }))
})

describe("the callback sink, called directly", () => {
  it.effect("sees every event once and in order, and a callback that throws on one does not break the run", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const run = yield* startScripted(
        [turn.toolCalls([toolCall("a", "echo")]), turn.text("done")],
        {
          tools: [
            defineTool({
              name: "echo",
              description: "",
              parameters: Schema.Struct({}),
              execute: () => Effect.succeed("ok")
            })
          ],
          onEvent: (event) => {
            seen.push(event.type)
            if (event.type === "tool_start") throw new Error("sink broke")
          }
        }
      )
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "stop")
      assert.deepStrictEqual(seen, run.events.map((e) => e.type))
      assert.deepStrictEqual(seen.filter((t) => t === "turn_end"), ["turn_end"])
      assert.includeMembers(seen, ["tool_start", "tool_end", "assistant_message"])
    }))

  it.effect("an effect the callback returns runs with the run's services and the layer's, before the run goes on", () =>
    Effect.gen(function*() {
      // `Where` is set for the run only (inside the layers); `Layered` only where the sink's layer is built
      const Where = Context.Reference<string>("test/FastPaths/Where", { defaultValue: () => "nowhere" })
      const Layered = Context.Reference<string>("test/FastPaths/Layered", { defaultValue: () => "nowhere" })
      const seen: Array<string> = []
      const model = Layer.succeed(
        Model,
        Model.of({
          stream: () =>
            Stream.fromIterable([
              { type: "text_delta", delta: "done" },
              {
                type: "done",
                message: { role: "assistant", content: [{ type: "text", text: "done" }], stopReason: "stop" }
              }
            ])
        })
      )
      const sink = callbackSinkLayer((event) =>
        Effect.gen(function*() {
          const where = yield* Where
          const layered = yield* Layered
          // a yield: the run must wait for this effect before its next event
          yield* Effect.yieldNow
          seen.push(`${event.type} ${where} ${layered}`)
        })
      ).pipe(Layer.provide(Layer.succeed(Layered, "sink layer")))
      const result = yield* runAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provideService(Where, "the run"),
        Effect.provide(Layer.mergeAll(model, toolExecutorLayer([]), sink))
      )
      assert.strictEqual(result.reason, "stop")
      assert.deepStrictEqual(seen, [
        "model_event the run sink layer",
        "assistant_message the run sink layer",
        "turn_end the run sink layer"
      ])
    }))
})

describe("without a tracing backend", () => {
  it.effect(
    "a run makes no span (effect's built-in tracer would show it to nobody): the model runs in its " +
      "caller's span",
    () =>
      Effect.gen(function*() {
        const seen: Array<string> = []
        const script = [turn.toolCalls([toolCall("a", "echo")]), turn.text("done")]
        let next = 0
        const model = Layer.succeed(
          Model,
          Model.of({
            stream: (request) =>
              Stream.unwrap(Effect.map(Effect.orDie(Effect.currentSpan), (span) => {
                seen.push(span.name)
                return script[next++]!(request)
              }))
          })
        )
        const echo = defineTool({
          name: "echo",
          description: "",
          parameters: Schema.Struct({}),
          execute: () => Effect.succeed("ok")
        })
        const result = yield* runAgentLoop({ messages: [user("go")] }).pipe(
          Effect.provide(Layer.mergeAll(model, toolExecutorLayer([echo]))),
          Effect.withSpan("caller")
        )
        assert.strictEqual(result.reason, "stop")
        assert.deepStrictEqual(seen, ["caller", "caller"])
      })
  )
})

describe("the in-memory journal's inline turns", () => {
  // the plain path: a journal equal to the in-memory one but not it, so each turn goes through `step`
  const plain = { ...memoryJournal }
  const runs = 1_000

  it.effect(
    `give the same runs as the plain path through RunJournal.step, over ${runs} generated fault plans`,
    () =>
      Effect.gen(function*() {
        const mismatches: Array<string> = []
        let violations = 0
        for (let i = 0; i < runs; i++) {
          const plan = generateFaultPlan(faultSeed(0x1a11e, i), { output: true, subAgents: true })
          const inline = yield* runFaultPlan(plan)
          const stepped = yield* Effect.provideService(runFaultPlan(plan), RunJournal, plain)
          violations += inline.violations.length + stepped.violations.length
          const a = JSON.stringify({ result: inline.result, exercised: inline.exercised })
          const b = JSON.stringify({ result: stepped.result, exercised: stepped.exercised })
          if (a !== b && mismatches.length < 3) mismatches.push(`plan ${plan.seed}:\n  inline  ${a}\n  stepped ${b}`)
        }
        assert.deepStrictEqual(mismatches, [])
        assert.strictEqual(violations, 0)
      }),
    { timeout: 300_000 }
  )
})
