/**
 * An interruption at every point where the run's fiber can be interrupted. With
 * `Scheduler.MaxOpsBeforeYield` at 2 the run's fiber hands the scheduler back after every
 * operation (at 1, effect 4.1's fiber yields before running any and never gets anywhere), so an interrupting fiber
 * that first yields `k` times lands at a different boundary for
 * each `k`: sweeping `k` until the run finishes first interrupts the run at every one of them. At
 * each, the three invariants must hold (every call paired, every appended message announced,
 * exactly one `turn_end`), whichever kind of sink the events go to.
 */
import { callbackSinkLayer, EventSink, runAgentLoop, toolExecutorLayer } from "@agentloop/core"
import type { AgentRunResult, LoopEvent, Message } from "@agentloop/core"
import { assistant, checkInvariants, fakeTool, makeScriptedModel, toolCall, turn, user } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Scheduler } from "effect"

type SinkKind = "callback" | "callback returning an effect" | "effect sink"

const sinkOf = (kind: SinkKind, events: Array<LoopEvent>): Layer.Layer<EventSink> => {
  switch (kind) {
    case "callback":
      return callbackSinkLayer((event) => {
        events.push(event)
      })
    case "callback returning an effect":
      return callbackSinkLayer((event) => Effect.sync(() => events.push(event)))
    case "effect sink":
      return Layer.succeed(EventSink, EventSink.of({ emit: (event) => Effect.sync(() => events.push(event)) }))
  }
}

/** One run interrupted after the interrupter yielded `k` times; `undefined` when the run ended first. */
const interruptedAt = (kind: SinkKind, k: number) =>
  Effect.gen(function*() {
    // two calls, then a `stop` that carries a call (answered skipped), then a follow-up turn
    const model = yield* makeScriptedModel([
      turn.toolCalls([toolCall("a", "t", {}), toolCall("b", "t", {})]),
      turn.toolCalls([toolCall("c", "t", {})]),
      turn.message(assistant("stop", { calls: [toolCall("d", "t", {})] }))
    ])
    const events: Array<LoopEvent> = []
    const input: Array<Message> = [user("go")]
    const context = yield* Layer.build(
      Layer.mergeAll(model.layer, sinkOf(kind, events), toolExecutorLayer([fakeTool("t", () => Effect.succeed("ok"))]))
    )
    const run = yield* runAgentLoop({ messages: input }).pipe(
      Effect.provideContext(context),
      Effect.provideService(Scheduler.MaxOpsBeforeYield, 3),
      Effect.forkChild({ startImmediately: true })
    )
    for (let i = 0; i < k; i++) yield* Effect.yieldNow
    const finished = run.pollUnsafe() !== undefined
    const exit = yield* Fiber.interrupt(run).pipe(Effect.andThen(Fiber.await(run)))
    const result: AgentRunResult | undefined = Exit.isSuccess(exit) ? exit.value : undefined
    const requests = yield* model.requests
    // interrupted before the run began (before its first effect): nothing happened, nothing to check
    const began = events.length > 0 || requests.length > 0 || result !== undefined
    return { finished, began, violations: began ? checkInvariants({ input, result, events, requests }) : [] }
  }).pipe(Effect.scoped)

describe("an interruption at every boundary of a run", () => {
  for (const kind of ["callback", "callback returning an effect", "effect sink"] as const) {
    it.effect(`leaves the invariants holding (${kind})`, () =>
      Effect.gen(function*() {
        let interrupted = 0
        for (let k = 0; k < 2_000; k++) {
          const { began, finished, violations } = yield* interruptedAt(kind, k)
          assert.deepStrictEqual(violations.map((v) => `k=${k}: [${v.invariant}] ${v.message}`), [])
          if (finished) {
            // every boundary before the end was tried: the sweep reached runs that end on their own
            assert.isAbove(interrupted, 50)
            return
          }
          if (began) interrupted++
        }
        assert.fail("the run never finished within 2,000 yields")
      }))
  }
})
