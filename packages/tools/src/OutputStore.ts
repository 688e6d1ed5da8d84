/**
 * Where a tool keeps an output it had to cut, so that the model can read the part it was not
 * shown: `bash` (and MCP tools, through `limitText`) write the whole output to a file of the
 * store, and the cut's notice names that file and the `offset` to read it with.
 *
 * - **Where**: `.agentloop/output/<pid>-<8 hex digits>/<tool>-<n>.txt` in the workspace, one folder
 *   per store, made on first use. Paths are shown relative to the workspace root, so `read` opens
 *   them as they are given.
 * - **Safety**: the folders are opened one by one from the workspace root, never through a
 *   symbolic link (a link planted at `.agentloop`, `.agentloop/output` or the store's folder is
 *   refused, not followed, even one that stays inside the workspace); `.agentloop/output` must
 *   belong to this user and be writable by no one else; the store's folder is 0700, its files
 *   0600; a file appears under its name only when complete (it is written under a temporary name,
 *   then renamed).
 * - **Bounds**: one kept output holds at most `OUTPUT_KEEP_MAX_BYTES` (what `read` opens); a store
 *   holds at most `OUTPUT_STORE_MAX_BYTES`, the oldest files removed first past that.
 * - **Cleanup**: the store's folder and its files are removed when the store's scope closes (the
 *   layer's: `codingToolsLayer`'s, a session's); folders left by a process that died without
 *   closing its store are removed by the next store made in that workspace (when their pid no
 *   longer runs).
 *
 * Without `outputStoreLayer` (the default value of `OutputStore`), nothing is kept and the notice
 * says so. `codingToolsLayer` provides it.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Schema } from "effect"
import type { Scope } from "effect"
import { SPILL_FOLDER, SpillError, SpillFolder } from "./internal/spill.ts"
import { cutLines, cutNotice, showCut } from "./internal/text.ts"
import { Workspace } from "./Workspace.ts"

/**
 * The most one kept output holds: 20 MiB, the largest file `read` opens (`READ_MAX_FILE_BYTES`).
 * Past it the rest is counted, not kept, and the notice says how much of the output the file has.
 *
 * @since 0.1.0
 * @category constants
 */
export const OUTPUT_KEEP_MAX_BYTES = 20 * 1024 * 1024

/**
 * The most one store keeps at once: 100 MiB. Keeping one more file past it removes the oldest.
 *
 * @since 0.1.0
 * @category constants
 */
export const OUTPUT_STORE_MAX_BYTES = 100 * 1024 * 1024

/**
 * Nothing was kept: `message` says why, in one line fit for a model (no path outside the
 * workspace, no stack trace).
 *
 * @since 0.1.0
 * @category errors
 */
export class OutputNotKept extends Schema.TaggedError<OutputNotKept>()("OutputNotKept", {
  message: Schema.String
}) {}

/**
 * An output kept in a file of the store.
 *
 * @since 0.1.0
 * @category models
 */
export interface KeptOutput {
  /** The file, relative to the workspace root. */
  readonly path: string
  /** Its size in bytes. */
  readonly bytes: number
  /** Its lines, counted as `read` counts them. */
  readonly lines: number
  /** False when the output was larger than `OUTPUT_KEEP_MAX_BYTES`: the file has its start only. */
  readonly complete: boolean
}

/**
 * A file of the store being written; removed when its scope closes unless `keep` ran.
 *
 * @since 0.1.0
 * @category models
 */
