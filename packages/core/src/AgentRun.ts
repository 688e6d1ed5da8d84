/**
 * A run's live events and its final result from one run, for UIs and servers.
 *
 * @since 0.1.0
 */
import { Deferred, Effect, Fiber, Queue, Stream } from "effect"
import type { Scope } from "effect"
import { EventSink } from "./EventSink.ts"
import type { Executor } from "./Executor.ts"
import { runLoop } from "./internal/engine/loop.ts"
import { guardSink } from "./internal/engine/shortcuts.ts"
import type { LoopEvent } from "./LoopEvent.ts"
import type { Model } from "./Model.ts"
import type { OutputInput } from "./Output.ts"
import type { AgentLoopOptions, AgentRunResult, AnswerOf } from "./Run.ts"

/**
 * A started run.
 *
 * - `events`: every `LoopEvent` of the run, from the first, ending right after `turn_end`. It
 *   buffers, so it may be read late; read it once.
 * - `result`: waits for the run to end. A run interrupted by `abort` or by closing its scope still
 *   has a result (reason `aborted`, every call paired).
 * - `abort`: interrupts the run (as an outside interruption) and waits until it has ended.
 *
 * `A` is the type of the final answer of a run with an `output` schema.
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentRun<A = unknown> {
  readonly events: Stream.Stream<LoopEvent>
  readonly result: Effect.Effect<AgentRunResult<A>>
  readonly abort: Effect.Effect<void>
}

/**
 * Starts a run in the background of the current scope. Events also go to the `EventSink` in the
 * context, when there is one. Closing the scope interrupts a run that has not ended.
 *
 * @since 0.1.0
 * @category loop
 */
export const startAgentLoop: {
  <S extends OutputInput<unknown>>(
    options: AgentLoopOptions & { readonly output: S }
  ): Effect.Effect<AgentRun<AnswerOf<S>>, never, Model | Executor | Scope.Scope>
  (options: AgentLoopOptions): Effect.Effect<AgentRun, never, Model | Executor | Scope.Scope>
} = (options: AgentLoopOptions): Effect.Effect<AgentRun, never, Model | Executor | Scope.Scope> =>
  Effect.gen(function*() {
    const queue = yield* Queue.unbounded<LoopEvent>()
    const done = yield* Deferred.make<AgentRunResult>()
    const outer = yield* Effect.serviceOption(EventSink)
    const forward = outer._tag === "Some" ? guardSink(outer.value) : undefined
    const emit = (event: LoopEvent) =>
      forward === undefined ?
        Effect.asVoid(Queue.offer(queue, event)) :
        // `guardSink` calls the sink when the effect is built: build it after the offer has run
        Effect.andThen(Queue.offer(queue, event), Effect.suspend(() => forward(event)))
    // started at once, so the run is inside its uninterruptible bookkeeping before `abort` can land
    const fiber = yield* Effect.forkScoped(runLoop(options, emit, (result) => Deferred.succeed(done, result)), {
      startImmediately: true
    })
    return {
      events: Stream.fromQueue(queue).pipe(Stream.takeUntil((event) => event.type === "turn_end")),
      result: Deferred.await(done),
      abort: Effect.asVoid(Fiber.interrupt(fiber))
    }
  })

/**
 * The events of one run as a stream, for UIs. The run starts when the stream is run and the
 * stream ends right after `turn_end`; stopping the stream early interrupts the run (which then
 * ends `aborted`, every call paired).
 *
 * @since 0.1.0
 * @category loop
 */
export const runAgentLoopStream = (options: AgentLoopOptions): Stream.Stream<LoopEvent, never, Model | Executor> =>
  Stream.unwrap(Effect.map(startAgentLoop(options), (run) => run.events))
