/**
 * The journal a run's steps go through: the one seam between the loop and the engine it runs on.
 *
 * There is one loop (SPEC §9). It runs each step of a run — a model turn, a policy decision, a
 * tool call, a safe boundary, the end — through `RunJournal.step`, under a stable name
 * (`turn/<n>`, `policy/<n>/<i>`, `call/<n>/<i>`, `stop/<n>`, `answer/<n>`, `end`), and waits for
 * approvals through `RunJournal.approval`.
 *
 * - The in-memory journal (the default) just runs each step: `step` returns the step's effect
 *   itself, at no cost (and the loop runs its model turns inline, see `memoryJournal`).
 * - A durable journal (`@agentloop/durable`) records each step's value and answers a step that was
 *   recorded before from the record, without running it. The step then calls `replayed` with the
 *   value, so the run's state becomes what running it made it. Every event of a step is emitted
 *   inside the step: a replayed step emits nothing, and nothing is ever announced twice.
 *
 * A step's value is plain data (it is described by the step's schema, for engines that serialise
 * it). A step that is running when its run is aborted answers the abort itself (a model turn ends
 * `aborted`, a running call is answered `interrupted`), so its record says what happened.
 *
 * @since 0.1.0
 */
import { Context, Deferred, Effect, Option } from "effect"
import type { Duration, Schema } from "effect"
import type { LoopEvent } from "./LoopEvent.ts"
import type { ToolCall } from "./Message.ts"
import type { ToolDefinition } from "./Model.ts"
import type { ApprovalAnswer } from "./Policy.ts"

/**
 * What kind of step a run takes: a model turn (with the safe boundary before it), a policy
 * decision, a tool call, the safe boundary of a run that would stop, the final-answer repair
 * request of a run with an output schema, the end.
 *
 * @since 0.1.0
 * @category models
 */
export type StepKind = "turn" | "policy" | "call" | "stop" | "answer" | "end"

/**
 * A step's stable name: `end`, `<kind>/<step>` or `<kind>/<step>/<index>`.
 *
 * @since 0.1.0
 * @category models
 */
export const stepName = (kind: StepKind, step: number, index: number | undefined): string =>
  kind === "end" ? "end" : index === undefined ? `${kind}/${step}` : `${kind}/${step}/${index}`

/**
 * How an approval request ended: answered (by the caller, or denied by the approval timeout), or
 * the run was aborted while it waited.
 *
 * @since 0.1.0
 * @category models
 */
export type ApprovalOutcome =
  | { readonly _tag: "Answered"; readonly answer: ApprovalAnswer }
  | { readonly _tag: "Aborted" }

/**
 * What a journal does.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunJournalShape {
  /**
   * Whether steps may be answered from a record instead of running (a durable journal). The loop
   * then lets each step answer an abort itself instead of stopping it from outside, and an
   * interruption of the run (its engine suspending it) ends nothing: the run goes on when it is
   * replayed.
   */
  readonly replays: boolean
  /**
   * Runs one step (or answers it from its record, and then calls `replayed` with its value).
   * `schema` describes the value, for journals that store it. `run` builds the step's effect: call
   * it only where that effect runs next (building it may already deliver the step's events to a
   * synchronous sink), and never for a step answered from its record.
   */
  readonly step: <S extends Schema.Top>(
    kind: StepKind,
    step: number,
    index: number | undefined,
    schema: S,
    run: () => Effect.Effect<S["Type"]>,
    replayed: (value: S["Type"]) => Effect.Effect<void>
  ) => Effect.Effect<S["Type"]>
  /**
   * Asks for the approval of call `index` of step `step` (its `approval_request` event is emitted
   * through `emit`) and waits for the answer, or for `timeout` (then answered denied).
   */
  readonly approval: (
    step: number,
    index: number,
    call: ToolCall,
    emit: (event: LoopEvent) => Effect.Effect<void>,
    timeout: Duration.Duration | undefined
  ) => Effect.Effect<ApprovalOutcome>
  /**
   * The time left of a run whose timeout is `limit`, measured from the run's first start (for an
   * in-memory run, which never restarts: `limit`).
   */
  readonly timeLeft: (limit: Duration.Duration) => Effect.Effect<Duration.Duration>
  /**
   * Runs what belongs to call `index` of step `step` but is not one of its steps (the batch
   * answering a call the abort stopped): not journaled, its events are the step's.
   */
  readonly within: <A>(step: number, index: number, effect: Effect.Effect<A>) => Effect.Effect<A>
  /**
   * Claims the start of call `index` of step `step`, inside its step, right before it runs
   * (`undefined`: every call simply runs, as in memory): the idempotency key the call runs with,
   * whether it was claimed before (it was running when its process died) and whether it must then
   * not run again (it is answered interrupted instead).
   */
  readonly claim:
    | ((
      step: number,
      index: number,
      call: ToolCall,
      definition: ToolDefinition | undefined
    ) => Effect.Effect<CallClaim>)
    | undefined
}

/**
 * A call's claim to start (see `RunJournalShape.claim`).
 *
 * @since 0.1.0
 * @category models
 */
export interface CallClaim {
  readonly idempotencyKey: string
  readonly again: boolean
  readonly atMostOnce: boolean
}

const answered = (answer: ApprovalAnswer): ApprovalOutcome => ({ _tag: "Answered", answer })

/**
 * The in-memory journal: every step just runs; an approval is a `Deferred` in the
 * `approval_request` event, answered by whoever holds the event.
 *
 * The loop knows this journal by identity and runs its model turns inline, in the run's own
 * generator, instead of through `step` (the one speed shortcut of the seam: a turn costs no effect
 * of its own). A copy of it (`{ ...memoryJournal }`) takes the plain path through `step`;
 * FastPaths.test.ts runs generated plans both ways and compares them.
 *
 * @since 0.1.0
 * @category constructors
 */
export const memoryJournal: RunJournalShape = {
  replays: false,
  step: (_kind, _step, _index, _schema, run) => run(),
  approval: (_step, _index, call, emit, timeout) => {
    const answer = Deferred.makeUnsafe<ApprovalAnswer>()
    const awaited = timeout === undefined ? Deferred.await(answer) : Effect.flatMap(
      Effect.timeoutOption(Deferred.await(answer), timeout),
      (given) =>
        Option.isSome(given) ? Effect.succeed(given.value) : Effect.andThen(
          // answer the request (a late answer from a UI is then ignored), unless one came just now
          Deferred.succeed(answer, { approved: false, reason: "approval timed out" }),
          Deferred.await(answer)
        )
    )
    return Effect.map(Effect.andThen(emit({ type: "approval_request", call, id: call.id, answer }), awaited), answered)
  },
  timeLeft: Effect.succeed,
  within: (_step, _index, effect) => effect,
  claim: undefined
}

/**
 * The journal the runs below it use (default: `memoryJournal`). An engine provides its own; a run
 * inside a tool call (a sub-agent) always has the in-memory journal.
 *
 * @since 0.1.0
 * @category references
 */
export const RunJournal = Context.Reference<RunJournalShape>("@agentloop/core/RunJournal", {
  defaultValue: () => memoryJournal
})
