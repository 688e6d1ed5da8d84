/**
 * A denied call, as one structured value: who denied it (the user at this terminal, the user at
 * another one with `agentloop approve`, the `--approval-timeout`, a deny rule, the read-only mode,
 * or nobody to ask) and the user's own reason, kept apart from the text the model is sent. The
 * model's text, the session's `approval` record and the terminal's line are all built here, from
 * the value.
 *
 * @since 0.1.0
 */
import type { ToolResultMessage } from "@agentloop/core"
import { Duration } from "effect"
import type { ApprovalRecord } from "./Gate.ts"

/**
 * Who denied a call, and why.
 *
 * @since 0.1.0
 * @category models
 */
export type Denial =
  /** The user, at this terminal (`n`, with an optional reason of theirs). */
  | { readonly by: "user"; readonly reason?: string | undefined }
  /** The user, at another terminal (`agentloop approve RUN CALL n [reason]`). */
  | { readonly by: "remote"; readonly reason?: string | undefined }
  /** Nobody answered within `--approval-timeout`. */
  | { readonly by: "timeout"; readonly timeout: Duration.Duration }
  /** A deny rule, as written with where it is from (`bash(rm *) (.agentloop/config.json)`). */
  | { readonly by: "rule"; readonly rule: string; readonly source: string }
  /** The read-only mode (plan). */
  | { readonly by: "mode"; readonly mode: "read-only" }
  /** The call needs an answer and there is no terminal to ask in. */
  | { readonly by: "no-terminal" }

/**
 * The reason given to the model when a call needs approval and nobody can be asked.
 *
 * @since 0.1.0
 * @category constants
 */
export const NO_TERMINAL_REASON =
  "needs approval, but agentloop is not running in a terminal to ask in (--yes allows it)"

/**
 * The reason the model sees for a call the read-only mode refused.
 *
 * @since 0.1.0
 * @category constants
 */
export const READ_ONLY_REASON = "the session is in read-only mode (plan): only read-only tools run (read, grep, " +
  "find, ls); describe the change you would make instead, and the user can switch modes to let it run"

/** What the model is told of a call a user denied, before the user's reason. */
const USER_DENIED = "the user denied this call"

/**
 * The reason the model sees for a call whose approval was not given in time. (`@agentloop/durable`
 * words a durable run's timeout the same way.)
 *
 * @since 0.1.0
 * @category approvals
 */
export const approvalTimeoutReason = (timeout: Duration.Duration): string =>
  `no answer to the approval request within ${Duration.format(timeout)}`

/**
 * The text the model is sent for a denied call (core puts it in the call's result, after "Tool
 * call was not executed because it was denied: ").
 *
 * @since 0.1.0
 * @category approvals
 */
export const denialText = (denial: Denial): string => {
  switch (denial.by) {
    case "user":
    case "remote":
      return denial.reason === undefined ? USER_DENIED : `${USER_DENIED}: ${denial.reason}`
    case "timeout":
      return approvalTimeoutReason(denial.timeout)
    case "rule":
      return `denied by the permission rule ${denial.rule}`
    case "mode":
      return READ_ONLY_REASON
    case "no-terminal":
      return NO_TERMINAL_REASON
  }
}

/**
 * The session's record of a denial (the writer adds `type` and `at`): the user's own reason for a
 * user's denial, the model's text for the others.
 *
 * @since 0.1.0
 * @category approvals
 */
export const denialRecord = (
  call: { readonly toolCallId: string; readonly name: string; readonly askedAt?: number | undefined },
  denial: Denial
): ApprovalRecord => {
  const base = {
    toolCallId: call.toolCallId,
    name: call.name,
    ...(call.askedAt === undefined ? {} : { askedAt: call.askedAt }),
    decision: "denied" as const,
    by: denial.by
  }
  switch (denial.by) {
    case "user":
    case "remote":
      return denial.reason === undefined ? base : { ...base, reason: denial.reason }
    case "rule":
      return { ...base, rule: `${denial.rule} (${denial.source})`, reason: denialText(denial) }
    case "mode":
      return { ...base, mode: denial.mode, reason: denialText(denial) }
    case "timeout":
    case "no-terminal":
      return { ...base, reason: denialText(denial) }
  }
}

/**
 * The denial text a result carries, when the call was denied (core's `deniedResult` keeps it in
 * `details.denial`); undefined for any other result.
 *
 * @since 0.1.0
 * @category approvals
 */
export const deniedTextOf = (result: ToolResultMessage): string | undefined => {
  const details = result.details
  if (typeof details !== "object" || details === null) return undefined
  const d = details as { readonly skipped?: unknown; readonly denial?: unknown }
  return d.skipped === true && typeof d.denial === "string" ? d.denial : undefined
}

/**
 * Whether a result is of a call that was denied (core's `deniedResult`: a skipped result whose
 * `details.reason` is `denied`, with the denial's text in `details.denial` when one was given).
 *
 * @since 0.1.0
 * @category approvals
 */
export const wasDenied = (result: ToolResultMessage): boolean => {
  const details = result.details
  if (typeof details !== "object" || details === null) return false
  const d = details as { readonly skipped?: unknown; readonly reason?: unknown }
  return d.skipped === true && d.reason === "denied"
}

/**
 * Who denied a call of a durable run that was answered outside this process, from the text its
 * result carries: the run's own `--approval-timeout` (`timeout`: the one the run was given), or an
 * `agentloop approve … n [reason]` (another terminal: its reason is what followed the text
 * `denialText` gives a user's denial; a text worded otherwise, from a program answering through
 * `@agentloop/durable` itself, is all reason). Only text crosses from the other process (core's
 * `ApprovalAnswer.reason`), so this is the one place that reads it back, and only words
 * `denialText` wrote. (No text: the answer gave no reason.)
 *
 * @since 0.1.0
 * @category approvals
 */
export const denialFromElsewhere = (text: string | undefined, timeout: Duration.Duration | undefined): Denial => {
  if (text === undefined) return { by: "remote" }
  if (timeout !== undefined && text === denialText({ by: "timeout", timeout })) return { by: "timeout", timeout }
  if (text === denialText({ by: "remote" })) return { by: "remote" }
  const prefix = `${denialText({ by: "remote" })}: `
  return { by: "remote", reason: text.startsWith(prefix) ? text.slice(prefix.length) : text }
}
