/**
 * One tool call's path, as named steps in the order a call takes them:
 *
 *     decideCall -> approveCall -> claimCall -> runCall -> answerCall
 *
 * - **decide** (`decideCall`, the step `policy/<n>/<i>`): the run's policy on the call. Without a
 *   policy, and for the run's final-answer tool, every call is allowed.
 * - **approve** (`approveCall`): what the decision means for the call: it may run, or it is answered
 *   at once (denied, aborted, the policy failed); an `ask` waits for its answer (a remembered
 *   `always` answer, or the journal's approval request).
 * - **claim** (`claimCall`, inside the step `call/<n>/<i>`): the journal's claim on the call's start
 *   (a durable journal's idempotency key; a call claimed before that must not run again is answered
 *   interrupted); the abort is checked here, last thing before the call starts.
 * - **run** (`runCall`): `tool_start`, then the executor runs the call (`runToolCall`: its signal,
 *   its time limit, every way it can end turned into its result).
 * - **answer** (`answerCall`): the result recorded in the batch and announced (`tool_end`),
 *   together. Every call is answered here, exactly once, whatever happened to it.
 *
 * `toolCall` is that path for one decided call: approve, then the call's step (claim, run,
 * answer), traced as the call's span (`execute_tool`, see spans.ts). The batch (batch.ts) decides
 * on each call of a stage, then runs `toolCall` for each.
 *
 * Each step is a plain function that builds its effect when called, and a step that has its answer
 * at once returns it as a finished effect, which the next step takes without a turn of the fiber
 * (`flatMapEager`): call them only where the effect runs next (a synchronous sink gets a step's
 * events as it is built, as everywhere on this path). They make no spans of their own (the spans
 * users see are spans.ts's, docs/guide/tracing.md). Generators measured slower on this path, which
 * every call takes: with each step an `Effect.fnUntraced` a run of one-call steps took about a
 * quarter longer, with `Effect.fnUntracedEager` only for the steps that usually answer at once
 * about 4% (the bench's workload (b); a generator that waits costs a continuation per call).
 *
 * Also here: the results given to calls that were denied, interrupted, timed out, or whose
 * execution ended in some way. Not part of the public API: every engine runs calls through the one
 * loop (see RunJournal.ts).
 */
import { Cause, Duration, Effect, Exit, Fiber, Option } from "effect"
import type { ExecutorShape, ToolContext } from "../../Executor.ts"
import type { LoopEvent } from "../../LoopEvent.ts"
import type { ToolCall, ToolResultMessage } from "../../Message.ts"
import { decide } from "../../Policy.ts"
import type { ApprovalAnswer } from "../../Policy.ts"
import { checkToolResult, errorResult, skippedResult } from "../../Transcript.ts"
import { describeCause } from "../rules/common.ts"
import type { BatchSettings } from "./batch.ts"
import { CallRecord, PolicyRecord } from "./records.ts"
import { changeAndEmit, RunningCalls } from "./shortcuts.ts"
import { traceApproval, traceCall } from "./spans.ts"

/**
 * What the calls of one batch share: the run's settings, the batch's step and calls, and what the
 * batch's staging reads once the calls are stopped (which calls were answered, which started).
 */
export interface Batch {
  readonly settings: BatchSettings
  /** The step (`n`) of the turn whose calls these are. */
  readonly step: number
  readonly calls: ReadonlyArray<ToolCall>
  /** Each call's result, once answered (`answerCall`). */
  readonly results: Array<ToolResultMessage | undefined>
  /** Whether each call started (`runCall`): a call stopped after it started is answered interrupted. */
  readonly started: Array<boolean>
}

/**
 * What comes of a call before it may start (`approveCall`, `claimCall`): it runs (with the
 * idempotency key of its claim, if the journal claims calls), or it is answered at once.
 */
export type Verdict =
  | { readonly run: true; readonly idempotencyKey: string | undefined }
  | { readonly run: false; readonly result: ToolResultMessage }

