/**
 * The folder a coding agent may touch. Every path a tool receives is resolved against the
 * workspace root and confined to it: `..` escapes, absolute paths outside the root and symbolic
 * links that lead outside (including dangling ones) are refused with a clear error.
 *
 * @since 0.1.0
 */
import { Context, Effect, FileSystem, Layer, Path } from "effect"
import type { PlatformError } from "effect"
import { ToolError } from "@agentloop/core"

/**
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceShape {
  /** The workspace root, with symbolic links resolved. */
  readonly root: string
  /**
   * Resolves `path` (relative to the root, or absolute) to a canonical absolute path inside the
   * workspace, following symbolic links; fails with a `ToolError` naming the path otherwise.
   */
  readonly resolve: (path: string) => Effect.Effect<string, ToolError>
  /** A path as the model should see it: relative to the root. */
  readonly display: (absolute: string) => string
}

/**
 * @since 0.1.0
 * @category services
 */
export class Workspace extends Context.Service<Workspace, WorkspaceShape>()("@agentloop/tools/Workspace") {}

const MAX_LINK_HOPS = 40

/**
 * Makes a workspace rooted at `root` (which must be an existing directory).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeWorkspace = Effect.fnUntraced(function*(root: string) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const realRoot = yield* fs.realPath(path.resolve(root))
  const info = yield* fs.stat(realRoot)
  if (info.type !== "Directory") {
    return yield* Effect.die(new Error(`agentloop: workspace root ${realRoot} is not a directory`))
  }

  const inside = (candidate: string) => {
    const relative = path.relative(realRoot, candidate)
    return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative))
  }
  const display = (absolute: string) => path.relative(realRoot, absolute) || "."
  const outside = (input: string, how: string) =>
    new ToolError({ message: `Path "${input}" is outside the workspace (${how}); paths must stay inside ${realRoot}` })
  const ioError = (input: string, error: PlatformError.PlatformError) =>
    new ToolError({ message: `Cannot resolve path "${input}": ${error.message}` })

  /** Walks `absolute` one segment at a time from the root, following links, staying inside. */
  const canonical = (input: string, absolute: string, hops: number): Effect.Effect<string, ToolError> =>
    Effect.gen(function*() {
      if (!inside(absolute)) return yield* outside(input, "it leads out of the workspace")
      const segments = path.relative(realRoot, absolute).split(path.sep).filter((s) => s.length > 0)
      let current = realRoot
      for (let i = 0; i < segments.length; i++) {
        const next = path.join(current, segments[i]!)
        const stat = yield* Effect.result(fs.lstat(next))
        if (stat._tag === "Failure") {
          if (stat.failure._tag === "PlatformError" && stat.failure.reason._tag === "NotFound") {
            // nothing exists from here on, so no link can redirect the rest
            return path.join(current, ...segments.slice(i))
          }
          return yield* ioError(input, stat.failure)
        }
        if (stat.success.type === "SymbolicLink") {
          if (hops >= MAX_LINK_HOPS) return yield* outside(input, "too many symbolic links")
          const target = yield* Effect.mapError(fs.readLink(next), (e) => ioError(input, e))
          const resolved = path.resolve(path.dirname(next), target)
          if (!inside(resolved)) return yield* outside(input, `the symbolic link ${display(next)} points outside`)
          current = yield* canonical(input, resolved, hops + 1)
        } else {
          current = next
        }
      }
      return current
    })

  return Workspace.of({
    root: realRoot,
    display,
    resolve: (input) =>
      Effect.suspend(() => {
        if (input.length === 0) return Effect.fail(new ToolError({ message: "Path is empty" }))
        if (input.includes("\u0000")) return Effect.fail(new ToolError({ message: "Path contains a NUL byte" }))
        const absolute = path.resolve(realRoot, input)
        if (!inside(absolute)) {
          return Effect.fail(outside(input, path.isAbsolute(input) ? "absolute path" : "it climbs out with .."))
        }
        return canonical(input, absolute, 0)
      })
  })
})

/**
 * The workspace layer for `root`.
 *
 * @since 0.1.0
 * @category layers
 */
export const workspaceLayer = (root: string): Layer.Layer<Workspace, PlatformError.PlatformError, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(Workspace, makeWorkspace(root))
