/**
 * `grep`: search the text files of a workspace folder (or one file) for a regular expression.
 *
 * - The pattern is a JavaScript `RegExp`, tested against each line on its own (with the `u` flag
 *   when it compiles with it, so `\p{L}` works; without it otherwise, so over-escaped characters
 *   such as `\-` still work). `literal` searches plain text; `ignoreCase`, or a leading `(?i)`,
 *   ignores case.
 * - The regular expression runs in a worker thread: a pattern that backtracks without end is
 *   stopped by the time limit (`SEARCH_TIME_LIMIT_MS`), by a timeout or by an abort, and the
 *   result then says the search stopped.
 * - The folder is walked like `find` (see `Search.ts`): confined, links never followed,
 *   `.gitignore` respected, `node_modules`, `.agentloop` and `.git` left out, in name order. Binary files (a NUL
 *   byte in the first 8 KiB, or not valid UTF-8), files over `GREP_MAX_FILE_BYTES` and files with
 *   several hard links are not searched, and the result says which.
 * - Output: `path:line:text` (`path-line-text` for context lines, `--` between groups), or the
 *   matching files (`output: "files"`), or `path:count` (`output: "count"`); at most `limit` entries
 *   (default `GREP_DEFAULT_LIMIT`, at most `GREP_MAX_LIMIT`) and `SEARCH_MAX_OUTPUT_BYTES`, with a
 *   notice naming the `offset` to continue from. Lines are cut at `GREP_MAX_LINE_LENGTH`.
 *
 * @since 0.1.0
 */
import { defineTool, ToolError } from "@agentloop/core"
import { Clock, Duration, Effect, Option, Schema } from "effect"
import { attempt } from "./internal/confined.ts"
import { toToolError } from "./internal/files.ts"
import { linesOf, makeMatcher } from "./internal/matcher.ts"
import type { MatchMode } from "./internal/matcher.ts"
import {
  checkPattern,
  compileGlob,
  includeIgnoredParameter,
  NonNegativeInt,
  openWalk,
  pageOf,
  plural,
  PositiveInt,
  someOf,
  walkNotices
} from "./internal/search.ts"
import { cutAt, decodeUtf8, looksBinary } from "./internal/text.ts"
import { readRegular } from "./internal/tree.ts"
import { SEARCH_MAX_OUTPUT_BYTES, SEARCH_TIME_LIMIT_MS } from "./Search.ts"

/** @since 0.1.0 @category constants */
export const GREP_DEFAULT_LIMIT = 100
/** @since 0.1.0 @category constants */
export const GREP_MAX_LIMIT = 2000
/** @since 0.1.0 @category constants */
export const GREP_MAX_CONTEXT = 10
/** @since 0.1.0 @category constants */
export const GREP_MAX_LINE_LENGTH = 500
/** @since 0.1.0 @category constants */
export const GREP_MAX_FILE_BYTES = 10 * 1024 * 1024

/** Text sent to the worker at once, at most (a few files' worth, or one large file). */
const BATCH_CHARS = 4 * 1024 * 1024
/** Entries walked between two looks at the clock and the fiber's interruption. */
const STEP_ENTRIES = 256

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&")

/** The pattern as a `RegExp` source and flags (with `u` when it compiles so), or why not. */
const compilePattern = (
  pattern: string,
  options: { readonly ignoreCase: boolean; readonly literal: boolean }
): Effect.Effect<{ readonly source: string; readonly flags: string }, ToolError> =>
  Effect.flatMap(checkPattern("pattern", pattern), () => {
    let source = pattern
    let ignoreCase = options.ignoreCase
    if (options.literal) source = escapeRegExp(pattern)
    else if (source.startsWith("(?i)") && source.length > 4) {
      source = source.slice(4)
      ignoreCase = true
    }
    const base = ignoreCase ? "i" : ""
    let firstError: unknown
    for (const flags of [`${base}u`, base]) {
      // RegExp is a foreign API whose only report of a bad pattern is an exception
      try {
        new RegExp(source, flags)
        return Effect.succeed({ source, flags })
      } catch (error) {
        firstError ??= error
      }
    }
    const message = firstError instanceof Error ? firstError.message : String(firstError)
    return Effect.fail(
      new ToolError({
        message: `pattern is not a valid JavaScript regular expression: ${message}` +
          " (use literal=true to search for the text as it is)"
      })
    )
  })

