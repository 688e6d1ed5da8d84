/**
 * The records of a session file (`.agentloop/sessions/<id>.jsonl`, written by the `agentloop`
 * CLI): the one schema of every line with a `type`, which the CLI writes with and which the CLI,
 * the session viewer and anything else that reads a session decode with. A session file is a
 * transcript file (see Persistence.ts) whose application records are these: `parseTranscript`
 * returns them in `records`, and `sessionRecordsOf` decodes them.
 *
 * Every record has `type` and `at` (epoch milliseconds). The format has been stable since 0.1
 * (header `version: 1`); a reader skips a record of a type it does not know (a newer writer may
 * add some) and extra fields are ignored, so files written by 0.1 and by later versions load.
 * The schemas say what a reader may find, so the fields that early or hand-made files lack are
 * optional here even where today's CLI always writes them (the README's "Session files" lists
 * what it writes); a writer states its records with these types.
 *
 * @since 0.1.0
 */
import { Exit, Schema } from "effect"
import type { CompactionState } from "./Compaction.ts"
import { RunReason } from "./LoopEvent.ts"
import { Usage, UserMessage } from "./Message.ts"
import type { Message } from "./Message.ts"
import type { LoadedTranscript, TranscriptRecord } from "./Persistence.ts"

const At = Schema.Finite.annotate({ description: "epoch milliseconds" })

/**
 * Where a forked session came from: the session it was copied from and the prompt (1-based, its
 * run's number in that session) up to and including which it holds that session's history.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ForkedFrom = Schema.Struct({
  session: Schema.String,
  prompt: Schema.Finite
})
/**
 * @since 0.1.0
 * @category models
 */
export type ForkedFrom = typeof ForkedFrom.Type

/**
 * The first line of a session: who, where and with what model; `forkedFrom` when the session
 * began as a copy of another one's history (`agentloop sessions fork`, `--fork`).
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
  systemPrompt: Schema.optionalKey(Schema.String),
  forkedFrom: Schema.optionalKey(ForkedFrom)
})
/**
 * @since 0.1.0
 * @category models
 */
export type SessionHeader = typeof SessionHeader.Type

/**
 * A run begins (a prompt; its user message follows as a message line). `runId` names a durable run.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunStartRecord = Schema.Struct({
  type: Schema.Literal("run_start"),
  at: At,
  prompt: Schema.optionalKey(Schema.String),
  runId: Schema.optionalKey(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type RunStartRecord = typeof RunStartRecord.Type

/**
 * A model request is sent (the `step`-th of its run, from 1).
 *
 * @since 0.1.0
 * @category schemas
 */
export const TurnStartRecord = Schema.Struct({
  type: Schema.Literal("turn_start"),
  at: At,
  step: Schema.optionalKey(Schema.Finite)
})
/**
 * @since 0.1.0
 * @category models
 */
export type TurnStartRecord = typeof TurnStartRecord.Type

/**
 * A tool call starts running.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolStartRecord = Schema.Struct({
  type: Schema.Literal("tool_start"),
  at: At,
  toolCallId: Schema.String,
  name: Schema.String
})
/**
 * @since 0.1.0
 * @category models
 */
export type ToolStartRecord = typeof ToolStartRecord.Type

/**
 * A tool call's result joined the transcript (the result follows as a message line).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolEndRecord = Schema.Struct({
  type: Schema.Literal("tool_end"),
  at: At,
  toolCallId: Schema.String,
  isError: Schema.optionalKey(Schema.Boolean)
})
/**
 * @since 0.1.0
 * @category models
 */
export type ToolEndRecord = typeof ToolEndRecord.Type

/**
 * A durable run's call waits for an approval.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ApprovalRequestRecord = Schema.Struct({
  type: Schema.Literal("approval_request"),
  at: At,
  runId: Schema.String,
  toolCallId: Schema.String,
  name: Schema.String
})
/**
 * @since 0.1.0
 * @category models
 */
