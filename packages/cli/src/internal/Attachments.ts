/**
 * What a prompt attaches: `@path` mentions (a text file's content, or an image), image paths pasted
 * or dropped into the line, and `run --image FILE`. Every file is read through `@agentloop/tools`'
 * confined layer (`WorkspaceFiles.readFile`: walked from the opened workspace root, no link followed
 * out of it, race-free on Linux), exactly as the `read` tool reads: `@../x`, an absolute path
 * outside the workspace and a link that leads out are refused with one line, and nothing is sent.
 *
 * A mention of a path that does not exist stays plain text (`@param` in a question about code),
 * with a note saying so; text files are attached up to `MENTION_MAX_BYTES` (the attached text says
 * where it was cut); images are recognised by their bytes and shaped as `read` shapes them (see
 * `Images.ts`): the model gets the tools' note (type, size, what was sent) before each image.
 */
import type { ImageContent, TextContent } from "@agentloop/core"
import { fitImage, makeWorkspace, READ_MAX_FILE_BYTES, Workspace, WorkspaceFiles } from "@agentloop/tools"
import type { WorkspaceFileError } from "@agentloop/tools"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Effect } from "effect"
import { homedir } from "node:os"
import * as nodePath from "node:path"
import { fileURLToPath } from "node:url"
import { CliError } from "../CliError.ts"
import { IMAGE_NAME, imageTypeOf } from "./Images.ts"

/** The most of a text file one mention attaches: 50 KiB (what one `read` call shows). */
export const MENTION_MAX_BYTES = 50 * 1024

/** A file read inside the workspace `root` through the confined layer (at most `maxBytes`). */
export const readInWorkspace = (
  root: string,
  path: string,
  maxBytes: number
): Effect.Effect<Uint8Array, WorkspaceFileError | CliError> =>
  WorkspaceFiles.readFile(path, maxBytes).pipe(
    Effect.provideServiceEffect(
      Workspace,
      makeWorkspace(root).pipe(
        Effect.provide(NodeServices.layer),
        Effect.mapError((e) => new CliError(`cannot open the workspace ${root}: ${e.message}`))
      )
    )
  )

/** One `@` mention in a prompt: the path as written. */
export interface Mention {
  readonly path: string
}

const TRAILING = /[.,;:!?)\]}]+$/

/**
 * The `@` mentions of `text`: `@path`, `@path\ with\ spaces` (as Tab completion writes them) and
 * `@"path with spaces"`, each at the start or after a space or an opening bracket (so an e-mail
 * address is not one); trailing punctuation of a sentence is not part of the path.
 */
export const parseMentions = (text: string): ReadonlyArray<Mention> => {
  const found: Array<Mention> = []
  for (const m of text.matchAll(/(?:^|(?<=[\s([{]))@(?:"([^"\n]+)"|((?:\\ |[^\s"])+))/g)) {
    const quoted = m[1]
    const bare = m[2]?.replace(/\\ /g, " ")
    const path = quoted ?? bare?.replace(TRAILING, "")
    if (path !== undefined && path.length > 0 && !path.startsWith("@")) found.push({ path })
  }
  return found
}

