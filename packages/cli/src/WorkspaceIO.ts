/**
 * Every file the CLI itself writes (session logs, the demo project) goes through this module, and
 * only inside the workspace, through `@agentloop/tools`' confined file layer (`WorkspaceFiles`):
 * each path is walked from the opened workspace root without following links (race-free on
 * Linux), new files are created exclusively, files are replaced atomically. A path that leads out
 * of the workspace, or through a link, is refused with a one-line error.
 *
 * @since 0.1.0
 */
import { makeWorkspace, Workspace, WorkspaceFiles } from "@agentloop/tools"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Effect, Schema } from "effect"
import type { Scope } from "effect"

/** The confined layer's error (reason, path, one-line message). */
type WorkspaceFileError = ReturnType<typeof WorkspaceFiles.createFile> extends Effect.Effect<unknown, infer E, unknown>
  ? E
  : never

/**
 * A write inside the workspace failed or was refused.
 *
 * @since 0.1.0
 * @category errors
 */
export class WorkspaceWriteError extends Schema.TaggedError<WorkspaceWriteError>()("WorkspaceWriteError", {
  path: Schema.String,
  reason: Schema.Literals(["Outside", "AlreadyExists", "NotFound", "TooLarge", "Io"]),
  message: Schema.String
}) {}

const OUTSIDE = new Set(["Outside", "TooManyLinks", "InvalidPath", "HardLinked", "NotRegularFile", "IsDirectory"])

const confined = <A, R extends Workspace | Scope.Scope>(
  root: string,
  effect: Effect.Effect<A, WorkspaceFileError, R>
): Effect.Effect<A, WorkspaceWriteError, Exclude<R, Workspace>> =>
  effect.pipe(
    Effect.mapError((e) =>
      new WorkspaceWriteError({
        path: e.path,
        reason: e.reason === "AlreadyExists" || e.reason === "NotFound" || e.reason === "TooLarge" ?
          e.reason :
          OUTSIDE.has(e.reason) ?
          "Outside" :
          "Io",
        message: e.message
      })
    ),
    Effect.provideServiceEffect(
      Workspace,
      makeWorkspace(root).pipe(
        Effect.provide(NodeServices.layer),
        Effect.mapError((e) =>
          new WorkspaceWriteError({
            path: root,
            reason: "Io",
            message: `cannot open the workspace ${root}: ${e.message}`
          })
        )
      )
    )
  ) as Effect.Effect<A, WorkspaceWriteError, Exclude<R, Workspace>>

/**
 * Makes the folder `path` (and its parents) inside the workspace.
 *
 * @since 0.1.0
 * @category files
 */
export const makeDirectory = (root: string, path: string): Effect.Effect<void, WorkspaceWriteError> =>
  confined(root, WorkspaceFiles.makeDirectory(path))

/**
 * Creates `path` with `content`; fails with reason `AlreadyExists` when there is a file there
 * (the CLI never overwrites a user's file unless told to with `--force`).
 *
 * @since 0.1.0
 * @category files
 */
export const createFile = (root: string, path: string, content: string): Effect.Effect<void, WorkspaceWriteError> =>
  confined(root, WorkspaceFiles.createFile(path, content))

/**
 * Writes `path` with `content`, replacing a regular file there atomically (never through a link).
 *
 * @since 0.1.0
 * @category files
 */
export const writeFile = (
  root: string,
  path: string,
  content: string | Uint8Array,
  options?: WorkspaceFiles.WriteOptions
): Effect.Effect<void, WorkspaceWriteError> => confined(root, WorkspaceFiles.writeFile(path, content, options))

/**
 * Creates `path` with `content` unless something is there (then fails with reason `AlreadyExists`).
 *
 * @since 0.1.0
 * @category files
 */
export const createBytes = (
  root: string,
  path: string,
  content: Uint8Array
): Effect.Effect<void, WorkspaceWriteError> => confined(root, WorkspaceFiles.createFile(path, content))

/**
 * Removes the file or link at `path` (never following a link in its last component); `false` when
 * nothing was there.
 *
 * @since 0.1.0
 * @category files
 */
export const removeFile = (root: string, path: string): Effect.Effect<boolean, WorkspaceWriteError> =>
  confined(root, WorkspaceFiles.removeFile(path))

/**
 * Where a write to `path` would write, relative to the workspace (links inside followed).
 *
 * @since 0.1.0
 * @category files
 */
export const resolvePath = (root: string, path: string): Effect.Effect<string, WorkspaceWriteError> =>
  confined(root, WorkspaceFiles.resolvePath(path))

/**
 * Reads the regular file `path` (never through a link out, nor a hard-linked file), with where it is
 * and its mode; fails with reason `NotFound` when it does not exist, `TooLarge` past `maxBytes`.
 *
 * @since 0.1.0
 * @category files
 */
export const readFileInfo = (
  root: string,
  path: string,
  options: { readonly maxBytes: number; readonly lenient?: boolean }
): Effect.Effect<WorkspaceFiles.FileInfo, WorkspaceWriteError> =>
  confined(root, WorkspaceFiles.readFileInfo(path, options))

/**
 * A file open for appending.
 *
 * @since 0.1.0
 * @category models
 */
export interface AppendFile {
  /** Writes `data` whole at the end of the file. */
  readonly append: (data: string) => Effect.Effect<void, WorkspaceWriteError>
}

/**
 * Opens `path` for appending (created when missing) for as long as the scope lasts; `exclusive`
 * fails when it exists.
 *
 * @since 0.1.0
 * @category files
 */
export const openAppend = (
  root: string,
  path: string,
  exclusive = false
): Effect.Effect<AppendFile, WorkspaceWriteError, Scope.Scope> =>
  Effect.gen(function*() {
    if (exclusive) yield* createFile(root, path, "")
    const file = yield* confined(root, WorkspaceFiles.openAppend(path))
    return {
      append: (data: string) => confined(root, file.append(data))
    }
  })

/** Session files may be large; reading one back is bounded by this. */
const MAX_SESSION_BYTES = 512 * 1024 * 1024

/**
 * Reads the regular file `path` inside the workspace as UTF-8 text (never through a link, at most
 * `maxBytes`).
 *
 * @since 0.1.0
 * @category files
 */
export const readTextFile = (
  root: string,
  path: string,
  maxBytes: number = MAX_SESSION_BYTES
): Effect.Effect<string, WorkspaceWriteError> =>
  Effect.map(confined(root, WorkspaceFiles.readFile(path, maxBytes)), (bytes) => new TextDecoder().decode(bytes))

/**
 * Cuts a torn last line (no newline at the end, left by a crash) off the file at `path`, so lines
 * appended next do not join it (the file is rewritten atomically). Returns whether it cut anything.
 *
 * @since 0.1.0
 * @category files
 */
export const cutTornLine = (root: string, path: string): Effect.Effect<boolean, WorkspaceWriteError> =>
  Effect.gen(function*() {
    const bytes = yield* confined(root, WorkspaceFiles.readFile(path, MAX_SESSION_BYTES))
    if (bytes.length === 0 || bytes[bytes.length - 1] === 0x0a) return false
    yield* confined(root, WorkspaceFiles.writeFile(path, bytes.subarray(0, bytes.lastIndexOf(0x0a) + 1)))
    return true
  })
