/**
 * The pure half of the terminal's line editor: the keys in the bytes a terminal sends (bracketed
 * pastes whole, the keys for a new line, the escape sequences of arrows and friends), and what
 * each editing key does to the text and its cursor. Terminal.ts drives it on a raw-mode stdin.
 *
 * A new line inside the text: Ctrl+J, Alt+Enter, Shift+Enter where the terminal reports it
 * (`CSI 13;2u`, `CSI 27;2;13~`), or Enter on a line ending with `\`. A paste is text, whatever its
 * lines: Enter inside it never sends. Alt+Enter is a key of its own (`altEnter`): while a run works
 * it sends the text as a follow-up; at a prompt it is a new line.
 *
 * @since 0.1.0
 */

/**
 * A key (or a paste) read from the terminal.
 *
 * @since 0.1.0
 * @category models
 */
export type Key =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "paste"; readonly text: string }
  | { readonly type: "key"; readonly name: KeyName }

/**
 * @since 0.1.0
 * @category models
 */
export type KeyName =
  | "enter"
  | "newline"
  | "altEnter"
  | "backspace"
  | "delete"
  | "left"
  | "right"
  | "up"
  | "down"
  | "home"
  | "end"
  | "wordLeft"
  | "wordRight"
  | "deleteWordBack"
  | "killToEnd"
  | "killToStart"
  | "interrupt"
  | "eof"
  | "editor"
  | "search"
  | "clearScreen"
  | "escape"
  | "tab"
  | "backTab"

const PASTE_START = "\u001b[200~"
const PASTE_END = "\u001b[201~"

const CONTROL: Readonly<Record<string, KeyName>> = {
  "\r": "enter",
  "\n": "newline",
  "\u007f": "backspace",
  "\b": "backspace",
  "\u0001": "home",
  "\u0005": "end",
  "\u0002": "left",
  "\u0006": "right",
  "\u0003": "interrupt",
  "\u0004": "eof",
  "\u0007": "editor",
  "\u000b": "killToEnd",
  "\u0015": "killToStart",
  "\u0017": "deleteWordBack",
  "\u0012": "search",
  "\u0010": "up",
  "\u000e": "down",
  "\u000c": "clearScreen",
  "\t": "tab"
}

const CSI: Readonly<Record<string, KeyName>> = {
  A: "up",
  B: "down",
  C: "right",
  D: "left",
  H: "home",
  F: "end",
  "1~": "home",
  "7~": "home",
  "4~": "end",
  "8~": "end",
  "3~": "delete",
  "1;5C": "wordRight",
  "1;5D": "wordLeft",
  "1;3C": "wordRight",
  "1;3D": "wordLeft",
  // Shift+Tab
  Z: "backTab",
  // Shift+Enter, where the terminal tells it from Enter (kitty's and xterm's modifyOtherKeys forms)
  "13;2u": "newline",
  "27;2;13~": "newline"
}

/**
 * A decoder of terminal input: feed it what stdin gives (decoded as UTF-8), get keys. A bracketed
 * paste split over several reads comes out as one paste.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeKeyDecoder = (): (chunk: string) => Array<Key> => {
  let pasting: string | undefined
  let pending = ""
  return (chunk) => {
    const keys: Array<Key> = []
    const s = pending + chunk
    pending = ""
    let text = ""
    const flush = () => {
      if (text.length > 0) keys.push({ type: "text", text })
      text = ""
    }
    let i = 0
    while (i < s.length) {
      if (pasting !== undefined) {
        const end = s.indexOf(PASTE_END, i)
        if (end < 0) {
          // keep what could be the start of the end marker for the next read
          let keep = 0
          for (let k = Math.min(PASTE_END.length - 1, s.length - i); k > 0; k--) {
            if (PASTE_END.startsWith(s.slice(s.length - k))) {
              keep = k
              break
            }
          }
          pasting += s.slice(i, s.length - keep)
          pending = s.slice(s.length - keep)
          return keys
        }
        keys.push({ type: "paste", text: pasting + s.slice(i, end) })
        pasting = undefined
        i = end + PASTE_END.length
        continue
      }
      const c = s[i]!
      if (c === "\u001b") {
        flush()
        if (s.startsWith(PASTE_START, i)) {
          pasting = ""
          i += PASTE_START.length
          continue
        }
        if (i + 1 >= s.length) {
          // a lone Esc (a terminal writes a whole sequence at once)
          keys.push({ type: "key", name: "escape" })
          i++
          continue
        }
        const next = s[i + 1]!
        if (next === "[" || next === "O") {
          let j = i + 2
          while (j < s.length && s.charCodeAt(j) >= 0x20 && s.charCodeAt(j) <= 0x3f) j++
          if (j >= s.length) {
            // a sequence cut by the read: wait for its end
            pending = s.slice(i)
            return keys
          }
          const body = s.slice(i + 2, j + 1)
          const name = CSI[body]
          if (name !== undefined) keys.push({ type: "key", name })
          i = j + 1
          continue
        }
        if (next === "\r") keys.push({ type: "key", name: "altEnter" })
        else if (next === "\n") keys.push({ type: "key", name: "newline" })
        else if (next === "b") keys.push({ type: "key", name: "wordLeft" })
        else if (next === "f") keys.push({ type: "key", name: "wordRight" })
        else if (next === "\u007f" || next === "\b") keys.push({ type: "key", name: "deleteWordBack" })
        else if (next === "\u001b") {
          keys.push({ type: "key", name: "escape" })
          i++
          continue
        }
        i += 2
        continue
      }
      const control = CONTROL[c]
      if (control !== undefined) {
        flush()
        keys.push({ type: "key", name: control })
      } else if (c.charCodeAt(0) >= 0x20) {
        text += c
      }
      i++
    }
    flush()
    return keys
  }
}

/**
 * The text being edited and the cursor in it (an index into `text`).
 *
 * @since 0.1.0
 * @category models
 */