/** Image paths pasted or dropped into the line (absolute, `~/…` or `file://`, plain or quoted). */
export const droppedPaths = (text: string): ReadonlyArray<string> => {
  const found: Array<string> = []
  for (const m of text.matchAll(/(?:^|(?<=\s))(?:'([^'\n]+)'|"([^"\n]+)"|((?:\\ |[^\s'"@])+))/g)) {
    let path = m[1] ?? m[2] ?? m[3]!.replace(/\\(.)/g, "$1")
    if (path.startsWith("file://")) {
      try {
        path = fileURLToPath(path)
      } catch {
        continue
      }
    }
    if ((path.startsWith("/") || path.startsWith("~/")) && IMAGE_NAME.test(path)) found.push(path)
  }
  return found
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

const decodeText = (bytes: Uint8Array): string | undefined => {
  if (bytes.subarray(0, 8192).includes(0)) return undefined
  try {
    return utf8.decode(bytes)
  } catch {
    return undefined
  }
}

/** A text file's block: its content up to `MENTION_MAX_BYTES`, cut at a line, saying where it was cut. */
export const textBlock = (shown: string, bytes: Uint8Array, text: string): TextContent => {
  if (bytes.length <= MENTION_MAX_BYTES) {
    return { type: "text", text: `<file path="${shown}">\n${text}${text.endsWith("\n") ? "" : "\n"}</file>` }
  }
  let head = Buffer.from(bytes.subarray(0, MENTION_MAX_BYTES)).toString("utf8").replace(/\uFFFD+$/, "")
  const lastNewline = head.lastIndexOf("\n")
  if (lastNewline > 0) head = head.slice(0, lastNewline + 1)
  const lines = head.split("\n").length - 1
  const note = `[${shown} is ${bytes.length} bytes; only its first ${
    Buffer.byteLength(head)
  } bytes (lines 1-${lines}) are attached: use the read tool with offset=${lines + 1} for the rest]`
  return { type: "text", text: `<file path="${shown}">\n${head}${note}\n</file>` }
}

/** What a prompt becomes: the user message's content, and what to tell the user about it. */
export interface Attached {
  readonly content: string | ReadonlyArray<TextContent | ImageContent>
  /** One line per attachment or mention left as text. */
  readonly notes: ReadonlyArray<string>
  readonly images: number
}

const kib = (n: number) => (n < 1024 ? `${n} B` : `${(n / 1024).toFixed(1)} KiB`)

type Read =
  | { readonly _tag: "text"; readonly block: TextContent; readonly note: string }
  | { readonly _tag: "image"; readonly blocks: readonly [TextContent, ImageContent]; readonly note: string }
  | { readonly _tag: "missing" }

/**
 * Reads one file to attach. `as` is how the user named it (`@x`, `--image x`), for messages;
 * `imageOnly` refuses a file that is not an image.
 */
const readAttachment = (root: string, path: string, as: string, imageOnly: boolean) =>
  Effect.gen(function*() {
    const read = yield* Effect.result(readInWorkspace(root, path, READ_MAX_FILE_BYTES))
    if (read._tag === "Failure") {
      const e = read.failure
      if (e instanceof CliError) return yield* Effect.fail(e)
      if (e.reason === "NotFound") return { _tag: "missing" } as Read
      if (e.reason === "TooLarge") {
        return yield* Effect.fail(new CliError(`${as}: too large to attach (${e.message})`))
      }
      return yield* Effect.fail(new CliError(`${as}: not attached: ${e.message}`))
    }
    const bytes = read.success
    const shown = nodePath.relative(root, nodePath.resolve(root, path)) || path
    const mimeType = imageTypeOf(bytes)
    if (mimeType !== undefined) {
      const fitted = yield* fitImage(bytes, mimeType, shown).pipe(
        Effect.mapError((e) => new CliError(`${as}: not attached: ${e.message}`))
      )
      const d = fitted.details
      const size = d.originalWidth === undefined ? "" : ` ${d.originalWidth}×${d.originalHeight} px,`
      const sent = Buffer.byteLength(fitted.image.data, "base64")
      const resized = d.resized || fitted.image.mimeType !== mimeType ?
        `; sent as ${d.width}×${d.height} px ${fitted.image.mimeType}, ${kib(sent)}` :
        ""
      return {
        _tag: "image",
        blocks: [fitted.note, fitted.image],
        note: `+ image ${shown} (${mimeType},${size} ${kib(bytes.length)}${resized})`
      } as Read
    }
    if (imageOnly) {
      return yield* Effect.fail(
        new CliError(`${as}: ${shown} is not an image (PNG, JPEG, GIF or WebP, recognised by its content)`)
      )
    }
    const text = decodeText(bytes)
    if (text === undefined) {
      return yield* Effect.fail(
        new CliError(`${as}: ${shown} is a binary file; text files and images (PNG, JPEG, GIF, WebP) can be attached`)
      )
    }
    const block = textBlock(shown, bytes, text)
    const cut = bytes.length > MENTION_MAX_BYTES ? `, cut to ${kib(MENTION_MAX_BYTES)}` : ""
    return { _tag: "text", block, note: `+ file ${shown} (${kib(bytes.length)}${cut})` } as Read
  })

/**
 * The content of a prompt with its attachments: the `@` mentions and dropped image paths of `text`
 * (unless `mentions` is false) and the `images` given (`run --image`, which must exist and be
 * images). Fails with one line when a file is refused (outside the workspace, a link out, too
 * large, binary); nothing is sent then.
 */
export const attach = (
  root: string,
  text: string,
  options: { readonly images?: ReadonlyArray<string> | undefined; readonly mentions?: boolean | undefined } = {}
): Effect.Effect<Attached, CliError> =>
  Effect.gen(function*() {
    const blocks: Array<TextContent | ImageContent> = []
    const notes: Array<string> = []
    const seen = new Set<string>()
    let imageCount = 0
    const add = (r: Read) => {
      if (r._tag === "missing") return
      if (r._tag === "text") blocks.push(r.block)
      else blocks.push(...r.blocks)
      if (r._tag === "image") imageCount++
      notes.push(r.note)
    }
    const once = (path: string) => {
      const key = nodePath.resolve(root, path)
      if (seen.has(key)) return false
      seen.add(key)
      return true
    }
    const scan = options.mentions !== false
    for (const m of scan ? parseMentions(text) : []) {
      if (!once(m.path)) continue
      const r = yield* readAttachment(root, m.path, `@${m.path}`, false)
      if (r._tag === "missing") notes.push(`@${m.path}: no such file in the workspace; sent as text`)
      add(r)
    }
    for (const dropped of scan ? droppedPaths(text) : []) {
      const path = dropped.startsWith("~/") ? nodePath.join(homedir(), dropped.slice(2)) : dropped
      const inside = !nodePath.relative(root, path).startsWith("..") &&
        !nodePath.isAbsolute(nodePath.relative(root, path))
      if (!inside) {
        notes.push(`${path}: not attached (outside the workspace ${root}; only files inside it are read)`)
        continue
      }
      if (!once(path)) continue
      const r = yield* Effect.result(readAttachment(root, path, path, true))
      // a pasted path that is not an image stays text (it may be the subject of the question)
      if (r._tag === "Failure") notes.push(`${path}: not attached (${r.failure.message.replace(`${path}: `, "")})`)
      else add(r.success)
    }
    for (const path of options.images ?? []) {
      if (!once(path)) continue
      const r = yield* readAttachment(root, path, `--image ${path}`, true)
      if (r._tag === "missing") {
        return yield* Effect.fail(new CliError(`--image ${path}: no such file in the workspace ${root}`))
      }
      add(r)
    }
    return {
      content: blocks.length === 0 ? text : [{ type: "text", text }, ...blocks],
      notes,
      images: imageCount
    }
  })

/** Whether a user message's content carries an image. */
export const hasImages = (content: string | ReadonlyArray<TextContent | ImageContent>): boolean =>
  typeof content !== "string" && content.some((part) => part.type === "image")
