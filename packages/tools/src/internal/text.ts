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

/**
 * Collects a stream of text keeping at most `head` characters from the start and `tail` from the
 * end, so memory stays bounded whatever a command prints.
 */
export class HeadTailBuffer {
  private headText = ""
  private tailText = ""
  private omitted = 0
  private readonly head: number
  private readonly tail: number
  constructor(head: number, tail: number) {
    this.head = head
    this.tail = tail
  }

  append(text: string): void {
    if (this.headText.length < this.head) {
      const room = this.head - this.headText.length
      this.headText += text.slice(0, room)
      text = text.slice(room)
    }
    if (text.length === 0) return
    this.tailText += text
    if (this.tailText.length > this.tail) {
      this.omitted += this.tailText.length - this.tail
      this.tailText = this.tailText.slice(this.tailText.length - this.tail)
    }
  }

  get truncated(): boolean {
    return this.omitted > 0
  }

  get text(): string {
    return this.omitted === 0 ?
      this.headText + this.tailText :
      `${this.headText}\n\n[... ${this.omitted} characters omitted ...]\n\n${this.tailText}`
  }
}

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
