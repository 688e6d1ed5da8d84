/**
 * Durable runs in the CLI (`--durable`): each run of a session is a durable run of
 * `@agentloop/durable` on its embedded engine, in one SQLite file per session,
 * `.agentloop/durable/<session id>.db`. A run's id is `<session id>.<n>` (its number in the
 * session), so a run id names its session file and its database.
 *
 * This module holds what the commands share: where things are, reading a session's durable runs
 * back from its records, bringing a session file in line with a run's journaled transcript, and
 * the commands `agentloop runs` and `agentloop approve`.
 *
 * @since 0.1.0
 */
import { decodeSessionRecord, sessionRecordsOf } from "@agentloop/core"
import type { Message, SessionRecord, TranscriptRecord } from "@agentloop/core"
import type { DurableRunStatus, DurableStore } from "@agentloop/durable"
import { runnerLockFileOf } from "@agentloop/durable/RunnerLock"
import { Effect, Layer } from "effect"
import type { WorkflowEngine } from "effect/workflow"
import { lstatSync, readdirSync, readFileSync, realpathSync } from "node:fs"
import type { Stats } from "node:fs"
import * as nodePath from "node:path"
import type { DatabaseSync } from "node:sqlite"
import { denialText } from "./approvals/Denial.ts"
import { stripControl } from "./Sanitize.ts"
import { SESSIONS_FOLDER } from "./Sessions.ts"
import * as WorkspaceIO from "./WorkspaceIO.ts"

/**
 * The folder of the durable runs' databases, relative to the workspace.
 *
 * @since 0.1.0
 * @category constants
 */
export const DURABLE_FOLDER = ".agentloop/durable"

/**
 * A durable run failed to start or could not be reached: one line for the user.
 *
 * @since 0.1.0
 * @category errors
 */
export class DurableCliError extends Error {
  readonly _tag = "DurableCliError"
}

/**
 * The database file of a session's durable runs (absolute).
 *
 * @since 0.1.0
 * @category files
 */
export const databaseOf = (root: string, sessionId: string): string =>
  nodePath.join(root, DURABLE_FOLDER, `${sessionId}.db`)

/**
 * The id of the `n`-th run (1-based) of a session.
 *
 * @since 0.1.0
 * @category runs
 */
export const runIdOf = (sessionId: string, n: number): string => `${sessionId}.${n}`

/** A session id the CLI makes (and the only ones that name a database): letters, digits, `-`, `_`. */
const SESSION_ID = /^[A-Za-z0-9_-]{1,100}$/

/**
 * The session a run id belongs to, or undefined when `runId` is not a CLI run id.
 *
 * @since 0.1.0
 * @category runs
 */
export const sessionOfRun = (runId: string): string | undefined => {
  const match = /^([A-Za-z0-9_-]{1,100})\.([1-9][0-9]{0,8})$/.exec(runId)
  return match === null ? undefined : match[1]
}

/** The SQLite files of a database: itself, its journal, its shared memory and its runner lock. */
const databaseFiles = (
  file: string
): ReadonlyArray<string> => [file, `${file}-wal`, `${file}-shm`, runnerLockFileOf(file)]

/**
 * Checks that a session's database can be opened without leaving the workspace: the session id
 * is one the CLI makes, `.agentloop/durable` is a real folder of the workspace (no link on the
 * way: SQLite follows links), and each of the database's files (`.db`, `-wal`, `-shm`, `-runner`)
 * that exists is a regular file with one link (not a symbolic link, not a hard link to a file
 * elsewhere). Returns the database file; `mustExist` fails when it does not exist, so that a
 * client never creates a database.
 *
 * (A process of the same user that swaps a file for a link between this check and SQLite's open
 * is not covered: node:sqlite has no `O_NOFOLLOW` open.)
 *
 * @since 0.1.0
 * @category files
 */