export interface EditState {
  readonly text: string
  readonly cursor: number
}

/** Pasted text as it goes into the line: line ends as `\n`, no control characters but tabs. */
const cleanPaste = (text: string): string =>
  text.replace(/\r\n?/g, "\n").replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, "")

const insert = (s: EditState, add: string): EditState => ({
  text: s.text.slice(0, s.cursor) + add + s.text.slice(s.cursor),
  cursor: s.cursor + add.length
})

const wordStart = (text: string, from: number) => {
  let i = from
  while (i > 0 && /\s/.test(text[i - 1]!)) i--
  while (i > 0 && !/\s/.test(text[i - 1]!)) i--
  return i
}
const wordEnd = (text: string, from: number) => {
  let i = from
  while (i < text.length && /\s/.test(text[i]!)) i++
  while (i < text.length && !/\s/.test(text[i]!)) i++
  return i
}
const lineStart = (text: string, at: number) => text.lastIndexOf("\n", at - 1) + 1
const lineEnd = (text: string, at: number) => {
  const i = text.indexOf("\n", at)
  return i < 0 ? text.length : i
}

/**
 * What an editing key does (keys that are not editing ones leave the state as it is). Up and down
 * move between the lines of a multi-line text (`atEdge` says when they go to the history instead).
 *
 * @since 0.1.0
 * @category editing
 */
export const applyKey = (s: EditState, key: Key): EditState => {
  if (key.type === "text") return insert(s, key.text)
  if (key.type === "paste") return insert(s, cleanPaste(key.text))
  const { cursor, text } = s
  switch (key.name) {
    case "newline":
    case "altEnter":
      return insert(s, "\n")
    case "backspace":
      return cursor === 0 ? s : { text: text.slice(0, cursor - 1) + text.slice(cursor), cursor: cursor - 1 }
    case "delete":
      return cursor >= text.length ? s : { text: text.slice(0, cursor) + text.slice(cursor + 1), cursor }
    case "left":
      return { text, cursor: Math.max(0, cursor - 1) }
    case "right":
      return { text, cursor: Math.min(text.length, cursor + 1) }
    case "home":
      return { text, cursor: lineStart(text, cursor) }
    case "end":
      return { text, cursor: lineEnd(text, cursor) }
    case "wordLeft":
      return { text, cursor: wordStart(text, cursor) }
    case "wordRight":
      return { text, cursor: wordEnd(text, cursor) }
    case "deleteWordBack": {
      const start = wordStart(text, cursor)
      return { text: text.slice(0, start) + text.slice(cursor), cursor: start }
    }
    case "killToEnd":
      return { text: text.slice(0, cursor) + text.slice(lineEnd(text, cursor)), cursor }
    case "killToStart": {
      const start = lineStart(text, cursor)
      return { text: text.slice(0, start) + text.slice(cursor), cursor: start }
    }
    case "up": {
      const start = lineStart(text, cursor)
      if (start === 0) return s
      const prevStart = lineStart(text, start - 1)
      return { text, cursor: Math.min(prevStart + (cursor - start), start - 1) }
    }
    case "down": {
      const end = lineEnd(text, cursor)
      if (end >= text.length) return s
      const start = lineStart(text, cursor)
      return { text, cursor: Math.min(end + 1 + (cursor - start), lineEnd(text, end + 1)) }
    }
    default:
      return s
  }
}

/**
 * Whether the cursor is on the first (`up`) or last (`down`) line of the text: there, up and down
 * go through the history.
 *
 * @since 0.1.0
 * @category editing
 */
export const atEdge = (s: EditState, direction: "up" | "down"): boolean =>
  direction === "up" ? lineStart(s.text, s.cursor) === 0 : lineEnd(s.text, s.cursor) >= s.text.length

/**
 * The width of text on the terminal, without its colour sequences (one column a code point).
 *
 * @since 0.1.0
 * @category rendering
 */
export const visibleWidth = (text: string): number => [...text.replace(/\u001b\[[0-9;]*m/g, "")].length

/**
 * Where the text ends and where the cursor is, in rows and columns from the prompt's start, when
 * `prompt` opens the first line, `continuation` every other one, and lines wrap at `columns`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const layout = (
  prompt: string,
  continuation: string,
  s: EditState,
  columns: number
): { readonly end: { row: number; col: number }; readonly cursor: { row: number; col: number } } => {
  const width = Math.max(1, columns)
  let row = 0
  let end = { row: 0, col: 0 }
  let cursor = { row: 0, col: 0 }
  const lines = s.text.split("\n")
  let offset = 0
  lines.forEach((line, index) => {
    const lead = visibleWidth(index === 0 ? prompt : continuation)
    const at = (chars: number) => {
      const col = lead + chars
      return { row: row + Math.floor(col / width), col: col % width }
    }
    const chars = [...line].length
    if (s.cursor >= offset && s.cursor <= offset + line.length) {
      cursor = at(Array.from(line.slice(0, s.cursor - offset)).length)
    }
    end = at(chars)
    // a line filling its last row exactly: the next one starts on the row after (no empty row between)
    const w = lead + chars
    row += w > 0 && w % width === 0 ? w / width : Math.floor(w / width) + 1
    offset += line.length + 1
  })
  return { end, cursor }
}
