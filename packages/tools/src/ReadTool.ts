/**
 * `read`: a text file with numbered lines, or an image.
 *
 * Limits: at most `READ_MAX_LINES` lines and `READ_MAX_BYTES` of output per call (the result then
 * says how to read on with `offset`), lines longer than `READ_MAX_LINE_LENGTH` characters are
 * cut (never inside a surrogate pair), files larger than `READ_MAX_FILE_BYTES` are refused (use
 * `bash` with `head`/`sed`), and binary files (a NUL byte in the first 8 KiB, or not valid UTF-8)
 * are refused. Only regular files with a single hard link are read: FIFOs, sockets and devices are
 * refused without blocking, and the size is checked on the opened file.
 *
 * PNG, JPEG, GIF and WebP images, recognised by their first bytes (never by the name alone: a
 * `not-an-image.png` holding text is read as text), come back as image content after a text note
 * of their type and size. An image is decoded first (a corrupt one is refused rather than sent to
 * a provider, which would refuse every later request of the conversation), and one with a side
 * over `READ_MAX_IMAGE_SIDE` pixels, over `READ_MAX_IMAGE_BYTES`, or turned by its EXIF orientation
 * is resized and re-encoded to fit; the note then gives the original and the sent dimensions.
 *
 * @since 0.1.0
 */
import { defineTool, ToolError } from "@agentloop/core"
import { Effect, Schema } from "effect"
import { attempt, Confined } from "./internal/confined.ts"
import { toToolError } from "./internal/files.ts"
import { prepareImage, sniffImage } from "./internal/images.ts"
import { lenientNote } from "./internal/lenientNames.ts"
import { byteLength, count, cutAt, decodeUtf8, looksBinary } from "./internal/text.ts"
import { Workspace } from "./Workspace.ts"

/** @since 0.1.0 @category constants */
export const READ_MAX_LINES = 2000
/** @since 0.1.0 @category constants */
export const READ_MAX_BYTES = 50 * 1024
/** @since 0.1.0 @category constants */
export const READ_MAX_LINE_LENGTH = 2000
/** @since 0.1.0 @category constants */
export const READ_MAX_FILE_BYTES = 20 * 1024 * 1024
/**
 * The largest encoded image sent, in bytes: 3.75 MiB, whose base64 is 5 MiB, the most Anthropic's
 * API takes for one image (it counts the base64 text). Larger images are re-encoded smaller.
 *
 * @since 0.1.0
 * @category constants
 */
export const READ_MAX_IMAGE_BYTES = 3.75 * 1024 * 1024
/**
 * The longest side of an image sent, in pixels: Anthropic refuses larger images in requests with
 * many images, OpenAI scales them down to this; larger images are resized to fit.
 *
 * @since 0.1.0
 * @category constants
 */
export const READ_MAX_IMAGE_SIDE = 2000
/**
 * Pixels (width × height) of an image `read` decodes at most: 100 megapixels; larger images are
 * refused before decoding, so a small file that claims to be huge cannot exhaust memory.
 *
 * @since 0.1.0
 * @category constants
 */
export const READ_MAX_IMAGE_PIXELS = 100_000_000

const PositiveInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

/**
 * The `read` tool.
 *
 * @since 0.1.0
 * @category tools
 */
