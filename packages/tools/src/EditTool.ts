/**
 * `edit`: replace an exact piece of text in a file. The text must occur exactly once (or pass
 * `replaceAll`); "not found" and "found N times" are distinct errors and leave the file untouched.
 * Overlapping occurrences count (`aba` occurs twice in `ababa`). The file is read and rewritten
 * through the same opened directory, atomically, keeping every byte outside the replaced text
 * (a BOM, CRLF line endings, its mode and owner); files that are not valid UTF-8, over
 * `EDIT_MAX_FILE_BYTES` or with more than one hard link are refused. The result carries a unified
 * diff, bounded in time and size.
 *
 * @since 0.1.0
 */
import { defineTool, ToolError } from "@agentloop/core"
import { Effect, Schema, TextDiff } from "effect"
import { attempt, Confined } from "./internal/confined.ts"
import { toToolError } from "./internal/files.ts"
import { decodeUtf8, keepHeadAndTail, looksBinary } from "./internal/text.ts"
import { READ_MAX_FILE_BYTES } from "./ReadTool.ts"
import { Workspace } from "./Workspace.ts"

/** @since 0.1.0 @category constants */
export const EDIT_MAX_DIFF_CHARS = 4000

/** @since 0.1.0 @category constants */
export const EDIT_MAX_FILE_BYTES = READ_MAX_FILE_BYTES
/** Past this many characters (before + after) no diff is computed, only a note. @since 0.1.0 @category constants */
export const EDIT_MAX_DIFF_INPUT_CHARS = 2_000_000

/** Occurrences counted at most: enough to say "not unique" without scanning a huge file for every one. */
const COUNT_CAP = 1000

/** Start positions of `needle` in `text`, overlapping ones included (`aba` occurs twice in `ababa`), up to `cap`. */
const countOverlapping = (text: string, needle: string, cap: number): number => {
  let count = 0
  for (let at = text.indexOf(needle); at >= 0 && count < cap; at = text.indexOf(needle, at + 1)) count++
  return count
}

/** Replaces the first or every non-overlapping occurrence, left to right, in linear time. */
const replace = (text: string, needle: string, replacement: string, all: boolean): { text: string; count: number } => {
  const parts: Array<string> = []
  let from = 0
  let count = 0
  for (let at = text.indexOf(needle); at >= 0; at = all ? text.indexOf(needle, from) : -1) {
    parts.push(text.slice(from, at), replacement)
    from = at + needle.length
    count++
  }
  parts.push(text.slice(from))
  return { text: parts.join(""), count }
}

/** The unified diff of an edit, cut to about `EDIT_MAX_DIFF_CHARS`; bounded in time (200 edits searched per region). */
const diffOf = (before: string, after: string): string => {
  if (before.length + after.length > EDIT_MAX_DIFF_INPUT_CHARS) {
    const over = EDIT_MAX_DIFF_INPUT_CHARS / 2
    return `[diff not shown: the file is over ${over} characters; use bash (git diff) to see it]`
  }
  const unified = TextDiff.unified(TextDiff.lines(before, after, { maxEdits: 200 }))
  return keepHeadAndTail(unified, EDIT_MAX_DIFF_CHARS / 2, EDIT_MAX_DIFF_CHARS / 2).text
}

/**
 * The `edit` tool.
 *
 * @since 0.1.0
 * @category tools
 */
export const editTool = defineTool({
  name: "edit",
  exclusive: true,
  description: "Replace exact text in a file. oldText must match the file exactly (whitespace included) and occur " +
    "exactly once, unless replaceAll is true. Read the file first. Returns a diff of the change.",
  parameters: Schema.Struct({
    path: Schema.String.annotate({ description: "file path, relative to the workspace root" }),
    oldText: Schema.String.annotate({ description: "the exact text to replace" }),
    newText: Schema.String.annotate({ description: "the text to put in its place" }),
    replaceAll: Schema.optionalKey(Schema.Boolean.annotate({ description: "replace every occurrence" }))
  }),
  execute: ({ path: input, oldText, newText, replaceAll }) =>
    Effect.gen(function*() {
      const workspace = yield* Workspace
      const files = new Confined(workspace.root)
      if (oldText.length === 0) return yield* new ToolError({ message: "oldText is empty; use write to create a file" })
      if (oldText === newText) {
        return yield* new ToolError({ message: "oldText and newText are the same; nothing to change" })
      }
      let before = ""
      let after = ""
      let count = 0
      let lineEndings = ""
      const written = yield* attempt(
        () =>
          files.write(input, {
            exclusive: false,
            mustExist: { maxBytes: EDIT_MAX_FILE_BYTES },
            content: (current, shown) => {
              const bytes = current!.bytes
              if (looksBinary(bytes)) {
                throw new ToolError({ message: `${shown} is a binary file; edit only changes text` })
              }
              const text = decodeUtf8(bytes, { keepBom: true })
              if (text === undefined) {
                throw new ToolError({
                  message: `${shown} is not valid UTF-8; edit would change bytes it does not touch, so it ` +
                    "refuses (use bash, e.g. sed or iconv)"
                })
              }
              before = text
              let needle = oldText
              let replacement = newText
              let found = countOverlapping(text, needle, COUNT_CAP)
              if (found === 0 && text.includes("\r\n") && oldText.includes("\n") && !oldText.includes("\r")) {
                // the model wrote \n line endings; the file has \r\n: match and write \r\n
                needle = oldText.replaceAll("\n", "\r\n")
                replacement = newText.replace(/\r?\n/g, "\r\n")
                found = countOverlapping(text, needle, COUNT_CAP)
                if (found > 0) lineEndings = " (matched with CRLF line endings, which were kept)"
              }
              if (found === 0) {
                throw new ToolError({
                  message: `oldText was not found in ${shown}; it must match exactly, including whitespace ` +
                    "and indentation"
                })
              }
              if (found > 1 && replaceAll !== true) {
                throw new ToolError({
                  message: `oldText occurs ${found >= COUNT_CAP ? `at least ${COUNT_CAP}` : found} times in ${shown} ` +
                    "(overlapping occurrences count); include more surrounding text to make it unique, " +
                    "or set replaceAll to true"
                })
              }
              const replaced = replace(text, needle, replacement, replaceAll === true)
              after = replaced.text
              count = replaced.count
              return new TextEncoder().encode(after)
            }
          }),
        (error): error is ToolError => error instanceof ToolError
      ).pipe(Effect.mapError((error) => error._tag === "ToolError" ? error : toToolError("edit")(error)))
      const diff = diffOf(before, after)
      return {
        content: [{
          type: "text" as const,
          text: `Edited ${written.shown} (${count} replacement${count === 1 ? "" : "s"})${lineEndings}.\n${diff}`
        }],
        details: { path: written.shown, replacements: count, diff }
      }
    })
})
