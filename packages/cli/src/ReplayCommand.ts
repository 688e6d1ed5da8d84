/**
 * `agentloop replay SESSION [--workspace DIR]`: re-runs a recorded session offline against its
 * recorded model answers, with the CLI's own tools (the tools layer `run` and `chat` build), and
 * checks that every request, every run's end and the invariants are the recording's. It is a
 * thin wrapper over the testkit's `recordingOf` and `replaySession`: the session is read with the
 * viewer's confined reader and core's transcript reader, nothing here parses it again.
 *
 * - The model is the recording (no provider, no network, no API key).
 * - A call is denied again when its recorded result says it was denied (with the reason the model
 *   saw); every other call runs: so the results the model sees are the ones the tools give now.
 * - The tools run, by default, in a fresh temporary folder holding the project's `git HEAD`
 *   (`git archive`; `.agentloop/` left out), or, outside a git repository, a copy of the project
 *   without `.agentloop/`; the folder is removed afterwards. Replaying in the live workspace after
 *   the session changed it would give false divergences. `--workspace DIR` runs them in DIR as it
 *   is (and changes it as the session did).
 *
 * Exit codes: 0 the session replays the same; 1 it diverged or broke an invariant (the
 * `ReplayError`'s message names the run, the step, the call and the difference); 2 bad input (no
 * such session, an unreadable or invalid file, a workspace that cannot be prepared).
 *
 * @since 0.1.0
 */
import { ask, deny } from "@agentloop/core"
import type { LoopEvent, PolicyDecision, ToolPolicy, ToolResultMessage } from "@agentloop/core"
import { recordingOf, replaySession } from "@agentloop/testkit"
import type { Recording } from "@agentloop/testkit"
import { Deferred, Effect, Layer, Option } from "effect"
import { execFileSync } from "node:child_process"
import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as NodePath from "node:path"
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

const deniedIn = (result: ToolResultMessage | undefined): { readonly reason: string | undefined } | undefined => {
  const details = result?.details
  if (typeof details !== "object" || details === null) return undefined
  const d = details as { readonly skipped?: unknown; readonly reason?: unknown; readonly denial?: unknown }
  if (d.skipped !== true || d.reason !== "denied") return undefined
  return { reason: typeof d.denial === "string" ? d.denial : undefined }
}

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

/** The tools' folder: DIR as it is, or a fresh copy of the project's HEAD (or of the project). */
const replayFolder = (project: string, workspace: Option.Option<string>) =>
  Effect.gen(function*() {
    if (Option.isSome(workspace)) {
      const dir = yield* workspaceOf(workspace)
      return { dir, note: `replaying in ${dir} as it is (the tools change it as the session did)` }
    }
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(NodePath.join(tmpdir(), "agentloop-replay-"))),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
    const git = (args: ReadonlyArray<string>) =>
      execFileSync("git", args, { cwd: project, stdio: ["ignore", "pipe", "ignore"], maxBuffer: 2 ** 31 - 1 })
    const head = yield* Effect.option(Effect.try(() => git(["rev-parse", "--short", "HEAD"]).toString().trim()))
    if (Option.isSome(head)) {
      yield* Effect.try({
        try: () => {
          const prefix = git(["rev-parse", "--show-prefix"]).toString().trim()
          const tar = git(["archive", "--format=tar", `HEAD:${prefix}`])
          execFileSync("tar", ["-x", "-C", dir], { input: tar, stdio: ["pipe", "ignore", "pipe"] })
          rmSync(NodePath.join(dir, ".agentloop"), { recursive: true, force: true })
        },
        catch: (e) => new CliError(`cannot copy git HEAD of ${project} into ${dir}: ${(e as Error).message}`)
      })
      return {
        dir,
        note: `replaying in a fresh copy of git HEAD (${head.value}) of ${project}, without .agentloop/ and ` +
          `uncommitted changes: ${dir} (removed afterwards)`
      }
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
      note: `replaying in a fresh copy of ${project} (not a git repository), without .agentloop/: ${dir} ` +
        "(removed afterwards)"
    }
  })

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
    const settings = yield* resolveSettings(NO_FLAGS, project, process.env).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    const folder = yield* replayFolder(project, options.workspace)
    const out = (line: string) => process.stdout.write(`${line}\n`)
    out(`agentloop replay ${stripControl(file)}: ${recording.runs.length} run(s)`)
    out(stripControl(folder.note))
    const tools = yield* toolsLayer(folder.dir, settings, { mcp: [], mcpUrl: [] }).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    const executor = yield* Layer.build(tools).pipe(Effect.mapError((e) => new CliError(e.message)))
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
