/**
 * Confined file operations for programs built on the tools (the CLI's demo files, session logs,
 * configuration): the same layer the `read`, `write` and `edit` tools use. Every path is relative
 * to the workspace root (or absolute inside it) and walked from an opened root descriptor without
 * following links out of it; see the README's safety section for what holds on which system.
 *
 * ```ts
 * import { Effect } from "effect"
 * import { WorkspaceFiles } from "@agentloop/tools"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   yield* WorkspaceFiles.createFile("notes/todo.md", "# todo\n") // fails with "AlreadyExists" if present
 *   const log = yield* WorkspaceFiles.openAppend(".agentloop/sessions/s1.jsonl")
 *   yield* log.append(JSON.stringify({ type: "start" }) + "\n")
 * }))
 * ```
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import { appendAll, attempt, closeFd, Confined } from "./internal/confined.ts"
import { Workspace } from "./Workspace.ts"
import type { WorkspaceFileError } from "./WorkspaceFileError.ts"

/**
 * The default size limit of `readFile` and `readFileString`: 1 MiB.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_BYTES = 1024 * 1024

const confined = Effect.map(Workspace, (workspace) => new Confined(workspace.root))

const encode = (content: string | Uint8Array): Uint8Array =>
  typeof content === "string" ? new TextEncoder().encode(content) : content

/**
 * Creates or overwrites `path` atomically: the content goes to a temporary file with an
 * unpredictable name in the same directory (created with `O_CREAT|O_EXCL|O_NOFOLLOW`), is synced,
 * then renamed over the target, so readers see the old file or the new one, never a mix. Parent
 * directories are created; an existing file keeps its mode (and owner, where permitted).
 *
 * @since 0.1.0
 * @category files
 */
export const writeFile = (
  path: string,
  content: string | Uint8Array,
  options: WriteOptions = {}
): Effect.Effect<void, WorkspaceFileError, Workspace> =>
  Effect.flatMap(confined, (files) =>
    attempt(() =>
      void files.write(path, {
        exclusive: false,
        content: () => encode(content),
        followFinal: options.followLinks !== false,
        mode: options.mode
      })
    ))

/**
 * How `writeFile` writes.
 *
 * @since 0.1.0
 * @category models
 */
export interface WriteOptions {
  /**
   * `false`: a link in the path's last component is not followed, and the write is refused (reason
   * `"NotRegularFile"`); links on the way are still followed inside the workspace. Default: followed.
   */
  readonly followLinks?: boolean | undefined
  /** The file's permission bits (default: the replaced file's, or `0o666` less the umask for a new one). */
  readonly mode?: number | undefined
}

/**
 * Removes the file (or link) at `path`, never following a link in its last component: a link is
 * removed itself, whatever it points to. A directory is refused. Succeeds with `false` when there
 * is nothing there.
 *
 * @since 0.1.0
 * @category files
 */
export const removeFile = (path: string): Effect.Effect<boolean, WorkspaceFileError, Workspace> =>
  Effect.flatMap(confined, (files) => attempt(() => files.remove(path).removed))

/**
 * Where `path` leads inside the workspace (links inside it followed), relative to the root: the
 * file a write to `path` would write. A path that does not exist (yet) is answered as it would be
 * created.
 *
 * @since 0.1.0
 * @category files
 */
export const resolvePath = (path: string): Effect.Effect<string, WorkspaceFileError, Workspace> =>
  Effect.flatMap(confined, (files) => attempt(() => files.display(files.resolve(path))))

/**
 * A file read by `readFileInfo`: where it is (relative to the root, links followed), its bytes and
 * its permission bits.
 *
 * @since 0.1.0
 * @category models
 */
export interface FileInfo {
  readonly path: string
  readonly bytes: Uint8Array
  readonly mode: number
}

/**
 * Reads the regular file `path` as `readFile` does (same refusals, `maxBytes` default
 * `DEFAULT_MAX_BYTES`), and says where it is and its mode. `lenient`: a missing name is looked up
 * among names differing only in spaces, quotes or Unicode form, as the `edit` tool looks it up.
 *
 * @since 0.1.0
 * @category files
 */