export interface OutputFile {
  /**
   * Appends `bytes` (give whole UTF-8 characters: past `OUTPUT_KEEP_MAX_BYTES` the file ends at
   * the last line break, or character, that fits). A write that fails makes `keep` fail.
   */
  readonly write: (bytes: Uint8Array) => Effect.Effect<void>
  /** Gives the file its final name and returns it. */
  readonly keep: Effect.Effect<KeptOutput, OutputNotKept>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface OutputStoreShape {
  /** A new file for an output of the tool `name`, to write while the output comes. */
  readonly create: (name: string) => Effect.Effect<OutputFile, OutputNotKept, Scope.Scope>
  /** Keeps `content` whole in a new file for the tool `name`. */
  readonly keep: (name: string, content: string | Uint8Array) => Effect.Effect<KeptOutput, OutputNotKept>
}

const none: OutputStoreShape = {
  create: () => Effect.fail(new OutputNotKept({ message: "no output store is set up (outputStoreLayer)" })),
  keep: () => Effect.fail(new OutputNotKept({ message: "no output store is set up (outputStoreLayer)" }))
}

/**
 * The store the tools keep cut outputs in. Its default keeps nothing; `outputStoreLayer` (part of
 * `codingToolsLayer`) keeps them in the workspace.
 *
 * @since 0.1.0
 * @category services
 */
export const OutputStore: Context.Reference<OutputStoreShape> = Context.Reference<OutputStoreShape>(
  "@agentloop/tools/OutputStore",
  { defaultValue: () => none }
)

const newline = 0x0a

/** The largest cut of `bytes` at or before `end` that does not split a UTF-8 character. */
const characterEnd = (bytes: Uint8Array, end: number): number => {
  let cut = end
  while (cut > 0 && end - cut < 3 && (bytes[cut]! & 0xc0) === 0x80) cut--
  return (bytes[cut]! & 0xc0) === 0x80 ? end : cut
}

/** Where a file that must stop within `room` bytes ends: after the last line break, else a character. */
const fittingEnd = (bytes: Uint8Array, room: number): number => {
  const lastBreak = bytes.subarray(0, room).lastIndexOf(newline)
  return lastBreak >= 0 ? lastBreak + 1 : characterEnd(bytes, room)
}

const fileName = (name: string, n: number): string =>
  `${name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64) || "output"}-${n}.txt`

const notKept = (error: unknown): OutputNotKept =>
  new OutputNotKept({ message: error instanceof SpillError ? error.reason : "unknown error" })

/**
 * A store in the workspace's `.agentloop/output`, removed when the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeOutputStore: Effect.Effect<OutputStoreShape, never, Workspace | Scope.Scope> = Effect.gen(
  function*() {
    const workspace = yield* Workspace
    let folder: SpillFolder | undefined
    let closed = false
    let counter = 0
    const files: Array<{ readonly name: string; readonly bytes: number }> = []
    let total = 0
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        folder?.close()
        folder = undefined
      })
    )
    /** Runs `f` on the store's folder (made on first use), turning a `SpillError` into `OutputNotKept`. */
    const use = <A>(f: (folder: SpillFolder) => A): Effect.Effect<A, OutputNotKept> =>
      Effect.suspend(() => {
        if (closed) return Effect.fail(new OutputNotKept({ message: "the output store is closed" }))
        // SpillFolder's methods are synchronous node:fs calls that report failure by throwing SpillError
        try {
          folder ??= SpillFolder.open(workspace.root)
          return Effect.succeed(f(folder))
        } catch (error) {
          if (error instanceof SpillError) return Effect.fail(notKept(error))
          throw error
        }
      })
    const place = (name: string, bytes: number) => {
      files.push({ name, bytes })
      total += bytes
      while (total > OUTPUT_STORE_MAX_BYTES && files.length > 1) {
        const oldest = files.shift()!
        total -= oldest.bytes
        folder?.remove(oldest.name)
      }
    }
    const create = (name: string): Effect.Effect<OutputFile, OutputNotKept, Scope.Scope> =>
      Effect.gen(function*() {
        let kept = false
        let bytes = 0
        let breaks = 0
        let last = -1
        let complete = true
        let failure: OutputNotKept | undefined
        const { dir, temporary } = yield* Effect.acquireRelease(
          use((dir) => ({ dir, temporary: dir.createTemporary() })),
          ({ dir, temporary }) => Effect.sync(() => kept || dir.remove(temporary.name, temporary.fd))
        )
        /** Runs a step of the folder's, which reports failure by throwing SpillError. */
        const step = (f: () => void): OutputNotKept | undefined => {
          try {
            f()
            return undefined
          } catch (error) {
            if (error instanceof SpillError) return notKept(error)
            throw error
          }
        }
        const write = (chunk: Uint8Array) =>
          Effect.sync(() => {
            if (kept || failure !== undefined || !complete || chunk.length === 0) return
            let part = chunk
            if (bytes + chunk.length > OUTPUT_KEEP_MAX_BYTES) {
              part = chunk.subarray(0, fittingEnd(chunk, OUTPUT_KEEP_MAX_BYTES - bytes))
              complete = false
            }
            if (part.length === 0) return
            failure = step(() => dir.write(temporary.fd, part))
            if (failure !== undefined) return
            bytes += part.length
            for (let i = part.indexOf(newline); i >= 0; i = part.indexOf(newline, i + 1)) breaks++
            last = part[part.length - 1]!
          })
        const keep = Effect.suspend((): Effect.Effect<KeptOutput, OutputNotKept> => {
          if (kept) return Effect.fail(new OutputNotKept({ message: "the output was kept already" }))
          if (closed) return Effect.fail(new OutputNotKept({ message: "the output store is closed" }))
          if (failure !== undefined) return Effect.fail(failure)
          const final = fileName(name, ++counter)
          failure = step(() => dir.commit(temporary.fd, temporary.name, final))
          if (failure !== undefined) return Effect.fail(failure)
          kept = true
          place(final, bytes)
          return Effect.succeed({
            path: `${dir.shown}/${final}`,
            bytes,
            lines: breaks + (bytes > 0 && last !== newline ? 1 : 0),
            complete
          })
        })
        return { write, keep }
      })
    const keep = (name: string, content: string | Uint8Array) =>
      Effect.scoped(Effect.gen(function*() {
        const file = yield* create(name)
        yield* file.write(typeof content === "string" ? new TextEncoder().encode(content) : content)
        return yield* file.keep
      }))
    return OutputStore.of({ create, keep })
  }
)

