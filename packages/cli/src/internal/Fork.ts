/**
 * Forking a session: a new session file that starts with an earlier session's history up to and
 * including one of its prompts (the prompt's run, to its end), and then goes on by itself. The
 * original file is only read.
 *
 * What the new file holds: its own header (`forkedFrom: { session, prompt }`, the original's system
 * prompt, since the history was made under it), then the original's messages and records of runs
 * 1..N as core's reader (`parseTranscript`) reads them: checked and paired, each batch's results in
 * call order, records decoded with `SessionRecord` (unknown and invalid ones are left out). So
 * prompts keep their numbers, the viewer shows the copied runs, and `agentloop replay` replays
 * them too. The cut is at prompt N's `run_end`: never inside a batch, and a run with no end (a
 * killed process, or a durable run that has not ended) is refused as a fork point. Compaction
 * records of runs 1..N are copied as they are: the messages they count are the same ones, so a
 * resumed fork reuses their summary exactly as the original would have.
 */
import { decodeSessionRecord, encodeTranscriptLine, sessionRunsOf } from "@agentloop/core"
import type { LoadedTranscript, Message, SessionHeader, SessionRecord, SessionRun } from "@agentloop/core"
import { Clock, Effect } from "effect"
import { CliError } from "../CliError.ts"
import { newSessionId, readSession, SESSIONS_FOLDER } from "../Sessions.ts"
import * as WorkspaceIO from "../WorkspaceIO.ts"

/** What `--fork ID[:N]` or `sessions fork ID --at N` names. */
export interface ForkPoint {
  readonly session: string
  /** The prompt to fork at (1-based); `undefined`: the last one. */
  readonly prompt: number | undefined
}

/** A session id as the CLI writes them (and as `--resume` accepts them). */
const SESSION_ID = /^[A-Za-z0-9._-]+$/

/** Reads `ID` or `ID:N` (the `--fork` flag's value). */
export const parseForkPoint = (text: string): ForkPoint | CliError => {
  const colon = text.lastIndexOf(":")
  const session = colon === -1 ? text : text.slice(0, colon)
  const n = colon === -1 ? undefined : text.slice(colon + 1)
  if (!SESSION_ID.test(session)) {
    return new CliError(`--fork: "${session}" is not a session id (see agentloop sessions)`)
  }
  if (n === undefined) return { session, prompt: undefined }
  if (!/^\d+$/.test(n)) return new CliError(`--fork ${session}:${n}: the prompt number must be a whole number`)
  return { session, prompt: Number(n) }
}

/**
 * The session `id` of the workspace (its file in the sessions folder, through the confined
 * reader), checked as core's reader checks it, with its header (`undefined`: it has none).
 */
export const readSessionById = (root: string, id: string) =>
  Effect.gen(function*() {
    if (!SESSION_ID.test(id)) {
      return yield* Effect.fail(new CliError(`"${id}" is not a session id (see agentloop sessions)`))
    }
    const loaded = yield* readSession(root, `${SESSIONS_FOLDER}/${id}.jsonl`).pipe(
      Effect.mapError((e) =>
        new CliError(
          e.message.endsWith("no such file or directory") ?
            `no session ${id} in ${root}/${SESSIONS_FOLDER} (agentloop sessions lists them)` :
            e.message
        )
      )
    )
    let header: SessionHeader | undefined
    for (const raw of loaded.records) {
      const decoded = decodeSessionRecord(raw)
      if (decoded?.ok === true && decoded.record.type === "session") {
        header = decoded.record
        break
      }
    }
    return { loaded, header }
  })

/** The prompts of a session, numbered from 1: its runs as `sessionRunsOf` finds them. */
export const promptsOf = (loaded: LoadedTranscript): ReadonlyArray<SessionRun> => sessionRunsOf(loaded)

/**
 * The entries of a fork at `prompt` (1-based, `undefined`: the last), after its header: the
 * records and messages of runs 1..prompt in file order, or what is wrong with that fork point.
 */