export const readFileInfo = (
  path: string,
  options: { readonly maxBytes?: number | undefined; readonly lenient?: boolean | undefined } = {}
): Effect.Effect<FileInfo, WorkspaceFileError, Workspace> =>
  Effect.flatMap(confined, (files) =>
    attempt(() => {
      const read = files.read(path, {
        maxBytes: () => options.maxBytes ?? DEFAULT_MAX_BYTES,
        refuseHardLinks: true,
        lenient: options.lenient
      })
      return { path: read.shown, bytes: read.bytes, mode: read.stat.mode & 0o7777 }
    }))

/**
 * Creates `path` with `content` only if nothing exists there (atomically, as `writeFile`); fails
 * with reason `"AlreadyExists"` otherwise, so callers can refuse to overwrite a user's file.
 *
 * @since 0.1.0
 * @category files
 */
export const createFile = (
  path: string,
  content: string | Uint8Array
): Effect.Effect<void, WorkspaceFileError, Workspace> =>
  Effect.flatMap(
    confined,
    (files) => attempt(() => void files.write(path, { exclusive: true, content: () => encode(content) }))
  )

/**
 * A file opened for appending by `openAppend`.
 *
 * @since 0.1.0
 * @category models
 */
export interface AppendFile {
  /** The path as shown inside the workspace. */
  readonly path: string
  /** Appends `data` whole, then flushes it to the disk (`fdatasync`). */
  readonly append: (data: string | Uint8Array) => Effect.Effect<void, WorkspaceFileError>
}

/**
 * Opens `path` for appending, creating it (and its parents) if absent; the file is closed when the
 * scope closes. Only a regular file with a single link is opened.
 *
 * @since 0.1.0
 * @category files
 */
export const openAppend = (path: string): Effect.Effect<AppendFile, WorkspaceFileError, Workspace | Scope.Scope> =>
  Effect.flatMap(confined, (files) =>
    Effect.acquireRelease(
      attempt(() => files.openAppend(path)),
      ({ fd }) => Effect.sync(() => closeFd(fd))
    ).pipe(Effect.map(({ fd, shown }): AppendFile => ({
      path: shown,
      append: (data) => attempt(() => appendAll(fd, encode(data), shown))
    }))))

/**
 * Reads the regular file `path` whole, refusing (without blocking) directories, FIFOs, sockets
 * and devices, files with more than one hard link (reason `"HardLinked"`), and files over
 * `maxBytes` (default `DEFAULT_MAX_BYTES`) with reason `"TooLarge"`.
 *
 * @since 0.1.0
 * @category files
 */
export const readFile = (
  path: string,
  maxBytes: number = DEFAULT_MAX_BYTES
): Effect.Effect<Uint8Array, WorkspaceFileError, Workspace> =>
  Effect.flatMap(
    confined,
    (files) => attempt(() => files.read(path, { maxBytes: () => maxBytes, refuseHardLinks: true }).bytes)
  )

/**
 * `readFile` decoded as UTF-8.
 *
 * @since 0.1.0
 * @category files
 */
export const readFileString = (
  path: string,
  maxBytes: number = DEFAULT_MAX_BYTES
): Effect.Effect<string, WorkspaceFileError, Workspace> =>
  Effect.map(readFile(path, maxBytes), (bytes) => new TextDecoder("utf-8").decode(bytes))

/**
 * Makes the directory `path` and any missing parents; succeeds if it already exists.
 *
 * @since 0.1.0
 * @category files
 */
export const makeDirectory = (path: string): Effect.Effect<void, WorkspaceFileError, Workspace> =>
  Effect.flatMap(confined, (files) => attempt(() => files.makeDirectory(path)))

/**
 * Whether something exists at `path` (following links inside the workspace; a dangling one does
 * not count). Paths outside the workspace fail rather than answer.
 *
 * @since 0.1.0
 * @category files
 */
export const exists = (path: string): Effect.Effect<boolean, WorkspaceFileError, Workspace> =>
  Effect.flatMap(confined, (files) => attempt(() => files.exists(path)))
