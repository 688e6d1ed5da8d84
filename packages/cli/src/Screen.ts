/**
 * The terminal as `run` and `chat` draw on it: output that scrolls, and below it a footer of live
 * lines redrawn in place — the status line of running tools, the messages typed while a run works
 * and waiting to be sent, the line being typed. Output never lands inside the footer, nor the
 * footer inside the output: before a write the footer is erased (the cursor goes back to where the
 * output ended), after it the footer is drawn again below, so even a streamed line that is not
 * finished yet goes on where it was.
 *
 * The way back is counted from where the cursor is, never from a saved place on the screen: a
 * terminal that is resized reflows its lines and moves them to and from its history, keeping the
 * cursor beside the text it was in, while a saved place (DECSC) stays on its row of the screen —
 * going back there erased output. So the rows of the footer above the cursor are counted at the
 * width the terminal has now (each footer row wraps on its own), the cursor goes up past them to the
 * output's last row, and to the column where the unfinished output line ends (its width in cells).
 * A resize reported while the footer is up (`resized`) draws it again at once.
 *
 * The room the footer takes is made first (by moving down with IND, which scrolls at the bottom of
 * the screen), so drawing it never scrolls. Footer lines are cut (or, for the typed text, wrapped)
 * one column short of the width, so no line wraps on its own.
 *
 * Not on a terminal (a pipe, CI), there is no footer: output is written as it is.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import { CliOutput } from "effect/cli"

/**
 * The parts of the footer, drawn in this order from the top: the running tools' status line, the
 * typed messages waiting for the run, the line being typed.
 *
 * @since 0.1.0
 * @category models
 */
export type FooterSlot = "status" | "queue" | "input"

const SLOTS: ReadonlyArray<FooterSlot> = ["status", "queue", "input"]

/**
 * One part of the footer.
 *
 * @since 0.1.0
 * @category models
 */
