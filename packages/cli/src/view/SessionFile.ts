/**
 * Reading a session file (`.agentloop/sessions/<id>.jsonl`): one JSON object per line, either a
 * transcript `Message` (it has `role`) or an application record (it has `type`). A torn last line
 * (a process killed mid-write) is ignored; any other line that is not a message or a known record
 * is kept as a problem to show, never a failure, so a damaged file still renders. Messages decode
 * with core's `Message` schema and records with core's `SessionRecord`, the schemas the CLI writes
 * them with.
 *
 * @since 0.1.0
 */
import { decodeSessionRecord, Message } from "@agentloop/core"
import type { SessionRecord, TranscriptRecord } from "@agentloop/core"
import { Exit, Schema } from "effect"

/**
 * One line of a session file, as read: a message, a record, or a line that is neither (with why).
 * `line` is 1-based.
 *
 * @since 0.1.0
 * @category models
 */
export type SessionLine =
  | { readonly _tag: "Message"; readonly line: number; readonly message: Message }
  | { readonly _tag: "Record"; readonly line: number; readonly record: SessionRecord }
  | { readonly _tag: "Problem"; readonly line: number; readonly problem: string }

const decodeMessage = Schema.decodeUnknownExit(Message)

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const parseJson = (text: string): { readonly ok: true; readonly value: unknown } | { readonly ok: false } => {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch {
    return { ok: false }
  }
}

/** The first lines of the schema's words, short enough for the page. */
const shortText = (text: string): string => text.split("\n").slice(0, 3).join(" ").slice(0, 300)

const issueText = (exit: Exit.Exit<unknown, Schema.SchemaError>): string => {
  if (Exit.isSuccess(exit)) return ""
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  return shortText(reason !== undefined && reason._tag === "Fail" ? reason.error.message : "invalid value")
}

/**
 * Parses the text of a session file line by line. Records of a type this reader does not know are
 * skipped (newer writers may add some); a torn last line is dropped.
 *
 * This is the one place to switch to core's `loadTranscript` for the messages.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseSessionText = (text: string): Array<SessionLine> => {
  const lines = text.split("\n")
  const out: Array<SessionLine> = []
  const last = lines.length - 1
  lines.forEach((raw, index) => {
    const line = index + 1
    const trimmed = raw.trim()
    if (trimmed === "") return
    const json = parseJson(trimmed)
    if (!json.ok) {
      // The last line without its newline is a write cut short: a valid prefix precedes it.
      if (index === last) return
      out.push({ _tag: "Problem", line, problem: "not valid JSON" })
      return
    }
    const value = json.value
    if (!isObject(value)) {
      out.push({ _tag: "Problem", line, problem: "not a JSON object" })
      return
    }
    if ("role" in value) {
      const exit = decodeMessage(value)
      if (Exit.isSuccess(exit)) out.push({ _tag: "Message", line, message: exit.value })
      else out.push({ _tag: "Problem", line, problem: `not a valid message: ${issueText(exit)}` })
      return
    }
    if (typeof value.type === "string") {
      const decoded = decodeSessionRecord(value as TranscriptRecord)
      // a type this reader does not know: skipped
      if (decoded === undefined) return
      if (decoded.ok) out.push({ _tag: "Record", line, record: decoded.record })
      else {out.push({
          _tag: "Problem",
          line,
          problem: `not a valid "${value.type}" record: ${shortText(decoded.error)}`
        })}
      return
    }
    out.push({ _tag: "Problem", line, problem: "neither a message (role) nor a record (type)" })
  })
  return out
}
