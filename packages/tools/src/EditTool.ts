/**
 * `edit`: replace a piece of text in a file. The text must occur exactly once (or pass
 * `replaceAll`); "not found" and "found N times" are distinct errors and leave the file untouched.
 * Overlapping occurrences count (`aba` occurs twice in `ababa`).
 *
 * Matching is exact first. When `oldText` occurs nowhere exactly, a loose match is tried: both
 * texts with `\r\n` as `\n`, spaces and tabs before a line break dropped, typographic quotes,
 * dashes and special spaces made ASCII, and Unicode compatibility forms (NFKC) unified; it is used
 * only when it names exactly one place, and the result says it matched loosely and what differed.
 * "Exactly once" counts every variant: an exact match and a loose one elsewhere are two places. A
 * "not found" names the closest place (line number and excerpt).
 *
 * The file is read and rewritten through the same opened directory, atomically, keeping every byte
 * outside the replaced text (a BOM, CRLF line endings, typographic quotes elsewhere, its mode and
 * owner); `newText` is written as given, except that a loose match whose text breaks lines with
 * `\r\n` gets `\r\n` line breaks. Files that are not valid UTF-8, over `EDIT_MAX_FILE_BYTES` or
 * with more than one hard link are refused. The result carries a unified diff, bounded in time and
 * size.
 *
 * @since 0.1.0
 */
import { defineTool, ToolError } from "@agentloop/core"
import { Effect, Schema, TextDiff } from "effect"
import { attempt, Confined } from "./internal/confined.ts"
import { planEdit } from "./internal/editPlan.ts"
import type { EditPlan } from "./internal/editPlan.ts"
import { toToolError } from "./internal/files.ts"
import { lenientNote } from "./internal/lenientNames.ts"
import { looseKindWords } from "./internal/normalize.ts"
import { decodeUtf8, keepHeadAndTail, looksBinary } from "./internal/text.ts"
import { READ_MAX_FILE_BYTES } from "./ReadTool.ts"
import { Workspace } from "./Workspace.ts"

/** @since 0.1.0 @category constants */
export const EDIT_MAX_DIFF_CHARS = 4000

/** @since 0.1.0 @category constants */
export const EDIT_MAX_FILE_BYTES = READ_MAX_FILE_BYTES
/** Past this many characters (before + after) no diff is computed, only a note. @since 0.1.0 @category constants */
export const EDIT_MAX_DIFF_INPUT_CHARS = 2_000_000

/** The unified diff of an edit, cut to about `EDIT_MAX_DIFF_CHARS`; bounded in time (200 edits searched per region). */
const diffOf = (before: string, after: string): string => {
  if (before.length + after.length > EDIT_MAX_DIFF_INPUT_CHARS) {
    const over = EDIT_MAX_DIFF_INPUT_CHARS / 2
    return `[diff not shown: the file is over ${over} characters; use bash (git diff) to see it]`
  }
  const unified = TextDiff.unified(TextDiff.lines(before, after, { maxEdits: 200 }))
  return keepHeadAndTail(unified, EDIT_MAX_DIFF_CHARS / 2, EDIT_MAX_DIFF_CHARS / 2).text
}

/** What the result says of a loose match: which normalisations it needed, and the line endings kept. */
const looseNote = (plan: EditPlan): string => {
  if (plan.loose === undefined) return ""
  const { kinds, replacements } = plan.loose
  const which = replacements === plan.replacements ? "" : ` (${replacements} of them)`
  const kept = plan.crlfKept ? "; the file's CRLF line endings were kept" : ""
  return `, matched loosely${which}: ${kinds.map((k) => looseKindWords[k]).join(", ")} differ${kept}`
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
  description: "Replace text in a file. oldText should match the file exactly (whitespace included) and must occur " +
    "exactly once, unless replaceAll is true. If it matches nowhere exactly, a match that differs only in line " +
    "endings, trailing whitespace, typographic quotes, dashes, special spaces or Unicode forms is used when there " +
    "is exactly one (the result says so). Read the file first. Returns a diff of the change.",
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
      let plan: EditPlan | undefined
      const written = yield* attempt(
        () =>
          files.write(input, {
            exclusive: false,
            mustExist: { maxBytes: EDIT_MAX_FILE_BYTES, lenient: true },
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
              plan = planEdit(text, oldText, newText, replaceAll === true, shown)
              after = plan.text
              return new TextEncoder().encode(after)
            }
          }),
        (error): error is ToolError => error instanceof ToolError
      ).pipe(Effect.mapError((error) => error._tag === "ToolError" ? error : toToolError("edit")(error)))
      const diff = diffOf(before, after)
      const count = plan!.replacements
      const loose = plan!.loose
      const pathNote = lenientNote(input, written.shown, written.renamed)
      return {
        content: [{
          type: "text" as const,
          text: `${pathNote === undefined ? "" : `${pathNote}\n`}Edited ${written.shown} (${count} replacement` +
            `${count === 1 ? "" : "s"}${looseNote(plan!)}).\n${diff}`
        }],
        details: {
          path: written.shown,
          replacements: count,
          diff,
          ...(pathNote === undefined ? {} : { requestedPath: input }),
          ...(loose === undefined ? {} : { loose: { replacements: loose.replacements, normalised: loose.kinds } })
        }
      }
    })
})
