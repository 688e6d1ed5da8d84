/**
 * Checkpoints and undo. Before a run's call changes files, what it will change is saved, and a
 * `checkpoint` record (core's `CheckpointRecord`) says so in the session file before the call
 * runs, so a process killed during the call leaves what undoing needs:
 *
 * - `write` and `edit`: the file the call will write (once per run and file: the run's first
 *   change counts), its content saved content-addressed (sha256) under
 *   `.agentloop/checkpoints/<session id>/`, or recorded as absent (undoing removes it). A file over
 *   `FILE_LIMIT`, or past the session's `SESSION_LIMIT`, is recorded as not saved, with why.
 * - `bash`, in a git repository: before the run's first bash call, the workspace's files as a git
 *   tree object (untracked files included, ignored ones and `.agentloop/` not), and again as each
 *   bash call ends, made with a temporary index: the user's index, HEAD, branches and stash are not
 *   touched. The files that differ between the first tree and the run's last are what undoing puts
 *   back (up to now, when the process died during a call). Outside a git
 *   repository (and for MCP servers' tools) the record says the changes are not tracked, and the
 *   terminal says so too.
 * - Any call, the session's first (with `replayStart`), in a git repository: the workspace's files as
 *   a git tree the same way, before the call runs (a `start` checkpoint): where `agentloop replay`
 *   starts, uncommitted and untracked files included. Undoing does not use it.
 *
 * Undoing (`/undo`, `/rewind`, `agentloop undo`) puts back, for every file a checkpoint of the
 * undone runs covers, the state of the earliest one, and appends an `undo` record naming the runs:
 * the transcript the session continues leaves them out (core's `sessionHistoryOf`), the file
 * keeps them. Every write and removal goes through the confined layer (`WorkspaceIO`): nothing is
 * written through a link or outside the workspace (a file swapped for a link since is refused,
 * and a link in `.agentloop/checkpoints` leading out stops the save), and a saved blob is checked
 * against its hash before it is put back.
 *
 * @since 0.1.0
 */
