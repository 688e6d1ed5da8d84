/**
 * One tool batch: every call of one assistant message answered exactly once, in call order,
 * whatever happens.
 *
 * - The policy is consulted before each call: denied calls get a skipped result (`denied`);
 *   `ask` emits an `approval_request` and waits for the caller's answer.
 * - Calls run concurrently (up to `ToolConcurrency`), except `exclusive` tools, which run alone:
 *   calls before them finish first, calls after them start after them.
 * - A call over its time limit is interrupted and answered with a timeout error.
 * - An abort (`signal`) or an interruption of the run stops what is running or waiting; the
 *   finalizer answers every call left (interrupted, or skipped when it never started) before
 *   anything else can look at the results.
 */
import { Deferred, Duration, Effect, Fiber, Option, Semaphore } from "effect"
import { batchStages, deniedResult, interruptedResult, runToolCall } from "../Batch.ts"
import type { ExecutorShape } from "../Executor.ts"
import type { ToolCall, ToolResultMessage } from "../Message.ts"
import type { ToolDefinition } from "../Model.ts"
import { decide } from "../Policy.ts"
import type { ApprovalAnswer, ToolPolicy } from "../Policy.ts"
import { skippedResult } from "../Transcript.ts"
import { abortRunningCalls, awaitAbort, changeAndEmit, RunningCalls } from "./common.ts"
import type { Emit } from "./common.ts"

/** What a batch needs from its run. */
export interface BatchSettings {
  readonly executor: ExecutorShape
  readonly emit: Emit
  readonly signal: AbortSignal | undefined
  readonly policy: ToolPolicy | undefined
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
  /** The name of the run's final-answer tool, if it has an output schema: its calls skip the policy. */
  readonly finalAnswer: string | undefined
}

/** The call's span, `agentloop.tool`, with its outcome. */
const traceCall = (call: ToolCall, ran: Effect.Effect<ToolResultMessage>) =>
  ran.pipe(
    Effect.tap((result) => Effect.annotateCurrentSpan("agentloop.tool.outcome", result.isError ? "error" : "ok")),
    Effect.withSpan("agentloop.tool", {
      attributes: { "agentloop.tool.name": call.name, "agentloop.tool.call_id": call.id }
    })
  )

/**
 * Runs the batch and hands the results, in call order, to `onDone` (synchronously, in the
 * finalizer, so nothing can come between the last result and the transcript).
 */
