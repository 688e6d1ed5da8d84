/**
 * `agentloop replay SESSION [--workspace DIR]`: re-runs a recorded session offline against its
 * recorded model answers, with the CLI's own tools (the tools layer `run` and `chat` build), and
 * checks that every request, every run's end and the invariants are the recording's. It is a
 * thin wrapper over the testkit's `recordingOf` and `replaySession`: the session is read with the
 * viewer's confined reader and core's transcript and session-record readers, nothing here parses it.
 *
 * - The model is the recording (no provider, no network, no API key).
 * - A call is denied again when its recorded result says it was denied (with the reason the model
 *   saw); every other call runs: so the results the model sees are the ones the tools give now.
 * - The tools run, by default, in a fresh temporary folder holding the workspace as the session's
 *   first call found it: the git tree its `start` checkpoint saved (Checkpoints.ts; uncommitted and
 *   untracked files included, ignored files and `.agentloop/` not), put there with `git archive`.
 *   A session without one (recorded before it was saved, or its tree pruned since) gets the project's
 *   `git HEAD`, and the output says so; outside a git repository, a copy of the project without
 *   `.agentloop/`. The folder is removed afterwards. Replaying in the live workspace after the session
 *   changed it would give false divergences. `--workspace DIR` runs them in DIR as it is (and changes
 *   it as the session did).
 * - The session's folder and the replay's stand for each other (`replayPaths`): in a call's
 *   arguments the session's folder becomes the replay's, in its result the replay's becomes the
 *   session's, so a command printing an absolute path (a stack trace, `pwd`) replays the same.
 *
 * Exit codes: 0 the session replays the same; 1 it diverged or broke an invariant (the
 * `ReplayError`'s message names the run, the step, the call and the difference); 2 bad input (no
 * such session, an unreadable or invalid file, a workspace that cannot be prepared).
 *
 * @since 0.1.0
 */
