/**
 * `ls`: the entries of one workspace folder, in name order.
 *
 * - Folders end with `/`; a symbolic link ends with `@` and shows its target when the target is
 *   inside the workspace (`link@ -> src/index.ts`, `(missing)` when nothing is there), or
 *   `(outside the workspace)` without the target otherwise. Links are never followed; whether one
 *   leads out is decided by the workspace's walk, which refuses to go out without looking there.
 * - What `.gitignore` files leave out, `node_modules`, `.agentloop` and `.git` are not listed (the
 *   result says so) unless `includeIgnored`.
 * - At most `limit` entries (default `LS_DEFAULT_LIMIT`, at most `LS_MAX_LIMIT`) and
 *   `SEARCH_MAX_OUTPUT_BYTES`, with the total and the `offset` to continue from.
 *
 * @since 0.1.0
 */
import { defineTool } from "@agentloop/core"
import { Effect, Schema } from "effect"
import * as NodeFs from "node:fs"
import { at } from "./internal/confined.ts"
import type { Confined } from "./internal/confined.ts"
import {
  includeIgnoredParameter,
  NonNegativeInt,
  openWalk,
  pageNotice,
  pageOf,
  PositiveInt,
  suffixOf,
  walkNotices
} from "./internal/search.ts"
import type { WalkEntry } from "./internal/tree.ts"
import { SEARCH_MAX_OUTPUT_BYTES } from "./Search.ts"
import { WorkspaceFileError } from "./WorkspaceFileError.ts"

/** @since 0.1.0 @category constants */
export const LS_DEFAULT_LIMIT = 500
/** @since 0.1.0 @category constants */
export const LS_MAX_LIMIT = 5000

/** ` -> target` of a link: the target when it stays inside, else only that it leads out. */
const linkTarget = (confined: Confined, entry: WalkEntry): string => {
  let target: string
  try {
    target = NodeFs.readlinkSync(at(entry.dir, entry.name))
  } catch {
    return ""
  }
  try {
    return confined.exists(entry.shown) ? ` -> ${target}` : ` -> ${target} (missing)`
  } catch (error) {
    if (!(error instanceof WorkspaceFileError)) throw error
    if (error.reason === "Outside") return " -> (outside the workspace)"
    if (error.reason === "TooManyLinks") return ` -> ${target} (a loop of links)`
    return ` -> ${target}`
  }
}

/**
 * The `ls` tool.
 *
 * @since 0.1.0
 * @category tools
 */
export const lsTool = defineTool({
  name: "ls",
  readOnly: true,
  description: "List the entries of a folder in the workspace (default: the root), sorted by name. Folders end " +
    "with /, symbolic links with @ and their target. What .gitignore leaves out, node_modules, .agentloop and " +
    `.git are not listed unless includeIgnored is set. At most ${LS_DEFAULT_LIMIT} entries unless limit is given ` +
    "(use offset for more).",
  parameters: Schema.Struct({
    path: Schema.optionalKey(
      Schema.String.annotate({ description: "folder to list, relative to the workspace root (default .)" })
    ),
    limit: Schema.optionalKey(
      PositiveInt.annotate({ description: `entries to return at most (default ${LS_DEFAULT_LIMIT})` })
    ),
    offset: Schema.optionalKey(NonNegativeInt.annotate({ description: "entries to skip, to page through them" })),
    includeIgnored: includeIgnoredParameter
  }),
  execute: (args) =>
    Effect.gen(function*() {
      const includeIgnored = args.includeIgnored === true
      const limit = Math.min(args.limit ?? LS_DEFAULT_LIMIT, LS_MAX_LIMIT)
      const offset = args.offset ?? 0
      const input = args.path ?? "."
      return yield* Effect.scoped(Effect.gen(function*() {
        const { confined, opened } = yield* openWalk("ls", input, { includeIgnored, recursive: false })
        if (opened._tag === "NotFolder") {
          const what = opened.kind === "file" ?
            `${opened.shown} is a file (${opened.size} bytes), not a folder; use read to see it.` :
            `${opened.shown} is not a folder.`
          return { content: [{ type: "text" as const, text: what }], details: { path: opened.shown, entries: 0 } }
        }
        const walk = opened.walk
        const lines: Array<string> = []
        for (let entry = walk.next(); entry !== undefined; entry = walk.next()) {
          const target = entry.kind === "symlink" ? linkTarget(confined, entry) : ""
          lines.push(entry.name + suffixOf(entry.kind) + target)
        }
        const page = pageOf(lines, offset, limit, SEARCH_MAX_OUTPUT_BYTES)
        let text = page.kept.join("\n")
        if (lines.length === 0) text = `No entries in ${walk.shown}.`
        else if (page.kept.length === 0) text = `No entries at offset ${offset}: ${walk.shown} has ${lines.length}.`
        const notices: Array<string> = []
        const more = pageNotice("entries", offset, page.end, lines.length, LS_MAX_LIMIT)
        if (more !== undefined) notices.push(more)
        notices.push(...walkNotices(walk, includeIgnored))
        return {
          content: [{ type: "text" as const, text: [text, ...notices].join("\n\n") }],
          details: {
            path: walk.shown,
            entries: page.kept.length,
            total: lines.length,
            truncated: page.end < lines.length || walk.stopped !== undefined
          }
        }
      }))
    })
})
