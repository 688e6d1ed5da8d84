/**
 * The agent loop: model proposes, tools run, results join the transcript, the model is asked
 * again, with the three invariants of SPEC §1 holding on every path.
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import { EventSink } from "./EventSink.ts"
import type { Executor } from "./Executor.ts"
import { checkInput, runLoop } from "./internal/engine/loop.ts"
import { guardSink } from "./internal/engine/shortcuts.ts"
import type { Model } from "./Model.ts"
import type { OutputInput } from "./Output.ts"
import type { AgentLoopOptions, AgentRunResult, AnswerOf } from "./Run.ts"

/**
 * Runs the agent loop until the model stops, the step limit is reached, the run is aborted or
 * something fails. Never fails: every ending is an `AgentRunResult` and exactly one `turn_end`
 * event. Interrupting the fiber running it (for example with `Effect.timeout`) is an abort: the
 * running tools are interrupted, every call is paired, the sink receives
 * `turn_end { reason: "aborted" }`, and the interruption then goes on to the caller (use
 * `startAgentLoop` to also get the result of a run interrupted that way, or the `timeout` option
 * to bound a run by time and still get its paired transcript).
 *
 * Events go to the `EventSink` in the context; without one the run works the same and its events
 * are dropped.
 *
 * With an `output` schema (`Schema<A>`), the run ends `stop` only with an accepted final answer,
 * and the result is an `AgentRunResult<A>` whose `output` is that answer, decoded.
 *
 * @since 0.1.0
 * @category loop
 */
export const runAgentLoop: {
  <S extends OutputInput<unknown>>(
    options: AgentLoopOptions & { readonly output: S }
  ): Effect.Effect<AgentRunResult<AnswerOf<S>>, never, Model | Executor>
  (options: AgentLoopOptions): Effect.Effect<AgentRunResult, never, Model | Executor>
} = (options: AgentLoopOptions): Effect.Effect<AgentRunResult, never, Model | Executor> =>
  Effect.flatMap(
    Effect.serviceOption(EventSink),
    (sink) => runLoop(options, Option.isSome(sink) ? guardSink(sink.value) : dropEvents, () => Effect.void)
  )

const dropEvents = () => Effect.void

/**
 * The bad-input error a run with these options ends with at once (SPEC §5: a malformed message, a
 * result with no call, a transcript that ends with the model's answer, an invalid option...), or
 * `undefined` when its input is good. It is the loop's own check: an engine that refuses bad input
 * before it starts a run (a durable one) refuses it with the same words.
 *
 * @since 0.1.0
 * @category guards
 */
export const runInputError = (options: AgentLoopOptions): string | undefined => {
  const checked = checkInput(options)
  return checked.ok ? undefined : checked.error
}
