/**
 * `edit`: replace an exact piece of text in a file. The text must occur exactly once (or pass
 * `replaceAll`); "not found" and "found N times" are distinct errors and leave the file untouched.
 * The file is rewritten atomically and the result carries a small unified diff.
 *
 * @since 0.1.0
 */
import { Effect, FileSystem, Schema, TextDiff } from "effect"
import { defineTool, ToolError } from "@agentloop/core"
import { fileError, writeAtomically } from "./internal/files.ts"
import { keepHeadAndTail, looksBinary } from "./internal/text.ts"
import { Workspace } from "./Workspace.ts"

/** @since 0.1.0 @category constants */
export const EDIT_MAX_DIFF_CHARS = 4000

const countOccurrences = (text: string, needle: string): number => {
  let count = 0
  for (let at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + needle.length)) count++
  return count
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
      const fs = yield* FileSystem.FileSystem
      const target = yield* workspace.resolve(input)
      const shown = workspace.display(target)
      if (oldText.length === 0) return yield* new ToolError({ message: "oldText is empty; use write to create a file" })
      if (oldText === newText) return yield* new ToolError({ message: "oldText and newText are the same; nothing to change" })
      const bytes = yield* Effect.mapError(fs.readFile(target), (e) => fileError(shown, e))
      if (looksBinary(bytes)) return yield* new ToolError({ message: `${shown} is a binary file; edit only changes text` })
      const before = new TextDecoder("utf-8").decode(bytes)
      const count = countOccurrences(before, oldText)
      if (count === 0) {
        return yield* new ToolError({
          message: `oldText was not found in ${shown}; it must match exactly, including whitespace and indentation`
        })
      }
      if (count > 1 && replaceAll !== true) {
        return yield* new ToolError({
          message: `oldText occurs ${count} times in ${shown}; include more surrounding text to make it unique, ` +
            "or set replaceAll to true"
        })
      }
      const after = replaceAll === true ? before.split(oldText).join(newText) : before.replace(oldText, () => newText)
      yield* writeAtomically(target, new TextEncoder().encode(after), shown)
      const diff = keepHeadAndTail(TextDiff.unified(TextDiff.lines(before, after)), EDIT_MAX_DIFF_CHARS / 2, EDIT_MAX_DIFF_CHARS / 2)
      return {
        content: [{ type: "text" as const, text: `Edited ${shown} (${count} replacement${count === 1 ? "" : "s"}).\n${diff.text}` }],
        details: { path: shown, replacements: count, diff: diff.text }
      }
    })
})
