/**
 * Every file the CLI itself writes (session logs, the demo project) goes through this module, and
 * only inside the workspace: each folder on the way is checked to be a real folder (not a link),
 * files are opened with `O_NOFOLLOW`, new files with `O_EXCL`. A path that leads out of the
 * workspace, or through a link, is refused with a one-line error.
 *
 * (This is the CLI's own small layer, written while `@agentloop/tools` gains its race-free
 * `WorkspaceFiles`; switching to it is a change to this file only.)
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"
import type { Scope } from "effect"
import { constants } from "node:fs"
import * as fsp from "node:fs/promises"
import * as nodePath from "node:path"

/**
 * A write inside the workspace failed or was refused.
 *
 * @since 0.1.0
 * @category errors
 */
export class WorkspaceWriteError extends Schema.TaggedError<WorkspaceWriteError>()("WorkspaceWriteError", {
  path: Schema.String,
  reason: Schema.Literals(["Outside", "AlreadyExists", "Io"]),
  message: Schema.String
}) {}

const codeOf = (e: unknown) => (e as { code?: unknown } | null)?.code

const ioError = (path: string, what: string) => (e: unknown) => {
  const code = codeOf(e)
  if (code === "EEXIST") {
    return new WorkspaceWriteError({ path, reason: "AlreadyExists", message: `${path} already exists` })
  }
  if (code === "ELOOP") {
    return new WorkspaceWriteError({ path, reason: "Outside", message: `${path} is a link; the CLI does not write through links` })
  }
  const detail = typeof code === "string" ? code : e instanceof Error ? e.message.split("\n")[0] : String(e)
  return new WorkspaceWriteError({ path, reason: "Io", message: `cannot ${what} ${path}: ${detail}` })
}

/** The parts of `path` relative to `root`, or a refusal when it leads out. */
const partsOf = (root: string, path: string): Effect.Effect<Array<string>, WorkspaceWriteError> => {
  const relative = nodePath.relative(root, nodePath.resolve(root, path))
  if (relative === "" || relative.startsWith(`..${nodePath.sep}`) || relative === ".." || nodePath.isAbsolute(relative)) {
    return Effect.fail(new WorkspaceWriteError({ path, reason: "Outside", message: `${path} is outside the workspace ${root}` }))
  }
  return Effect.succeed(relative.split(nodePath.sep))
}

/** Checks (and with `create`, makes) each folder of `parts` under `root`: real folders only. */
const walkFolders = (root: string, parts: ReadonlyArray<string>, shown: string) =>
  Effect.tryPromise({
    try: async () => {
      let current = root
      for (const part of parts) {
        current = nodePath.join(current, part)
        let info
        try {
          info = await fsp.lstat(current)
        } catch (e) {
          if (codeOf(e) !== "ENOENT") throw e
          await fsp.mkdir(current)
          info = await fsp.lstat(current)
        }
        if (info.isSymbolicLink()) throw Object.assign(new Error("link"), { code: "ELOOP" })
        if (!info.isDirectory()) throw Object.assign(new Error("not a folder"), { code: "ENOTDIR" })
      }
      return current
    },
    catch: ioError(shown, "create the folders of")
  })

/**
 * Makes the folder `path` (and its parents) inside the workspace.
 *
 * @since 0.1.0
 * @category files
 */
export const makeDirectory = (root: string, path: string): Effect.Effect<void, WorkspaceWriteError> =>
  Effect.flatMap(partsOf(root, path), (parts) => Effect.asVoid(walkFolders(root, parts, path)))

const openFile = (root: string, path: string, flags: number) =>
  Effect.flatMap(partsOf(root, path), (parts) =>
    Effect.flatMap(walkFolders(root, parts.slice(0, -1), path), (folder) =>
      Effect.tryPromise({
        try: () => fsp.open(nodePath.join(folder, parts[parts.length - 1]!), flags | constants.O_NOFOLLOW, 0o644),
        catch: ioError(path, "open")
      })))

/**
 * Creates `path` with `content`; fails with reason `AlreadyExists` when there is a file there
 * (the CLI never overwrites a user's file unless told to with `--force`).
 *
 * @since 0.1.0
 * @category files
 */
export const createFile = (root: string, path: string, content: string): Effect.Effect<void, WorkspaceWriteError> =>
  Effect.acquireUseRelease(
    openFile(root, path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL),
    (handle) => Effect.tryPromise({ try: () => handle.writeFile(content), catch: ioError(path, "write") }),
    (handle) => Effect.promise(() => handle.close())
  )

/**
 * Writes `path` with `content`, replacing a regular file there (never through a link).
 *
 * @since 0.1.0
 * @category files
 */
export const writeFile = (root: string, path: string, content: string): Effect.Effect<void, WorkspaceWriteError> =>
  Effect.acquireUseRelease(
    openFile(root, path, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC),
    (handle) => Effect.tryPromise({ try: () => handle.writeFile(content), catch: ioError(path, "write") }),
    (handle) => Effect.promise(() => handle.close())
  )

/**
 * A file open for appending.
 *
 * @since 0.1.0
 * @category models
 */
export interface AppendFile {
  /** Writes `data` whole at the end of the file (one write call). */
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
  Effect.map(
    Effect.acquireRelease(
      openFile(root, path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | (exclusive ? constants.O_EXCL : 0)),
      (handle) => Effect.promise(() => handle.close())
    ),
    (handle) => ({
      append: (data) =>
        Effect.tryPromise({ try: () => handle.appendFile(data, "utf8"), catch: ioError(path, "append to") })
    })
  )

/**
 * Cuts a torn last line (no newline at the end, left by a crash) off the file at `path`, so lines
 * appended next do not join it. Returns whether it cut anything.
 *
 * @since 0.1.0
 * @category files
 */
export const cutTornLine = (root: string, path: string): Effect.Effect<boolean, WorkspaceWriteError> =>
  Effect.acquireUseRelease(
    openFile(root, path, constants.O_RDWR),
    (handle) =>
      Effect.tryPromise({
        try: async () => {
          const bytes = await handle.readFile()
          if (bytes.length === 0 || bytes[bytes.length - 1] === 0x0a) return false
          await handle.truncate(bytes.lastIndexOf(0x0a) + 1)
          return true
        },
        catch: ioError(path, "repair")
      }),
    (handle) => Effect.promise(() => handle.close())
  )
