/**
 * The pure pieces of a tool batch, shared by the in-memory loop and any other engine that runs
 * batches (a durable one, for instance): how calls are grouped into stages by the `exclusive`
 * trait, and the results given to calls that were denied, interrupted, timed out, or whose
 * execution ended in some way.
 *
 * @since 0.1.0
 */
import { Cause, Duration, Exit } from "effect"
import type { ToolCall, ToolResultMessage } from "./Message.ts"
import type { ToolDefinition } from "./Model.ts"
import { describeCause } from "./internal/common.ts"
import { checkToolResult, errorResult, skippedResult } from "./Transcript.ts"

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
 * The result of a call that started and was interrupted before it finished
 * (`details: { interrupted: true }`).
 *
 * @since 0.1.0
 * @category batch
 */
export const interruptedResult = (call: ToolCall): ToolResultMessage =>
  errorResult(call, "Tool call was interrupted before it finished.", { interrupted: true })

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
 * The result of a call stopped at its time limit (`details: { timedOut: true, timeoutMs }`).
 *
 * @since 0.1.0
 * @category batch
 */
export const timedOutResult = (call: ToolCall, timeout: Duration.Duration): ToolResultMessage =>
  errorResult(call, `Tool "${call.name}" timed out after ${Duration.format(timeout)} and was stopped.`, {
    timedOut: true,
    timeoutMs: Duration.toMillis(timeout)
  })

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