import { decodeSessionRecord, Executor, sessionHistoryOf } from "@agentloop/core"
import type { CheckpointFile, CheckpointRecord, HistoryRun, SessionRecord, UndoRecord } from "@agentloop/core"
import { Clock, Context, Effect, Schema, Semaphore } from "effect"
import { execFile } from "node:child_process"
import { createHash } from "node:crypto"
import { copyFileSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as nodePath from "node:path"
import { stripControl } from "./Sanitize.ts"
import { readSession } from "./Sessions.ts"
import * as WorkspaceIO from "./WorkspaceIO.ts"

/**
 * Where checkpoints are kept, relative to the workspace (a folder per session).
 *
 * @since 0.1.0
 * @category constants
 */
export const CHECKPOINTS_FOLDER = ".agentloop/checkpoints"

/**
 * A file larger than this (bytes) is not saved (its checkpoint says so): 16 MiB.
 *
 * @since 0.1.0
 * @category constants
 */
export const FILE_LIMIT = 16 * 1024 * 1024

/**
 * What one session's saved files may take in all (bytes): 256 MiB.
 *
 * @since 0.1.0
 * @category constants
 */
export const SESSION_LIMIT = 256 * 1024 * 1024

/**
 * Undoing is not possible (nothing to undo, a prompt number out of range, a durable run that has
 * not ended), or the session could not be read.
 *
 * @since 0.1.0
 * @category errors
 */
export class UndoError extends Schema.TaggedError<UndoError>()("UndoError", { message: Schema.String }) {}

/** agentloop's own files: never saved nor restored (sessions, checkpoints, durable databases). */
const OWN = /^\.agentloop\/(sessions|checkpoints|durable)(\/|$)/

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

const blobPath = (sessionId: string, blob: string) => `${CHECKPOINTS_FOLDER}/${sessionId}/${blob}`

const mib = (bytes: number) => bytes < 1024 * 1024 ? `${bytes} bytes` : `${(bytes / 1024 / 1024).toFixed(0)} MiB`

// -- git ------------------------------------------------------------------------------------------

/** Runs git in `root`; its output, or `undefined` when it fails (not a repository, no git). */
const git = (
  root: string,
  args: ReadonlyArray<string>,
  options: { readonly index?: string; readonly maxBytes?: number } = {}
): Effect.Effect<Buffer | undefined> =>
  Effect.callback<Buffer | undefined>((resume) => {
    const env: NodeJS.ProcessEnv = { ...process.env, GIT_OPTIONAL_LOCKS: "0", GIT_TERMINAL_PROMPT: "0" }
    for (const name of ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"]) delete env[name]
    if (options.index !== undefined) env["GIT_INDEX_FILE"] = options.index
    // (a repository's fsmonitor hook is a program of its config: not run for a checkpoint)
    const child = execFile(
      "git",
      ["-c", "core.fsmonitor=false", "-c", "core.quotepath=false", ...args],
      { cwd: root, env, encoding: "buffer", maxBuffer: options.maxBytes ?? 64 * 1024 * 1024 },
      (error, stdout) => resume(Effect.succeed(error === null ? stdout : undefined))
    )
    return Effect.sync(() => void child.kill("SIGKILL"))
  })

/**
 * The workspace's files as a git tree object (tracked and untracked files, not ignored ones nor
 * `.agentloop/`), written with a temporary index (a copy of the repository's, so unchanged files
 * are not read again); `undefined` when the workspace is not in a git repository.
 *
 * @since 0.1.0
 * @category git
 */
export const workspaceTree = (root: string): Effect.Effect<string | undefined> =>
  Effect.gen(function*() {
    const inside = yield* git(root, ["rev-parse", "--is-inside-work-tree"])
    if (inside === undefined || inside.toString().trim() !== "true") return undefined
    const indexPath = yield* git(root, ["rev-parse", "--path-format=absolute", "--git-path", "index"])
    return yield* Effect.acquireUseRelease(
      Effect.sync(() => mkdtempSync(nodePath.join(tmpdir(), "agentloop-checkpoint-"))),
      (folder) =>
        Effect.gen(function*() {
          const index = nodePath.join(folder, "index")
          try {
            if (indexPath !== undefined) copyFileSync(indexPath.toString().trim(), index)
          } catch {
            // a repository without an index yet: every file is read
          }
          const added = yield* git(root, ["add", "-A", "--", "."], { index })
          // agentloop's own folder is not the project's (naming it in `add` fails when it is ignored)
          const own = yield* git(root, ["rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", ".agentloop"], {
            index
          })
          if (added === undefined || own === undefined) return undefined
          const tree = yield* git(root, ["write-tree"], { index })
          return tree?.toString().trim()
        }),
      (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
    )
  })

/** A file that differs between a checkpoint's tree and now: its state in the tree (`sha` undefined: absent). */
interface TreeChange {
  readonly path: string
  readonly mode: string
  readonly sha: string | undefined
}

const changesSince = (root: string, before: string, now: string): Effect.Effect<Array<TreeChange> | undefined> =>
  Effect.map(
    git(root, ["diff-tree", "-r", "-z", "--no-renames", "--relative", before, now]),
    (out) => {
      if (out === undefined) return undefined
      const parts = out.toString("utf8").split("\0")
      const changes: Array<TreeChange> = []
      for (let i = 0; i + 1 < parts.length; i += 2) {
        // ":<mode before> <mode now> <sha before> <sha now> <status>", then the path
        const [mode, , sha] = parts[i]!.slice(1).split(" ")
        changes.push({ path: parts[i + 1]!, mode: mode!, sha: /^0+$/.test(sha!) ? undefined : sha })
      }
      return changes
    }
  )

// -- saving ---------------------------------------------------------------------------------------

/**
 * What checkpointing needs from the session it works for.
 *
 * @since 0.1.0
 * @category models
 */
export interface CheckpointOptions {
  readonly root: string
  /** The session whose folder the files are saved in (it changes with `/clear`). */
  readonly sessionId: () => string
  /** The number of the run going on (1 for the session's first run). */
  readonly run: () => number
  /** Writes a record to the session file. */
  readonly append: (record: CheckpointRecord) => Effect.Effect<void>
  /** Shows a line (a file not saved, changes not tracked). */
  readonly notice: (text: string) => Effect.Effect<void>
  /** What the session's files already take (a resumed session). */
  readonly stored?: number | undefined
  readonly fileLimit?: number | undefined
  readonly sessionLimit?: number | undefined
  /**
   * Save the workspace as the session's first call finds it, for `agentloop replay` (a `start`
   * checkpoint): `true` for a session with no call yet, `false` for one that had calls (a resumed
   * session: a tree taken now would not be its start). A session begun later in the same process
   * (`/clear`) is saved whenever this is given. Not given: no `start` is saved.
   */
  readonly replayStart?: boolean | undefined
}

/**
 * Checkpointing for a session: `wrap` gives the executor that saves, before each call, what the
 * call will change (see the module's description).
 *
 * @since 0.1.0
 * @category models
 */
export interface Checkpoints {
  readonly wrap: (executor: Executor["Service"]) => Executor["Service"]
  /** The same, for a built tools layer's context. */
  readonly wrapContext: <R extends Executor>(context: Context.Context<R>) => Context.Context<R>
}

/**
 * What the session's saved files take, from its checkpoint records (each blob counted once).
 *
 * @since 0.1.0
 * @category checkpoints
 */
export const storedBytes = (records: ReadonlyArray<SessionRecord>): number => {
  const seen = new Map<string, number>()
  for (const r of records) {
    if (r.type === "checkpoint" && r.file?.blob !== undefined) seen.set(r.file.blob, r.file.size ?? 0)
  }
  let total = 0
  for (const size of seen.values()) total += size
  return total
}

/**
 * Whether a session's records hold a call already (a `tool_start`, or a checkpoint): its first call
 * is behind it, so its start for `agentloop replay` can no longer be saved (`replayStart`).
 *
 * @since 0.1.0
 * @category checkpoints
 */
export const hadCalls = (records: ReadonlyArray<SessionRecord>): boolean =>
  records.some((r) => r.type === "tool_start" || r.type === "checkpoint")

/**
 * Makes the checkpointing of a session (see the module's description).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeCheckpoints = (options: CheckpointOptions): Effect.Effect<Checkpoints> =>
  Effect.gen(function*() {
    const { root } = options
    const fileLimit = options.fileLimit ?? FILE_LIMIT
    const sessionLimit = options.sessionLimit ?? SESSION_LIMIT
    const lock = yield* Semaphore.make(1)
    const state = {
      session: options.sessionId(),
      stored: options.stored ?? 0,
      blobs: new Set<string>(),
      run: -1,
      paths: new Set<string>(),
      /** Whether the run's bash calls are tracked (a git repository); undefined before its first. */
      bash: undefined as boolean | undefined,
      others: new Set<string>(),
      /** The session whose start is saved, or not to be saved (`replayStart`). */
      started: options.replayStart === false ? options.sessionId() : undefined as string | undefined
    }
    const current = () => {
      const session = options.sessionId()
      if (session !== state.session) {
        state.session = session
        state.stored = 0
        state.blobs.clear()
        state.run = -1
      }
      const run = options.run()
      if (run !== state.run) {
        state.run = run
        state.paths.clear()
        state.bash = undefined
        state.others.clear()
      }
      return { session, run }
    }

    /** Saves `bytes` as a blob of the session; why not, when it could not. */
    const saveBlob = (session: string, blob: string, bytes: Uint8Array) =>
      Effect.gen(function*() {
        if (state.blobs.has(blob)) return undefined
        if (state.stored + bytes.length > sessionLimit) {
          return `the session's checkpoints reached their limit of ${mib(sessionLimit)}`
        }
        const path = blobPath(session, blob)
        const created = yield* Effect.result(WorkspaceIO.createBytes(root, path, bytes))
        if (created._tag === "Failure") {
          if (created.failure.reason !== "AlreadyExists") return `cannot save it: ${created.failure.message}`
          // saved before (an earlier process): only if it still holds what its name says
          const there = yield* Effect.result(WorkspaceIO.readFileInfo(root, path, { maxBytes: fileLimit }))
          if (there._tag === "Failure" || sha256(there.success.bytes) !== blob) {
            const replaced = yield* Effect.result(WorkspaceIO.writeFile(root, path, bytes, { followLinks: false }))
            if (replaced._tag === "Failure") return `cannot save it: ${replaced.failure.message}`
          }
        }
        state.blobs.add(blob)
        state.stored += bytes.length
        return undefined
      })

    /** The checkpoint of the file a `write` or `edit` of `input` will change; undefined: nothing to save. */
    const fileCheckpoint = (session: string, input: string, lenient: boolean) =>
      Effect.gen(function*() {
        const read = yield* Effect.result(
          lenient ?
            WorkspaceIO.readFileInfo(root, input, { maxBytes: fileLimit, lenient: true }) :
            Effect.flatMap(
              WorkspaceIO.resolvePath(root, input),
              (path) => WorkspaceIO.readFileInfo(root, path, { maxBytes: fileLimit })
            )
        )
        if (read._tag === "Success") {
          const { path, bytes, mode } = read.success
          const blob = sha256(bytes)
          const unsaved = yield* saveBlob(session, blob, bytes)
          return unsaved === undefined ?
            { path, blob, size: bytes.length, mode } :
            { path, size: bytes.length, mode, skipped: unsaved }
        }
        const e = read.failure
        // the call itself will fail on these (a path out of the workspace, an edit of a missing file)
        if (e.reason === "Outside" || (lenient && e.reason === "NotFound")) return undefined
        const path = yield* Effect.orElseSucceed(WorkspaceIO.resolvePath(root, input), () => input)
        if (e.reason === "NotFound") return { path, absent: true }
        if (e.reason === "TooLarge") return { path, skipped: `it is larger than ${mib(fileLimit)}` }
        return { path, skipped: e.message }
      })

    const checkpoint = (call: { readonly id: string; readonly name: string; readonly arguments: unknown }) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const { session, run } = current()
        const base = { type: "checkpoint" as const, at: yield* Clock.currentTimeMillis, run, toolCallId: call.id }
        if (call.name === "write" || call.name === "edit") {
          const args = call.arguments as { readonly path?: unknown }
          if (typeof args.path !== "string" || args.path.length === 0) return
          const file: CheckpointFile | undefined = yield* fileCheckpoint(session, args.path, call.name === "edit")
          if (file === undefined || state.paths.has(file.path) || OWN.test(file.path)) return
          state.paths.add(file.path)
          yield* options.append({ ...base, tool: call.name, file })
          if (file.skipped !== undefined) {
            yield* options.notice(`⚠ ${stripControl(file.path)} is not saved for /undo: ${stripControl(file.skipped)}`)
          }
        } else if (call.name === "bash") {
          if (state.bash !== undefined) return
          const tree = yield* workspaceTree(root)
          state.bash = tree !== undefined
          if (tree !== undefined) return yield* options.append({ ...base, tool: "bash", tree })
          yield* options.append({ ...base, tool: "bash", notTracked: "bash: the workspace is not a git repository" })
          yield* options.notice("⚠ bash's changes are not tracked for /undo: the workspace is not a git repository")
        } else if (!state.others.has(call.name)) {
          state.others.add(call.name)
          yield* options.append({ ...base, tool: call.name, notTracked: `${call.name}: not one of the coding tools` })
          yield* options.notice(`⚠ ${stripControl(call.name)}'s changes are not tracked for /undo`)
        }
      }))

    /**
     * The session's start, on its first call (`replayStart`): the tree it found, or `undefined`
     * (already saved, not asked for, or not a git repository).
     */
    const start = (call: { readonly id: string; readonly name: string }) =>
      options.replayStart === undefined || state.started === options.sessionId() ?
        Effect.succeed(undefined) :
        lock.withPermits(1)(Effect.gen(function*() {
          const { session, run } = current()
          if (state.started === session) return undefined
          state.started = session
          const tree = yield* workspaceTree(root)
          if (tree === undefined) return undefined
          yield* options.append({
            type: "checkpoint",
            at: yield* Clock.currentTimeMillis,
            run,
            toolCallId: call.id,
            tool: call.name,
            start: tree
          })
          return tree
        }))

    /** The tree after a bash call of a tracked run. */
    const afterBash = (call: { readonly id: string }) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const { run } = current()
        if (state.bash !== true) return
        const after = yield* workspaceTree(root)
        if (after === undefined) return
        yield* options.append({
          type: "checkpoint",
          at: yield* Clock.currentTimeMillis,
          run,
          toolCallId: call.id,
          tool: "bash",
          after
        })
      }))

    const wrap = (executor: Executor["Service"]): Executor["Service"] =>
      Executor.of({
        get definitions() {
          return executor.definitions
        },
        execute: (call, context) => {
          const definition = executor.definitions.find((d) => d.name === call.name)
          // an unknown tool is refused by the executor
          if (definition === undefined) return executor.execute(call, context)
          // read-only tools change nothing, but what they read is where a replay starts too
          if (definition.readOnly === true) return Effect.andThen(start(call), executor.execute(call, context))
          const run = executor.execute(call, context)
          return Effect.andThen(
            Effect.andThen(start(call), checkpoint(call)),
            call.name === "bash" ? Effect.onExit(run, () => afterBash(call)) : run
          )
        }
      })
    return {
      wrap,
      wrapContext: <R extends Executor>(context: Context.Context<R>): Context.Context<R> =>
        Context.add(context, Executor, wrap(Context.get(context as Context.Context<Executor>, Executor)))
    }
  })