export const checkDatabase = (
  root: string,
  sessionId: string,
  mustExist: boolean
): Effect.Effect<string, DurableCliError> =>
  Effect.suspend(() => {
    if (!SESSION_ID.test(sessionId)) {
      return Effect.fail(new DurableCliError(`"${stripControl(sessionId).slice(0, 100)}" is not a session id`))
    }
    const folder = nodePath.join(root, DURABLE_FOLDER)
    const file = databaseOf(root, sessionId)
    let real: string
    try {
      real = realpathSync(folder)
    } catch {
      return Effect.fail(new DurableCliError(`no durable runs database at ${file}`))
    }
    if (real !== nodePath.join(realpathSync(root), DURABLE_FOLDER)) {
      return Effect.fail(
        new DurableCliError(`${folder} leads out of the workspace (a link): refusing to open a database there`)
      )
    }
    for (const f of databaseFiles(file)) {
      let stat: Stats
      try {
        stat = lstatSync(f)
      } catch {
        if (f === file && mustExist) return Effect.fail(new DurableCliError(`no durable runs database at ${file}`))
        continue
      }
      if (!stat.isFile()) {
        return Effect.fail(
          new DurableCliError(`${f} is ${stat.isSymbolicLink() ? "a link" : "not a regular file"}: refusing to open it`)
        )
      }
      if (stat.nlink > 1) return Effect.fail(new DurableCliError(`${f} has another hard link: refusing to open it`))
    }
    return Effect.succeed(file)
  })

/**
 * Makes the databases' folder (inside the workspace, through no link) and returns the session's
 * database file, refusing one that is (or whose journal, shared memory or lock file is) a link
 * (see `checkDatabase`).
 *
 * @since 0.1.0
 * @category files
 */
export const prepareDatabase = (root: string, sessionId: string): Effect.Effect<string, DurableCliError> =>
  Effect.gen(function*() {
    if (!SESSION_ID.test(sessionId)) return yield* checkDatabase(root, sessionId, false)
    yield* WorkspaceIO.makeDirectory(root, DURABLE_FOLDER).pipe(Effect.mapError((e) => new DurableCliError(e.message)))
    return yield* checkDatabase(root, sessionId, false)
  })

/**
 * Whether a live process is the runner of a session's database right now (it holds the file's
 * runner lock, which the operating system releases when that process ends, however it ends).
 * Checked before a session is resumed, so a second process does not touch a session that another
 * one is still writing. The lock is taken for an instant and released at once. A database that
 * `checkDatabase` refuses is not opened here (the run then fails with its reason).
 *
 * @since 0.1.0
 * @category runs
 */
export const runnerBusy = (root: string, sessionId: string): boolean => {
  const checked = Effect.runSync(Effect.result(checkDatabase(root, sessionId, true)))
  if (checked._tag === "Failure") return false
  const file = checked.success
  let lock: DatabaseSync | undefined
  try {
    // node:sqlite loads here, when a session has a durable database, not with every command
    const sqlite: typeof import("node:sqlite") = process.getBuiltinModule("node:sqlite")
    lock = new sqlite.DatabaseSync(runnerLockFileOf(file), { timeout: 0 })
    lock.exec("BEGIN EXCLUSIVE")
    lock.exec("ROLLBACK")
    return false
  } catch (error) {
    return String((error as Error)?.message ?? error).includes("locked")
  } finally {
    if (lock?.isOpen === true) lock.close()
  }
}

/**
 * What a session's records say about one of its durable runs.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordedRun {
  readonly runId: string
  readonly prompt: string
  readonly startedAt: number
  /** The `run_end` record, when the session has it. */
  readonly end: { readonly reason: string; readonly steps: number } | undefined
  /** Calls that asked for approval and have no answer nor result in the records yet, in order. */
  readonly pending: ReadonlyArray<{ readonly callId: string; readonly name: string; readonly askedAt: number }>
}

/**
 * The durable runs of a session, from its records (oldest first), as core's session record schema
 * decodes them (a record that does not decode is left out).
 *
 * @since 0.1.0
 * @category runs
 */
export const recordedRuns = (records: ReadonlyArray<TranscriptRecord>): Array<RecordedRun> =>
  runsOf(sessionRecordsOf(records))