const runs: Verdict = { run: true, idempotencyKey: undefined }

/** The decision on a call that needs none: no policy, or the run's final-answer tool. */
export const allowed: PolicyRecord = { _tag: "Allow" }
const decidedAllowed = Effect.succeed(allowed)
const abortedFirst: PolicyRecord = { _tag: "Aborted" }
const noReplay = () => Effect.void

/** The policy's decision for a call, or how it failed (as data: a failure is the run's, not the batch's). */
const decidePolicy = (settings: BatchSettings, call: ToolCall): Effect.Effect<PolicyRecord> =>
  Effect.map(
    Effect.exit(decide(settings.policy!, call, settings.definitions.get(call.name))),
    (exit): PolicyRecord =>
      Exit.isSuccess(exit) ?
        exit.value :
        {
          _tag: "Failed",
          error: `the run's policy failed on call "${call.id}" (${call.name}): ${describeCause(exit.cause)}`
        }
  )

/**
 * **decide**: the policy's decision on call `index` (the step `policy/<n>/<i>`; the run aborted
 * first is its answer then). Without a policy, and for the final-answer tool, the call is allowed
 * and no step is taken.
 */
export const decideCall = (batch: Batch, index: number): Effect.Effect<PolicyRecord> => {
  const { calls, settings } = batch
  const call = calls[index]!
  if (settings.policy === undefined || call.name === settings.finalAnswer) return decidedAllowed
  return settings.journal.step(
    "policy",
    batch.step,
    index,
    PolicyRecord,
    () => settings.signal?.aborted ? Effect.succeed(abortedFirst) : decidePolicy(settings, call),
    noReplay
  )
}

/** The result of a call its policy could not decide: it does not run. */
const policyFailedResult = (call: ToolCall, error: string): ToolResultMessage =>
  errorResult(call, `Tool call was not executed because ${error}`, { skipped: true, reason: "policy-failed" })

const verdictOfAnswer = (call: ToolCall, answer: ApprovalAnswer): Verdict =>
  answer.approved ? runs : { run: false, result: deniedResult(call, answer.reason) }

/**
 * **approve**: the verdict on call `index` once its policy decided: at once, or after the approval
 * an `ask` waits for (an `always` answer is remembered for the tool, for the rest of the run). A
 * policy that failed leaves its error in `settings.policyError` (the run ends with it).
 */
export const approveCall = (batch: Batch, index: number, decision: PolicyRecord): Effect.Effect<Verdict> => {
  const { calls, settings } = batch
  const call = calls[index]!
  switch (decision._tag) {
    case "Allow":
      return runsNow
    case "Aborted":
      return Effect.succeed({ run: false, result: skippedResult(call, "aborted") })
    case "Deny":
      return Effect.succeed({ run: false, result: deniedResult(call, decision.reason) })
    case "Failed":
      settings.policyError ??= decision.error
      return Effect.succeed({ run: false, result: policyFailedResult(call, decision.error) })
    case "Ask": {
      const known = settings.remembered.get(call.name)
      if (known !== undefined) return Effect.succeed(verdictOfAnswer(call, known))
      const asked = settings.journal.approval(batch.step, index, call, settings.emit, settings.approvalTimeout)
      return Effect.map(settings.traced ? traceApproval(call, asked) : asked, (outcome) => {
        if (outcome._tag === "Aborted") return { run: false, result: skippedResult(call, "aborted") }
        if (outcome.answer.always === true) settings.remembered.set(call.name, outcome.answer)
        return verdictOfAnswer(call, outcome.answer)
      })
    }
  }
}
const runsNow = Effect.succeed(runs)

/**
 * **claim**: whether call `index` starts now, inside its step, right before it would. A journal
 * that claims calls (a durable one) gives the key the call runs with, and says whether the call was
 * claimed before: it was running when its process died, or when the run was aborted (answered
 * then by the batch, not by its step), and it is answered as it was then (interrupted, or skipped
 * if it never started); a call claimed before that must run at most once is answered interrupted.
 * An abort that came first answers the call skipped.
 */