import { ask, deny, Executor, parseTranscript, sessionRecordsOf, ToolError } from "@agentloop/core"
import type { LoopEvent, PolicyDecision, ToolPolicy, ToolResultMessage } from "@agentloop/core"
import { recordingOf, replaySession } from "@agentloop/testkit"
import type { Recording } from "@agentloop/testkit"
import { Context, Deferred, Effect, Layer, Option } from "effect"
import { execFileSync } from "node:child_process"
import { cpSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as NodePath from "node:path"
import { deniedTextOf, wasDenied } from "./approvals/Denial.ts"
import { CliError, reportCliError } from "./CliError.ts"
import { NO_FLAGS, resolveSettings } from "./Config.ts"
import { toolsLayer, workspaceOf } from "./internal/Setup.ts"
import { stripControl } from "./Sanitize.ts"
import { readSessionText, resolveSessionFile } from "./view/Viewer.ts"

/**
 * The largest number of model requests a replayed run may make: a run that ended `maxSteps` hit
 * its limit at its recorded steps, so the replay's limit is that; otherwise any limit at least
 * the recorded steps gives the same runs.
 *
 * @since 0.1.0
 * @category replay
 */
export const replayMaxSteps = (recording: Recording): number => {
  const limited = recording.runs.flatMap((run) =>
    run.reason === "maxSteps" && run.steps !== undefined ? [run.steps] : []
  )
  if (limited.length > 0) return Math.min(...limited)
  return Math.max(50, ...recording.runs.map((run) => (run.steps ?? 0) + 1))
}

/** Where a call is answered in the recording: its run, the model answer (step) that made it, its id. */
const keyOf = (run: number, step: number, callId: string) => `${run}/${step}/${callId}`

/** The recorded result of every call, by `keyOf`. */
const recordedResults = (recording: Recording): Map<string, ToolResultMessage> => {
  const results = new Map<string, ToolResultMessage>()
  for (const run of recording.runs) {
    let step = 0
    for (const message of run.messages) {
      if (message.role === "assistant") step++
      else if (message.role === "toolResult") results.set(keyOf(run.index, step, message.toolCallId), message)
    }
  }
  return results
}

const deniedIn = (result: ToolResultMessage | undefined): { readonly reason: string | undefined } | undefined =>
  result !== undefined && wasDenied(result) ? { reason: deniedTextOf(result) } : undefined

/**
 * The replay's policy and the events it follows: a call whose recorded result says it was denied
 * is denied again with the same reason (a denial without one is asked, and the question answered
 * no); every other call runs.
 *
 * @since 0.1.0
 * @category replay
 */
export const recordedApprovals = (recording: Recording): {
  readonly policy: ToolPolicy
  readonly follow: (run: number, event: LoopEvent) => Effect.Effect<void>
} => {
  const results = recordedResults(recording)
  const at = { run: 0, step: 0 }
  return {
    policy: (call): PolicyDecision => {
      const denied = deniedIn(results.get(keyOf(at.run, at.step, call.id)))
      if (denied === undefined) return { _tag: "Allow" }
      return denied.reason === undefined ? ask : deny(denied.reason)
    },
    follow: (run, event) =>
      Effect.suspend(() => {
        if (run !== at.run) {
          at.run = run
          at.step = 0
        }
        if (event.type === "assistant_message") at.step++
        return event.type === "approval_request" ?
          Effect.asVoid(Deferred.succeed(event.answer, { approved: false })) :
          Effect.void
      })
  }
}

/** What the session file says of where it ran: its folder (the header's `cwd`) and its saved start. */
const originOf = (text: string, file: string) =>
  Effect.map(parseTranscript(text, file), (loaded) => {
    let cwd: string | undefined
    let start: string | undefined
    for (const record of sessionRecordsOf(loaded.records)) {
      if (record.type === "session" && cwd === undefined) cwd = record.cwd
      if (record.type === "checkpoint" && record.start !== undefined && start === undefined) start = record.start
    }
    return { cwd, start }
  })

/** A git object's name: a SHA-1 or SHA-256 in hex. */
const OBJECT_NAME = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/

/**
 * The tools' folder: DIR as it is, or a fresh copy of the workspace as the session's first call
 * found it (its `start` tree), of the project's HEAD when the session has none, or of the project.
 */
const replayFolder = (project: string, workspace: Option.Option<string>, start: string | undefined) =>
  Effect.gen(function*() {
    if (Option.isSome(workspace)) {
      const dir = yield* workspaceOf(workspace)
      return { dir, note: `replaying in ${dir} as it is (the tools change it as the session did)` }
    }
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => realpathSync(mkdtempSync(NodePath.join(tmpdir(), "agentloop-replay-")))),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
    const git = (args: ReadonlyArray<string>) =>
      execFileSync("git", args, { cwd: project, stdio: ["ignore", "pipe", "ignore"], maxBuffer: 2 ** 31 - 1 })
    /** Puts the workspace's part of a git tree-ish into the folder (which is emptied first). */
    const extract = (treeish: string, prefix: string) =>
      Effect.try({
        try: () => {
          rmSync(dir, { recursive: true, force: true })
          mkdirSync(dir)
          const tar = git(["archive", "--format=tar", `${treeish}:${prefix}`])
          execFileSync("tar", ["-x", "-C", dir], { input: tar, stdio: ["pipe", "ignore", "pipe"] })
          rmSync(NodePath.join(dir, ".agentloop"), { recursive: true, force: true })
        },
        catch: (e) => e as Error
      })
    const prefix = yield* Effect.option(Effect.try(() => git(["rev-parse", "--show-prefix"]).toString().trim()))
    const saved = start === undefined ? undefined : `its start (git tree ${stripControl(start.slice(0, 12))})`
    let why = "the session saved no start (recorded by an earlier agentloop, or outside a git repository)"
    if (Option.isSome(prefix)) {
      // (a session file may come from anywhere: what is not an object's name never reaches git's arguments)
      if (start !== undefined && !OBJECT_NAME.test(start)) why = `${saved} is not the name of a git tree`
      else if (start !== undefined) {
        const restored = yield* Effect.result(extract(start, prefix.value))
        if (restored._tag === "Success") {
          return {
            dir,
            note: `replaying in a fresh copy of ${project} as the session's first call found it, from ${saved}: ` +
              `uncommitted and untracked files included, ignored files (node_modules/...) and .agentloop/ ` +
              `left out: ${dir} (removed afterwards)`
          }
        }
        why = `${saved} is not in this repository (pruned by git gc, or saved in another clone)`
      }
      const head = yield* Effect.option(Effect.try(() => git(["rev-parse", "--short", "HEAD"]).toString().trim()))
      if (Option.isSome(head)) {
        yield* Effect.mapError(
          extract("HEAD", prefix.value),
          (e) => new CliError(`cannot copy git HEAD of ${project} into ${dir}: ${e.message}`)
        )
        return {
          dir,
          note: `replaying in a fresh copy of git HEAD (${head.value}) of ${project}, without .agentloop/ and ` +
            `uncommitted changes, as ${why}: ${dir} (removed afterwards)`
        }
      }
    } else if (saved !== undefined) {
      why = `${saved} cannot be read outside a git repository`
    }
    const agentloop = NodePath.join(project, ".agentloop")
    yield* Effect.try({
      try: () =>
        cpSync(project, dir, {
          recursive: true,
          verbatimSymlinks: true,
          filter: (source) => source !== agentloop
        }),
      catch: (e) => new CliError(`cannot copy ${project} into ${dir}: ${(e as Error).message}`)
    })
    return {
      dir,
      note: `replaying in a fresh copy of ${project} as it is now${
        Option.isSome(prefix) ? " (a git repository without a commit)" : " (not a git repository)"
      }, without .agentloop/${start === undefined ? "" : `, as ${why}`}: ${dir} (removed afterwards)`
    }
  })

