/**
 * One tool batch: every call of one assistant message answered exactly once, in call order,
 * whatever happens. This module is the batch's staging only: which calls run together, in what
 * order, and what answers the calls an abort stopped. Each call's own path is in toolCall.ts, as
 * named steps: decide -> approve -> claim -> run -> answer.
 *
 * - Calls run in stages (`batchStages`): a run of calls that may run concurrently (up to
 *   `ToolConcurrency`), or an `exclusive` tool's call alone (calls before it finish first, calls
 *   after it start after it).
 * - With a policy, a stage first decides on each of its calls (`decideCall`, the step
 *   `policy/<n>/<i>`), then runs them (`toolCall`), those that ask for an approval last (so the calls
 *   that need no answer are running before an approval parks: a durable engine suspends the run once
 *   every branch waits and no step is in flight). Without one, every call is allowed.
 * - A policy that fails answers its call with an error result (it does not run) and ends the run
 *   `error` once the batch is answered.
 * - An abort (`signal`) stops what is running or waiting, on every engine the same way: the batch
 *   is stopped from outside and its finalizer answers every call left (interrupted, or skipped
 *   when it never started) before anything else can look at the results. A journal that replays
 *   answers those calls' steps on a replay from their claims (a call claimed is answered
 *   interrupted, one never claimed skipped): the same results.
 */
import { Effect, Exit, Fiber, Semaphore } from "effect"
import type { Duration } from "effect"
import type { ExecutorShape } from "../../Executor.ts"
import type { ToolCall, ToolResultMessage } from "../../Message.ts"
import type { ToolDefinition } from "../../Model.ts"
import type { ApprovalAnswer, ToolPolicy } from "../../Policy.ts"
import type { RunJournalShape } from "../../RunJournal.ts"
import type { AgentTraceInfo } from "../../Tracing.ts"
import { skippedResult } from "../../Transcript.ts"
import { awaitAbort } from "./common.ts"
import type { PolicyRecord } from "./records.ts"
import { abortRunningCalls, RunningCalls } from "./shortcuts.ts"
import type { Emit } from "./shortcuts.ts"
import { allowed, answerCall, decideCall, interruptedResult, toolCall } from "./toolCall.ts"
import type { Batch } from "./toolCall.ts"

/** What a batch needs from its run. */
export interface BatchSettings {
  readonly executor: ExecutorShape
  readonly emit: Emit
  readonly signal: AbortSignal | undefined
  readonly policy: ToolPolicy | undefined
  readonly journal: RunJournalShape
  /** Answers given with `always: true`, by tool name, for the whole run. */
  readonly remembered: Map<string, ApprovalAnswer>
  /** The executor's definitions by name, as read for the current turn. */
  definitions: ReadonlyMap<string, ToolDefinition>
  readonly concurrency: number | "unbounded"
  readonly defaultTimeout: Duration.Input | undefined
  /** How long an `ask` waits for its answer before the call is denied ("approval timed out"). */
  readonly approvalTimeout: Duration.Duration | undefined
  /** Make a span per call (a tracing backend is installed). */
  readonly traced: boolean
  /** The agent the run is, for its calls' spans. */
  readonly agent: AgentTraceInfo
  /** The name of the run's final-answer tool, if it has an output schema: its calls skip the policy. */
  readonly finalAnswer: string | undefined
  /** Set by a batch whose policy failed on a call: the run's error (the run ends with it). */
  policyError: string | undefined
  /** Brings the final-answer state up to a replayed call's result (a journal that replays). */
  readonly replayAnswer: ((call: ToolCall) => Effect.Effect<void>) | undefined
}

/**
 * Groups call indices into stages, run one after another: a run of non-exclusive calls (which
 * may run concurrently), or one exclusive call alone.
 *
 * @since 0.1.0
 * @category batch
 */
export const batchStages = (
  calls: ReadonlyArray<ToolCall>,
  definitions: ReadonlyMap<string, ToolDefinition>
): Array<Array<number>> => {
  const stages: Array<Array<number>> = []
  let current: Array<number> = []
  calls.forEach((call, index) => {
    if (definitions.get(call.name)?.exclusive === true) {
      if (current.length > 0) stages.push(current)
      stages.push([index])
      current = []
    } else {
      current.push(index)
    }
  })
  if (current.length > 0) stages.push(current)
  return stages
}

/**
 * `f` for each of `items`, at most `cap` at a time. The cap is a semaphore over items all forked
 * at once, not forEach's own bound: a bounded forEach starts the next item from the observer of one
 * that ended, and when that start ends another item synchronously (a call's tool_start reached a
 * sink whose callback interrupts the run, whose stage then fires the running calls' signals), it
 * re-enters its loop and starts the same item again (effect 4.1: a call ran twice). Unbounded,
 * forEach never starts an item from an observer.
 */
