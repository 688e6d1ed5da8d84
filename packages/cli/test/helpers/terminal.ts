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
import { spawnSync } from "node:child_process"

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

/**
 * A program in a real terminal that can be resized: a tmux pane (its own tmux server, no user
 * config), what a user sees of it read back with `capture-pane` — its scrollback too — as the
 * terminal has reflowed it.
 */
export interface TmuxTerminal {
  /** Types `text` as it is (`keys`: tmux key names such as `Enter`, `Escape`). */
  readonly type: (text: string) => void
  readonly keys: (...names: ReadonlyArray<string>) => void
  /** Makes the terminal `cols` × `rows` (the program gets SIGWINCH). */
  readonly resize: (cols: number, rows: number) => void
  /** Every line: the scrollback, then the screen; a line the terminal wrapped is joined back into one. */
  readonly lines: () => Array<string>
  /** Resolves with the lines once `test` holds of them, failing past `timeoutMs` with what it shows. */
  readonly waitFor: (test: (lines: Array<string>) => boolean, timeoutMs?: number) => Promise<Array<string>>
  /** Whether the program is still running. */
  readonly running: () => boolean
  /** Ends the tmux server (and the program with it). */
  readonly close: () => void
}

export const tmuxTerminal = (
  command: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env: NodeJS.ProcessEnv; readonly cols: number; readonly rows: number }
): TmuxTerminal => {
  const socket = `agentloop-test-${process.pid}-${Math.random().toString(16).slice(2)}`
  const tmux = (...args: ReadonlyArray<string>) => {
    const run = spawnSync("tmux", ["-L", socket, "-f", "/dev/null", ...args], { cwd: options.cwd, encoding: "utf8" })
    if (run.error !== undefined) throw new Error(`tmux could not run (is it installed?): ${run.error.message}`)
    return run
  }
  const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`
  const env = Object.entries({ ...options.env, TERM: "xterm-256color" }).filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${quote(v!)}`)
  const started = tmux(
    "new-session",
    "-d",
    "-s",
    "t",
    "-x",
    String(options.cols),
    "-y",
    String(options.rows),
    `exec env -i ${env.join(" ")} ${command.map(quote).join(" ")}`
  )
  if (started.status !== 0) throw new Error(`tmux new-session failed: ${started.stderr}`)
  tmux("set-option", "-g", "history-limit", "100000")
  tmux("set-option", "-g", "remain-on-exit", "on")
  const lines = () => {
    const shown = tmux("capture-pane", "-p", "-J", "-S", "-", "-E", "-", "-t", "t").stdout
    return shown.split("\n").map((l) => l.trimEnd())
  }
  return {
    type: (text) => void tmux("send-keys", "-t", "t", "-l", text),
    keys: (...names) => void tmux("send-keys", "-t", "t", ...names),
    resize: (cols, rows) => void tmux("resize-window", "-t", "t", "-x", String(cols), "-y", String(rows)),
    lines,
    waitFor: async (test, timeoutMs = 90_000) => {
      const end = Date.now() + timeoutMs
      while (Date.now() < end) {
        const shown = lines()
        if (test(shown)) return shown
        await new Promise((r) => setTimeout(r, 50))
      }
      throw new Error(`timed out waiting for the terminal; it shows:\n${lines().join("\n")}`)
    },
    running: () => tmux("display-message", "-p", "-t", "t", "#{pane_dead}").stdout.trim() === "0",
    close: () => void tmux("kill-server")
  }
}