// -- undoing --------------------------------------------------------------------------------------

/**
 * What undoing did to the files.
 *
 * @since 0.1.0
 * @category models
 */
export interface Restored {
  readonly restored: ReadonlyArray<string>
  readonly removed: ReadonlyArray<string>
  readonly failed: ReadonlyArray<{ readonly path: string; readonly reason: string }>
  readonly notTracked: ReadonlyArray<string>
}

type Target =
  | { readonly _tag: "file"; readonly file: CheckpointFile }
  | { readonly _tag: "tree"; readonly change: TreeChange }

const sameFile = (root: string, path: string, bytes: Uint8Array, mode: number | undefined, limit: number) =>
  Effect.map(
    Effect.result(WorkspaceIO.readFileInfo(root, path, { maxBytes: limit })),
    (now) =>
      now._tag === "Success" && Buffer.from(now.success.bytes).equals(bytes) &&
      (mode === undefined || now.success.mode === mode)
  )

/**
 * Puts back the files the checkpoints cover, each as its earliest checkpoint found it (records in
 * file order); a git tree covers the files that differ between it and the workspace now.
 *
 * @since 0.1.0
 * @category undo
 */
export const restoreCheckpoints = (
  root: string,
  sessionId: string,
  checkpoints: ReadonlyArray<CheckpointRecord>,
  fileLimit: number = FILE_LIMIT
): Effect.Effect<Restored> =>
  Effect.gen(function*() {
    const targets = new Map<string, Target>()
    const notTracked: Array<string> = []
    const failed: Array<{ path: string; reason: string }> = []
    let now: string | undefined
    // each run's last tree after a bash call (none when its process died during the call: now)
    const lastAfter = new Map<number, string>()
    for (const r of checkpoints) if (r.after !== undefined) lastAfter.set(r.run, r.after)
    const treeDone = new Set<number>()
    for (const r of checkpoints) {
      if (r.file !== undefined) {
        if (!targets.has(r.file.path)) targets.set(r.file.path, { _tag: "file", file: r.file })
      } else if (r.tree !== undefined) {
        // the run's first tree counts (a durable run's call run again after a restart records another)
        if (treeDone.has(r.run)) continue
        treeDone.add(r.run)
        let until = lastAfter.get(r.run)
        if (until === undefined) until = now ??= yield* workspaceTree(root)
        const changes = until === undefined ? undefined : yield* changesSince(root, r.tree, until)
        if (changes === undefined) {
          failed.push({ path: ".", reason: `the git tree ${r.tree.slice(0, 12)} of bash's checkpoint cannot be read` })
          continue
        }
        for (const change of changes) {
          if (!targets.has(change.path)) targets.set(change.path, { _tag: "tree", change })
        }
      } else if (r.notTracked !== undefined && !notTracked.includes(r.notTracked)) {
        notTracked.push(r.notTracked)
      }
    }
    const restored: Array<string> = []
    const removed: Array<string> = []
    const put = (path: string, bytes: Uint8Array, mode: number | undefined) =>
      Effect.gen(function*() {
        if (yield* sameFile(root, path, bytes, mode, fileLimit)) return
        // never through a link: a file swapped for one since is refused
        yield* WorkspaceIO.writeFile(root, path, bytes, { followLinks: false, ...(mode === undefined ? {} : { mode }) })
        restored.push(path)
      })
    const remove = (path: string) =>
      Effect.map(WorkspaceIO.removeFile(root, path), (was) => {
        if (was) removed.push(path)
      })
    for (const [path, target] of [...targets].sort(([a], [b]) => a.localeCompare(b))) {
      if (OWN.test(path)) continue
      const done = yield* Effect.result(Effect.gen(function*() {
        if (target._tag === "file") {
          const { file } = target
          if (file.absent === true) return yield* remove(path)
          if (file.blob === undefined) {
            return failed.push({ path, reason: `it was not saved (${file.skipped ?? "no content recorded"})` })
          }
          const saved = yield* WorkspaceIO.readFileInfo(root, blobPath(sessionId, file.blob), { maxBytes: fileLimit })
          if (sha256(saved.bytes) !== file.blob) {
            return failed.push({ path, reason: `its saved copy ${file.blob.slice(0, 12)} was changed since` })
          }
          return yield* put(path, saved.bytes, file.mode)
        }
        const { change } = target
        if (change.sha === undefined) return yield* remove(path)
        if (change.mode !== "100644" && change.mode !== "100755") {
          return failed.push({ path, reason: change.mode === "120000" ? "it was a link" : "it was a submodule" })
        }
        const bytes = yield* git(root, ["cat-file", "blob", change.sha], { maxBytes: fileLimit })
        if (bytes === undefined) return failed.push({ path, reason: `git cannot read its blob ${change.sha}` })
        return yield* put(path, bytes, change.mode === "100755" ? 0o755 : 0o644)
      }))
      if (done._tag === "Failure") failed.push({ path, reason: done.failure.message })
    }
    return { restored, removed, failed, notTracked }
  })

