/**
 * Pure functions over the transcript: building results for calls that did not run, checking what
 * crosses a boundary (input messages, the model's final message, an executor's result) and
 * repairing dangling calls so a saved transcript can always be resumed.
 *
 * @since 0.1.0
 */
import { Exit, Schema } from "effect"
import { skipText } from "./Decision.ts"
import type { SkipReason } from "./Decision.ts"
import { describeCause } from "./internal/rules/common.ts"
import {
  isAssistantMessageFast,
  isMessageFast,
  isSoundTranscriptFast,
  isToolResultMessageFast
} from "./internal/rules/guards.ts"
import { AssistantMessage, Message, toolCallsOf, ToolResultMessage } from "./Message.ts"
import type { ToolCall } from "./Message.ts"

/**
 * Outcome of a boundary check: the checked value, or a message saying what is wrong.
 *
 * @since 0.1.0
 * @category models
 */
export type Checked<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: string }

const ok = <A>(value: A): Checked<A> => ({ ok: true, value })
const bad = (error: string): Checked<never> => ({ ok: false, error })

/**
 * An error result answering `call`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const errorResult = (call: ToolCall, text: string, details?: unknown): ToolResultMessage => ({
  role: "toolResult",
  toolCallId: call.id,
  toolName: call.name,
  content: [{ type: "text", text }],
  ...(details === undefined ? {} : { details }),
  isError: true
})

/**
 * The result for a call that was not executed: `isError: true`, `details: { skipped: true, reason }`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const skippedResult = (call: ToolCall, reason: SkipReason): ToolResultMessage =>
  errorResult(call, skipText(reason), { skipped: true, reason })

// The boundary checks first try the fast structural guards (internal/rules/guards.ts), which accept
// exactly what these schemas accept; anything they reject is decoded with the schema, which
// words the error.
const decodeMessage = Schema.decodeUnknownExit(Message)
const decodeAssistant = Schema.decodeUnknownExit(AssistantMessage)
const decodeToolResult = Schema.decodeUnknownExit(ToolResultMessage)

/** The schema's words for a failed decode (a failed decode always carries its `SchemaError`). */
const issueText = (exit: Exit.Failure<unknown, Schema.SchemaError>): string => {
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  return reason?._tag === "Fail" ? reason.error.message : describeCause(exit.cause)
}

const indent = (text: string) => text.replace(/\n/g, "\n  ")

/**
 * The first tool-call id that occurs twice in `calls`, if any.
 *
 * @since 0.1.0
 * @category getters
 */
export const duplicateCallId = (calls: ReadonlyArray<ToolCall>): string | undefined => {
  if (calls.length <= 8) {
    // the common case (a handful of calls): no allocation
    for (let i = 1; i < calls.length; i++) {
      for (let j = 0; j < i; j++) if (calls[j]!.id === calls[i]!.id) return calls[i]!.id
    }
    return undefined
  }
  const seen = new Set<string>()
  for (const call of calls) {
    if (seen.has(call.id)) return call.id
    seen.add(call.id)
  }
  return undefined
}

/**
 * Checks the model's final message (SPEC §5): it must decode as an `AssistantMessage` and its tool
 * call ids must be unique. The original object is returned, so provider fields survive.
 *
 * @since 0.1.0
 * @category validation
 */
export const checkAssistantMessage = (raw: unknown): Checked<AssistantMessage> => {
  if (!isAssistantMessageFast(raw)) {
    const exit = decodeAssistant(raw)
    if (Exit.isFailure(exit)) return bad(`the model's final message is malformed: ${indent(issueText(exit))}`)
  }
  const message = raw as AssistantMessage
  const duplicate = duplicateCallId(toolCallsOf(message))
  return duplicate === undefined ?
    ok(message) :
    bad(`the model's final message repeats tool call id "${duplicate}"; nothing was executed`)
}

/**
 * Checks an executor's answer to `call`: it must decode as a `ToolResultMessage` with the call's
 * id and name. Anything else is replaced by an error result for the call, saying what was wrong.
 *
 * @since 0.1.0
 * @category validation
 */
export const checkToolResult = (call: ToolCall, raw: unknown): ToolResultMessage => {
  if (!isToolResultMessageFast(raw)) {
    const exit = decodeToolResult(raw)
    if (Exit.isFailure(exit)) {
      return errorResult(call, `Tool "${call.name}" returned a malformed result: ${issueText(exit)}`, {
        invalidResult: true
      })
    }
  }
  const result = raw as ToolResultMessage
  if (result.toolCallId !== call.id || result.toolName !== call.name) {
    return errorResult(
      call,
      `Tool "${call.name}" returned a result for another call (id "${result.toolCallId}", tool "${result.toolName}")`,
      { invalidResult: true }
    )
  }
  return result
}