export type ApprovalRequestRecord = typeof ApprovalRequestRecord.Type

/**
 * Who decided an approval: `user` (asked at the terminal), `policy` (an earlier `always` of the
 * session), `rule` (a permission rule: the record's `rule` names it and where it is written),
 * `mode` (the permission mode: the record's `mode`), `no-terminal` (no one to ask), `remote`
 * (`agentloop approve` from another process), `timeout` (no answer within `--approval-timeout`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ApprovalBy = Schema.Literals(["user", "policy", "rule", "mode", "no-terminal", "remote", "timeout"])
/**
 * @since 0.1.0
 * @category models
 */
export type ApprovalBy = typeof ApprovalBy.Type

/**
 * A call was approved or denied. `askedAt` is when the question was put, for decisions that asked.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ApprovalRecord = Schema.Struct({
  type: Schema.Literal("approval"),
  at: At,
  toolCallId: Schema.String,
  name: Schema.optionalKey(Schema.String),
  decision: Schema.Literals(["approved", "denied", "always"]),
  by: Schema.optionalKey(ApprovalBy),
  reason: Schema.optionalKey(Schema.String),
  askedAt: Schema.optionalKey(At),
  /** The permission rule that decided, as written, with where: `bash(npm test*) (.agentloop/config.json)`. */
  rule: Schema.optionalKey(Schema.String),
  /** The permission mode that decided (`read-only`, `accept-edits`, `yes`). */
  mode: Schema.optionalKey(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type ApprovalRecord = typeof ApprovalRecord.Type

/**
 * An MCP server asked something of the user during a call, and what came of it: an elicitation
 * (`request: "elicitation"`, the form's field names in `fields`; `answer` `accept`, `decline` or
 * `cancel`) or a sampling request (`request: "sampling"`; `answer` `approve`, `edit` or `deny`). `by` says
 * who answered (`user`, `mode` for sampling the `yes` mode allowed, `no-terminal`). The values
 * given are never recorded (a form may ask for anything). `runId`: the run it happened in.
 *
 * @since 0.1.0
 * @category schemas
 */
export const McpRequestRecord = Schema.Struct({
  type: Schema.Literal("mcp_request"),
  at: At,
  server: Schema.String,
  request: Schema.Literals(["elicitation", "sampling"]),
  /** The server's message (an elicitation's question, a sampling request's last message), cut to 400 characters. */
  message: Schema.String,
  fields: Schema.optionalKey(Schema.Array(Schema.String)),
  answer: Schema.Literals(["accept", "decline", "cancel", "approve", "edit", "deny"]),
  by: Schema.Literals(["user", "mode", "no-terminal"]),
  askedAt: Schema.optionalKey(At),
  runId: Schema.optionalKey(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type McpRequestRecord = typeof McpRequestRecord.Type

/**
 * The transcript's first `summarized` messages were replaced by `summary` for the model; `kept`
 * messages stayed verbatim. `usage` is what the summarizing request cost; `inRun`: the compaction
 * shaped a run's request, so that usage is also in the run's `run_end` usage (count it once).
 * Without it (`/compact`, or a file from before runs counted their compactions) it is in no run's.
 *
 * @since 0.1.0
 * @category schemas
 */
export const CompactionRecord = Schema.Struct({
  type: Schema.Literal("compaction"),
  at: At,
  summarized: Schema.optionalKey(Schema.Finite),
  kept: Schema.optionalKey(Schema.Finite),
  summary: Schema.optionalKey(UserMessage),
  usage: Schema.optionalKey(Usage),
  inRun: Schema.optionalKey(Schema.Boolean)
})
/**
 * @since 0.1.0
 * @category models
 */
export type CompactionRecord = typeof CompactionRecord.Type

/**
 * The model in use changed (`/model`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ModelSwitchRecord = Schema.Struct({ type: Schema.Literal("model"), at: At, model: Schema.String })
/**
 * @since 0.1.0
 * @category models
 */
export type ModelSwitchRecord = typeof ModelSwitchRecord.Type

/**
 * A run ended (one per run). `output` is the accepted final answer of a run with an output schema.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunEndRecord = Schema.Struct({
  type: Schema.Literal("run_end"),
  at: At,
  reason: RunReason,
  steps: Schema.optionalKey(Schema.Finite),
  error: Schema.optionalKey(Schema.String),
  usage: Schema.optionalKey(Usage),
  output: Schema.optionalKey(Schema.Unknown),
  runId: Schema.optionalKey(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type RunEndRecord = typeof RunEndRecord.Type

/**
 * A file as a checkpoint found it before a call changed it: `path` (relative to the workspace, links
 * followed) and either `blob` (the sha256, in hex, of its content, saved under the session's
 * checkpoint folder), `absent` (there was no file: undoing removes it), or `skipped` (why it was not
 * saved: too large, the session's cap reached, not a regular file...; undoing cannot restore it).
 *
 * @since 0.1.0
 * @category schemas
 */
export const CheckpointFile = Schema.Struct({
  path: Schema.String,
  blob: Schema.optionalKey(Schema.String),
  size: Schema.optionalKey(Schema.Finite),
  /** The permission bits. */
  mode: Schema.optionalKey(Schema.Finite),
  absent: Schema.optionalKey(Schema.Boolean),
  skipped: Schema.optionalKey(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type CheckpointFile = typeof CheckpointFile.Type

/**
 * What a run's call was about to change, saved before the change (written before the call runs,
 * so a process killed during the call leaves it): for `write` and `edit` the `file`, for the run's
 * first `bash` call in a git repository the workspace's `tree` (a git tree object of its files,
 * untracked ones included, ignored ones not) and, as each bash call ends, the tree `after` it (what
 * differs between the two is what undoing puts back), or `notTracked`: why this call's changes are not
 * saved (`bash` outside a git repository, an MCP server's tool). `run` is the run's number in the
 * session (1 for its first `run_start`). For each file, a run's first checkpoint is the one undoing
 * restores.
 *
 * @since 0.1.0
 * @category schemas
 */
export const CheckpointRecord = Schema.Struct({
  type: Schema.Literal("checkpoint"),
  at: At,
  run: Schema.Finite,
  toolCallId: Schema.optionalKey(Schema.String),
  tool: Schema.optionalKey(Schema.String),
  file: Schema.optionalKey(CheckpointFile),
  tree: Schema.optionalKey(Schema.String),
  /** For a `bash` call in a git repository: the workspace's tree when the call ended. */
  after: Schema.optionalKey(Schema.String),
  /**
   * In a git repository, on the session's first call: the workspace's tree as that call found it
   * (before anything in the session changed a file), where `agentloop replay` starts. Undoing ignores it.
   */
  start: Schema.optionalKey(Schema.String),
  notTracked: Schema.optionalKey(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type CheckpointRecord = typeof CheckpointRecord.Type

/**
 * Runs were undone (`/undo`, `/rewind`, `agentloop undo`): `runs` are their numbers in the session
 * (as `CheckpointRecord.run` counts), and the transcript the session continues no longer holds
 * them (`sessionHistoryOf`); the file keeps them. What was done to the files: `restored` (put back
 * as they were), `removed` (created by the runs), `failed` (with why), `notTracked` (changes
 * undoing could not cover, as the checkpoints said).
 *
 * @since 0.1.0
 * @category schemas
 */
export const UndoRecord = Schema.Struct({
  type: Schema.Literal("undo"),
  at: At,
  runs: Schema.Array(Schema.Finite),
  restored: Schema.optionalKey(Schema.Array(Schema.String)),
  removed: Schema.optionalKey(Schema.Array(Schema.String)),
  failed: Schema.optionalKey(Schema.Array(Schema.Struct({ path: Schema.String, reason: Schema.String }))),
  notTracked: Schema.optionalKey(Schema.Array(Schema.String))
})
/**
 * @since 0.1.0
 * @category models
 */
export type UndoRecord = typeof UndoRecord.Type

/**
 * Every record of a session file.
 *
 * @since 0.1.0
 * @category schemas
 */
export const SessionRecord = Schema.Union([
  SessionHeader,
  RunStartRecord,
  TurnStartRecord,
  ToolStartRecord,
  ToolEndRecord,
  ApprovalRequestRecord,
  ApprovalRecord,
  McpRequestRecord,
  CompactionRecord,
  ModelSwitchRecord,
  RunEndRecord,
  CheckpointRecord,
  UndoRecord
])
/**
 * @since 0.1.0
 * @category models
 */
export type SessionRecord = typeof SessionRecord.Type

/**
 * The `type` of every session record, for telling a record of an unknown type (skipped) from a
 * known one that does not decode.
 *
 * @since 0.1.0
 * @category constants
 */
export const sessionRecordTypes: ReadonlySet<string> = new Set(
  SessionRecord.members.map((member) => member.fields.type.literal)
)

const decodeRecord = Schema.decodeUnknownExit(SessionRecord)

/**
 * Decodes one record: the record, or the schema's words for what is wrong. `undefined` for a
 * record whose `type` is not a session record's (a newer writer's: readers skip it).
 *
 * @since 0.1.0
 * @category decoding
 */
export const decodeSessionRecord = (
  record: TranscriptRecord
):
  | { readonly ok: true; readonly record: SessionRecord }
  | { readonly ok: false; readonly error: string }
  | undefined =>
{
  if (!sessionRecordTypes.has(record.type)) return undefined
  const exit = decodeRecord(record)
  if (Exit.isSuccess(exit)) return { ok: true, record: exit.value }
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  return { ok: false, error: reason?._tag === "Fail" ? reason.error.message : "not a valid record" }
}

/**
 * The session records among a transcript file's records (`LoadedTranscript.records`), decoded,
 * in file order. Records of an unknown type and records that do not decode are left out.
 *
 * @since 0.1.0
 * @category decoding
 */
export const sessionRecordsOf = (records: ReadonlyArray<TranscriptRecord>): Array<SessionRecord> => {
  const out: Array<SessionRecord> = []
  for (const record of records) {
    const decoded = decodeSessionRecord(record)
    if (decoded !== undefined && decoded.ok) out.push(decoded.record)
  }
  return out
}

/**
 * One run of a session, as its file holds it: its `run_start` and `run_end` records and where its
 * messages are in the transcript. The run's prompt is `messages[from]` (written right after its
 * `run_start`); what the run added follows it, up to `to` (excluded).
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionRun {
  readonly start: RunStartRecord
  /** The run's end; `undefined` when the file has none (a killed process, or a run still going). */
  readonly end: RunEndRecord | undefined
  /** The index of the run's prompt in the transcript: its input is `messages.slice(0, from + 1)`. */
  readonly from: number
  /** Where the run's messages end (at its `run_end`, the next run's start, or the transcript's end). */
  readonly to: number
}

/**
 * The runs of a session file, in file order, from what `parseTranscript` / `loadTranscript` read
 * (its records, decoded as `sessionRecordsOf` does, and where they sit among the messages).
 *
 * @since 0.1.0
 * @category decoding
 */
export const sessionRunsOf = (
  loaded: Pick<LoadedTranscript, "messages" | "records" | "recordsAt">
): Array<SessionRun> => {
  const runs: Array<{ start: RunStartRecord; end: RunEndRecord | undefined; from: number; to: number }> = []
  let open: (typeof runs)[number] | undefined
  loaded.records.forEach((raw, i) => {
    const decoded = decodeSessionRecord(raw)
    if (decoded === undefined || !decoded.ok) return
    const at = loaded.recordsAt[i] ?? loaded.messages.length
    const record = decoded.record
    if (record.type === "run_start") {
      if (open !== undefined) open.to = at
      open = { start: record, end: undefined, from: at, to: loaded.messages.length }
      runs.push(open)
    } else if (record.type === "run_end" && open !== undefined) {
      open.end = record
      open.to = at
      open = undefined
    }
  })
  return runs
}

/**
 * The runs an undo dropped, by their number in the session (1 for the first `run_start`).
 *
 * @since 0.1.0
 * @category decoding
 */
export const undoneRuns = (records: ReadonlyArray<SessionRecord>): Set<number> => {
  const undone = new Set<number>()
  for (const r of records) if (r.type === "undo") { for (const n of r.runs) undone.add(n) }
  return undone
}

/**
 * A run of the transcript a session continues: its number in the session (1 for the first
 * `run_start`, undone runs counted) and where its messages are in `SessionHistory.messages`.
 *
 * @since 0.1.0
 * @category models
 */
export interface HistoryRun extends SessionRun {
  readonly number: number
}

/**
 * What a session continues from: its transcript without the runs an undo dropped (every call
 * still paired: a run's messages go whole), those runs, and the compaction in force (the last one
 * whose summary covers only messages still there).
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionHistory {
  readonly messages: Array<Message>
  readonly runs: ReadonlyArray<HistoryRun>
  readonly compaction: CompactionState | undefined
}

/**
 * The transcript a session continues from what `parseTranscript` / `loadTranscript` read of its
 * file (see `SessionHistory`). A run's messages are its prompt and everything up to the next run's
 * prompt; messages before the first run are kept.
 *
 * @since 0.1.0
 * @category decoding
 */
export const sessionHistoryOf = (
  loaded: Pick<LoadedTranscript, "messages" | "records" | "recordsAt">
): SessionHistory => {
  const all = sessionRunsOf(loaded)
  const decoded: Array<{ readonly record: SessionRecord; readonly at: number }> = []
  loaded.records.forEach((raw, i) => {
    const d = decodeSessionRecord(raw)
    if (d !== undefined && d.ok) decoded.push({ record: d.record, at: loaded.recordsAt[i] ?? loaded.messages.length })
  })
  const undone = undoneRuns(decoded.map((d) => d.record))
  const messages: Array<Message> = loaded.messages.slice(0, all[0]?.from ?? loaded.messages.length)
  const runs: Array<HistoryRun> = []
  all.forEach((run, i) => {
    const end = all[i + 1]?.from ?? loaded.messages.length
    if (undone.has(i + 1)) return
    const from = messages.length
    for (let m = run.from; m < end; m++) messages.push(loaded.messages[m]!)
    runs.push({ ...run, number: i + 1, from, to: from + (run.to - run.from) })
  })
  // the compaction in force: an undo that leaves fewer messages than a summary covers ends it
  let compaction: CompactionState | undefined
  let live = all[0]?.from ?? loaded.messages.length
  let runNumber = 0
  const kept = new Set<number>()
  for (const { record } of decoded) {
    if (record.type === "run_start") {
      runNumber++
      kept.add(runNumber)
      const run = all[runNumber - 1]
      const end = all[runNumber]?.from ?? loaded.messages.length
      if (run !== undefined) live += end - run.from
    } else if (record.type === "compaction" && record.summary !== undefined && record.summarized !== undefined) {
      compaction = { summary: record.summary, covered: record.summarized }
    } else if (record.type === "undo") {
      for (const n of record.runs) {
        if (!kept.delete(n)) continue
        const run = all[n - 1]
        if (run !== undefined) live -= (all[n]?.from ?? loaded.messages.length) - run.from
      }
      if (compaction !== undefined && compaction.covered > live) compaction = undefined
    }
  }
  return { messages, runs, compaction }
}