const runsOf = (records: ReadonlyArray<SessionRecord>): Array<RecordedRun> => {
  const runs: Array<{
    runId: string
    prompt: string
    startedAt: number
    end: RecordedRun["end"]
    pending: Map<string, { callId: string; name: string; askedAt: number }>
  }> = []
  let current: (typeof runs)[number] | undefined
  for (const r of records) {
    if (r.type === "run_start") {
      current = r.runId === undefined ?
        undefined :
        { runId: r.runId, prompt: r.prompt ?? "", startedAt: r.at, end: undefined, pending: new Map() }
      if (current !== undefined) runs.push(current)
      continue
    }
    if (current === undefined) continue
    if (r.type === "run_end") {
      current.end = { reason: r.reason, steps: r.steps ?? 0 }
      current.pending.clear()
    } else if (r.type === "approval_request") {
      current.pending.set(r.toolCallId, { callId: r.toolCallId, name: r.name, askedAt: r.at })
    } else if (r.type === "approval" || r.type === "tool_start" || r.type === "tool_end") {
      current.pending.delete(r.toolCallId)
    }
  }
  return runs.map((r) => ({ ...r, pending: [...r.pending.values()] }))
}

/**
 * The last run of a session when it is a durable run without its end in the session: it was
 * interrupted (or is being run by another process).
 *
 * @since 0.1.0
 * @category runs
 */
export const unfinishedRun = (records: ReadonlyArray<TranscriptRecord>): RecordedRun | undefined => {
  const decoded = sessionRecordsOf(records)
  let lastRunId: string | undefined
  for (const r of decoded) if (r.type === "run_start") lastRunId = r.runId
  if (lastRunId === undefined) return undefined
  const run = runsOf(decoded).find((r) => r.runId === lastRunId)
  return run !== undefined && run.end === undefined ? run : undefined
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** JSON with the keys of every object sorted: two messages are the same when these are equal. */
const canonical = (value: unknown): string =>
  JSON.stringify(
    value,
    (_key, v: unknown) => isObject(v) ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, v[k]])) : v
  )

/**
 * A session file split at a run: the lines up to and including the run's prompt message, and the
 * lines after it.
 *
 * @since 0.1.0
 * @category sessions
 */
export const splitAtRun = (
  text: string,
  runId: string
): { readonly before: ReadonlyArray<string>; readonly after: ReadonlyArray<string> } | undefined => {
  const lines = text.split("\n")
  if (lines[lines.length - 1] === "") lines.pop()
  const parsed = lines.map((line) => {
    try {
      const value: unknown = JSON.parse(line)
      return isObject(value) ? value : undefined
    } catch {
      return undefined
    }
  })
  const start = parsed.findIndex((v) => {
    const decoded = v === undefined || typeof v["type"] !== "string"
      ? undefined
      : decodeSessionRecord(v as TranscriptRecord)
    return decoded?.ok === true && decoded.record.type === "run_start" && decoded.record.runId === runId
  })
  if (start < 0) return undefined
  let prompt = start + 1
  // the run's records come first, then its prompt: the first line that is a message
  while (prompt < lines.length && !(parsed[prompt] !== undefined && "role" in parsed[prompt]!)) prompt++
  if (prompt >= lines.length) return { before: lines, after: [] }
  return { before: lines.slice(0, prompt + 1), after: lines.slice(prompt + 1) }
}

/**
 * The message lines a session holds for a run (after its prompt), as the run's transcript tail
 * to compare with its journaled one: whether they are the same messages (tool results of a batch
 * may be in the order they finished).
 *
 * @since 0.1.0
 * @category sessions
 */
export const sameMessages = (lines: ReadonlyArray<string>, expected: ReadonlyArray<Message>): boolean => {
  const found = lines.flatMap((line) => {
    try {
      const value: unknown = JSON.parse(line)
      return isObject(value) && "role" in value ? [canonical(value)] : []
    } catch {
      return []
    }
  }).sort()
  const wanted = expected.map(canonical).sort()
  return found.length === wanted.length && found.every((m, i) => m === wanted[i])
}

/** The key of a record that a call or turn run again after a restart writes again (the last one counts). */
const repeatKey = (record: SessionRecord | undefined): string | undefined => {
  switch (record?.type) {
    case "turn_start":
      return `turn|${record.step}`
    case "tool_start":
    case "tool_end":
    case "approval_request":
      return `${record.type}|${record.toolCallId}`
    default:
      return undefined
  }
}

/**
 * The lines of a run after its prompt, rebuilt from its records (in file order, a turn or call
 * recorded twice — it ran again after a restart — keeping its last record) and its journaled
 * messages (in transcript order): each assistant message after its turn's `turn_start`, each
 * tool result after its call's `tool_end`, as a run writes them live.
 *
 * @since 0.1.0
 * @category sessions
 */