export const claimCall = (batch: Batch, index: number): Effect.Effect<Verdict> => {
  const { calls, settings } = batch
  const call = calls[index]!
  const claim = settings.journal.claim
  if (claim === undefined) {
    return settings.signal?.aborted ? Effect.succeed({ run: false, result: skippedResult(call, "aborted") }) : runsNow
  }
  return Effect.map(claim(batch.step, index, call, settings.definitions.get(call.name)), (claimed): Verdict => {
    if (settings.signal?.aborted) {
      return { run: false, result: claimed.again ? interruptedResult(call) : skippedResult(call, "aborted") }
    }
    if (claimed.again && claimed.atMostOnce) return { run: false, result: interruptedResult(call) }
    return { run: true, idempotencyKey: claimed.idempotencyKey }
  })
}

/**
 * **run**: call `index` starts (`tool_start`) and the executor runs it, within the tool's time limit
 * (its own `timeoutMs`, or `ToolTimeout`): see `runToolCall`.
 */
export const runCall = (
  batch: Batch,
  index: number,
  idempotencyKey: string | undefined
): Effect.Effect<ToolResultMessage> => {
  const { calls, settings } = batch
  const call = calls[index]!
  batch.started[index] = true
  const limit = settings.definitions.get(call.name)?.timeoutMs ?? settings.defaultTimeout
  const timeout = limit === undefined ? undefined : Duration.fromInputUnsafe(limit)
  const announced = settings.emit({ type: "tool_start", call })
  const execution = runToolCall(
    settings.executor,
    call,
    settings.emit,
    timeout,
    idempotencyKey === undefined ? undefined : { idempotencyKey }
  )
  // (a sink that took the event at once has nothing left to run: see `Emit` in shortcuts.ts)
  return announced === Effect.void ? execution : Effect.andThen(announced, execution)
}

/**
 * **answer**: call `index`'s result recorded in the batch and announced (`tool_end`), together
 * (`changeAndEmit`: nothing comes between the two).
 */
export const answerCall = (
  batch: Batch,
  index: number,
  result: ToolResultMessage
): Effect.Effect<ToolResultMessage> => {
  const announced = changeAndEmit(batch.settings.emit, () => {
    batch.results[index] = result
  }, { type: "tool_end", result })
  // (a sink that took the event at once has nothing left to run: see `Emit` in shortcuts.ts)
  return announced === Effect.void ? Effect.succeed(result) : Effect.as(announced, result)
}

/**
 * The step `call/<n>/<i>`: **claim**, **run**, **answer** (a call the verdict answered is only
 * answered).
 */
const callStep = (batch: Batch, index: number, verdict: Verdict): Effect.Effect<ToolResultMessage> =>
  verdict.run ?
    Effect.flatMapEager(claimCall(batch, index), (claimed) =>
      claimed.run ?
        Effect.flatMap(runCall(batch, index, claimed.idempotencyKey), (result) => answerCall(batch, index, result)) :
        answerCall(batch, index, claimed.result)) :
    answerCall(batch, index, verdict.result)

/** A replayed call step: its result recorded, and the final-answer state brought up to it. */
const replayCall = (batch: Batch, index: number) => (result: ToolResultMessage): Effect.Effect<void> => {
  const { settings } = batch
  const call = batch.calls[index]!
  batch.results[index] = result
  return settings.replayAnswer !== undefined && call.name === settings.finalAnswer ?
    settings.replayAnswer(call) :
    Effect.void
}

/**
 * One decided call's path: **approve**, then the call's step `call/<n>/<i>` (**claim**, **run**,
 * **answer**); traced, the call's span (`execute_tool`) from its approval to its result.
 */