/**
 * A session's prompts that undoing can take back, oldest first (the transcript it continues).
 *
 * @since 0.1.0
 * @category undo
 */
export const undoablePrompts = (root: string, file: string): Effect.Effect<ReadonlyArray<HistoryRun>, UndoError> =>
  Effect.map(
    Effect.mapError(readSession(root, file), (e) => new UndoError({ message: e.message })),
    (loaded) => sessionHistoryOf(loaded).runs
  )

/**
 * What undoing a session did: the `undo` record to append, and the prompts it took back.
 *
 * @since 0.1.0
 * @category models
 */
export interface Undone {
  readonly record: UndoRecord
  readonly prompts: ReadonlyArray<string>
  readonly left: number
}

/**
 * Undoes a session's last prompt, or (`to`: a number `undoablePrompts` counts from 1) that prompt
 * and every later one: restores their files and gives the `undo` record to append.
 *
 * @since 0.1.0
 * @category undo
 */
export const undoSession = (
  root: string,
  session: { readonly id: string; readonly file: string },
  to?: number | undefined
): Effect.Effect<Undone, UndoError> =>
  Effect.gen(function*() {
    const loaded = yield* Effect.mapError(readSession(root, session.file), (e) => new UndoError({ message: e.message }))
    const runs = sessionHistoryOf(loaded).runs
    if (runs.length === 0) return yield* new UndoError({ message: "nothing to undo: the session has no prompt left" })
    const from = to ?? runs.length
    if (!Number.isInteger(from)) return yield* new UndoError({ message: "/rewind N takes a prompt number" })
    if (from < 1 || from > runs.length) {
      return yield* new UndoError({
        message: `there is no prompt ${from}: the session has ${runs.length} (1-${runs.length}; /rewind lists them)`
      })
    }
    const last = runs[runs.length - 1]!
    if (last.start.runId !== undefined && last.end === undefined) {
      return yield* new UndoError({
        message: `the last run ${last.start.runId} is a durable run that has not ended: resume it first ` +
          "(agentloop chat --durable --continue; Ctrl-C aborts it), then undo"
      })
    }
    const dropped = runs.slice(from - 1)
    const numbers = new Set(dropped.map((r) => r.number))
    const checkpoints: Array<CheckpointRecord> = []
    for (const raw of loaded.records) {
      const decoded = raw.type === "checkpoint" ? decodeSessionRecord(raw) : undefined
      if (decoded?.ok === true && decoded.record.type === "checkpoint" && numbers.has(decoded.record.run)) {
        checkpoints.push(decoded.record)
      }
    }
    const done = yield* restoreCheckpoints(root, session.id, checkpoints)
    const record: UndoRecord = {
      type: "undo",
      at: yield* Clock.currentTimeMillis,
      runs: [...numbers],
      ...(done.restored.length > 0 ? { restored: [...done.restored] } : {}),
      ...(done.removed.length > 0 ? { removed: [...done.removed] } : {}),
      ...(done.failed.length > 0 ? { failed: done.failed.map((f) => ({ ...f })) } : {}),
      ...(done.notTracked.length > 0 ? { notTracked: [...done.notTracked] } : {})
    }
    return { record, prompts: dropped.map((r) => r.start.prompt ?? ""), left: from - 1 }
  })