export const rebuildRun = (after: ReadonlyArray<string>, messages: ReadonlyArray<Message>): Array<string> => {
  // the run's records (a line that is a message is left out: the journal's messages replace them),
  // decoded by core's schema; a record it does not know is kept as it is, with no key
  const parsed = after.flatMap((line) => {
    try {
      const value: unknown = JSON.parse(line)
      if (!isObject(value) || "role" in value || typeof value["type"] !== "string") return []
      const decoded = decodeSessionRecord(value as TranscriptRecord)
      return [{ line, record: decoded?.ok === true ? decoded.record : undefined }]
    } catch {
      return []
    }
  })
  const last = new Map<string, number>()
  parsed.forEach(({ record }, i) => {
    const key = repeatKey(record)
    if (key !== undefined) last.set(key, i)
  })
  const records = parsed.filter(({ record }, i) => {
    const key = repeatKey(record)
    return key === undefined || last.get(key) === i
  })
  const out: Array<string> = []
  let next = 0
  /** Writes the records up to and including the first one from `next` that `test` accepts (none if no record does). */
  const flushThrough = (test: (record: SessionRecord | undefined) => boolean) => {
    const at = records.findIndex((r, i) => i >= next && test(r.record))
    if (at < 0) return
    for (; next <= at; next++) out.push(records[next]!.line)
  }
  let step = 0
  for (const message of messages) {
    if (message.role === "assistant") {
      step++
      const s = step
      flushThrough((r) => r?.type === "turn_start" && r.step === s)
    } else if (message.role === "toolResult") {
      const id = message.toolCallId
      flushThrough((r) => r?.type === "tool_end" && r.toolCallId === id)
    }
    out.push(JSON.stringify(message))
  }
  for (; next < records.length; next++) out.push(records[next]!.line)
  return out
}

/**
 * Brings a session file in line with a run's journaled transcript (`messages`: what the run
 * added after its prompt). Nothing is written when the file already holds exactly those messages
 * and `always` is false; otherwise (a process was killed while the run went on) the run's part of
 * the file is rebuilt (`rebuildRun`) and the file replaced in one step. Returns whether it
 * rewrote the file.
 *
 * @since 0.1.0
 * @category sessions
 */
export const reconcileSession = (
  root: string,
  file: string,
  runId: string,
  messages: ReadonlyArray<Message>,
  always = false
): Effect.Effect<boolean, DurableCliError> =>
  Effect.gen(function*() {
    const text = yield* Effect.try({
      try: () => readFileSync(nodePath.join(root, file), "utf8"),
      catch: (e) => new DurableCliError(`cannot read ${file}: ${(e as { code?: string }).code ?? e}`)
    })
    const split = splitAtRun(text, runId)
    if (split === undefined) return yield* Effect.fail(new DurableCliError(`${file} has no run ${runId}`))
    if (!always && sameMessages(split.after, messages)) return false
    const lines = [...split.before, ...rebuildRun(split.after, messages)]
    yield* WorkspaceIO.writeFile(root, file, `${lines.join("\n")}\n`).pipe(
      Effect.mapError((e) => new DurableCliError(e.message))
    )
    return true
  })

/** The run `runId` of the workspace, from its session's records, when it has not ended. */
const openRun = (root: string, runId: string, what: string) =>
  Effect.gen(function*() {
    const sessionId = sessionOfRun(runId)
    const records = sessionId === undefined ? undefined : yield* sessionRecords(root, sessionId)
    const run = records === undefined ? undefined : recordedRuns(records).find((r) => r.runId === runId)
    if (sessionId === undefined || run === undefined) {
      return yield* Effect.fail(
        new DurableCliError(`unknown run ${stripControl(runId).slice(0, 120)} in ${root} (agentloop runs lists them)`)
      )
    }
    if (run.end !== undefined) {
      return yield* Effect.fail(new DurableCliError(`run ${runId} has ended (${run.end.reason}): nothing to ${what}`))
    }
    return { sessionId, run }
  })

/**
 * `agentloop abort RUN`: aborts a durable run from any process. It is taken at the run's next
 * safe boundary: calls waiting for approval or not started are answered skipped (`aborted`), a
 * call already running finishes, and the run ends `aborted`. With no process running the run, it
 * ends so when its command runs again.
 *
 * @since 0.1.0
 * @category commands
 */
