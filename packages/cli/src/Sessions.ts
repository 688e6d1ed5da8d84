/**
 * Sessions: one JSONL file per session under `.agentloop/sessions/<id>.jsonl` in the workspace,
 * appended line by line as things happen (see the README's "Session files" for every record). It
 * is a superset of core's transcript format, so `loadTranscript(file)` gives the transcript.
 *
 * @since 0.1.0
 */
import {
  addUsage,
  AssistantMessage,
  decodeSessionRecord,
  makeTranscriptWriter,
  parseTranscript,
  PersistenceError,
  sessionHistoryOf,
  sessionRecordsOf,
  ToolResultMessage,
  undoneRuns,
  UserMessage
} from "@agentloop/core"
import type {
  CompactionState,
  Message,
  RunEndRecord,
  RunStartRecord,
  SessionHeader,
  SessionRecord,
  StopReason,
  TranscriptRecord,
  TranscriptWriter,
  Usage
} from "@agentloop/core"
import { Clock, Effect, Exit, Random, Schema, Struct } from "effect"
import type { Scope } from "effect"
import { readdirSync } from "node:fs"
import * as nodePath from "node:path"
import * as WorkspaceIO from "./WorkspaceIO.ts"

/**
 * The sessions folder, relative to the workspace.
 *
 * @since 0.1.0
 * @category constants
 */
export const SESSIONS_FOLDER = ".agentloop/sessions"

/**
 * An open session: what was in the file, and a writer that appends to it.
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionLog {
  readonly id: string
  /** The file, relative to the workspace. */
  readonly file: string
  readonly header: SessionHeader
  /**
   * The transcript the session continues (checked and paired): the file's, without the runs an
   * undo dropped (core's `sessionHistoryOf`).
   */
  readonly messages: ReadonlyArray<Message>
  /** The compaction in force for those messages (the last summary still covering only them). */
  readonly compaction: CompactionState | undefined
  /** The records so far, decoded (core's `SessionRecord`; records of unknown types are left out). */
  readonly records: ReadonlyArray<SessionRecord>
  /** Whether a torn last line (left by a crash) was cut off when the session was opened. */
  readonly repairedTornLine: boolean
  readonly writer: TranscriptWriter
}

/**
 * A new session id: the time (UTC) and four random characters, e.g. `20261130-215501-k3f9`; ids
 * sort by time.
 *
 * @since 0.1.0
 * @category sessions
 */
export const newSessionId: Effect.Effect<string> = Effect.gen(function*() {
  const now = new Date(yield* Clock.currentTimeMillis).toISOString()
  const stamp = `${now.slice(0, 10).replace(/-/g, "")}-${now.slice(11, 19).replace(/:/g, "")}`
  const suffix = (yield* Random.nextIntBetween(0, 36 ** 4)).toString(36).padStart(4, "0")
  return `${stamp}-${suffix}`
})

const toPersistenceError = (e: WorkspaceIO.WorkspaceWriteError) =>
  new PersistenceError({ path: e.path, message: e.message })

const writerFor = (root: string, file: string, exclusive: boolean, repaired: boolean) =>
  Effect.flatMap(
    Effect.mapError(WorkspaceIO.openAppend(root, file, exclusive), toPersistenceError),
    (appendFile) =>
      makeTranscriptWriter((line) => Effect.mapError(appendFile.append(line), toPersistenceError), repaired)
  )

/**
 * Starts a new session file with its header.
 *
 * @since 0.1.0
 * @category sessions
 */
export const createSession = (
  root: string,
  header: { readonly cwd: string; readonly provider: string; readonly model: string; readonly systemPrompt: string }
): Effect.Effect<SessionLog, PersistenceError, Scope.Scope> =>
  Effect.gen(function*() {
    const id = yield* newSessionId
    const file = `${SESSIONS_FOLDER}/${id}.jsonl`
    const writer = yield* writerFor(root, file, true, false)
    const full: SessionHeader = { type: "session", version: 1, id, at: yield* Clock.currentTimeMillis, ...header }
    yield* writer.append(full)
    return {
      id,
      file,
      header: full,
      messages: [],
      compaction: undefined,
      records: [full],
      repairedTornLine: false,
      writer
    }
  })

