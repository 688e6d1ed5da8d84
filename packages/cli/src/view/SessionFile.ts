/**
 * Reading a session file (`.agentloop/sessions/<id>.jsonl`): one JSON object per line, either a
 * transcript `Message` (it has `role`) or an application record (it has `type`). A torn last line
 * (a process killed mid-write) is ignored; any other line that is not a message or a known record
 * is kept as a problem to show, never a failure, so a damaged file still renders.
 *
 * @since 0.1.0
 */
import { Exit, Schema } from "effect"
import { Message, RunReason, Usage } from "@agentloop/core"

const At = Schema.Finite

/**
 * The first line of a session: who, where and with what model.
 *
 * @since 0.1.0
 * @category schemas
 */
export const SessionHeader = Schema.Struct({
  type: Schema.Literal("session"),
  at: At,
  version: Schema.optionalKey(Schema.Finite),
  id: Schema.optionalKey(Schema.String),
  cwd: Schema.optionalKey(Schema.String),
  provider: Schema.optionalKey(Schema.String),
  model: Schema.optionalKey(Schema.String),
  systemPrompt: Schema.optionalKey(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type SessionHeader = typeof SessionHeader.Type

/**
 * Every application record of a session file (see the session format: `run_start`, `turn_start`,
 * `tool_start`, `tool_end`, `approval`, `compaction`, `model` (a switch of model), `run_end`, and the
 * `session` header).
 *
 * @since 0.1.0
 * @category schemas
 */
export const SessionRecord = Schema.Union([
  SessionHeader,
  Schema.Struct({ type: Schema.Literal("run_start"), at: At, prompt: Schema.optionalKey(Schema.String) }),
  Schema.Struct({ type: Schema.Literal("turn_start"), at: At, step: Schema.optionalKey(Schema.Finite) }),
  Schema.Struct({ type: Schema.Literal("tool_start"), at: At, toolCallId: Schema.String, name: Schema.String }),
  Schema.Struct({
    type: Schema.Literal("tool_end"),
    at: At,
    toolCallId: Schema.String,
    isError: Schema.optionalKey(Schema.Boolean)
  }),
  Schema.Struct({
    type: Schema.Literal("approval"),
    at: At,
    toolCallId: Schema.String,
    name: Schema.optionalKey(Schema.String),
    decision: Schema.Literals(["approved", "denied", "always"]),
    by: Schema.optionalKey(Schema.String),
    reason: Schema.optionalKey(Schema.String),
    askedAt: Schema.optionalKey(At)
  }),
  Schema.Struct({
    type: Schema.Literal("compaction"),
    at: At,
    summarized: Schema.optionalKey(Schema.Finite),
    kept: Schema.optionalKey(Schema.Finite),
    summary: Schema.optionalKey(Message),
    usage: Schema.optionalKey(Usage)
  }),
  Schema.Struct({ type: Schema.Literal("model"), at: At, model: Schema.String }),
  Schema.Struct({
    type: Schema.Literal("run_end"),
    at: At,
    reason: RunReason,
    steps: Schema.optionalKey(Schema.Finite),
    error: Schema.optionalKey(Schema.String),
    usage: Schema.optionalKey(Usage)
  })
])
/**
 * @since 0.1.0
 * @category models
 */
export type SessionRecord = typeof SessionRecord.Type

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
const decodeRecord = Schema.decodeUnknownExit(SessionRecord)

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const parseJson = (text: string): { readonly ok: true; readonly value: unknown } | { readonly ok: false } => {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch {
    return { ok: false }
  }
}

const issueText = (exit: Exit.Exit<unknown, Schema.SchemaError>): string => {
  if (Exit.isSuccess(exit)) return ""
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  const text = reason !== undefined && reason._tag === "Fail" ? reason.error.message : "invalid value"
  return text.split("\n").slice(0, 3).join(" ").slice(0, 300)
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
      if (!knownTypes.has(value.type)) return
      const exit = decodeRecord(value)
      if (Exit.isSuccess(exit)) out.push({ _tag: "Record", line, record: exit.value })
      else out.push({ _tag: "Problem", line, problem: `not a valid "${value.type}" record: ${issueText(exit)}` })
      return
    }
    out.push({ _tag: "Problem", line, problem: "neither a message (role) nor a record (type)" })
  })
  return out
}

const knownTypes = new Set([
  "session",
  "run_start",
  "turn_start",
  "tool_start",
  "tool_end",
  "approval",
  "compaction",
  "model",
  "run_end"
])
