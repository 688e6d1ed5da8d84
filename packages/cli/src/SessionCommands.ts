/**
 * `agentloop sessions [--all]` (the sessions with a conversation; with `--all` the empty ones too),
 * `agentloop sessions show ID` (a session's prompts, numbered: the numbers `fork` takes) and
 * `agentloop sessions fork ID [--at N]` (a new session with the history of ID up to and including
 * prompt N; see internal/Fork.ts for what it copies). They read sessions through the CLI's
 * confined reader and print nothing a session file could use to drive the terminal.
 *
 * @since 0.1.0
 */
import { sessionRecordsOf, undoneRuns } from "@agentloop/core"
import { Effect, Option } from "effect"
import { CliError, reportCliError } from "./CliError.ts"
import { forkSession, promptsOf, readSessionById } from "./internal/Fork.ts"
import { workspaceOf } from "./internal/Setup.ts"
import { stripControl } from "./Sanitize.ts"
import { ANSWERED, hasConversation, listSessions, SESSIONS_FOLDER } from "./Sessions.ts"

const oneLine = (text: string, max: number): string => {
  const line = stripControl(text).replace(/\s+/g, " ").trim()
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

const dateOf = (at: number): string => at === 0 ? "?" : new Date(at).toISOString().slice(0, 16).replace("T", " ")

/**
 * `agentloop sessions [--all]`: one line per session, oldest first: id, date, the model's answers
 * (steps) in what it continues, how its last run ended, its first prompt; runs an undo dropped are
 * not counted. Sessions without a conversation (`hasConversation`: the one `/clear` opened, runs that
 * failed before the model answered, every prompt undone) are listed only with `all`; otherwise a line
 * on stderr says how many were left out. A file that does not read is always listed.
 *
 * @since 0.1.0
 * @category commands
 */
export const listCommand = (options: {
  readonly workspace: Option.Option<string>
  readonly all: boolean
}): Effect.Effect<void> =>
  Effect.gen(function*() {
    const root = yield* workspaceOf(options.workspace)
    const sessions = yield* listSessions(root)
    const shown = options.all ?
      sessions :
      sessions.filter((s) => hasConversation(s) || s.ended.startsWith("unreadable"))
    const hidden = sessions.length - shown.length
    if (sessions.length === 0) process.stdout.write(`no sessions in ${root}/${SESSIONS_FOLDER}\n`)
    else if (shown.length === 0) process.stdout.write(`no session with a conversation in ${root}/${SESSIONS_FOLDER}\n`)
    for (const s of shown) {
      // file names and records are text anyone could have written (a cloned repository): no control sequences out
      process.stdout.write(
        `${stripControl(s.id)}  ${dateOf(s.at)}  ${String(s.steps).padStart(3)} step(s)  ${
          stripControl(s.ended).padEnd(11)
        }  ${oneLine(s.firstPrompt, 60)}\n`
      )
    }
    if (hidden > 0) {
      process.stderr.write(
        `${hidden} empty session(s) not shown: no answer from the model, or every prompt undone ` +
          "(agentloop sessions --all lists them)\n"
      )
    }
  }).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError))

/**
 * `agentloop sessions show ID`: the session's header and its prompts, numbered from 1, each with
 * how its run ended (`undone` for a prompt an undo took back: it keeps its number) and its steps (the
 * model's answers, `ANSWERED`).
 *
 * @since 0.1.0
 * @category commands
 */
export const showCommand = (options: {
  readonly workspace: Option.Option<string>
  readonly session: string
}): Effect.Effect<void> =>
  Effect.gen(function*() {
    const root = yield* workspaceOf(options.workspace)
    const { header, loaded } = yield* readSessionById(root, options.session)
    const out: Array<string> = []
    const model = [header?.provider, header?.model].filter((x) => x !== undefined && x !== "").join(" ")
    out.push(`session ${options.session}  ${dateOf(header?.at ?? 0)}${model === "" ? "" : `  ${oneLine(model, 60)}`}`)
    if (header?.forkedFrom !== undefined) {
      out.push(`forked from ${oneLine(header.forkedFrom.session, 60)} at prompt ${header.forkedFrom.prompt}`)
    }
    const runs = promptsOf(loaded)
    const undone = undoneRuns(sessionRecordsOf(loaded.records))
    if (runs.length === 0) out.push("no prompts yet")
    runs.forEach((run, i) => {
      const ended = undone.has(i + 1) ? "undone" : run.end === undefined ? "no end" : run.end.reason
      // the model's answers up to the next prompt, as `agentloop sessions` counts them
      const steps = loaded.messages.slice(run.from, runs[i + 1]?.from ?? loaded.messages.length)
        .filter((m) => m.role === "assistant" && ANSWERED.has(m.stopReason)).length
      out.push(
        `${String(i + 1).padStart(3)}  ${ended.padEnd(8)} ${String(steps).padStart(3)} step(s)  ${
          oneLine(run.start.prompt ?? "", 80)
        }`
      )
    })
    if (runs.length > 0) {
      out.push(
        `fork: agentloop sessions fork ${options.session} --at N, or agentloop chat --fork ${options.session}:N`
      )
    }
    process.stdout.write(`${out.join("\n")}\n`)
  }).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError))

/**
 * `agentloop sessions fork ID [--at N]`: writes a new session holding the history of ID up to and
 * including prompt N (default: all of it), prints its id; ID's file is not changed.
 *
 * @since 0.1.0
 * @category commands
 */
export const forkCommand = (options: {
  readonly workspace: Option.Option<string>
  readonly session: string
  readonly at: Option.Option<number>
}): Effect.Effect<void> =>
  Effect.gen(function*() {
    const root = yield* workspaceOf(options.workspace)
    const fork = yield* forkSession(root, { session: options.session, prompt: Option.getOrUndefined(options.at) })
    process.stdout.write(
      `${fork.id}\nforked ${options.session} at prompt ${fork.prompt} into ${fork.file}; continue it with ` +
        `agentloop chat --resume ${fork.id} (or run --resume ${fork.id} "…")\n`
    )
  }).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError))