export const readTool = defineTool({
  name: "read",
  readOnly: true,
  description: `Read a file in the workspace. Text comes back with line numbers (at most ${READ_MAX_LINES} lines or ` +
    `${READ_MAX_BYTES / 1024} KB per call; use offset and limit to read on). Images (png, jpeg, gif, webp) come back ` +
    `as images, resized to at most ${READ_MAX_IMAGE_SIDE} px a side. Binary files are refused.`,
  parameters: Schema.Struct({
    path: Schema.String.annotate({ description: "file path, relative to the workspace root" }),
    offset: Schema.optionalKey(PositiveInt.annotate({ description: "first line to read, counting from 1" })),
    limit: Schema.optionalKey(PositiveInt.annotate({ description: "how many lines to read at most" }))
  }),
  execute: ({ path: input, offset, limit }) => {
    // set when the path was found leniently: the note put before the result
    let pathNote: string | undefined
    return Effect.gen(function*() {
      const workspace = yield* Workspace
      const files = new Confined(workspace.root)
      const file = yield* attempt(() =>
        files.read(input, {
          maxBytes: () => READ_MAX_FILE_BYTES,
          refuseHardLinks: true,
          lenient: true
        })
      ).pipe(Effect.mapError(toToolError("read")))
      const { bytes, shown } = file
      pathNote = lenientNote(input, shown, file.renamed)
      const size = bytes.length
      const imageType = sniffImage(bytes)
      if (imageType !== undefined) {
        const image = yield* prepareImage(bytes, imageType, file.name, shown, {
          maxSide: READ_MAX_IMAGE_SIDE,
          maxBytes: READ_MAX_IMAGE_BYTES,
          maxInputPixels: READ_MAX_IMAGE_PIXELS
        })
        const { mimeType } = image
        return {
          content: [
            { type: "text" as const, text: image.note },
            { type: "image" as const, data: Buffer.from(image.data).toString("base64"), mimeType }
          ],
          details: { path: shown, bytes: size, mimeType, ...image.details }
        }
      }
      if (looksBinary(bytes)) {
        return yield* new ToolError({
          message: `${shown} is a binary file (${size} bytes); read only shows text files`
        })
      }
      const text = decodeUtf8(bytes)
      if (text === undefined) {
        return yield* new ToolError({
          message: `${shown} is not valid UTF-8 text (${size} bytes; binary, or another encoding); ` +
            "use bash (file, iconv, xxd) to look at it"
        })
      }
      const lines = text.split("\n")
      if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop()
      const total = text.length === 0 ? 0 : lines.length
      const first = offset ?? 1
      if (total === 0) {
        return { content: [{ type: "text" as const, text: `${shown} is empty.` }], details: { path: shown, lines: 0 } }
      }
      if (first > total) {
        return yield* new ToolError({
          message: `offset ${first} is past the end of ${shown}, which has ${total} lines`
        })
      }
      const wanted = Math.min(limit ?? READ_MAX_LINES, READ_MAX_LINES)
      const out: Array<string> = []
      let bytesOut = 0
      let last = first - 1
      let full = false
      const longLines: Array<number> = []
      for (let n = first; n <= total && n < first + wanted; n++) {
        let line = lines[n - 1]!
        if (line.length > READ_MAX_LINE_LENGTH) {
          line = `${cutAt(line, READ_MAX_LINE_LENGTH)} [... line cut at ${READ_MAX_LINE_LENGTH} characters]`
          longLines.push(n)
        }
        const numbered = `${String(n).padStart(6)}\t${line}`
        bytesOut += byteLength(numbered) + 1
        if (bytesOut > READ_MAX_BYTES && out.length > 0) {
          full = true
          break
        }
        out.push(numbered)
        last = n
      }
      const notes: Array<string> = []
      if (last < total) {
        // the notice names read's own limit when that is what stopped it (not the caller's `limit`)
        const why = full ?
          ` (read's limit: ${READ_MAX_BYTES / 1024} KB per call)` :
          last - first + 1 === READ_MAX_LINES ?
          ` (read's limit: ${count(READ_MAX_LINES)} lines per call)` :
          ""
        notes.push(`[Showing lines ${first}-${last} of ${total}${why}. Use offset=${last + 1} to read on.]`)
      }
      if (longLines.length > 0) {
        const which = longLines.length > 10 ? `${longLines.slice(0, 10).join(", ")}, …` : longLines.join(", ")
        notes.push(
          `[${longLines.length} line(s) longer than read's limit of ${count(READ_MAX_LINE_LENGTH)} characters ` +
            `were cut there (line ${which}); use bash to see them whole.]`
        )
      }
      return {
        content: [{ type: "text" as const, text: [out.join("\n"), ...notes].join("\n\n") }],
        details: { path: shown, firstLine: first, lastLine: last, totalLines: total, truncated: last < total }
      }
    }).pipe(Effect.map((out) =>
      pathNote === undefined ?
        out :
        {
          ...out,
          content: [{ type: "text" as const, text: pathNote }, ...out.content],
          details: { ...out.details, requestedPath: input }
        }
    ))
  }
})
