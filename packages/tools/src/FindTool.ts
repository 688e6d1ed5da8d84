/**
 * `find`: the paths in a workspace folder that match a glob.
 *
 * - The glob (picomatch: `*`, `?`, `**`, `[...]`, `{a,b}`) is matched against each path relative
 *   to the folder searched; a glob without `/` is matched against the name alone, at any depth
 *   (`*.ts`). Dot files match. An absolute glob or one with `..` is refused: choose the folder
 *   with `path`.
 * - The walk (see `Search.ts`) is confined like `read`, never follows a link (a link is listed, as
 *   `path@`), respects `.gitignore`, leaves out `node_modules`, `.agentloop` and `.git` unless `includeIgnored`,
 *   and goes in name order, depth first. Folders are listed as `path/`.
 * - At most `limit` paths (default `FIND_DEFAULT_LIMIT`, at most `FIND_MAX_LIMIT`) and
 *   `SEARCH_MAX_OUTPUT_BYTES`, with the total and the `offset` to continue from.
 *
 * @since 0.1.0
 */
import { defineTool, ToolError } from "@agentloop/core"
import { Clock, Effect, Schema } from "effect"
import {
  compileGlob,
  includeIgnoredParameter,
  NonNegativeInt,
  openWalk,
  pageNotice,
  pageOf,
  PositiveInt,
  suffixOf,
  walkNotices
} from "./internal/search.ts"
import { SEARCH_MAX_OUTPUT_BYTES, SEARCH_TIME_LIMIT_MS } from "./Search.ts"

/** @since 0.1.0 @category constants */
export const FIND_DEFAULT_LIMIT = 500
/** @since 0.1.0 @category constants */
export const FIND_MAX_LIMIT = 5000

const STEP_ENTRIES = 1000

/**
 * The `find` tool.
 *
 * @since 0.1.0
 * @category tools
 */
export const findTool = defineTool({
  name: "find",
  readOnly: true,
  description: "Find files and folders in the workspace whose path matches a glob (\"**/*.ts\", \"src/**/test*\"; " +
    "a glob without / matches the name at any depth: \"*.md\"). Skips what .gitignore leaves out, node_modules, " +
    ".agentloop and .git. Folders end with /, symbolic links with @ (not followed). Sorted by path; " +
    `at most ${FIND_DEFAULT_LIMIT} paths unless limit is given (use offset for more).`,
  parameters: Schema.Struct({
    pattern: Schema.String.annotate({ description: "glob matched against paths relative to path" }),
    path: Schema.optionalKey(
      Schema.String.annotate({ description: "folder to search, relative to the workspace root (default .)" })
    ),
    type: Schema.optionalKey(
      Schema.Literals(["file", "directory", "symlink"]).annotate({ description: "only entries of this kind" })
    ),
    limit: Schema.optionalKey(
      PositiveInt.annotate({ description: `paths to return at most (default ${FIND_DEFAULT_LIMIT})` })
    ),
    offset: Schema.optionalKey(NonNegativeInt.annotate({ description: "paths to skip, to page through results" })),
    includeIgnored: includeIgnoredParameter
  }),
  execute: (args) =>
    Effect.gen(function*() {
      const includeIgnored = args.includeIgnored === true
      const match = yield* compileGlob("pattern", args.pattern)
      const limit = Math.min(args.limit ?? FIND_DEFAULT_LIMIT, FIND_MAX_LIMIT)
      const offset = args.offset ?? 0
      const input = args.path ?? "."
      return yield* Effect.scoped(Effect.gen(function*() {
        const { opened } = yield* openWalk("find", input, { includeIgnored, recursive: true, match })
        if (opened._tag === "NotFolder") {
          return yield* new ToolError({ message: `${opened.shown} is not a folder; find searches folders` })
        }
        const walk = opened.walk
        const deadline = (yield* Clock.currentTimeMillis) + SEARCH_TIME_LIMIT_MS
        const paths: Array<string> = []
        let done = false
        let timedOut = false
        while (!done) {
          for (let n = 0; n < STEP_ENTRIES; n++) {
            const entry = walk.next()
            if (entry === undefined) {
              done = true
              break
            }
            if (entry.matched && (args.type === undefined || args.type === entry.kind)) {
              paths.push(entry.shown + suffixOf(entry.kind))
            }
          }
          if (!done && (yield* Clock.currentTimeMillis) >= deadline) {
            timedOut = true
            break
          }
          yield* Effect.yieldNow
        }
        const page = pageOf(paths, offset, limit, SEARCH_MAX_OUTPUT_BYTES)
        const notices: Array<string> = []
        let text = page.kept.join("\n")
        if (paths.length === 0) text = `No paths match ${args.pattern} in ${walk.shown}.`
        else if (page.kept.length === 0) text = `No paths at offset ${offset}: there are ${paths.length}.`
        const more = pageNotice("paths", offset, page.end, paths.length, FIND_MAX_LIMIT)
        if (more !== undefined) notices.push(more)
        if (timedOut) {
          notices.push(
            `[The search stopped after ${SEARCH_TIME_LIMIT_MS / 1000} s: the results are incomplete. Narrow path.]`
          )
        }
        notices.push(...walkNotices(walk, includeIgnored))
        return {
          content: [{ type: "text" as const, text: [text, ...notices].join("\n\n") }],
          details: {
            path: walk.shown,
            paths: page.kept.length,
            total: paths.length,
            truncated: page.end < paths.length || timedOut || walk.stopped !== undefined,
            ...(timedOut ? { stopped: "time" } : walk.stopped === undefined ? {} : { stopped: walk.stopped.reason })
          }
        }
      }))
    })
})