export interface FooterBlock {
  /** Its lines: the CLI's own text and colours (text from a model or a user already sanitized). */
  readonly lines: ReadonlyArray<string>
  /** Where the cursor goes (in the line being typed): a line of the block, a column of that line. */
  readonly cursor?: { readonly line: number; readonly column: number } | undefined
  /** Long lines wrap onto more rows (the typed text) instead of being cut. */
  readonly wrap?: boolean | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Screen {
  /** A terminal: the footer is drawn. */
  readonly live: boolean
  /** Output, above the footer. */
  readonly write: (text: string) => void
  /** Sets one part of the footer, or removes it (`undefined`). */
  readonly setBlock: (slot: FooterSlot, block: FooterBlock | undefined) => void
  /**
   * Runs `effect` with the footer erased and not drawn, for something else that writes on the
   * terminal meanwhile (a question, `$EDITOR`, a pager); output starts on a line of its own first.
   * After it the cursor is taken to be at the start of a line, and the footer comes back.
   */
  readonly suspend: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** The terminal was resized: the footer is drawn again, from where the cursor is now (see the module). */
  readonly resized: () => void
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ScreenOptions {
  /** Writes to the terminal as it is. */
  readonly write: (text: string) => void
  readonly live: boolean
  /** The terminal's size now (undefined or 0 when it does not say: 80 × 24). */
  readonly columns?: (() => number | undefined) | undefined
  readonly rows?: (() => number | undefined) | undefined
}

// eslint-disable-next-line no-control-regex
const SGR = /\u001b\[[0-9;]*m/y
// eslint-disable-next-line no-control-regex
const TRAILING_SGR = /(?:\u001b\[[0-9;]*m)+$/

/** `line` in pieces of at most `width` visible columns (colour sequences take none); tabs count as one. */
const piecesOf = (line: string, width: number, wrap: boolean): Array<string> => {
  const pieces: Array<string> = []
  let piece = ""
  let columns = 0
  let i = 0
  while (i < line.length) {
    SGR.lastIndex = i
    const sgr = SGR.exec(line)
    if (sgr !== null) {
      piece += sgr[0]
      i += sgr[0].length
      continue
    }
    const code = line.codePointAt(i)!
    const char = String.fromCodePoint(code)
    i += char.length
    if (columns === width) {
      if (!wrap) {
        // cut: the rest of the line is dropped, its colours kept closed
        piece += "\u001b[0m"
        return [piece]
      }
      pieces.push(piece)
      piece = ""
      columns = 0
    }
    piece += char === "\t" ? " " : char
    columns++
  }
  pieces.push(piece)
  // a wrapped line that fills its last row: the cursor after it is on the next one
  if (wrap && columns === width) pieces.push("")
  return pieces
}

/** `line` cut after `column` visible columns (colour sequences take none), as `piecesOf` counts them. */
const splitAt = (line: string, column: number): [string, string] => {
  let columns = 0
  let i = 0
  while (i < line.length && columns < column) {
    SGR.lastIndex = i
    const sgr = SGR.exec(line)
    if (sgr !== null) {
      i += sgr[0].length
      continue
    }
    i += String.fromCodePoint(line.codePointAt(i)!).length
    columns++
  }
  return [line.slice(0, i), line.slice(i)]
}

/**
 * A screen over `options.write` (see the module's description).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeScreen = (options: ScreenOptions): Screen => {
  const { live } = options
  const blocks = new Map<FooterSlot, FooterBlock>()
  let atLineStart = true
  /** The width of the output's unfinished last line (terminal cells). */
  let partialWidth = 0
  /** The footer is on the screen, below the output: its rows, and where the cursor was left in them. */
  let drawn:
    | { readonly rows: ReadonlyArray<string>; readonly cursor: { readonly row: number; readonly col: number } }
    | undefined
  let suspended = 0

  const size = (read: (() => number | undefined) | undefined, fallback: number) => {
    const n = read?.()
    return n !== undefined && n > 0 ? n : fallback
  }

  /** The footer's rows, top first, and where the cursor goes in them. */
  const layout = () => {
    const width = Math.max(1, size(options.columns, 80) - 1)
    const rows: Array<string> = []
    let cursor: { row: number; col: number } | undefined
    for (const slot of SLOTS) {
      const block = blocks.get(slot)
      if (block === undefined) continue
      block.lines.forEach((line, index) => {
        if (block.cursor?.line === index) {
          const column = Math.max(0, block.cursor.column)
          cursor = { row: rows.length + Math.floor(column / width), col: column % width }
        }
        rows.push(...piecesOf(line, width, block.wrap === true))
      })
    }
    // at most the screen's height less two rows; the last ones (where the cursor is) are kept
    const max = Math.max(1, size(options.rows, 24) - 2)
    if (rows.length > max) {
      const drop = rows.length - max
      rows.splice(0, drop)
      if (cursor !== undefined) cursor = { row: Math.max(0, cursor.row - drop), col: cursor.col }
    }
    return { rows, cursor }
  }

  /**
   * The footer erased, the cursor back where the output ended (see the module's description): `ESC 7` is
   * used only within this one write, to come back after clearing the rows below (a move down stops at the
   * bottom of the screen).
   */
  const erase = (): string => {
    if (drawn === undefined) return ""
    const { cursor, rows } = drawn
    drawn = undefined
    const columns = size(options.columns, 80)
    const heights = rows.map((row) => Math.max(1, Math.ceil(CliOutput.displayWidth(row) / columns)))
    const above = heights.slice(0, cursor.row).reduce((a, b) => a + b, 0) + Math.floor(cursor.col / columns)
    const total = heights.reduce((a, b) => a + b, 0)
    const up = (n: number) => (n > 0 ? `\u001b[${n}A` : "")
    // (row by row, not with ED: at the top left of the screen tmux takes an ED for a clear and keeps the
    // screen in its history)
    const clear = (below: number) => `\u001b7\u001b[K${"\u001b[1B\u001b[2K".repeat(below)}\u001b8`
    // at a line start (or after a line that fills its last row): the output goes on at the footer's first row
    const column = partialWidth % columns
    if (atLineStart || column === 0) return `${up(above)}\r${clear(total - 1)}`
    // else on the row above it, after the unfinished line's last cell
    return `${up(above + 1)}\u001b[${column + 1}G${clear(total)}`
  }

  const draw = (): string => {
    if (!live || suspended > 0 || blocks.size === 0) return ""
    const layout_ = layout()
    const { rows } = layout_
    if (rows.length === 0) return ""
    // the cursor: in the line being typed, else at the start of the footer
    const cursor = layout_.cursor === undefined ?
      { row: 0, col: 0 } :
      { row: Math.min(layout_.cursor.row, rows.length - 1), col: layout_.cursor.col }
    // the rows the footer needs below the cursor's row, made first (IND scrolls at the bottom)
    const below = atLineStart ? rows.length - 1 : rows.length
    let out = below > 0 ? `${"\u001bD".repeat(below)}\u001b[${below}A` : ""
    out += atLineStart ? "\r" : "\u001bD\r"
    // the cursor's place saved as it is passed and taken back at the end; the rows drawn with autowrap off,
    // each clearing the rest of its row: on a terminal narrower than it says (tmux reflows at once and tells
    // the program later) a row is cut by the terminal, never wrapped onto more rows nor scrolling the screen
    const [before, after] = splitAt(rows[cursor.row]!, cursor.col)
    out += "\u001b[?7l"
    out += [...rows.slice(0, cursor.row), `${before}\u001b7${after}`, ...rows.slice(cursor.row + 1)]
      .map((row) => `${row}\u001b[K`).join("\r\n")
    out += "\u001b[?7h\u001b8"
    drawn = { rows, cursor: { row: cursor.row, col: CliOutput.displayWidth(before) } }
    return out
  }

  const track = (text: string) => {
    const plain = text.replace(TRAILING_SGR, "")
    if (plain.length > 0) atLineStart = plain.endsWith("\n")
    const last = Math.max(text.lastIndexOf("\n"), text.lastIndexOf("\r"))
    partialWidth = last >= 0
      ? CliOutput.displayWidth(text.slice(last + 1))
      : partialWidth + CliOutput.displayWidth(text)
  }

  const sameBlock = (a: FooterBlock | undefined, b: FooterBlock | undefined) =>
    a === b ||
    (a !== undefined && b !== undefined && a.wrap === b.wrap && a.cursor?.line === b.cursor?.line &&
      a.cursor?.column === b.cursor?.column && a.lines.length === b.lines.length &&
      a.lines.every((line, i) => line === b.lines[i]))

  return {
    live,
    write: (text) => {
      if (text.length === 0) return
      if (drawn === undefined && (blocks.size === 0 || !live || suspended > 0)) {
        track(text)
        options.write(text)
        return
      }
      const before = erase()
      track(text)
      options.write(before + text + draw())
    },
    setBlock: (slot, block) => {
      if (!live || sameBlock(blocks.get(slot), block)) return
      if (block === undefined) blocks.delete(slot)
      else blocks.set(slot, block)
      if (suspended > 0) return
      const out = erase() + draw()
      if (out.length > 0) options.write(out)
    },
    suspend: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          suspended++
          let out = erase()
          if (live && !atLineStart) out += "\r\n"
          atLineStart = true
          partialWidth = 0
          if (out.length > 0) options.write(out)
        }),
        () => effect,
        () =>
          Effect.sync(() => {
            suspended--
            atLineStart = true
            partialWidth = 0
            const out = draw()
            if (out.length > 0) options.write(out)
          })
      ),
    resized: () => {
      if (drawn === undefined || suspended > 0) return
      const out = erase() + draw()
      if (out.length > 0) options.write(out)
    }
  }
}

let current: Screen | undefined

/**
 * Makes `screen` the process's screen for as long as the scope lasts: what else writes on the same
 * terminal (the CLI's logger) writes through it, above its footer.
 *
 * @since 0.1.0
 * @category constructors
 */
export const useScreen = (screen: Screen): Effect.Effect<void, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const before = current
      current = screen
      return before
    }),
    (before) =>
      Effect.sync(() => {
        current = before
      })
  ).pipe(Effect.asVoid)

/**
 * The process's live screen, while a command draws one (see `useScreen`).
 *
 * @since 0.1.0
 * @category screens
 */
export const activeScreen = (): Screen | undefined => (current?.live === true ? current : undefined)
