/**
 * Text helpers shared by the tools: binary detection and output caps.
 */

/** A file whose first 8 KiB hold a NUL byte is treated as binary (as git and grep do). */
export const looksBinary = (bytes: Uint8Array): boolean => {
  const end = Math.min(bytes.length, 8192)
  for (let i = 0; i < end; i++) if (bytes[i] === 0) return true
  return false
}

/** UTF-8 length of a string, in bytes. */
export const byteLength = (text: string): number => Buffer.byteLength(text, "utf8")

/**
 * Keeps the head and the tail of a long output, with a note of what was cut in between. Sizes
 * are in characters; the cut falls on line breaks when one is near.
 */
export const keepHeadAndTail = (text: string, head: number, tail: number): { text: string; truncated: boolean } => {
  if (text.length <= head + tail) return { text, truncated: false }
  let headEnd = text.lastIndexOf("\n", head)
  if (headEnd < head / 2) headEnd = head
  let tailStart = text.indexOf("\n", text.length - tail)
  if (tailStart < 0 || tailStart > text.length - tail / 2) tailStart = text.length - tail
  const omitted = text.slice(headEnd, tailStart)
  const lines = omitted.split("\n").length - 1
  return {
    text: `${text.slice(0, headEnd)}\n\n[... ${omitted.length} characters (${lines} lines) omitted ...]\n\n${
      text.slice(tailStart)
    }`,
    truncated: true
  }
}

/** Whether the UTF-16 unit at `index` of `text` is the first half of a surrogate pair. */
const isHighSurrogate = (text: string, index: number): boolean => {
  const unit = text.charCodeAt(index)
  return unit >= 0xd800 && unit <= 0xdbff
}

/** Whether the UTF-16 unit at `index` of `text` is the second half of a surrogate pair. */
const isLowSurrogate = (text: string, index: number): boolean => {
  const unit = text.charCodeAt(index)
  return unit >= 0xdc00 && unit <= 0xdfff
}

const countLines = (text: string): number => {
  let n = 0
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) n++
  return n
}

/**
 * Where a long output was cut: what is shown (`head`, `tail`) and what was left out between them.
 * Lines count from 1 as `read` numbers them (a line is what ends with `\n`, or the last piece).
 */
export interface OutputCut {
  readonly head: string
  readonly tail: string
  /** The characters (UTF-16 units) left out between `head` and `tail`. */
  readonly omittedChars: number
  /** The line where the omitted part starts: the first omitted line, or the line a cut falls inside. */
  readonly firstOmittedLine: number
  /** The line where the omitted part ends. */
  readonly lastOmittedLine: number
  /** Whether a cut falls inside a line (one longer than the part of the limit it had to fit in). */
  readonly insideLine: boolean
  readonly totalChars: number
  readonly totalLines: number
}

/**
 * Collects a stream of text keeping at most `head` characters from the start and `tail` from the
 * end, so memory stays bounded whatever a command prints. `cut` then says what to show: whole
 * lines (the head ends after a line break, the tail starts after one), or, when the part of the
 * limit a side has holds no line break (a single line longer than it), as much of that line as
 * fits, cut between two characters: never inside a surrogate pair.
 */
export class LineCutBuffer {
  private headText = ""
  private tailText = ""
  /** The last character dropped from the tail's window (to know whether the window starts a line). */
  private beforeTail = ""
  private chars = 0
  private newlines = 0
  private last = ""
  private readonly head: number
  private readonly tail: number
  constructor(head: number, tail: number) {
    this.head = head
    this.tail = tail
  }

  append(text: string): void {
    if (text.length === 0) return
    this.chars += text.length
    this.newlines += countLines(text)
    this.last = text[text.length - 1]!
    if (this.headText.length < this.head) {
      const room = this.head - this.headText.length
      this.headText += text.slice(0, room)
      text = text.slice(room)
    }
    if (text.length === 0) return
    this.tailText += text
    if (this.tailText.length > this.tail) {
      const drop = this.tailText.length - this.tail
      this.beforeTail = this.tailText[drop - 1]!
      this.tailText = this.tailText.slice(drop)
    }
  }

  /** Whether more than `head + tail` characters came in: the output is cut. */
  get truncated(): boolean {
    return this.chars > this.head + this.tail
  }

  /** Everything, when nothing was cut. */
  get whole(): string {
    return this.headText + this.tailText
  }

  get totalChars(): number {
    return this.chars
  }

  get totalLines(): number {
    return this.newlines + (this.chars > 0 && this.last !== "\n" ? 1 : 0)
  }

  /** Where the output is cut, or undefined when it is not. */
  cut(): OutputCut | undefined {
    if (!this.truncated) return undefined
    const lastBreak = this.headText.lastIndexOf("\n")
    const headInside = lastBreak < 0
    // a head window without a line break lies inside the first line: keep what fits, but never half a pair
    const headEnd = !headInside ?
      lastBreak + 1 :
      isHighSurrogate(this.headText, this.headText.length - 1) ?
      this.headText.length - 1 :
      this.headText.length
    const head = this.headText.slice(0, headEnd)
    const firstBreak = this.tailText.indexOf("\n")
    // the tail starts a line when its window does, or after its first break (unless that ends the output)
    const startsLine = this.beforeTail === "\n"
    const breakInside = firstBreak >= 0 && firstBreak + 1 < this.tailText.length
    const tailInside = !startsLine && !breakInside
    const tailStart = startsLine ? 0 : breakInside ? firstBreak + 1 : isLowSurrogate(this.tailText, 0) ? 1 : 0
    const tail = this.tailText.slice(tailStart)
    const breaksBeforeTail = this.newlines - countLines(tail)
    return {
      head,
      tail,
      omittedChars: this.chars - head.length - tail.length,
      firstOmittedLine: 1 + countLines(head),
      lastOmittedLine: tailInside ? breaksBeforeTail + 1 : breaksBeforeTail,
      insideLine: headInside || tailInside,
      totalChars: this.chars,
      totalLines: this.totalLines
    }
  }
}