/**
 * Checks and repairs the input transcript (SPEC §5):
 *
 * - every message must decode with the `Message` schema;
 * - tool call ids are unique within an assistant message;
 * - tool results sit in the block of results directly after their assistant message, one per call
 *   and naming the call's tool; anything else is an orphan (bad input);
 * - calls with no result are paired with a skipped result (reason `interrupted`) right after the
 *   results already there, and each block is put into call order.
 *
 * Returns a fresh array; the input array and its messages are never mutated.
 *
 * @since 0.1.0
 * @category validation
 */
export const prepareTranscript = (input: ReadonlyArray<unknown>): Checked<Array<Message>> => {
  // (a plain array only: `slice` would keep the class of an Array subclass)
  if (Object.getPrototypeOf(input) === Array.prototype && isSoundTranscriptFast(input)) {
    return ok(input.slice() as Array<Message>)
  }
  for (let i = 0; i < input.length; i++) {
    if (isMessageFast(input[i])) continue
    const exit = decodeMessage(input[i])
    if (Exit.isFailure(exit)) return bad(`messages[${i}] is not a valid message: ${indent(issueText(exit))}`)
  }
  const messages = input as ReadonlyArray<Message>
  const out: Array<Message> = []
  let i = 0
  while (i < messages.length) {
    const message = messages[i]!
    if (message.role === "toolResult") {
      return bad(
        `messages[${i}] is a tool result for call "${message.toolCallId}" that does not follow the assistant ` +
          "message making that call (orphan tool result)"
      )
    }
    out.push(message)
    i++
    if (message.role !== "assistant") continue
    const calls = toolCallsOf(message)
    const n = calls.length
    if (n === 0 && (i >= messages.length || messages[i]!.role !== "toolResult")) continue
    const duplicate = duplicateCallId(calls)
    if (duplicate !== undefined) return bad(`messages[${i - 1}] repeats tool call id "${duplicate}"`)
    // the result found for each call, by call index; a large batch is looked up by id (a linear
    // search per result would be quadratic)
    const found: Array<ToolResultMessage | undefined> = new Array(n)
    const indexById = n > 8 ? new Map(calls.map((c, k) => [c.id, k])) : undefined
    while (i < messages.length && messages[i]!.role === "toolResult") {
      const result = messages[i] as ToolResultMessage
      let k = -1
      if (indexById !== undefined) k = indexById.get(result.toolCallId) ?? -1
      else {
        for (let j = 0; j < n; j++) {
          if (calls[j]!.id === result.toolCallId) {
            k = j
            break
          }
        }
      }
      if (k < 0) {
        return bad(
          `messages[${i}] is a tool result for call "${result.toolCallId}", which the assistant message before it ` +
            "did not make (orphan tool result)"
        )
      }
      const call = calls[k]!
      if (found[k] !== undefined) return bad(`messages[${i}] is a second tool result for call "${call.id}"`)
      if (result.toolName !== call.name) {
        return bad(
          `messages[${i}] answers call "${call.id}" as tool "${result.toolName}", but that call is to "${call.name}"`
        )
      }
      found[k] = result
      i++
    }
    for (let k = 0; k < n; k++) out.push(found[k] ?? skippedResult(calls[k]!, "interrupted"))
  }
  return ok(out)
}

/**
 * Every way `messages` breaks invariant 2 (each call answered exactly once, right after its
 * assistant message, in call order), as readable strings. Empty when the transcript is sound.
 * Used on transcripts the loop is about to send and by the testkit's `checkInvariants`.
 *
 * @since 0.1.0
 * @category validation
 */
export const pairingViolations = (messages: ReadonlyArray<Message>): Array<string> => {
  const violations: Array<string> = []
  let i = 0
  while (i < messages.length) {
    const message = messages[i]!
    i++
    if (message.role === "toolResult") {
      violations.push(`messages[${i - 1}]: tool result for "${message.toolCallId}" does not answer the calls before it`)
      continue
    }
    if (message.role !== "assistant") continue
    const calls = toolCallsOf(message)
    let k = 0
    while (i < messages.length && messages[i]!.role === "toolResult") {
      const result = messages[i] as ToolResultMessage
      const expected = calls[k]
      if (expected === undefined) {
        violations.push(`messages[${i}]: extra tool result for "${result.toolCallId}"`)
      } else if (expected.id !== result.toolCallId) {
        violations.push(
          `messages[${i}]: expected the result for call "${expected.id}" (call order), found "${result.toolCallId}"`
        )
      }
      k++
      i++
    }
    for (; k < calls.length; k++) {
      violations.push(`messages[${i - 1}]: tool call "${calls[k]!.id}" has no result`)
    }
  }
  return violations
}
