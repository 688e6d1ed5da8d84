/**
 * The terminal as `run` and `chat` draw on it: output that scrolls, and below it a footer of live
 * lines redrawn in place — the status line of running tools, the messages typed while a run works
 * and waiting to be sent, the line being typed. Output never lands inside the footer, nor the
 * footer inside the output: before a write the footer is erased (the cursor goes back to where the
 * output ended, which was saved with DECSC), after it the footer is drawn again below, so even a
 * streamed line that is not finished yet goes on where it was.
 *
 * The room the footer takes is made before the cursor is saved (by moving down with IND, which
 * scrolls at the bottom of the screen), so drawing it never scrolls and the saved place stays
 * right. Footer lines are cut (or, for the typed text, wrapped) one column short of the width, so
 * no line wraps on its own.
 *
 * Not on a terminal (a pipe, CI), there is no footer: output is written as it is.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type { Scope } from "effect"

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
  /** The footer is on the screen, on the rows below the saved cursor (this many of them). */
  let drawn: { readonly below: number } | undefined
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

  const erase = (): string => {
    if (drawn === undefined) return ""
    const { below } = drawn
    drawn = undefined
    // back to where the output ended, its row cleared from there and the footer's rows below it, one by
    // one (not with ED: at the top left of the screen tmux takes an ED for a clear and keeps the screen
    // in its history)
    return `\u001b8\u001b[K${"\u001b[1B\u001b[2K".repeat(below)}\u001b8`
  }

  const draw = (): string => {
    if (!live || suspended > 0 || blocks.size === 0) return ""
    const { cursor, rows } = layout()
    if (rows.length === 0) return ""
    // the rows the footer needs below the cursor's row, made first (IND scrolls at the bottom)
    const below = atLineStart ? rows.length - 1 : rows.length
    let out = below > 0 ? `${"\u001bD".repeat(below)}\u001b[${below}A` : ""
    out += "\u001b7"
    out += atLineStart ? "\r" : "\u001bD\r"
    out += rows.join("\r\n")
    if (cursor !== undefined) {
      const up = rows.length - 1 - cursor.row
      out += `${up > 0 ? `\u001b[${up}A` : ""}\r${cursor.col > 0 ? `\u001b[${cursor.col}C` : ""}`
    }
    drawn = { below }
    return out
  }

  const track = (text: string) => {
    const plain = text.replace(TRAILING_SGR, "")
    if (plain.length > 0) atLineStart = plain.endsWith("\n")
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
          if (out.length > 0) options.write(out)
        }),
        () => effect,
        () =>
          Effect.sync(() => {
            suspended--
            atLineStart = true
            const out = draw()
            if (out.length > 0) options.write(out)
          })
      )
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