/** `text` cut as `LineCutBuffer` cuts a stream. */
export const cutLines = (text: string, head: number, tail: number): LineCutBuffer => {
  const buffer = new LineCutBuffer(head, tail)
  buffer.append(text)
  return buffer
}

/**
 * Splits a byte stream at UTF-8 character boundaries: `push` returns the bytes up to the last
 * whole character (the rest waits for the next chunk) and their text, so that the bytes of one
 * stream, written between another stream's, never have a character torn apart. Invalid bytes pass
 * through as they are (their text has U+FFFD in their place).
 */
export class Utf8Chunks {
  private pending: Uint8Array = new Uint8Array(0)
  private readonly decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true })

  push(chunk: Uint8Array): { readonly bytes: Uint8Array; readonly text: string } {
    const all = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
    const end = completeEnd(all)
    const bytes = all.subarray(0, end)
    this.pending = all.slice(end)
    return { bytes, text: this.decoder.decode(bytes, { stream: true }) }
  }

  /** What is left at the end of the stream (an incomplete character, kept as it is). */
  end(): { readonly bytes: Uint8Array; readonly text: string } {
    const bytes = this.pending
    this.pending = new Uint8Array(0)
    return { bytes, text: this.decoder.decode(bytes) }
  }
}

/** The end of the last whole UTF-8 character of `bytes` (an incomplete one at the end is left out). */
const completeEnd = (bytes: Uint8Array): number => {
  const length = bytes.length
  for (let i = length - 1; i >= 0 && i >= length - 4; i--) {
    const byte = bytes[i]!
    if ((byte & 0xc0) === 0x80) continue
    if (byte < 0xc0) return length
    const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : 2
    return length - i < need ? i : length
  }
  return length
}

/** A count for a notice: `1,234,567`. */
export const count = (n: number): string => n.toLocaleString("en-US")

/** A size for a notice: `20.0 MiB`, `50.0 KB`, `812 bytes`. */
export const size = (bytes: number): string =>
  bytes >= 1024 * 1024 ?
    `${(bytes / (1024 * 1024)).toFixed(1)} MiB` :
    bytes >= 1024 ?
    `${(bytes / 1024).toFixed(1)} KB` :
    `${count(bytes)} bytes`

/** What became of the whole output: kept in a file (all of it, or its start), or not, and why. */
export type Kept =
  | { readonly path: string; readonly bytes: number; readonly lines: number; readonly complete: boolean }
  | { readonly notKept: string }

/** The notice put where an output was cut: what was left out, the limit, and where to read it whole. */
export const cutNotice = (
  cut: OutputCut,
  limit: { readonly head: number; readonly tail: number },
  kept: Kept
): string => {
  const lines = cut.firstOmittedLine === cut.lastOmittedLine ?
    `line ${count(cut.firstOmittedLine)}` :
    `lines ${count(cut.firstOmittedLine)}-${count(cut.lastOmittedLine)}`
  const inside = cut.insideLine ? "; a line longer than its part is cut between two characters" : ""
  const what = `[... ${count(cut.omittedChars)} characters omitted (${lines} of ${count(cut.totalLines)}): ` +
    `output cut at ${count(limit.head + limit.tail)} characters, the first ${count(limit.head)} and last ` +
    `${count(limit.tail)} shown${inside}.`
  if ("notKept" in kept) return `${what} The full output was not kept: ${kept.notKept}. ...]`
  const where = kept.complete ?
    `Full output: ${kept.path}` :
    `The first ${size(kept.bytes)} of the output (lines 1-${count(kept.lines)}) are kept in ${kept.path}`
  return `${what} ${where} - read it with offset=${cut.firstOmittedLine} to see the omitted part ...]`
}

/** The head, the notice on a line of its own, and the tail. */
export const showCut = (cut: OutputCut, notice: string): string =>
  `${cut.head}${cut.head.length === 0 || cut.head.endsWith("\n") ? "" : "\n"}${notice}\n${cut.tail}`

/** `bytes` decoded as UTF-8, or undefined when they are not valid UTF-8. A BOM is dropped. */
export const decodeUtf8 = (bytes: Uint8Array, options?: { readonly keepBom?: boolean }): string | undefined => {
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: options?.keepBom === true })
  // TextDecoder is a foreign API whose only report of invalid input is an exception
  try {
    return decoder.decode(bytes)
  } catch {
    return undefined
  }
}

/** The first `max` UTF-16 units of `text`, one fewer when the cut would split a surrogate pair. */
export const cutAt = (text: string, max: number): string => {
  if (text.length <= max) return text
  const last = text.charCodeAt(max - 1)
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max)
}