/**
 * The store, in the workspace's `.agentloop/output`, for as long as the layer lives.
 *
 * @since 0.1.0
 * @category layers
 */
export const outputStoreLayer: Layer.Layer<never, never, Workspace> = Layer.effect(OutputStore, makeOutputStore)

/**
 * How much of a long output a tool shows: its first `head` and last `tail` characters.
 *
 * @since 0.1.0
 * @category models
 */
export interface OutputLimit {
  readonly head: number
  readonly tail: number
}

/**
 * `text` as a tool shows it within `limit`: whole when it fits, else its head and tail around a
 * notice that names the limit and, when `OutputStore` keeps the whole text (under the tool's
 * `name`), the file and the `offset` to read the omitted part with. Cuts fall on line breaks, or
 * between two characters inside a line longer than its part of the limit.
 *
 * @since 0.1.0
 * @category output
 */
export const limitText = (
  name: string,
  text: string,
  limit: OutputLimit
): Effect.Effect<{ readonly text: string; readonly truncated: boolean; readonly fullOutput?: string }> =>
  Effect.gen(function*() {
    const cut = cutLines(text, limit.head, limit.tail).cut()
    if (cut === undefined) return { text, truncated: false }
    const store = yield* OutputStore
    const kept = yield* Effect.result(store.keep(name, text))
    const notice = cutNotice(cut, limit, kept._tag === "Success" ? kept.success : { notKept: kept.failure.message })
    return {
      text: showCut(cut, notice),
      truncated: true,
      ...(kept._tag === "Success" ? { fullOutput: kept.success.path } : {})
    }
  })

/**
 * The folder of the stores' folders, relative to the workspace root.
 *
 * @since 0.1.0
 * @category constants
 */
export const OUTPUT_FOLDER: string = SPILL_FOLDER