/** A character that continues a file name: a folder's path followed by one is another folder's. */
const NAME = "[\\p{L}\\p{N}_.~+@%#-]"

const realOrSelf = (path: string): string => {
  try {
    return realpathSync(path)
  } catch {
    return path
  }
}

/** `/a/b/` and `/a/b` are one folder; `/` (or nothing) is no folder to map. */
const folderForms = (paths: ReadonlyArray<string | undefined>): Array<string> => {
  const forms = new Set<string>()
  for (const path of paths) {
    if (path === undefined) continue
    const trimmed = path.replace(/\/+$/, "")
    if (trimmed.length > 0 && NodePath.isAbsolute(trimmed)) forms.add(trimmed)
  }
  return [...forms]
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** Replaces each of `from` (whole folders: not `/a/bc` for `/a/b`) with `to`. */
const replacer = (from: ReadonlyArray<string>, to: string): (text: string) => string => {
  const sources = from.filter((path) => path !== to).sort((a, b) => b.length - a.length)
  if (sources.length === 0) return (text) => text
  const pattern = new RegExp(
    `(?<!${NAME})(?:${sources.map(escapeRegExp).join("|")})(?!${NAME})`,
    "gu"
  )
  return (text) => text.replace(pattern, to)
}

const mapStrings = (f: (text: string) => string) => {
  const go = (value: unknown): unknown => {
    if (typeof value === "string") return f(value)
    if (Array.isArray(value)) return value.map(go)
    if (typeof value === "object" && value !== null) {
      return Object.fromEntries(Object.entries(value).map(([key, v]) => [key, go(v)]))
    }
    return value
  }
  return go
}

/**
 * How the session's folder and the replay's stand for each other. `recorded` are the forms of the
 * session's folder (the first is the one the session's tools ran in: what a result is mapped back
 * to), `replay` those of the replay's (the first is the one its tools run in). A form with a
 * trailing slash is the same folder; the real path of each (`/tmp` is `/private/tmp` on macOS) is
 * added. Only whole folders are replaced: `/a/b` is not in `/a/bc` nor in `/x/a/b`.
 *
 * - `toReplay`: a call's arguments, with the session's folder replaced by the replay's.
 * - `toRecorded`: a text the replay's tools gave, with the replay's folder replaced by the session's.
 *
 * @since 0.1.0
 * @category replay
 */
export const replayPaths = (recorded: ReadonlyArray<string>, replay: ReadonlyArray<string>): {
  readonly toReplay: (args: Record<string, unknown>) => Record<string, unknown>
  readonly toRecorded: (text: string) => string
} => {
  const recordedForms = folderForms([...recorded, ...recorded.map(realOrSelf)])
  const replayForms = folderForms([...replay, ...replay.map(realOrSelf)])
  if (recordedForms.length === 0 || replayForms.length === 0) return { toReplay: (args) => args, toRecorded: (t) => t }
  const toReplay = mapStrings(replacer(recordedForms, replayForms[0]!))
  return {
    toReplay: (args) => toReplay(args) as Record<string, unknown>,
    toRecorded: replacer(replayForms, recordedForms[0]!)
  }
}

/** The executor with its calls' paths mapped (see `replayPaths`), both ways. */
const mappedExecutor = (executor: Executor["Service"], paths: ReturnType<typeof replayPaths>): Executor["Service"] => {
  const details = mapStrings(paths.toRecorded)
  return Executor.of({
    get definitions() {
      return executor.definitions
    },
    execute: (call, context) =>
      executor.execute({ ...call, arguments: paths.toReplay(call.arguments) }, context).pipe(
        Effect.map((result): ToolResultMessage => ({
          ...result,
          content: result.content.map((part) =>
            part.type === "text" ? { ...part, text: paths.toRecorded(part.text) } : part
          ),
          ...(result.details === undefined ? {} : { details: details(result.details) })
        })),
        Effect.mapError((e) => new ToolError({ message: paths.toRecorded(e.message) }))
      )
  })
}

const summaryOf = (args: Record<string, unknown>): string => {
  const first = ["path", "command", "pattern"].map((k) => args[k]).find((v) => typeof v === "string")
  const text = stripControl(String(first ?? "")).replace(/\s+/g, " ")
  return text.length > 60 ? `${text.slice(0, 59)}…` : text
}

/**
 * `agentloop replay SESSION [--workspace DIR]` (see the module's description).
 *
 * @since 0.1.0
 * @category commands
 */
export const replayCommand = (options: {
  readonly session: string
  readonly workspace: Option.Option<string>
}) =>
  Effect.scoped(Effect.gen(function*() {
    const project = yield* workspaceOf(Option.none())
    const file = yield* resolveSessionFile(project, options.session).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    const text = yield* readSessionText(file, project).pipe(Effect.mapError((e) => new CliError(e.message)))
    const recording = yield* recordingOf(text, file).pipe(Effect.mapError((e) => new CliError(e.message)))
    const origin = yield* originOf(text, file).pipe(Effect.mapError((e) => new CliError(e.message)))
    const settings = yield* resolveSettings(NO_FLAGS, project, process.env).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    const folder = yield* replayFolder(project, options.workspace, origin.start)
    const out = (line: string) => process.stdout.write(`${line}\n`)
    out(`agentloop replay ${stripControl(file)}: ${recording.runs.length} run(s)`)
    out(stripControl(folder.note))
    const tools = yield* toolsLayer(folder.dir, settings, { mcp: [], mcpUrl: [] }).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    const built = yield* Layer.build(tools).pipe(Effect.mapError((e) => new CliError(e.message)))
    // (a session's folder as the shell named it: the current one, when that is where the session ran)
    const shell = process.env["PWD"]
    const recordedFolder = origin.cwd ?? project
    const paths = replayPaths(
      [recordedFolder, ...(shell !== undefined && realOrSelf(shell) === realOrSelf(recordedFolder) ? [shell] : [])],
      [folder.dir]
    )
    const executor = Context.add(built, Executor, mappedExecutor(Context.get(built, Executor), paths))
    const approvals = recordedApprovals(recording)
    let calls = 0
    // each call's arguments, from the message that made it (a denied call has no tool_start)
    const argumentsOf = new Map<string, Record<string, unknown>>()
    const replayed = yield* replaySession(recording, {
      policy: approvals.policy,
      maxSteps: replayMaxSteps(recording),
      onEvent: (run, event) =>
        Effect.andThen(
          approvals.follow(run, event),
          Effect.sync(() => {
            if (event.type === "assistant_message") {
              for (const part of event.message.content) {
                if (part.type === "toolCall") argumentsOf.set(part.id, part.arguments)
              }
            }
            if (event.type === "tool_start") calls++
            if (event.type === "tool_end") {
              const r = event.result
              const mark = deniedIn(r) !== undefined ? "⊘" : r.isError ? "✗" : "✓"
              out(
                `  run ${run} · ${mark} ${stripControl(r.toolName)} ${summaryOf(argumentsOf.get(r.toolCallId) ?? {})}`
              )
            } else if (event.type === "turn_end") {
              out(`run ${run}: ${event.reason} after ${event.steps} step(s)`)
            }
          })
        )
    }).pipe(Effect.provide(executor), Effect.result)
    if (replayed._tag === "Failure") {
      const e = replayed.failure
      if (e.reason === "unreadable") return yield* Effect.fail(new CliError(e.message))
      process.stderr.write(`agentloop replay: ${e.reason}: ${stripControl(e.message)}\n`)
      process.exitCode = 1
      return
    }
    const steps = replayed.success.reduce((n, run) => n + run.result.steps, 0)
    out(
      `replayed ${replayed.success.length} run(s), ${steps} step(s), ${calls} tool call(s): the same as the recording`
    )
  })).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError))
