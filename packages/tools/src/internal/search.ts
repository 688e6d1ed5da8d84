/**
 * What the search tools (`grep`, `find`, `ls`) share: their parameters, the glob check, the
 * paging of results and the notices that say what a result left out.
 */
import { ToolError } from "@agentloop/core"
import { Effect, Schema } from "effect"
import type { Scope } from "effect"
import picomatch from "picomatch"
import {
  SEARCH_MAX_DEPTH,
  SEARCH_MAX_ENTRIES,
  SEARCH_MAX_PATTERN_LENGTH,
  SEARCH_NAME_MATCH_TIME_LIMIT_MS
} from "../Search.ts"
import { Workspace } from "../Workspace.ts"
import { attempt, Confined } from "./confined.ts"
import { toToolError } from "./files.ts"
import { guarded } from "./guard.ts"
import { byteLength } from "./text.ts"
import { Walk } from "./tree.ts"
import type { EntryKind, Opened, WalkOptions } from "./tree.ts"

export const PositiveInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))
export const NonNegativeInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

export const includeIgnoredParameter = Schema.optionalKey(
  Schema.Boolean.annotate({
    description: "also search what .gitignore files and the defaults (node_modules, .agentloop) leave out; " +
      ".git is never searched"
  })
)

/**
 * Opens the folder `input` of the workspace for a walk (closed with the scope), or says what it is
 * instead; fails with the tool's error when it is outside or missing.
 */
export const openWalk = (
  tool: string,
  input: string,
  options: WalkOptions
): Effect.Effect<{ readonly confined: Confined; readonly opened: Opened }, ToolError, Workspace | Scope.Scope> =>
  Effect.flatMap(Workspace, (workspace) => {
    const confined = new Confined(workspace.root)
    return Effect.map(
      Effect.acquireRelease(
        attempt(() => Walk.open(confined, input, options)).pipe(Effect.mapError(toToolError(tool))),
        (opened) => Effect.sync(() => opened._tag === "Walk" && opened.walk.close())
      ),
      (opened) => ({ confined, opened })
    )
  })

/** An entry as `find` and `ls` show it: folders end with `/`, links with `@`. */
export const suffixOf = (kind: EntryKind): string => kind === "directory" ? "/" : kind === "symlink" ? "@" : ""

/** The first names of a list, for a notice: `a, b, c and 4 more`. */
export const someOf = (names: ReadonlyArray<string>, most = 5): string =>
  names.length <= most ? names.join(", ") : `${names.slice(0, most).join(", ")} and ${names.length - most} more`

export const plural = (n: number, one: string, many: string): string => `${n} ${n === 1 ? one : many}`

/** Refuses a pattern that is empty, too long, or (for globs) reaches above the folder searched. */
export const checkPattern = (what: string, pattern: string): Effect.Effect<void, ToolError> => {
  if (pattern.length === 0) return Effect.fail(new ToolError({ message: `${what} is empty` }))
  if (pattern.length > SEARCH_MAX_PATTERN_LENGTH) {
    return Effect.fail(
      new ToolError({
        message: `${what} is ${pattern.length} characters long, over the limit of ${SEARCH_MAX_PATTERN_LENGTH}`
      })
    )
  }
  if (pattern.includes("\u0000")) return Effect.fail(new ToolError({ message: `${what} contains a NUL character` }))
  return Effect.void
}

/**
 * A glob as a test of paths relative to the searched folder (picomatch; dot files match; a glob
 * without `/` is matched against the name alone, at any depth). Refused: an absolute glob and `..`,
 * which would name something outside the folder searched: choose the folder with `path` instead.
 */
export const compileGlob = (
  what: string,
  glob: string
): Effect.Effect<(relative: string, isDirectory: boolean) => boolean, ToolError> =>
  Effect.flatMap(checkPattern(what, glob), () => {
    if (glob.startsWith("/") || /(^|\/)\.\.(\/|$)/.test(glob)) {
      return Effect.fail(
        new ToolError({
          message: `${what} "${glob}" reaches outside the folder searched (an absolute path or ..); ` +
            "a glob matches paths inside the folder: choose the folder with path"
        })
      )
    }
    let compiled: { readonly value: (path: string) => boolean } | undefined
    try {
      compiled = guarded(
        () => picomatch(glob, { dot: true, basename: !glob.includes("/"), windows: false }),
        SEARCH_NAME_MATCH_TIME_LIMIT_MS
      )
    } catch (error) {
      const message = error instanceof Error ? error.message.split("\n")[0] : String(error)
      return Effect.fail(new ToolError({ message: `${what} "${glob}" is not a valid glob: ${message}` }))
    }
    if (compiled === undefined) {
      return Effect.fail(new ToolError({ message: `${what} "${glob}" is too complex to compile` }))
    }
    const test = compiled.value
    // a trailing slash in a glob names folders: "src/**/" matches "src/a/"
    return Effect.succeed((relative: string, isDirectory: boolean) =>
      test(relative) || (isDirectory && test(`${relative}/`))
    )
  })