export const forkEntries = (
  loaded: LoadedTranscript,
  id: string,
  prompt: number | undefined
): { readonly prompt: number; readonly entries: ReadonlyArray<Message | SessionRecord> } | CliError => {
  const runs = promptsOf(loaded)
  if (runs.length === 0) return new CliError(`session ${id} has no prompt to fork from`)
  const n = prompt ?? runs.length
  if (!Number.isInteger(n) || n < 1 || n > runs.length) {
    return new CliError(
      `session ${id} has ${runs.length} prompt(s): fork at 1 to ${runs.length}, not ${n} ` +
        `(agentloop sessions show ${id})`
    )
  }
  const run = runs[n - 1]!
  if (run.end === undefined) {
    return new CliError(
      `prompt ${n} of session ${id} has no end (its process was killed, or the run is still going): fork at an ` +
        `earlier prompt, or continue it with --resume ${id}`
    )
  }
  const entries: Array<Message | SessionRecord> = []
  // runs as sessionRunsOf counts them: the n-th run_start, then the first run_end while it is open
  let starts = 0
  let open = false
  let next = 0
  for (let i = 0; i < loaded.records.length; i++) {
    const decoded = decodeSessionRecord(loaded.records[i]!)
    if (decoded === undefined || !decoded.ok) continue
    const record = decoded.record
    const at = loaded.recordsAt[i] ?? loaded.messages.length
    while (next < at && next < run.to) entries.push(loaded.messages[next++]!)
    if (record.type === "session") continue
    // a compaction can only count messages the fork holds (anything else is a damaged file's)
    if (record.type === "compaction" && (record.summarized ?? 0) > run.to) continue
    if (record.type === "run_start") {
      starts++
      open = true
    }
    entries.push(record)
    if (record.type === "run_end" && open) {
      open = false
      if (starts === n) break
    }
  }
  while (next < run.to) entries.push(loaded.messages[next++]!)
  return { prompt: n, entries }
}

/**
 * Writes the fork of `point` as a new session file in the workspace (created exclusively, through
 * the confined writer) and returns its id and how many prompts it holds. `header` is the new
 * session's provider and model (default: the original's).
 */
export const forkSession = (
  root: string,
  point: ForkPoint,
  header: { readonly provider?: string | undefined; readonly model?: string | undefined } = {}
): Effect.Effect<{ readonly id: string; readonly file: string; readonly prompt: number }, CliError> =>
  Effect.gen(function*() {
    const { header: original, loaded } = yield* readSessionById(root, point.session)
    if (original === undefined) {
      return yield* Effect.fail(new CliError(`${SESSIONS_FOLDER}/${point.session}.jsonl has no session header`))
    }
    const fork = forkEntries(loaded, point.session, point.prompt)
    if (fork instanceof CliError) return yield* Effect.fail(fork)
    const id = yield* newSessionId
    const file = `${SESSIONS_FOLDER}/${id}.jsonl`
    const provider = header.provider ?? original.provider
    const model = header.model ?? original.model
    const full: SessionHeader = {
      type: "session",
      version: 1,
      id,
      at: yield* Clock.currentTimeMillis,
      cwd: root,
      ...(provider === undefined ? {} : { provider }),
      ...(model === undefined ? {} : { model }),
      ...(original.systemPrompt === undefined ? {} : { systemPrompt: original.systemPrompt }),
      forkedFrom: { session: point.session, prompt: fork.prompt }
    }
    const text = [full, ...fork.entries].map(encodeTranscriptLine).join("")
    yield* WorkspaceIO.createFile(root, file, text).pipe(Effect.mapError((e) => new CliError(e.message)))
    return { id, file, prompt: fork.prompt }
  })

/** `run/chat --fork ID[:N]`: the fork of what the flag names (see `forkSession`). */
export const forkFlag = (
  root: string,
  value: string,
  header: { readonly provider?: string | undefined; readonly model?: string | undefined }
) =>
  Effect.suspend(() => {
    const point = parseForkPoint(value)
    return point instanceof CliError ? Effect.fail(point) : forkSession(root, point, header)
  })