export const abortDurableRun = (root: string, runId: string): Effect.Effect<string, DurableCliError> =>
  Effect.gen(function*() {
    const { sessionId } = yield* openRun(root, runId, "abort")
    yield* withClient(root, sessionId, (durable) => durable.abortRun(runId))
    return `abort requested: run ${runId} ends at its next safe boundary (calls not started are skipped, a ` +
      `running call finishes)`
  })

/**
 * The records of a session file, or undefined when it does not exist or cannot be read (the file
 * is read inside the workspace, through no link).
 */
const sessionRecords = (root: string, sessionId: string): Effect.Effect<Array<TranscriptRecord> | undefined> =>
  Effect.gen(function*() {
    if (!SESSION_ID.test(sessionId)) return undefined
    const read = yield* Effect.result(WorkspaceIO.readTextFile(root, `${SESSIONS_FOLDER}/${sessionId}.jsonl`))
    if (read._tag === "Failure") return undefined
    const out: Array<TranscriptRecord> = []
    for (const line of read.success.split("\n")) {
      try {
        const value: unknown = JSON.parse(line)
        if (isObject(value) && typeof value["type"] === "string") out.push(value as TranscriptRecord)
      } catch {
        // a torn last line
      }
    }
    return out
  })

/** The durable package, loaded when a command opens a run's database (not for every command). */
type DurablePackage = typeof import("@agentloop/durable")

/** Runs `effect` with a client (no runner) of a session's database. */
const withClient = <A, E>(
  root: string,
  sessionId: string,
  effect: (durable: DurablePackage) => Effect.Effect<A, E, WorkflowEngine.WorkflowEngine | DurableStore>
): Effect.Effect<A, E | DurableCliError> =>
  Effect.flatMap(
    checkDatabase(root, sessionId, true),
    (file) =>
      Effect.flatMap(Effect.promise(() => import("@agentloop/durable")), (durable) =>
        Effect.scoped(
          Effect.flatMap(
            Layer.build(durable.embeddedClientLayer({ filename: file })).pipe(
              Effect.mapError((e: { readonly message: string }) =>
                new DurableCliError(`cannot open ${file}: ${e.message}`)
              )
            ),
            (context) => Effect.provideContext(effect(durable), context)
          )
        ))
  )

/**
 * One line of `agentloop runs`.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunLine {
  readonly runId: string
  readonly startedAt: number
  readonly prompt: string
  /**
   * `running`, `waiting for approval: <call> (<tool>), …`, `waiting`, `ended <reason> after <n> step(s)`, or
   * `unknown: <why>`.
   */
  readonly state: string
}

const describeStatus = (status: DurableRunStatus | undefined): string => {
  if (status === undefined) return "not started (its process stopped before the run was registered)"
  if (status.state === "ended") return `ended ${status.reason ?? "?"} after ${status.steps ?? "?"} step(s)`
  if (status.approvals.length > 0) {
    return `waiting for approval: ${status.approvals.map((p) => `${p.call.id} (${p.call.name})`).join(", ")}`
  }
  return status.state
}

/**
 * The durable runs of a workspace, oldest first, with their state: from the session's records
 * for runs that ended there, from the run's database otherwise.
 *
 * @since 0.1.0
 * @category runs
 */