const isHeader = (r: SessionRecord): r is SessionHeader => r.type === "session"

/**
 * Reads a session file (relative to the workspace): its transcript and records.
 *
 * @since 0.1.0
 * @category sessions
 */
export const readSession = (root: string, file: string) =>
  Effect.gen(function*() {
    // inside the workspace, through no link (a session folder in a cloned repository may hold one)
    const text = yield* WorkspaceIO.readTextFile(root, file).pipe(
      Effect.mapError((e) => new PersistenceError({ path: file, message: `cannot read ${file}: ${e.message}` }))
    )
    return yield* parseTranscript(text, file)
  })

/**
 * Opens an existing session to append to it (a torn last line is cut off first).
 *
 * @since 0.1.0
 * @category sessions
 */
export const openSession = (root: string, id: string): Effect.Effect<SessionLog, PersistenceError, Scope.Scope> =>
  Effect.gen(function*() {
    const file = `${SESSIONS_FOLDER}/${id}.jsonl`
    const repaired = yield* Effect.mapError(WorkspaceIO.cutTornLine(root, file), toPersistenceError)
    const loaded = yield* readSession(root, file)
    const records = sessionRecordsOf(loaded.records)
    const header = records.find(isHeader)
    if (header === undefined) {
      return yield* Effect.fail(new PersistenceError({ path: file, message: `${file} has no session header` }))
    }
    const writer = yield* writerFor(root, file, false, repaired)
    const history = sessionHistoryOf(loaded)
    return {
      id,
      file,
      header,
      messages: history.messages,
      compaction: history.compaction,
      records,
      repairedTornLine: repaired,
      writer
    }
  })

/**
 * A message line as `agentloop sessions` and `--continue` read it: whose message it is and, for the
 * model's, how it ended (core's message schemas, narrowed to those fields; the rest of the line is
 * not decoded, so a large tool result costs only its `JSON.parse`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const MessageOutline = Schema.Union([
  AssistantMessage.mapFields(Struct.pick(["role", "stopReason"])),
  UserMessage.mapFields(Struct.pick(["role"])),
  ToolResultMessage.mapFields(Struct.pick(["role"]))
])
/**
 * @since 0.1.0
 * @category models
 */
export type MessageOutline = typeof MessageOutline.Type

/**
 * One line of a session file as a summary reads it: a session record (decoded with core's
 * `SessionRecord`) or a message's outline, in file order.
 *
 * @since 0.1.0
 * @category models
 */
export type SessionLine = SessionRecord | MessageOutline

/**
 * How a model's answer ended for it to count as a step of the conversation: it stopped, asked for
 * tools, or hit its token limit. An answer that ended `error` or `aborted` (and a request that never
 * got one: an unreachable server, a refused key) is no step.
 *
 * @since 0.1.0
 * @category constants
 */
export const ANSWERED: ReadonlySet<StopReason> = new Set(["stop", "toolUse", "length"])

/**
 * One line of `agentloop sessions`: what the session continues, i.e. its file without the runs an
 * undo dropped (the same partition as core's `sessionHistoryOf`).
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionSummary {
  readonly id: string
  readonly at: number
  /** The first prompt of the runs left (an undone prompt is not shown). */
  readonly firstPrompt: string
  /** The runs left. */
  readonly runs: number
  /** The model's answers (`ANSWERED`) in what the session continues: undone runs' answers are not counted. */
  readonly steps: number
  /**
   * How the last run left ended: its reason, `interrupted` when it has no end (a killed process, or a
   * durable run to resume), `undone` when an undo dropped every run, `no runs`.
   */
  readonly ended: string
  /** Whether the last run left has no end. */
  readonly unfinished: boolean
  /** What the whole session cost, undone runs included (their tokens were spent). */
  readonly usage: Usage | undefined
  readonly model: string
}