/**
 * Lines `offset…` of `lines`, at most `limit` of them and `SEARCH_MAX_OUTPUT_BYTES` in all (at
 * least one line): `end` is the index after the last line kept.
 */
export const pageOf = (
  lines: ReadonlyArray<string>,
  offset: number,
  limit: number,
  maxBytes: number
): { readonly kept: ReadonlyArray<string>; readonly end: number } => {
  const kept: Array<string> = []
  let bytes = 0
  let end = offset
  for (let i = offset; i < lines.length && kept.length < limit; i++) {
    bytes += byteLength(lines[i]!) + 1
    if (bytes > maxBytes && kept.length > 0) break
    kept.push(lines[i]!)
    end = i + 1
  }
  return { kept, end }
}

/** The notice of a page of `total` entries: which `offset` continues, when something is left. */
export const pageNotice = (what: string, offset: number, end: number, total: number, max: number): string | undefined =>
  end < total ?
    `[Showing ${what} ${offset + 1}-${end} of ${total}. Use offset=${end} for more, or limit=N (at most ${max}).]` :
    undefined

/** The notices of what a walk left out or why it stopped. */
export const walkNotices = (walk: Walk, includeIgnored: boolean): Array<string> => {
  const notices: Array<string> = []
  const { counts, stopped } = walk
  if (stopped?.reason === "entries") {
    notices.push(
      `[The walk stopped after ${SEARCH_MAX_ENTRIES} entries: the results are incomplete. Narrow path (or the glob).]`
    )
  }
  if (stopped?.reason === "slow") {
    notices.push(
      `[Matching the names in ${stopped.folder} took over ${SEARCH_NAME_MATCH_TIME_LIMIT_MS / 1000} s (a .gitignore ` +
        "rule or the glob is too complex to match quickly): the walk stopped there and the results are incomplete.]"
    )
  }
  if (walk.namedIgnored === "ignored") {
    notices.push(`[${walk.shown} is ignored (.gitignore or node_modules); walked as it was named.]`)
  }
  if (walk.namedIgnored === "own") {
    notices.push(`[${walk.shown} is left out by default (agentloop's own files); walked as it was named.]`)
  }
  if (!includeIgnored && counts.own.length === 1) {
    notices.push(
      `[${counts.own[0]} left out (agentloop's own sessions and kept output); includeIgnored=true or ` +
        `path=${counts.own[0]} includes it.]`
    )
  }
  if (!includeIgnored && counts.own.length > 1) {
    notices.push(
      `[${counts.own.length} .agentloop folders left out (agentloop's own sessions and kept output): ` +
        `${someOf(counts.own)}; includeIgnored=true, or one of them as path, includes them.]`
    )
  }
  if (!includeIgnored && counts.ignored > 0) {
    notices.push(
      `[${plural(counts.ignored, "entry", "entries")} left out by .gitignore or as node_modules; ` +
        "includeIgnored=true includes them.]"
    )
  }
  if (counts.tooDeep > 0) {
    notices.push(`[${plural(counts.tooDeep, "folder", "folders")} deeper than ${SEARCH_MAX_DEPTH} levels not walked.]`)
  }
  if (counts.unreadable.length > 0) {
    notices.push(
      `[${plural(counts.unreadable.length, "folder", "folders")} could not be read: ${someOf(counts.unreadable)}.]`
    )
  }
  if (counts.rulesNotApplied.length > 0) {
    notices.push(
      `[${plural(counts.rulesNotApplied.length, ".gitignore file", ".gitignore files")} not applied (over ` +
        `the size limit, several hard links, or unreadable): ${someOf(counts.rulesNotApplied)}.]`
    )
  }
  return notices
}
