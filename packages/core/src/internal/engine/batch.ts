/**
 * One tool batch: every call of one assistant message answered exactly once, in call order,
 * whatever happens.
 *
 * - The policy is consulted before each call (the step `policy/<n>/<i>`): denied calls get a
 *   skipped result (`denied`); `ask` asks the journal for an approval and waits for the answer; a
 *   policy that fails answers its call with an error result (it does not run) and ends the run
 *   `error` once the batch is answered.
 * - Each call is the step `call/<n>/<i>`, whose value is the call's result.
 * - Calls run concurrently (up to `ToolConcurrency`), except `exclusive` tools, which run alone:
 *   calls before them finish first, calls after them start after them.
 * - A call over its time limit is interrupted and answered with a timeout error.
 * - Traced, each call is a span (`execute_tool`) from its policy's decision to its result, and the
 *   wait for an approval a span inside it (see spans.ts).
 * - An abort (`signal`) stops what is running or waiting, on every engine the same way: the batch
 *   is stopped from outside and its finalizer answers every call left (interrupted, or skipped
 *   when it never started) before anything else can look at the results. A journal that replays
 *   answers those calls' steps on a replay from their claims (a call claimed is answered
 *   interrupted, one never claimed skipped): the same results.
 */
import { Duration, Effect, Exit, Fiber, Semaphore } from "effect"
import type { ExecutorShape } from "../../Executor.ts"
import type { ToolCall, ToolResultMessage } from "../../Message.ts"
import type { ToolDefinition } from "../../Model.ts"
import { decide } from "../../Policy.ts"
import type { ApprovalAnswer, ToolPolicy } from "../../Policy.ts"
import type { RunJournalShape } from "../../RunJournal.ts"
import type { AgentTraceInfo } from "../../Tracing.ts"
import { errorResult, skippedResult } from "../../Transcript.ts"
import { describeCause } from "../rules/common.ts"
import { awaitAbort } from "./common.ts"
import { CallRecord, PolicyRecord } from "./records.ts"
import { abortRunningCalls, changeAndEmit, RunningCalls } from "./shortcuts.ts"
import type { Emit } from "./shortcuts.ts"
import { traceApproval, traceCall } from "./spans.ts"
import { batchStages, deniedResult, interruptedResult, runToolCall } from "./toolCall.ts"

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

/** The policy's decision for a call, or how it failed (as data: a failure is the run's, not the batch's). */
const decidePolicy = (policy: ToolPolicy, call: ToolCall, definition: ToolDefinition | undefined) =>
  Effect.map(Effect.exit(decide(policy, call, definition)), (exit): PolicyRecord =>
    Exit.isSuccess(exit) ?
      exit.value :
      {
        _tag: "Failed",
        error: `the run's policy failed on call "${call.id}" (${call.name}): ${describeCause(exit.cause)}`
      })

/** The result of a call its policy could not decide: it does not run. */
const policyFailedResult = (call: ToolCall, error: string): ToolResultMessage =>
  errorResult(call, `Tool call was not executed because ${error}`, { skipped: true, reason: "policy-failed" })

const allowed: PolicyRecord = { _tag: "Allow" }
const abortedFirst: PolicyRecord = { _tag: "Aborted" }