/**
 * The summary of a session from its lines (`outlineSession`; records alone, e.g. `sessionRecordsOf`'s,
 * give the runs and usage, and no steps).
 *
 * @since 0.1.0
 * @category sessions
 */
export const summarize = (id: string, lines: ReadonlyArray<SessionLine>): SessionSummary => {
  let header: SessionHeader | undefined
  // runs as core's `sessionRunsOf` finds them; a run's messages go up to the next run's start
  const runs: Array<{ start: RunStartRecord; end: RunEndRecord | undefined; answers: number }> = []
  let beforeRuns = 0
  let usage: Usage | undefined
  const records: Array<SessionRecord> = []
  for (const line of lines) {
    if ("role" in line) {
      if (line.role === "assistant" && ANSWERED.has(line.stopReason)) {
        const run = runs.at(-1)
        if (run === undefined) beforeRuns++
        else run.answers++
      }
      continue
    }
    records.push(line)
    if (line.type === "session") header ??= line
    else if (line.type === "run_start") runs.push({ start: line, end: undefined, answers: 0 })
    else if (line.type === "run_end") {
      const run = runs.at(-1)
      if (run !== undefined && run.end === undefined) run.end = line
      usage = addUsage(usage, line.usage)
    } else if (line.type === "compaction" && line.inRun !== true) {
      // a compaction in a run is in that run's usage already
      usage = addUsage(usage, line.usage)
    }
  }
  const undone = undoneRuns(records)
  const left = runs.filter((_, i) => !undone.has(i + 1))
  const last = left.at(-1)
  return {
    id,
    at: header?.at ?? 0,
    firstPrompt: left[0]?.start.prompt ?? "",
    runs: left.length,
    steps: left.reduce((n, run) => n + run.answers, beforeRuns),
    ended: last === undefined ? (runs.length > 0 ? "undone" : "no runs") : last.end?.reason ?? "interrupted",
    unfinished: last !== undefined && last.end === undefined,
    usage,
    model: header?.model ?? ""
  }
}

/**
 * Whether a session holds a conversation to go on with: at least one answer of the model
 * (`ANSWERED`) in what it continues, or its last run left has not ended (a killed process, a durable
 * run to resume). A session `/clear` just opened, one whose runs all failed before the model
 * answered (an unreachable server, a refused key), and one whose every prompt was undone hold none.
 * The one rule of `--continue` (which skips such sessions) and `agentloop sessions` (which does not
 * list them without `--all`).
 *
 * @since 0.1.0
 * @category sessions
 */
export const hasConversation = (summary: SessionSummary): boolean => summary.steps > 0 || summary.unfinished

/** The records a summary reads; the others (turns, calls, approvals, checkpoints) are not decoded. */
const SUMMARY_RECORDS: ReadonlySet<string> = new Set(["session", "run_start", "run_end", "compaction", "undo"])

const decodeOutline = Schema.decodeUnknownExit(MessageOutline)

/**
 * The lines of a session file a summary reads, in file order: its records of `SUMMARY_RECORDS`'
 * types (decoded with `SessionRecord`; others, unknown ones and ones that do not decode are left out,
 * as `sessionRecordsOf` does) and its messages' outlines. Lines are told apart as core's
 * `parseTranscript` tells them (a message has `role`, a record a string `type`); a torn last line is
 * skipped. A line that is not JSON, is neither, or a message whose outline does not decode fails.
 *
 * @since 0.1.0
 * @category sessions
 */