interface Found {
  readonly shown: string
  /** The file's lines (content mode only). */
  readonly lines: ReadonlyArray<string>
  /** Indexes of the matching lines (content), or [] with `count`. */
  readonly hits: ReadonlyArray<number>
  readonly count: number
}

interface Skipped {
  readonly binary: Array<string>
  readonly large: Array<string>
  readonly hardLinked: Array<string>
  readonly unreadable: Array<string>
  symlinks: number
}

const formatLine = (shown: string, index: number, line: string, sep: ":" | "-", cut: { n: number }): string => {
  let text = line
  if (text.length > GREP_MAX_LINE_LENGTH) {
    text = `${cutAt(text, GREP_MAX_LINE_LENGTH)} [... line cut]`
    cut.n++
  }
  return `${shown}${sep}${index + 1}${sep}${text}`
}

/**
 * The `content` output: matches `offset…` (at most `limit`) with `context` lines around them, in
 * at most `SEARCH_MAX_OUTPUT_BYTES`; `shown` is how many matches it holds.
 */
const contentOutput = (
  found: ReadonlyArray<Found>,
  offset: number,
  limit: number,
  context: number
): { readonly text: string; readonly shown: number; readonly cut: number } => {
  const out: Array<string> = []
  const cut = { n: 0 }
  let bytes = 0
  let index = 0
  let shown = 0
  for (const file of found) {
    const hitSet = new Set(file.hits)
    let last = -1
    for (const hit of file.hits) {
      if (index++ < offset) continue
      if (shown >= limit) break
      const chunk: Array<string> = []
      const from = Math.max(last + 1, hit - context)
      const to = Math.min(file.lines.length - 1, hit + context)
      if (context > 0 && out.length > 0 && (last < 0 || from > last + 1)) chunk.push("--")
      for (let i = from; i <= to; i++) {
        chunk.push(formatLine(file.shown, i, file.lines[i]!, hitSet.has(i) ? ":" : "-", cut))
      }
      const chunkBytes = chunk.reduce((n, line) => n + Buffer.byteLength(line) + 1, 0)
      if (bytes + chunkBytes > SEARCH_MAX_OUTPUT_BYTES && shown > 0) {
        return { text: out.join("\n"), shown, cut: cut.n }
      }
      out.push(...chunk)
      bytes += chunkBytes
      last = Math.max(last, to)
      shown++
    }
    if (shown >= limit) break
  }
  return { text: out.join("\n"), shown, cut: cut.n }
}

/**
 * The `grep` tool.
 *
 * @since 0.1.0
 * @category tools
 */
