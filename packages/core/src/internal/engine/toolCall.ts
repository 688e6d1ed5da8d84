/**
 * One tool call as the loop runs it (`runToolCall`), how a batch's calls are grouped into stages
 * by the `exclusive` trait, and the results given to calls that were denied, interrupted, timed
 * out, or whose execution ended in some way. Not part of the public API: every engine runs calls
 * through the one loop (see RunJournal.ts).
 */
import { Cause, Duration, Effect, Exit, Fiber, Option } from "effect"
import type { ExecutorShape, ToolContext } from "../../Executor.ts"
import type { LoopEvent } from "../../LoopEvent.ts"
import type { ToolCall, ToolResultMessage } from "../../Message.ts"
import type { ToolDefinition } from "../../Model.ts"
import { checkToolResult, errorResult, skippedResult } from "../../Transcript.ts"
import { describeCause } from "../rules/common.ts"
import { RunningCalls } from "./shortcuts.ts"

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
