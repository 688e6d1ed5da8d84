/**
 * Where a run's abort, steering and follow-up messages come from: the loop's second seam with its
 * engine (the first is `RunJournal`).
 *
 * An in-memory run takes them from its options (`signal`, `steering`, `followUps`); that is the
 * default, used whenever no `RunControl` is provided. A durable engine provides its own: an abort
 * from any process, messages pushed to its store. The loop reads steering and follow-ups only
 * inside journaled steps, so what a read returned is recorded with the step.
 *
 * @since 0.1.0
 */
import { Context } from "effect"
import type { Effect } from "effect"

/**
 * What a control supplies.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunControlShape {
  /** Fires when the run is aborted (checked at the safe boundaries, raced by running turns and calls). */
  readonly signal: AbortSignal | undefined
  /**
   * The steering messages pushed since the first `from` the run has taken (not checked yet: the
   * loop checks each). Called only at a safe boundary, inside a step.
   */
  readonly steering: ((from: number) => Effect.Effect<ReadonlyArray<unknown>>) | undefined
  /** The same for follow-up messages. */
  readonly followUps: ((from: number) => Effect.Effect<ReadonlyArray<unknown>>) | undefined
}

/**
 * The control of the runs below it; `undefined` (the default): each run's own options.
 *
 * @since 0.1.0
 * @category references
 */
export const RunControl = Context.Reference<RunControlShape | undefined>("@agentloop/core/RunControl", {
  defaultValue: () => undefined
})