export const toolCall = (batch: Batch, index: number, decision: PolicyRecord): Effect.Effect<unknown> => {
  const { journal, traced } = batch.settings
  const answered = Effect.flatMapEager(approveCall(batch, index, decision), (verdict) =>
    journal.step(
      "call",
      batch.step,
      index,
      CallRecord,
      () => callStep(batch, index, verdict),
      // (only a journal that replays calls it: in memory no closure is made)
      journal.replays ? replayCall(batch, index) : noReplay
    ))
  return traced ? traceCall(batch.calls[index]!, batch.settings.agent, answered, () => batch.results[index]) : answered
}

/**
 * What running calls asked to keep should they be interrupted (`ToolContext.keepOnInterrupt`), by
 * call. Only calls whose tool asked have an entry.
 */
const kept = new WeakMap<ToolCall, Readonly<Record<string, unknown>>>()

const keep = (call: ToolCall, details: Readonly<Record<string, unknown>>): void => {
  kept.set(call, { ...kept.get(call), ...details })
}

/** `details` with what the call asked to keep, if anything. */
const withKept = (call: ToolCall, details: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> => {
  const extra = kept.get(call)
  return extra === undefined ? details : { ...extra, ...details }
}

/**
 * The result of a call that started and was interrupted before it finished
 * (`details: { interrupted: true }`, plus what the tool asked to keep with `keepOnInterrupt`).
 *
 * @since 0.1.0
 * @category batch
 */
export const interruptedResult = (call: ToolCall): ToolResultMessage =>
  errorResult(call, "Tool call was interrupted before it finished.", withKept(call, { interrupted: true }))

/**
 * The result of a call the policy (or a person) denied: skipped with reason `denied`, and the
 * denial's reason in the text when one was given.
 *
 * @since 0.1.0
 * @category batch
 */
export const deniedResult = (call: ToolCall, reason: string | undefined): ToolResultMessage =>
  reason === undefined ?
    skippedResult(call, "denied") :
    errorResult(call, `Tool call was not executed because it was denied: ${reason}`, {
      skipped: true,
      reason: "denied",
      denial: reason
    })

/**
 * The result of a call stopped at its time limit (`details: { timedOut: true, timeoutMs }`, plus
 * what the tool asked to keep with `keepOnInterrupt`).
 *
 * @since 0.1.0
 * @category batch
 */
export const timedOutResult = (call: ToolCall, timeout: Duration.Duration): ToolResultMessage =>
  errorResult(
    call,
    `Tool "${call.name}" timed out after ${Duration.format(timeout)} and was stopped.`,
    withKept(call, { timedOut: true, timeoutMs: Duration.toMillis(timeout) })
  )

/**
 * Turns everything an execution can do (succeed, fail, die, throw, be interrupted) into the
 * result for `call`: a success is checked (a result that does not answer `call` is replaced by
 * an error result), a failure or defect becomes an error result carrying its message (never a
 * stack), an interruption the interrupted result.
 *
 * @since 0.1.0
 * @category batch
 */
export const resultOfExit = (call: ToolCall, exit: Exit.Exit<unknown, unknown>): ToolResultMessage => {
  if (Exit.isSuccess(exit)) return checkToolResult(call, exit.value)
  const cause = exit.cause
  if (Cause.hasFails(cause)) {
    return errorResult(call, `Tool "${call.name}" failed: ${describeCause(cause)}`, { failed: true })
  }
  if (Cause.hasDies(cause)) {
    return errorResult(call, `Tool "${call.name}" crashed: ${describeCause(cause)}`, { defect: true })
  }
  return interruptedResult(call)
}

/**
 * Runs one call through an executor and answers it, whatever happens: the call gets its own
 * `AbortSignal` (fired before the tool's own interrupt finalizers), its progress becomes
 * `tool_progress` events (ignored once it ended), a `timeout` stops it with the timed-out result,
 * and a failure, defect or interruption becomes an error result (see `resultOfExit`); what the
 * tool gives `keepOnInterrupt` joins the details of an interrupted or timed-out result. `extra`
 * adds fields to the tool's context (a durable engine's `idempotencyKey`).
 *
 * @since 0.1.0
 * @category batch
 */
export const runToolCall = (
  executor: ExecutorShape,
  call: ToolCall,
  emit: (event: LoopEvent) => Effect.Effect<void>,
  timeout: Duration.Duration | undefined,
  extra?: { readonly idempotencyKey?: string }
): Effect.Effect<ToolResultMessage> =>
  Effect.suspend(() => {
    const controller = new AbortController()
    let ended = false
    const context: ToolContext = {
      signal: controller.signal,
      toolCallId: call.id,
      toolName: call.name,
      ...(extra?.idempotencyKey === undefined ? {} : { idempotencyKey: extra.idempotencyKey }),
      reportProgress: (progress) =>
        Effect.suspend(() => ended ? Effect.void : emit({ type: "tool_progress", toolCallId: call.id, progress })),
      keepOnInterrupt: (details) => keep(call, details)
    }
    // the executor's effect for the call, made as the call starts (a throw is the call's defect)
    const startNow = (): Effect.Effect<unknown, unknown> => {
      let effect: unknown
      try {
        effect = executor.execute(call, context)
      } catch (defect) {
        return Effect.die(defect)
      }
      return Effect.isEffect(effect) ?
        effect as Effect.Effect<unknown, unknown> :
        Effect.die(new TypeError(`Executor.execute returned ${typeof effect}, not an Effect`))
    }
    const started = Effect.suspend(startNow)
    // When the call is interrupted (abort, timeout, the run's interruption), its `AbortSignal`
    // fires *before* the tool's own interrupt finalizers run: a tool's cleanup can rely on the
    // signal having fired (a child process told to stop, a request cancelled), as it would with an
    // AbortSignal-driven API. In a concurrent stage of the in-memory loop's batch, which fires the
    // signals of its running calls before it interrupts them (`RunningCalls`), a call without a
    // time limit runs in the fiber the stage gave it; otherwise it runs in a fiber of its own,
    // started at once with the caller's context while the caller is uninterruptible (so no
    // interruption can land between the start and the handler that fires the signal, then
    // interrupts the call's fiber). A call that ended at once (a synchronous tool, the usual case)
    // is answered without joining or interrupting anything.
    const inOwnFiber = (caller: Fiber.Fiber<unknown, unknown>) =>
      Effect.uninterruptibleMask((restore) => {
        const own = Effect.runForkWith(caller.context)(started)
        return own.pollUnsafe() ?? Effect.onInterrupt(
          restore(Fiber.join(own)),
          () => Effect.andThen(Effect.sync(() => controller.abort()), Fiber.interrupt(own))
        )
      })
    const finish = (exit: Exit.Exit<unknown, unknown>) => {
      ended = true
      return resultOfExit(call, exit)
    }
    if (timeout === undefined) {
      return Effect.withFiber((fiber) => {
        const running = fiber.getRef(RunningCalls)
        if (running === undefined) return Effect.map(Effect.exit(inOwnFiber(fiber)), finish)
        running.set(controller, fiber)
        return Effect.map(Effect.exit(startNow()), (exit) =>
          // no longer registered: the stage stopped the call (fired its signal, and is interrupting
          // it), so it ended by the interruption, as a call in a fiber of its own would have
          finish(running.delete(controller) ? exit : Exit.interrupt(fiber.id)))
      })
    }
    return Effect.map(Effect.exit(Effect.timeoutOption(Effect.withFiber(inOwnFiber), timeout)), (exit) => {
      if (Exit.isSuccess(exit) && Option.isNone(exit.value)) {
        ended = true
        return timedOutResult(call, timeout)
      }
      return finish(Exit.map(exit, (o) => Option.getOrUndefined(o as Option.Option<unknown>)))
    })
  })