export const listWorkspaceRuns = (root: string): Effect.Effect<ReadonlyArray<RunLine>> =>
  Effect.gen(function*() {
    let names: Array<string>
    try {
      names = readdirSync(nodePath.join(root, SESSIONS_FOLDER))
        .filter((n) => n.endsWith(".jsonl"))
        .map((n) => n.slice(0, -".jsonl".length))
    } catch {
      names = []
    }
    const out: Array<RunLine> = []
    for (const sessionId of names) {
      const records = yield* sessionRecords(root, sessionId)
      if (records === undefined) continue
      // only the session's own runs (a run id names its session, and so its database)
      const runs = recordedRuns(records).filter((r) => sessionOfRun(r.runId) === sessionId)
      if (runs.length === 0) continue
      let statuses: ReadonlyArray<DurableRunStatus> | undefined
      let unreachable = ""
      if (runs.some((r) => r.end === undefined)) {
        const listed = yield* Effect.result(withClient(root, sessionId, (durable) => durable.listRuns()))
        if (listed._tag === "Success") statuses = listed.success
        else unreachable = listed.failure.message
      }
      // a run that has not ended and whose session no process runs now goes on when its command runs again
      const idle = runs.some((r) => r.end === undefined) && !runnerBusy(root, sessionId)
      for (const run of runs) {
        const state = run.end !== undefined ?
          `ended ${run.end.reason} after ${run.end.steps} step(s)` :
          statuses === undefined ?
          `unknown: ${unreachable}` :
          describeStatus(statuses.find((s) => s.runId === run.runId))
        const stopped = run.end === undefined && idle && !state.startsWith("ended") ?
          " (no process is running it: it goes on when its command runs again)" :
          ""
        // a session file is text anyone could have written (a cloned repository): no control sequences out
        out.push({
          runId: run.runId,
          startedAt: run.startedAt,
          prompt: stripControl(run.prompt),
          state: stripControl(`${state}${stopped}`)
        })
      }
    }
    return out.sort((a, b) => a.startedAt - b.startedAt || a.runId.localeCompare(b.runId))
  })

/**
 * An answer given to `agentloop approve`: `y`/`yes` or `n`/`no` (any case), with an optional
 * reason after `n`.
 *
 * @since 0.1.0
 * @category approvals
 */
export const parseApproveAnswer = (
  answer: string,
  reason: ReadonlyArray<string>
): { readonly approved: boolean; readonly reason?: string } | DurableCliError => {
  const word = answer.trim().toLowerCase()
  // plain text: a reason with control sequences would carry them into the session file and its readers
  const text = stripControl(reason.join(" ")).trim()
  if (word === "y" || word === "yes") {
    return text.length > 0 ? new DurableCliError(`a reason goes with n (no), not with ${answer}`) : { approved: true }
  }
  if (word === "n" || word === "no") return text.length > 0 ? { approved: false, reason: text } : { approved: false }
  return new DurableCliError(`the answer must be y or n, not "${stripControl(answer).slice(0, 40)}"`)
}

/**
 * The reason the model sees for a call the user denied (the same from the terminal and from
 * `agentloop approve`): `denialText` of a user's denial (approvals/Denial.ts).
 *
 * @since 0.1.0
 * @category approvals
 */
export const denialReason = (reason: string | undefined): string => denialText({ by: "user", reason })

/**
 * `agentloop approve RUN CALL y|n [reason]`: answers a durable run's waiting approval from any
 * process. Checks first that the run exists, has not ended and waits for that call.
 *
 * @since 0.1.0
 * @category commands
 */
export const approveRun = (
  root: string,
  runId: string,
  callId: string,
  answer: string,
  reason: ReadonlyArray<string>
): Effect.Effect<string, DurableCliError> =>
  Effect.gen(function*() {
    const parsed = parseApproveAnswer(answer, reason)
    if (parsed instanceof DurableCliError) return yield* Effect.fail(parsed)
    const { sessionId } = yield* openRun(root, runId, "approve")
    // the database says which calls wait (the session's records may lag behind)
    const name = yield* withClient(root, sessionId, (durable) =>
      Effect.gen(function*() {
        const waiting = yield* durable.pendingApprovals(runId).pipe(
          Effect.mapError((e) => new DurableCliError(e.message))
        )
        // a call id from the model may hold control sequences, shown without them: either form names it
        const pending = waiting.find((p) => p.call.id === callId) ??
          waiting.find((p) => stripControl(p.call.id) === callId)
        if (pending === undefined) {
          return yield* Effect.fail(
            new DurableCliError(
              `run ${runId} has no approval waiting for call ${callId} (${
                waiting.length === 0 ? "none is waiting" : `waiting: ${waiting.map((p) => p.call.id).join(", ")}`
              })`
            )
          )
        }
        yield* durable.approve(
          runId,
          pending.call.id,
          parsed.approved
            ? { approved: true }
            : { approved: false, reason: denialText({ by: "remote", reason: parsed.reason }) }
        )
        return pending.call.name
      }))
    return `${parsed.approved ? "approved" : "denied"}: call ${stripControl(callId)} (${name}) of run ${runId}`
  })