/** What comes of a call before it may start: it runs, or it is answered at once. */
type Verdict = { readonly run: true } | { readonly run: false; readonly result: ToolResultMessage }
const runs: Verdict = { run: true }
const noReplay = () => Effect.void

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
  const { executor, emit, signal, policy, remembered, definitions, journal } = settings
  const replays = journal.replays
  const results: Array<ToolResultMessage | undefined> = new Array(calls.length)
  const started: Array<boolean> = new Array(calls.length).fill(false)
  // records the result and announces it, together (called only where the effect runs next)
  const finish = (index: number, result: ToolResultMessage): Effect.Effect<ToolResultMessage> => {
    const announced = changeAndEmit(emit, () => {
      results[index] = result
    }, { type: "tool_end", result })
    return announced === Effect.void ? Effect.succeed(result) : Effect.as(announced, result)
  }

  /** The policy's decision on call `index` (the step `policy/<n>/<i>`). */
  const decisionOf = (index: number, call: ToolCall): Effect.Effect<PolicyRecord> =>
    journal.step(
      "policy",
      step,
      index,
      PolicyRecord,
      () => signal?.aborted ? Effect.succeed(abortedFirst) : decidePolicy(policy!, call, definitions.get(call.name)),
      noReplay
    )

  /** The verdict on call `index` once its policy decided: at once, or after the approval it asks for. */
  const verdictOf = (index: number, call: ToolCall, decision: PolicyRecord): Effect.Effect<Verdict> => {
    switch (decision._tag) {
      case "Allow":
        return Effect.succeed(runs)
      case "Aborted":
        return Effect.succeed({ run: false, result: skippedResult(call, "aborted") })
      case "Deny":
        return Effect.succeed({ run: false, result: deniedResult(call, decision.reason) })
      case "Failed":
        settings.policyError ??= decision.error
        return Effect.succeed({ run: false, result: policyFailedResult(call, decision.error) })
      case "Ask": {
        const known = remembered.get(call.name)
        if (known !== undefined) return Effect.succeed(verdictOfAnswer(call, known))
        const asked = journal.approval(step, index, call, emit, settings.approvalTimeout)
        return Effect.map(settings.traced ? traceApproval(call, asked) : asked, (outcome) => {
          if (outcome._tag === "Aborted") return { run: false, result: skippedResult(call, "aborted") }
          if (outcome.answer.always === true) remembered.set(call.name, outcome.answer)
          return verdictOfAnswer(call, outcome.answer)
        })
      }
    }
  }

  /** Call `index` as it runs: started, executed. */
  const execute = (
    index: number,
    call: ToolCall,
    idempotencyKey: string | undefined
  ): Effect.Effect<ToolResultMessage> => {
    started[index] = true
    const limit = definitions.get(call.name)?.timeoutMs ?? settings.defaultTimeout
    const timeout = limit === undefined ? undefined : Duration.fromInputUnsafe(limit)
    const announced = emit({ type: "tool_start", call })
    const execution = runToolCall(
      executor,
      call,
      emit,
      timeout,
      idempotencyKey === undefined ? undefined : { idempotencyKey }
    )
    // (a sink that took the event at once has nothing left to run)
    return announced === Effect.void ? execution : Effect.andThen(announced, execution)
  }

  /** Call `index`, from its verdict to its result, as its span when traced. */
  const traced = (index: number, answered: Effect.Effect<unknown>): Effect.Effect<unknown> =>
    settings.traced ? traceCall(calls[index]!, settings.agent, answered, () => results[index]) : answered

  /** The step of call `index`, once its verdict is known (call it where the effect runs next). */
  const callStep = (index: number, call: ToolCall, verdict: Verdict): Effect.Effect<unknown> =>
    journal.step(
      "call",
      step,
      index,
      CallRecord,
      (): Effect.Effect<ToolResultMessage> => {
        if (!verdict.run) return finish(index, verdict.result)
        const claim = journal.claim
        if (claim === undefined) {
          if (signal?.aborted) return finish(index, skippedResult(call, "aborted"))
          return Effect.flatMap(execute(index, call, undefined), (result) => finish(index, result))
        }
        return Effect.flatMap(claim(step, index, call, definitions.get(call.name)), (claimed) => {
          // a call found started before was running when its process died, or when the run was
          // aborted (answered then by the batch, not by its step): it is answered as it was then
          if (signal?.aborted) {
            return finish(index, claimed.again ? interruptedResult(call) : skippedResult(call, "aborted"))
          }
          if (claimed.again && claimed.atMostOnce) return finish(index, interruptedResult(call))
          return Effect.flatMap(execute(index, call, claimed.idempotencyKey), (result) => finish(index, result))
        })
      },
      // (only a journal that replays calls it: in memory no closure is made)
      replays ?
        (result) => {
          results[index] = result
          return settings.replayAnswer !== undefined && call.name === settings.finalAnswer ?
            settings.replayAnswer(call) :
            Effect.void
        } :
        noReplay
    )

  /**
   * Runs call `index` without a policy (call it where the effect runs next: inside an effect, or `forEach`'s
   * callback).
   */
  const oneNow = (index: number): Effect.Effect<unknown> => traced(index, callStep(index, calls[index]!, runs))
  const one = (index: number): Effect.Effect<unknown> => Effect.suspend(() => oneNow(index))

  /**
   * `f` for each of `items`, at most `ToolConcurrency` at a time. The cap is a semaphore over items
   * all forked at once, not forEach's own bound: a bounded forEach starts the next item from the
   * observer of one that ended, and when that start ends another item synchronously (a call's
   * tool_start reached a sink whose callback interrupts the run, whose stage then fires the running
   * calls' signals), it re-enters its loop and starts the same item again (effect 4.1: a call ran
   * twice). Unbounded, forEach never starts an item from an observer.
   */
  const capped = <A, D extends boolean>(
    items: ReadonlyArray<number>,
    f: (item: number) => Effect.Effect<A>,
    discard: D
  ): Effect.Effect<D extends true ? void : Array<A>> => {
    const cap = settings.concurrency
    const gate = cap === "unbounded" || cap >= items.length ? undefined : Semaphore.makeUnsafe(cap)
    const each = gate === undefined ? f : (item: number) => gate.withPermits(1)(Effect.suspend(() => f(item)))
    return Effect.forEach(items, each, { concurrency: "unbounded", discard }) as Effect.Effect<
      D extends true ? void : Array<A>
    >
  }

  /**
   * The calls of a stage, concurrently (`run(item)` for each of `items`), in a fiber of their
   * own whose calls register their controllers in `running` and run in the fibers `forEach` gives
   * them (see runToolCall): when the stage is interrupted (an abort, the run's interruption),
   * every running call's signal fires first, then the fiber and its calls are interrupted. So a
   * tool's signal fires before its own interrupt finalizers with one fiber per call instead of
   * two.
   */
  const concurrently = (
    items: ReadonlyArray<number>,
    run: (item: number) => Effect.Effect<unknown>
  ): Effect.Effect<void> => {
    const running = new Map<AbortController, Fiber.Fiber<unknown, unknown>>()
    const stageCalls = Effect.provideService(capped(items, run, true), RunningCalls, running)
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

  /**
   * A stage with a policy: first the policy's decision on each of its calls, then the calls, those
   * that ask for an approval last (so the calls that need no answer are running before an approval
   * parks: a durable engine suspends the run once every branch waits and no step is in flight).
   */
  const decidedStage = (stage: ReadonlyArray<number>): Effect.Effect<unknown> =>
    Effect.flatMap(
      capped(stage, (index): Effect.Effect<PolicyRecord> => {
        const call = calls[index]!
        return call.name === settings.finalAnswer ? Effect.succeed(allowed) : decisionOf(index, call)
      }, false),
      (decisions) => {
        const order = stage.map((index, k) => ({ index, decision: decisions[k] }))
          .sort((a, b) => Number(a.decision._tag === "Ask") - Number(b.decision._tag === "Ask"))
        const go = (k: number): Effect.Effect<unknown> => {
          const { decision, index } = order[k]!
          const call = calls[index]!
          return traced(
            index,
            Effect.flatMap(verdictOf(index, call, decision), (verdict) => callStep(index, call, verdict))
          )
        }
        return order.length === 1 ? Effect.suspend(() => go(0)) : concurrently(order.map((_, k) => k), go)
      }
    )

  // a batch of one call runs in the run's own fiber (forking one child to join it at once buys nothing)
  const batch = policy !== undefined ?
    Effect.forEach(batchStages(calls, definitions), decidedStage, { discard: true }) :
    calls.length === 1 ?
    one(0) :
    Effect.forEach(
      batchStages(calls, definitions),
      (stage) => stage.length === 1 ? oneNow(stage[0]!) : concurrently(stage, oneNow),
      { discard: true }
    )
  // (a replayed batch of an aborted run: each step answers the abort itself, as it was answered then)
  const raced = signal === undefined || (replays && signal.aborted)
    ? batch
    : Effect.raceFirst(batch, awaitAbort(signal))
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
        return journal.within(
          step,
          index,
          finish(index, started[index] ? interruptedResult(call) : skippedResult(call, "aborted"))
        )
      }, { discard: true }),
      Effect.sync(() => onDone(results as Array<ToolResultMessage>))
    )
  })
  // with a journal that replays, an interruption is the engine suspending the run: nothing is
  // answered now (the run is replayed, and each step answers for itself then)
  return replays ?
    Effect.onExit(raced, (exit) => Exit.isSuccess(exit) ? answerLeft : Effect.void) :
    Effect.ensuring(raced, answerLeft)
}

const verdictOfAnswer = (call: ToolCall, answer: ApprovalAnswer): Verdict =>
  answer.approved ? runs : { run: false, result: deniedResult(call, answer.reason) }