/**
 * The first line of a prompt, for a list (at most `width` characters, no control sequences).
 *
 * @since 0.1.0
 * @category undo
 */
export const promptLine = (prompt: string, width = 70): string => {
  const first = stripControl(prompt.split("\n")[0] ?? "").trim()
  return first.length > width ? `${first.slice(0, width - 1)}…` : first
}

/**
 * What `/undo`, `/rewind` and `agentloop undo` show of what they did.
 *
 * @since 0.1.0
 * @category undo
 */
export const describeUndo = (undone: Undone): Array<string> => {
  const { record } = undone
  const n = undone.prompts.length
  const lines = [
    n === 1 ?
      `↶ undone: "${promptLine(undone.prompts[0]!)}"` :
      `↶ undone: ${n} prompts, from "${promptLine(undone.prompts[0]!)}"`
  ]
  for (const path of record.restored ?? []) lines.push(`  restored ${stripControl(path)}`)
  for (const path of record.removed ?? []) lines.push(`  removed ${stripControl(path)}`)
  for (const f of record.failed ?? []) lines.push(`  ⚠ not restored ${stripControl(f.path)}: ${stripControl(f.reason)}`)
  for (const what of record.notTracked ?? []) lines.push(`  ⚠ not tracked: ${stripControl(what)}`)
  if ((record.restored ?? []).length + (record.removed ?? []).length + (record.failed ?? []).length === 0) {
    lines.push("  no file to put back")
  }
  lines.push(`  the conversation is back to before it (${undone.left} prompt(s) left)`)
  return lines
}