export const grepTool = defineTool({
  name: "grep",
  readOnly: true,
  description: "Search file contents in the workspace for a JavaScript regular expression, line by line. " +
    "Searches a folder (default: the workspace root) recursively, skipping what .gitignore leaves out, " +
    "node_modules, .agentloop, .git and binary files; symbolic links are not followed. Output: path:line:text " +
    `(at most ${GREP_DEFAULT_LIMIT} matches unless limit is given; use offset for more), or the matching files ` +
    "(output=files), or counts per file (output=count). Use glob to choose files (\"*.ts\", \"src/**/*.test.ts\").",
  parameters: Schema.Struct({
    pattern: Schema.String.annotate({
      description: "JavaScript regular expression (or plain text with literal=true), matched against each line"
    }),
    path: Schema.optionalKey(
      Schema.String.annotate({ description: "folder or file to search, relative to the workspace root (default .)" })
    ),
    glob: Schema.optionalKey(
      Schema.String.annotate({
        description: "only files whose path (relative to path) matches this glob; without / it matches the file name"
      })
    ),
    ignoreCase: Schema.optionalKey(Schema.Boolean.annotate({ description: "ignore case" })),
    literal: Schema.optionalKey(Schema.Boolean.annotate({ description: "the pattern is plain text, not a regex" })),
    context: Schema.optionalKey(
      NonNegativeInt.check(Schema.isLessThanOrEqualTo(GREP_MAX_CONTEXT)).annotate({
        description: `lines of context before and after each match (0-${GREP_MAX_CONTEXT})`
      })
    ),
    output: Schema.optionalKey(
      Schema.Literals(["content", "files", "count"]).annotate({
        description: "content (default): matching lines; files: the files that match; count: matches per file"
      })
    ),
    limit: Schema.optionalKey(
      PositiveInt.annotate({ description: `entries to return at most (default ${GREP_DEFAULT_LIMIT})` })
    ),
    offset: Schema.optionalKey(NonNegativeInt.annotate({ description: "entries to skip, to page through results" })),
    includeIgnored: includeIgnoredParameter
  }),
  execute: (args, ctx) =>
    Effect.gen(function*() {
      const mode: MatchMode = args.output ?? "content"
      const includeIgnored = args.includeIgnored === true
      const regex = yield* compilePattern(args.pattern, {
        ignoreCase: args.ignoreCase === true,
        literal: args.literal === true
      })
      const glob = args.glob === undefined ? undefined : yield* compileGlob("glob", args.glob)
      const limit = Math.min(args.limit ?? GREP_DEFAULT_LIMIT, GREP_MAX_LIMIT)
      const offset = args.offset ?? 0
      const context = mode === "content" ? args.context ?? 0 : 0
      /** Matches (content) or files (files, count) wanted: one more than shown tells that more exist. */
      const wanted = offset + limit + 1
      const input = args.path ?? "."

      return yield* Effect.scoped(Effect.gen(function*() {
        const { confined, opened } = yield* openWalk("grep", input, { includeIgnored, recursive: true, match: glob })
        const matcher = yield* makeMatcher(regex.source, regex.flags)
        const deadline = (yield* Clock.currentTimeMillis) + SEARCH_TIME_LIMIT_MS
        const found: Array<Found> = []
        const skipped: Skipped = { binary: [], large: [], hardLinked: [], unreadable: [], symlinks: 0 }
        let total = 0
        let searched = 0
        let timedOut = false
        let batch: Array<{ readonly shown: string; readonly text: string }> = []
        let batchChars = 0

        const flush = Effect.gen(function*() {
          if (batch.length === 0) return
          const files = batch
          batch = []
          batchChars = 0
          const left = deadline - (yield* Clock.currentTimeMillis)
          // the time limit runs from before the batch is sent: a progress report means it is being matched
          const answer = left <= 0 ? Option.none() : yield* Effect.gen(function*() {
            const answer = yield* matcher.start({ mode, texts: files.map((f) => f.text), max: wanted - total })
            yield* ctx.reportProgress({ searchedFiles: searched, matches: total })
            return yield* answer
          }).pipe(Effect.timeoutOption(Duration.millis(left)))
          if (Option.isNone(answer)) {
            timedOut = true
            return
          }
          files.forEach((file, i) => {
            const result = answer.value[i]!
            if (typeof result === "number") {
              if (result > 0) {
                found.push({ shown: file.shown, lines: [], hits: [], count: result })
                total++
              }
            } else if (result.length > 0) {
              found.push({ shown: file.shown, lines: linesOf(file.text), hits: result, count: result.length })
              total += result.length
            }
          })
        })

        const add = (shown: string, bytes: Uint8Array): boolean => {
          const text = looksBinary(bytes) ? undefined : decodeUtf8(bytes)
          if (text === undefined) {
            skipped.binary.push(shown)
            return false
          }
          searched++
          batch.push({ shown, text })
          batchChars += text.length
          return true
        }

        if (opened._tag === "NotFolder") {
          // one file, named by the caller: searched even if ignored, refused (with why) if not text
          const file = yield* attempt(() =>
            confined.read(input, { maxBytes: () => GREP_MAX_FILE_BYTES, refuseHardLinks: true })
          ).pipe(Effect.mapError(toToolError("grep")))
          if (!add(file.shown, file.bytes)) {
            return yield* new ToolError({
              message: `${file.shown} is a binary file (a NUL byte, or not valid UTF-8); grep searches text files`
            })
          }
          yield* flush
        } else {
          const walk = opened.walk
          let done = false
          while (!done && !timedOut && total < wanted) {
            for (let n = 0; n < STEP_ENTRIES && batchChars < BATCH_CHARS; n++) {
              const entry = walk.next()
              if (entry === undefined) {
                done = true
                break
              }
              if (entry.kind === "symlink") skipped.symlinks++
              if (entry.kind !== "file" || !entry.matched) continue
              const read = readRegular(entry.dir, entry.name, GREP_MAX_FILE_BYTES)
              if (read._tag === "Bytes") add(entry.shown, read.bytes)
              else if (read._tag === "TooLarge") skipped.large.push(entry.shown)
              else if (read._tag === "HardLinked") skipped.hardLinked.push(entry.shown)
              else if (read._tag === "Unreadable") skipped.unreadable.push(entry.shown)
            }
            if (done || batchChars >= BATCH_CHARS || batch.length >= STEP_ENTRIES) yield* flush
            if (!done && (yield* Clock.currentTimeMillis) >= deadline) timedOut = true
            yield* Effect.yieldNow
          }
        }

        const shownPath = opened._tag === "Walk" ? opened.walk.shown : opened.shown
        let text: string
        let shown: number
        let cut = 0
        if (mode === "content") {
          const output = contentOutput(found, offset, limit, context)
          text = output.text
          shown = output.shown
          cut = output.cut
        } else {
          const lines = found.map((f) => mode === "files" ? f.shown : `${f.shown}:${f.count}`)
          const page = pageOf(lines, offset, limit, SEARCH_MAX_OUTPUT_BYTES)
          text = page.kept.join("\n")
          shown = page.kept.length
        }
        const what = mode === "content" ? "matches" : "files"
        const end = offset + shown
        const more = total > end
        const notices: Array<string> = []
        if (total === 0) {
          text = `No matches for ${args.pattern} in ${shownPath} (${plural(searched, "file", "files")} searched).`
        } else if (shown === 0) {
          text = `No ${what} at offset ${offset}: there are ${total}.`
        }
        if (more) {
          notices.push(
            `[Showing ${what} ${offset + 1}-${end}; there are more. Use offset=${end} for more, or limit=N ` +
              `(at most ${GREP_MAX_LIMIT}).]`
          )
        }
        if (timedOut) {
          notices.push(
            `[The search stopped after ${SEARCH_TIME_LIMIT_MS / 1000} s: the results are incomplete. ` +
              "Narrow path or glob, or simplify the pattern.]"
          )
        }
        if (cut > 0) {
          notices.push(`[${plural(cut, "line was", "lines were")} cut at ${GREP_MAX_LINE_LENGTH} characters.]`)
        }
        if (skipped.binary.length > 0) {
          notices.push(
            `[${plural(skipped.binary.length, "binary file", "binary files")} not searched: ${someOf(skipped.binary)}.]`
          )
        }
        if (skipped.large.length > 0) {
          notices.push(
            `[${plural(skipped.large.length, "file", "files")} over ${GREP_MAX_FILE_BYTES / 1024 / 1024} MiB not ` +
              `searched: ${someOf(skipped.large)}; use bash to search them.]`
          )
        }
        if (skipped.hardLinked.length > 0) {
          notices.push(
            `[${plural(skipped.hardLinked.length, "file", "files")} with several hard links not searched (one could ` +
              `be a name of a file outside the workspace): ${someOf(skipped.hardLinked)}.]`
          )
        }
        if (skipped.unreadable.length > 0) {
          notices.push(
            `[${plural(skipped.unreadable.length, "file", "files")} could not be read: ${someOf(skipped.unreadable)}.]`
          )
        }
        if (skipped.symlinks > 0) {
          notices.push(`[${plural(skipped.symlinks, "symbolic link", "symbolic links")} not followed.]`)
        }
        if (opened._tag === "Walk") notices.push(...walkNotices(opened.walk, includeIgnored))
        return {
          content: [{ type: "text" as const, text: [text, ...notices].join("\n\n") }],
          details: {
            path: shownPath,
            output: mode,
            [what]: shown,
            searchedFiles: searched,
            truncated: more || timedOut || (opened._tag === "Walk" && opened.walk.stopped !== undefined),
            ...(timedOut ? { stopped: "time" } : opened._tag === "Walk" && opened.walk.stopped !== undefined ?
              { stopped: opened.walk.stopped.reason } :
              {})
          }
        }
      }))
    })
})