const capped = <I, A, D extends boolean>(
  cap: number | "unbounded",
  items: ReadonlyArray<I>,
  f: (item: I) => Effect.Effect<A>,
  discard: D
): Effect.Effect<D extends true ? void : Array<A>> => {
  const gate = cap === "unbounded" || cap >= items.length ? undefined : Semaphore.makeUnsafe(cap)
  const each = gate === undefined ? f : (item: I) => gate.withPermits(1)(Effect.suspend(() => f(item)))
  return Effect.forEach(items, each, { concurrency: "unbounded", discard }) as Effect.Effect<
    D extends true ? void : Array<A>
  >
}

/**
 * The calls of a stage, concurrently (`run(item)` for each of `items`, at most `cap` at a time), in
 * a fiber of their own whose calls register their controllers in `running` and run in the fibers
 * `forEach` gives them (see runToolCall): when the stage is interrupted (an abort, the run's
 * interruption), every running call's signal fires first, then the fiber and its calls are
 * interrupted. So a tool's signal fires before its own interrupt finalizers with one fiber per call
 * instead of two.
 */
const concurrently = <I>(
  cap: number | "unbounded",
  items: ReadonlyArray<I>,
  run: (item: I) => Effect.Effect<unknown>
): Effect.Effect<void> => {
  const running = new Map<AbortController, Fiber.Fiber<unknown, unknown>>()
  const stageCalls = Effect.provideService(capped(cap, items, run, true), RunningCalls, running)
  return Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(
      Effect.forkChild(restore(stageCalls), { startImmediately: true }),
      (fiber) =>
        Effect.onInterrupt(
          restore(Fiber.join(fiber)),
          () => Effect.andThen(Effect.sync(() => abortRunningCalls(running)), Fiber.interrupt(fiber))
        )
    )
  )
}

/** A call of a stage with its policy's decision. */
interface Decided {
  readonly index: number
  readonly decision: PolicyRecord
}

/** The calls of a stage in the order they start: those that ask for an approval last. */
const asksLast = (stage: ReadonlyArray<number>, decisions: ReadonlyArray<PolicyRecord>): Array<Decided> =>
  stage.map((index, k): Decided => ({ index, decision: decisions[k]! }))
    .sort((a, b) => Number(a.decision._tag === "Ask") - Number(b.decision._tag === "Ask"))

/**
 * Runs the batch of step `step` and hands the results, in call order, to `onDone` (synchronously,
 * so nothing can come between the last result and the transcript). A policy that failed leaves its
 * error in `settings.policyError`.
 */
export const runBatch = (
  settings: BatchSettings,
  step: number,
  calls: ReadonlyArray<ToolCall>,
  onDone: (results: ReadonlyArray<ToolResultMessage>) => void
): Effect.Effect<void> => {
  const { concurrency, journal, policy, signal } = settings
  const batch: Batch = {
    settings,
    step,
    calls,
    results: new Array(calls.length),
    started: new Array(calls.length).fill(false)
  }
  const run = (item: Decided) => toolCall(batch, item.index, item.decision)
  const runAllowed = (index: number) => toolCall(batch, index, allowed)
  const decide = (index: number) => decideCall(batch, index)

  /** A stage's calls: decided (with a policy), then run, alone in the run's own fiber or concurrently. */
  const runStage = policy === undefined ?
    (stage: ReadonlyArray<number>): Effect.Effect<unknown> =>
      stage.length === 1 ? runAllowed(stage[0]!) : concurrently(concurrency, stage, runAllowed) :
    (stage: ReadonlyArray<number>): Effect.Effect<unknown> =>
      Effect.flatMap(capped(concurrency, stage, decide, false), (decisions) => {
        const order = asksLast(stage, decisions)
        return order.length === 1 ? run(order[0]!) : concurrently(concurrency, order, run)
      })
  // a batch of one call runs in the run's own fiber (forking one child to join it at once buys nothing)
  const staged = policy === undefined && calls.length === 1 ?
    Effect.suspend(() => runAllowed(0)) :
    Effect.forEach(batchStages(calls, settings.definitions), runStage, { discard: true })
  // (a replayed batch of an aborted run: each step answers the abort itself, as it was answered then)
  const raced = signal === undefined || (journal.replays && signal.aborted)
    ? staged
    : Effect.raceFirst(staged, awaitAbort(signal))
  const { results, started } = batch
  const answerLeft = Effect.suspend(() => {
    const pending: Array<number> = []
    for (let index = 0; index < calls.length; index++) if (results[index] === undefined) pending.push(index)
    if (pending.length === 0) {
      // every call answered (the usual ending): hand the results over now
      onDone(results as Array<ToolResultMessage>)
      return Effect.void
    }
    return Effect.andThen(
      Effect.forEach(pending, (index) => {
        const call = calls[index]!
        const result = started[index] ? interruptedResult(call) : skippedResult(call, "aborted")
        return journal.within(step, index, answerCall(batch, index, result))
      }, { discard: true }),
      Effect.sync(() => onDone(results as Array<ToolResultMessage>))
    )
  })
  // with a journal that replays, an interruption is the engine suspending the run: nothing is
  // answered now (the run is replayed, and each step answers for itself then)
  return journal.replays ?
    Effect.onExit(raced, (exit) => Exit.isSuccess(exit) ? answerLeft : Effect.void) :
    Effect.ensuring(raced, answerLeft)
}
