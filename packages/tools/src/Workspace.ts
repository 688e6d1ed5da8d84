/**
 * The folder a coding agent may touch. Every path a tool receives is resolved against the
 * workspace root and confined to it: `..` escapes, absolute paths outside the root and symbolic
 * links that lead outside (including dangling ones) are refused with a clear error. The file
 * operations themselves (`WorkspaceFiles`, the tools) walk the path again from an opened root
 * descriptor, so what `resolve` returns is for display: see the README's safety section.
 *
 * @since 0.1.0
 */
import { ToolError } from "@agentloop/core"
import { Context, Effect, FileSystem, Layer, Path } from "effect"
import type { PlatformError } from "effect"
import { attempt, Confined } from "./internal/confined.ts"

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

/**
 * Makes a workspace rooted at `root` (which must be an existing directory).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeWorkspace = Effect.fnUntraced(function*(root: string) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  if (root.trim().length === 0) return yield* Effect.die(new Error("agentloop: the workspace root is empty"))
  const realRoot = yield* fs.realPath(path.resolve(root))
  const info = yield* fs.stat(realRoot)
  if (info.type !== "Directory") {
    return yield* Effect.die(new Error(`agentloop: workspace root ${realRoot} is not a directory`))
  }

  const confined = new Confined(realRoot)
  return Workspace.of({
    root: realRoot,
    display: (absolute) => confined.display(absolute),
    resolve: (input) =>
      attempt(() => confined.resolve(input)).pipe(Effect.mapError((error) => new ToolError({ message: error.message })))
  })
})

/**
 * The workspace layer for `root`.
 *
 * @since 0.1.0
 * @category layers
 */
export const workspaceLayer = (
  root: string
): Layer.Layer<Workspace, PlatformError.PlatformError, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(Workspace, makeWorkspace(root))
