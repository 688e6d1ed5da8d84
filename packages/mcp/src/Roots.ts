/**
 * Roots: the folders a client tells its servers they may work in (MCP `roots/list`). With `roots`
 * in the options of `mcpToolsLayer` the client declares the capability (with `listChanged`) and
 * answers each server's `roots/list` with them; `McpTools.setRoots` replaces them and tells the
 * connected servers (`notifications/roots/list_changed`). A CLI offers its workspace:
 *
 * ```ts
 * import { mcpToolsLayer, rootOfDirectory } from "@agentloop/mcp"
 *
 * export const ToolsLive = mcpToolsLayer([], { roots: [rootOfDirectory(process.cwd())] })
 * ```
 *
 * Roots are information, not confinement: MCP leaves it to each server to stay inside them.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { basename, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { McpConfigError } from "./Errors.ts"

/**
 * One root: a `file://` URI and, optionally, a name to show.
 *
 * @since 0.1.0
 * @category models
 */
export interface McpRoot {
  readonly uri: string
  readonly name?: string | undefined
}

/**
 * The root of a folder: its absolute `file://` URI, named after the folder (or `name`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const rootOfDirectory = (path: string, name?: string): McpRoot => {
  const absolute = resolve(path)
  return { uri: pathToFileURL(absolute).href, name: name ?? (basename(absolute) || absolute) }
}

/**
 * `roots` when each is a `file://` URI (what MCP allows), else an `McpConfigError` naming the first
 * that is not.
 *
 * @since 0.1.0
 * @category constructors
 */
export const checkRoots = (roots: ReadonlyArray<McpRoot>): Effect.Effect<ReadonlyArray<McpRoot>, McpConfigError> => {
  const bad = roots.find((root) => !URL.canParse(root.uri) || new URL(root.uri).protocol !== "file:")
  return bad === undefined ? Effect.succeed([...roots]) : Effect.fail(
    new McpConfigError({ message: `the MCP root "${bad.uri}" is not a file:// URI (rootOfDirectory makes one)` })
  )
}