export const outlineSession = (text: string, file: string): Effect.Effect<Array<SessionLine>, PersistenceError> =>
  Effect.suspend(() => {
    const fail = (message: string) => Effect.fail(new PersistenceError({ path: file, message }))
    const lines: Array<SessionLine> = []
    let from = 0
    for (let n = 1; from < text.length; n++) {
      const newline = text.indexOf("\n", from)
      const line = text.slice(from, newline === -1 ? text.length : newline)
      from = newline === -1 ? text.length : newline + 1
      if (line.trim().length === 0) continue
      let value: unknown
      try {
        value = JSON.parse(line)
      } catch {
        // a torn last line (a crash while it was written) is left out, as reading the session does
        if (newline === -1) break
        return fail(`line ${n} of ${file} is not valid JSON`)
      }
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        return fail(`line ${n} of ${file} is not a JSON object`)
      }
      if ("role" in value) {
        const outline = decodeOutline(value)
        if (Exit.isFailure(outline)) return fail(`line ${n} of ${file} is not a valid message`)
        lines.push(outline.value)
      } else if ("type" in value && typeof value.type === "string") {
        if (!SUMMARY_RECORDS.has(value.type)) continue
        const decoded = decodeSessionRecord(value as TranscriptRecord)
        if (decoded?.ok === true) lines.push(decoded.record)
      } else {
        return fail(`line ${n} of ${file} is neither a message (no "role") nor a record (no "type")`)
      }
    }
    return Effect.succeed(lines)
  })

/**
 * Every session of the workspace, oldest first, summarized (`summarize`) from what its file holds
 * (`outlineSession`: records and the outline of each message, not whole messages). A file that
 * cannot be read is listed with `ended: "unreadable: …"`.
 *
 * @since 0.1.0
 * @category sessions
 */
export const listSessions = (root: string): Effect.Effect<ReadonlyArray<SessionSummary>> =>
  Effect.gen(function*() {
    let names: Array<string>
    try {
      names = readdirSync(nodePath.join(root, SESSIONS_FOLDER)).filter((n) => n.endsWith(".jsonl")).sort()
    } catch {
      return []
    }
    const out: Array<SessionSummary> = []
    for (const name of names) {
      const id = name.slice(0, -".jsonl".length)
      const file = `${SESSIONS_FOLDER}/${name}`
      // inside the workspace, through no link (a session folder in a cloned repository may hold one)
      const lines = yield* Effect.result(
        WorkspaceIO.readTextFile(root, file).pipe(
          Effect.mapError((e) => new PersistenceError({ path: file, message: `cannot read ${file}: ${e.message}` })),
          Effect.flatMap((text) => outlineSession(text, file))
        )
      )
      out.push(
        lines._tag === "Success" ?
          summarize(id, lines.success) :
          {
            id,
            at: 0,
            firstPrompt: "",
            runs: 0,
            steps: 0,
            ended: `unreadable: ${lines.failure.message}`,
            unfinished: false,
            usage: undefined,
            model: ""
          }
      )
    }
    return out.sort((a, b) => a.at - b.at || a.id.localeCompare(b.id))
  })

/**
 * The session `--continue` continues, of `listSessions`' (oldest first): the latest with a
 * conversation (`hasConversation`); when none has one, the latest that reads (so `--continue` after
 * undoing every prompt goes on in that session rather than in a new file); `undefined` when no
 * session reads.
 *
 * @since 0.1.0
 * @category sessions
 */
export const sessionToContinue = (sessions: ReadonlyArray<SessionSummary>): SessionSummary | undefined =>
  sessions.findLast(hasConversation) ?? sessions.findLast((s) => !s.ended.startsWith("unreadable"))

/**
 * Appends an entry, reporting (not failing on) a write error.
 *
 * @since 0.1.0
 * @category sessions
 */
export const appendOrReport = (
  log: SessionLog,
  entry: Message | SessionRecord,
  report: (message: string) => void
): Effect.Effect<void> => Effect.catch(log.writer.append(entry), (e) => Effect.sync(() => report(e.message)))
