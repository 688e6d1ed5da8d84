/**
 * @agentloop/tools — the coding-agent tools (read, write, edit, bash), confined to a workspace.
 *
 * @since 0.1.0
 */
import { toolExecutorLayer } from "@agentloop/core"
import type { Executor } from "@agentloop/core"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Layer } from "effect"
import type { PlatformError } from "effect"
import { bashOptionsLayer, bashTool } from "./BashTool.ts"
import type { BashOptions } from "./BashTool.ts"
import { editTool } from "./EditTool.ts"
import { findTool } from "./FindTool.ts"
import { grepTool } from "./GrepTool.ts"
import { lsTool } from "./LsTool.ts"
import { outputStoreLayer } from "./OutputStore.ts"
import { readTool } from "./ReadTool.ts"
import { workspaceLayer } from "./Workspace.ts"
import { writeTool } from "./WriteTool.ts"

export * from "./BashTool.ts"
export * from "./EditTool.ts"
export * from "./FindTool.ts"
export * from "./GrepTool.ts"
export * from "./Images.ts"
export * from "./LsTool.ts"
export * from "./OutputStore.ts"
export * from "./ReadTool.ts"
export * from "./Search.ts"
export * from "./WebFetchTool.ts"
export * from "./Workspace.ts"
export * from "./WorkspaceFileError.ts"
export * as WorkspaceFiles from "./WorkspaceFiles.ts"
export * from "./WriteTool.ts"

/**
 * The coding tools, in the order a model sees them: `read`, `write`, `edit`, `bash`, then the
 * read-only searches `grep`, `find` and `ls` (`web_fetch` is not among them: it is off unless added).
 *
 * @since 0.1.0
 * @category tools
 */
export const codingTools = [readTool, writeTool, editTool, bashTool, grepTool, findTool, lsTool] as const

/**
 * Options of `codingToolsLayer`.
 *
 * @since 0.1.0
 * @category models
 */
export interface CodingToolsOptions {
  /** The `bash` tool's environment policy and containment. */
  readonly bash?: BashOptions | undefined
}

/**
 * An `Executor` with the coding tools confined to `root`, on Node's file system and processes, and
 * an `OutputStore` for the outputs they cut (in `root`'s `.agentloop/output`, removed with the layer).
 *
 * @since 0.1.0
 * @category layers
 */
export const codingToolsLayer = (
  root: string,
  options: CodingToolsOptions = {}
): Layer.Layer<Executor, PlatformError.PlatformError> =>
  toolExecutorLayer(codingTools).pipe(
    Layer.provide(bashOptionsLayer(options.bash ?? {})),
    Layer.provide(outputStoreLayer.pipe(Layer.provideMerge(workspaceLayer(root)))),
    Layer.provide(NodeServices.layer)
  )
