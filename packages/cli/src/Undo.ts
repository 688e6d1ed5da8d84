/**
 * `agentloop undo`: `/undo` and `/rewind` from the shell, for a session no process runs (a chat
 * that was closed, a run that failed, a process killed in the middle of a call).
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import { describeUndo, promptLine, undoablePrompts, undoSession } from "./Checkpoints.ts"
import { CliError } from "./CliError.ts"
import { runnerBusy } from "./Durable.ts"
import { workspaceOf } from "./internal/Setup.ts"
import { stripControl } from "./Sanitize.ts"
import { listSessions, openSession, SESSIONS_FOLDER } from "./Sessions.ts"

/**
 * `agentloop undo [--session ID] [--to N] [--list]`: puts back the files of the session's last
 * prompt (with `--to N`: of prompt N and every later one) and takes them out of the conversation
 * that `--continue` / `--resume` continue; `--list` numbers the prompts instead.
 *
 * @since 0.1.0
 * @category commands
 */
export const undoCommand = (options: {
  readonly workspace: Option.Option<string>
  readonly session: Option.Option<string>
  readonly to: Option.Option<number>
  readonly list: boolean
}): Effect.Effect<void> =>
  Effect.scoped(Effect.gen(function*() {
    const root = yield* workspaceOf(options.workspace)
    let id = Option.getOrUndefined(options.session)
    if (id === undefined) {
      const latest = (yield* listSessions(root)).filter((s) => !s.ended.startsWith("unreadable")).pop()
      if (latest === undefined) {
        return yield* Effect.fail(new CliError(`there is no session in ${root}/${SESSIONS_FOLDER} yet`))
      }
      id = latest.id
    }
    if (!/^[A-Za-z0-9._-]+$/.test(id)) {
      return yield* Effect.fail(
        new CliError(`--session: "${stripControl(id)}" is not a session id (see agentloop sessions)`)
      )
    }
    const file = `${SESSIONS_FOLDER}/${id}.jsonl`
    if (options.list) {
      const runs = yield* undoablePrompts(root, file).pipe(Effect.mapError((e) => new CliError(e.message)))
      if (runs.length === 0) process.stdout.write(`session ${id} has no prompt to undo\n`)
      runs.forEach((r, i) =>
        process.stdout.write(`${String(i + 1).padStart(3)}  ${promptLine(r.start.prompt ?? "")}\n`)
      )
      return
    }
    if (runnerBusy(root, id)) {
      return yield* Effect.fail(
        new CliError(`session ${id} is being run by another agentloop process right now: undo it there`)
      )
    }
    // (opening cuts a torn last line a crash left, so the record starts a line of its own)
    const log = yield* openSession(root, id).pipe(Effect.mapError((e) => new CliError(e.message)))
    const undone = yield* undoSession(root, log, Option.getOrUndefined(options.to)).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    yield* log.writer.append(undone.record).pipe(Effect.mapError((e) => new CliError(e.message)))
    process.stdout.write(`session ${id}\n${describeUndo(undone).join("\n")}\n`)
  })).pipe(
    Effect.catchIf((e): e is CliError => e instanceof CliError, (e) =>
      Effect.sync(() => {
        process.stderr.write(`agentloop: ${stripControl(e.message)}\n`)
        process.exitCode = 2
      }))
  )