export const runBatch = (
  settings: BatchSettings,
  calls: ReadonlyArray<ToolCall>,
  onDone: (results: ReadonlyArray<ToolResultMessage>) => void
): Effect.Effect<void> => {
  const { executor, emit, signal, policy, remembered, definitions } = settings
  const results: Array<ToolResultMessage | undefined> = new Array(calls.length)
  const started: Array<boolean> = new Array(calls.length).fill(false)
  // records the result and announces it, together (called only where the effect runs next)
  const finish = (index: number, result: ToolResultMessage): Effect.Effect<void> =>
    changeAndEmit(emit, () => {
      results[index] = result
    }, { type: "tool_end", result })

  const approved: ApprovalAnswer = { approved: true }
  const approve = (call: ToolCall): Effect.Effect<ApprovalAnswer> =>
    Effect.suspend(() => {
      if (policy === undefined || call.name === settings.finalAnswer) return Effect.succeed({ approved: true })
      return Effect.flatMap(decide(policy, call, definitions.get(call.name)), (decision) => {
        if (decision._tag === "Allow") return Effect.succeed({ approved: true })
        if (decision._tag === "Deny") return Effect.succeed({ approved: false, reason: decision.reason })
        const known = remembered.get(call.name)
        if (known !== undefined) return Effect.succeed(known)
        const answer = Deferred.makeUnsafe<ApprovalAnswer>()
        const limit = settings.approvalTimeout
        const awaited = limit === undefined ? Deferred.await(answer) : Effect.flatMap(
          Effect.timeoutOption(Deferred.await(answer), limit),
          (given) =>
            Option.isSome(given) ? Effect.succeed(given.value) : Effect.andThen(
              // answer the request (a late answer from a UI is then ignored), unless one came just now
              Deferred.succeed(answer, { approved: false, reason: "approval timed out" }),
              Deferred.await(answer)
            )
        )
        return emit({ type: "approval_request", call, id: call.id, answer }).pipe(
          Effect.andThen(awaited),
          Effect.tap((given) => Effect.sync(() => given.always === true && remembered.set(call.name, given)))
        )
      })
    })

  /** Runs call `index` (call it where the effect runs next: inside an effect, or `forEach`'s callback). */
  const oneNow = (index: number): Effect.Effect<void> => {
    if (signal?.aborted) return Effect.void
    const call = calls[index]!
    const run = (answer: ApprovalAnswer): Effect.Effect<void> => {
      if (!answer.approved) return finish(index, deniedResult(call, answer.reason))
      if (signal?.aborted) return Effect.void
      started[index] = true
      const limit = definitions.get(call.name)?.timeoutMs ?? settings.defaultTimeout
      const timeout = limit === undefined ? undefined : Duration.fromInputUnsafe(limit)
      const announced = emit({ type: "tool_start", call })
      const execution = runToolCall(executor, call, emit, timeout)
      // (a sink that took the event at once has nothing left to run)
      const ran = announced === Effect.void ? execution : Effect.andThen(announced, execution)
      return Effect.flatMap(settings.traced ? traceCall(call, ran) : ran, (result) => finish(index, result))
    }
    // without a policy every call is approved: no need to ask
    return policy === undefined ? run(approved) : Effect.flatMap(approve(call), run)
  }
  const one = (index: number): Effect.Effect<void> => Effect.suspend(() => oneNow(index))

  /**
   * The calls of a stage, concurrently, in a fiber of their own whose calls register their
   * controllers in `running` and run in the fibers `forEach` gives them (see runToolCall): when
   * the stage is interrupted (an abort, the run's interruption), every running call's signal fires
   * first, then the fiber and its calls are interrupted. So a tool's signal fires before its own
   * interrupt finalizers with one fiber per call instead of two.
   */
  const concurrently = (stage: ReadonlyArray<number>): Effect.Effect<void> => {
    const running = new Map<AbortController, Fiber.Fiber<unknown, unknown>>()
    // A cap is a semaphore over calls that are all forked at once, not forEach's own bound: a bounded
    // forEach starts the next call from the observer of one that ended, and when that start ends
    // another call synchronously (its tool_start reached a sink whose callback interrupts the run,
    // whose stage fires the running calls' signals), forEach re-enters its loop and starts the same
    // call again (effect 4.1). Unbounded, forEach never starts a call from an observer.
    const cap = settings.concurrency
    const gate = cap === "unbounded" || cap >= stage.length ? undefined : Semaphore.makeUnsafe(cap)
    const stageCalls = Effect.provideService(
      Effect.forEach(
        stage,
        gate === undefined ? oneNow : (index) => gate.withPermits(1)(one(index)),
        { concurrency: "unbounded", discard: true }
      ),
      RunningCalls,
      running
    )
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

  // a batch of one call runs in the run's own fiber (forking one child to join it at once buys nothing)
  const batch = calls.length === 1 ?
    one(0) :
    Effect.forEach(
      batchStages(calls, definitions),
      (stage) => stage.length === 1 ? oneNow(stage[0]!) : concurrently(stage),
      { discard: true }
    )
  const raced = signal === undefined ? batch : Effect.raceFirst(batch, awaitAbort(signal))
  return Effect.ensuring(
    raced,
    Effect.suspend(() => {
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
          return finish(index, started[index] ? interruptedResult(call) : skippedResult(call, "aborted"))
        }, { discard: true }),
        Effect.sync(() => onDone(results as Array<ToolResultMessage>))
      )
    })
  )
}
