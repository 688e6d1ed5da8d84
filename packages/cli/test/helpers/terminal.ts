/**
 * A terminal emulator for tests (xterm.js, headless): what a user would see of the bytes a program
 * wrote, row by row, after the escape sequences did their work (cursor moves, erasing, scrolling).
 *
 * DECSC / DECRC (`ESC 7` / `ESC 8`) save and restore the cursor's place on the screen, as xterm
 * and tmux do: after a scroll the restored cursor is on the same row of the screen, no longer next
 * to the text it was saved beside (xterm.js itself keeps it next to that text, which would hide a
 * program's mistake).
 */
import xterm from "@xterm/headless"

export interface VirtualTerminal {
  /** Gives the terminal `text` (a line feed also returns the carriage, as a tty's ONLCR does). */
  readonly feed: (text: string) => Promise<void>
  /** The rows on the screen now, top first, without trailing spaces. */
  readonly screen: () => Array<string>
  /** Every row: the scrollback, then the screen. */
  readonly all: () => Array<string>
  /** Where the cursor is on the screen (0-based). */
  readonly cursor: () => { readonly row: number; readonly col: number }
}

export const virtualTerminal = (cols: number, rows: number): VirtualTerminal => {
  const term = new xterm.Terminal({ cols, rows, convertEol: true, allowProposedApi: true, scrollback: 100_000 })
  const rowsFrom = (start: number, end: number) => {
    const out: Array<string> = []
    const buffer = term.buffer.active
    for (let i = start; i < end; i++) out.push((buffer.getLine(i)?.translateToString(true) ?? "").trimEnd())
    return out
  }
  const write = (text: string) => new Promise<void>((resolve) => term.write(text, resolve))
  let saved = { row: 0, col: 0 }
  return {
    feed: async (text) => {
      for (const part of text.split(/(\u001b[78])/)) {
        if (part === "\u001b7") saved = { row: term.buffer.active.cursorY, col: term.buffer.active.cursorX }
        else if (part === "\u001b8") await write(`\u001b[${saved.row + 1};${saved.col + 1}H`)
        else if (part.length > 0) await write(part)
      }
    },
    screen: () => rowsFrom(term.buffer.active.baseY, term.buffer.active.baseY + rows),
    all: () => rowsFrom(0, term.buffer.active.length),
    cursor: () => ({ row: term.buffer.active.cursorY, col: term.buffer.active.cursorX })
  }
}
