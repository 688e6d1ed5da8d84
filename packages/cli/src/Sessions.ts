/**
 * Sessions: one JSONL file per session under `.agentloop/sessions/<id>.jsonl` in the workspace,
 * appended line by line as things happen (see the README's "Session files" for every record). It
 * is a superset of core's transcript format, so `loadTranscript(file)` gives the transcript.
 *
 * @since 0.1.0
 */
import {
  addUsage,
  makeTranscriptWriter,
  parseTranscript,
  PersistenceError,
  sessionHistoryOf,
  sessionRecordsOf
} from "@agentloop/core"
import type { CompactionState, Message, SessionHeader, SessionRecord, TranscriptWriter, Usage } from "@agentloop/core"
import { Clock, Effect, Random } from "effect"
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
 * One line of `agentloop sessions`.
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionSummary {
  readonly id: string
  readonly at: number
  readonly firstPrompt: string
  readonly runs: number
  readonly steps: number
  /** The last run's reason, `interrupted` when the last run has no end (a killed process), or `no runs`. */
  readonly ended: string
  readonly usage: Usage | undefined
  readonly model: string
}

/**
 * The summary of a session from its records (decoded: `sessionRecordsOf`).
 *
 * @since 0.1.0
 * @category sessions
 */
export const summarize = (id: string, records: ReadonlyArray<SessionRecord>): SessionSummary => {
  const header = records.find(isHeader)
  let firstPrompt = ""
  let runs = 0
  let steps = 0
  let ended = "no runs"
  let usage: Usage | undefined
  for (const r of records) {
    if (r.type === "run_start") {
      runs++
      if (firstPrompt === "" && r.prompt !== undefined) firstPrompt = r.prompt
      ended = "interrupted"
    } else if (r.type === "run_end") {
      steps += r.steps ?? 0
      ended = r.reason
      usage = addUsage(usage, r.usage)
    } else if (r.type === "compaction" && r.inRun !== true) {
      // a compaction in a run is in that run's usage already
      usage = addUsage(usage, r.usage)
    }
  }
  return { id, at: header?.at ?? 0, firstPrompt, runs, steps, ended, usage, model: header?.model ?? "" }
}

/**
 * Every session of the workspace, oldest first. A file that cannot be read is listed with
 * `ended: "unreadable: …"`.
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
      const loaded = yield* Effect.result(readSession(root, `${SESSIONS_FOLDER}/${name}`))
      out.push(
        loaded._tag === "Success" ?
          summarize(id, sessionRecordsOf(loaded.success.records)) :
          {
            id,
            at: 0,
            firstPrompt: "",
            runs: 0,
            steps: 0,
            ended: `unreadable: ${loaded.failure.message}`,
            usage: undefined,
            model: ""
          }
      )
    }
    return out.sort((a, b) => a.at - b.at || a.id.localeCompare(b.id))
  })

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
