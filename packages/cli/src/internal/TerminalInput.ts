/**
 * The line editor of a terminal: one reader of a raw-mode stdin for the whole command, so nothing
 * typed is lost between two prompts (a paste of three lines, a line typed while a run works), and
 * Ctrl-C / Ctrl-D / Esc are seen while a run streams too.
 *
 * While a run works (`whileRunning`), what is typed is edited on a line of its own in the screen's
 * footer, below the output and never inside it: Enter sends it to the run as steering, Alt+Enter
 * as a follow-up, Esc aborts the run, Ctrl-C clears the text (on none, acts as the signal). What is
 * left there when the run ends is the next prompt's text. Keys typed between a prompt and the run
 * it starts go to that line too.
 *
 * Keys (LineEditor.ts decodes them): Enter sends (a line ending with `\` continues instead);
 * Ctrl+J, Alt+Enter and Shift+Enter (where the terminal reports it) put a new line in; a
 * bracketed paste is text whatever its lines. ↑/↓ on the first/last line go through the history
 * (whole entries), Ctrl-R searches it. Ctrl-G opens the text in `$VISUAL`/`$EDITOR` (default
 * `vi`), which gets the terminal until it exits; it is killed if the program leaves meanwhile.
 * Ctrl-C clears a typed text, otherwise acts as the signal would (the controller); Ctrl-D on an
 * empty text leaves (a run in progress is aborted first), and leaves at once while a run works.
 */
import { Deferred, Effect } from "effect"
import type { Fiber, Scope } from "effect"
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as nodePath from "node:path"
import { StringDecoder } from "node:string_decoder"
import type { History } from "../History.ts"
import { applyKey, atEdge, layout, makeKeyDecoder } from "../LineEditor.ts"
import type { EditState, Key } from "../LineEditor.ts"
import { stripControl } from "../Sanitize.ts"
import type { Screen } from "../Screen.ts"
import type { Style } from "../Style.ts"
import type { Controller, LineInput } from "../Terminal.ts"

const BRACKETED_PASTE_ON = "\u001b[?2004h"
const BRACKETED_PASTE_OFF = "\u001b[?2004l"
const EMPTY: EditState = { text: "", cursor: 0 }

interface Search {
  readonly query: string
  /** Index of the entry shown, or undefined when nothing matches. */
  readonly match: number | undefined
  readonly saved: EditState
}

/**
 * The terminal's line input, for as long as the scope lasts (raw mode and bracketed paste are
 * turned off again when it closes).
 */
export const makeTerminalInput = (
  controller: Controller,
  options: {
    readonly history: History
    readonly leaveOnEof: boolean
    /** Tab completion at a prompt (not at an approval question): candidates, and the part they replace. */
    readonly complete?: ((before: string) => Promise<[Array<string>, string]>) | undefined
    /** The screen the output is drawn on: the line typed while a run works is part of its footer. */
    readonly screen: Screen
    readonly style?: Style | undefined
    /** Shift+Tab at a prompt or while a run works (not at a question): the next mode, as a line to show. */
    readonly cycleMode?: (() => string) | undefined
    /** Shows a line among a run's output (ending an answer's streaming line first); default: the screen's. */
    readonly say?: ((line: string) => void) | undefined
  }
): Effect.Effect<LineInput, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { complete, cycleMode, history, screen } = options
    const say = options.say ?? ((line: string) => screen.write(`${line}\n`))
    const dim = options.style?.dim ?? ((text: string) => text)
    const input = process.stdin
    // questions go to the terminal even when stdout is a pipe
    const output = process.stdout.isTTY === true ? process.stdout : process.stderr
    const write = (text: string) => {
      if (!controller.outputClosed() && !output.destroyed) output.write(text)
    }
    const decode = makeKeyDecoder()
    const utf8 = new StringDecoder("utf8")
    const typeahead: Array<Key> = []
    let active: ((key: Key) => void) | undefined
    // the editor or the pager, while one has the terminal
    let editor: ChildProcess | undefined
    let closed = false
    // while a run works: where its typed messages go, and the text being typed (then the next prompt's)
    let running: ((text: string, kind: "steering" | "followUp") => void) | undefined
    let pending = EMPTY
    // texts the next reads answer with (`queue`)
    const queued: Array<string> = []

    const leaveNow = () => {
      if (!options.leaveOnEof) return
      // while a run works: leave now (the run is aborted, its calls paired)
      screen.setBlock("input", undefined)
      if (!controller.exitRequested()) screen.write("^D\n")
      controller.requestExit(0)
    }

    /** The line being typed while a run works, in the footer (none while it is empty). */
    const drawPending = () => {
      if (pending.text.length === 0) {
        screen.setBlock("input", undefined)
        return
      }
      // (shown without control characters, as a paste may hold some)
      const before = stripControl(pending.text.slice(0, pending.cursor)).split("\n")
      const lines = stripControl(pending.text).split("\n").map((line, i) => `${i === 0 ? "» " : "… "}${line}`)
      screen.setBlock("input", {
        lines: [...lines, dim("  Enter: steer the run now · Alt+Enter: send after the run · Esc: stop the run")],
        cursor: { line: before.length - 1, column: 2 + [...before[before.length - 1]!].length },
        wrap: true
      })
    }

    /** A key while a run works and no question is asked. */
    const onRunKey = (key: Key) => {
      if (running === undefined) return
      if (key.type === "key") {
        switch (key.name) {
          case "enter":
          case "altEnter": {
            const text = pending.text
            if (text.trim().length === 0) return
            pending = EMPTY
            drawPending()
            history.add(text)
            running(text, key.name === "enter" ? "steering" : "followUp")
            return
          }
          case "escape":
            controller.abort()
            return
          case "backTab":
            // shown with the run's output; the next call the mode decides sees it
            if (cycleMode !== undefined) say(dim(cycleMode()))
            return
          case "interrupt":
            if (pending.text.length > 0) pending = EMPTY
            else controller.interrupt()
            break
          case "eof":
            if (pending.text.length === 0) return leaveNow()
            pending = applyKey(pending, { type: "key", name: "delete" })
            break
          case "tab":
          case "search":
          case "editor":
          case "clearScreen":
            return
          default:
            pending = applyKey(pending, key)
        }
      } else {
        pending = applyKey(pending, key)
      }
      drawPending()
    }

    const onData = (chunk: Buffer | string) => {
      for (const key of decode(typeof chunk === "string" ? chunk : utf8.write(chunk))) {
        if (active !== undefined) active(key)
        else if (running !== undefined) onRunKey(key)
        else if (key.type === "key" && key.name === "interrupt") controller.interrupt()
        else if (key.type === "key" && key.name === "escape") controller.abort()
        else if (key.type === "key" && key.name === "eof") leaveNow()
        else typeahead.push(key)
      }
    }
    const attach = () => {
      input.setRawMode(true)
      write(BRACKETED_PASTE_ON)
      input.on("data", onData)
      input.resume()
    }
    const detach = () => {
      input.removeListener("data", onData)
      input.pause()
      write(BRACKETED_PASTE_OFF)
      if (!input.destroyed) input.setRawMode(false)
    }
    const onEnd = () => {
      // the terminal is gone (closed stdin): like Ctrl-D
      if (active !== undefined) active({ type: "key", name: "eof" })
      else controller.requestExit(0)
    }
    // the terminal reflowed its lines: the footer is drawn again from where the cursor is now
    const onResize = () => screen.resized()
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        attach()
        input.on("end", onEnd)
        output.on("resize", onResize)
      }),
      () =>
        Effect.sync(() => {
          closed = true
          input.removeListener("end", onEnd)
          output.removeListener("resize", onResize)
          if (editor === undefined) detach()
          editor?.kill("SIGKILL")
        })
    )

    const read: LineInput["read"] = (prompt, options) =>
      screen.suspend(Effect.callback<string | undefined>((resume) => {
        if (controller.exitRequested()) {
          resume(Effect.succeed(undefined))
          return
        }
        const useHistory = options?.history !== false
        const entries = useHistory ? history.entries() : []
        const continuation = "\u001b[2m… \u001b[22m"
        // a prompt starts with what was being typed while the last run worked (not a question asked during one)
        let state = useHistory && running === undefined ? pending : EMPTY
        if (useHistory && running === undefined) pending = EMPTY
        let index = entries.length
        let draft = EMPTY
        let search: Search | undefined
        let row = 0
        // what the last render showed
        let last = { prompt: "", text: "", cursor: 0 }
        let done = false
        let watcher: Fiber.Fiber<void> | undefined

        const render = () => {
          const shown = search === undefined ?
            { prompt, state } :
            {
              prompt: `${
                search.match === undefined && search.query.length > 0 ? "(failing search)" : "(search)"
              } '${search.query}': `,
              state: search.match === undefined ?
                EMPTY :
                { text: entries[search.match]!, cursor: entries[search.match]!.length }
            }
          // (a terminal that does not say its size, as some pseudo-terminals: 80 columns)
          const columns = output.columns !== undefined && output.columns > 0 ? output.columns : 80
          const at = layout(shown.prompt, continuation, shown.state, columns)
          if (last.prompt === shown.prompt && last.text === shown.state.text && last.cursor === shown.state.cursor) {
            return
          }
          // typing at the end of the text on the same row: only the new characters
          const added = shown.state.text.slice(last.text.length)
          if (
            last.prompt === shown.prompt && shown.state.text.startsWith(last.text) &&
            last.cursor === last.text.length &&
            shown.state.cursor === shown.state.text.length && added.length > 0 && !added.includes("\n") &&
            at.end.row === row && at.end.col > 0
          ) {
            last = { prompt: shown.prompt, text: shown.state.text, cursor: shown.state.cursor }
            write(added)
            return
          }
          last = { prompt: shown.prompt, text: shown.state.text, cursor: shown.state.cursor }
          let out = `${row > 0 ? `\u001b[${row}A` : ""}\r\u001b[J${shown.prompt}`
          out += shown.state.text.split("\n").join(`\r\n${continuation}`)
          // the end exactly at the edge: go to the next row, as the layout counts it
          if (at.end.col === 0 && at.end.row > 0 && !shown.state.text.endsWith("\n")) out += " \r"
          const up = at.end.row - at.cursor.row
          out += `${up > 0 ? `\u001b[${up}A` : ""}\r${at.cursor.col > 0 ? `\u001b[${at.cursor.col}C` : ""}`
          row = at.cursor.row
          write(out)
        }
        const finish = (value: string | undefined) => {
          if (done) return
          done = true
          active = undefined
          watcher?.interruptUnsafe()
          editor?.kill("SIGKILL")
          if (search !== undefined && value !== undefined) search = undefined
          state = { text: value ?? state.text, cursor: (value ?? state.text).length }
          render()
          write("\r\n")
          if (value !== undefined && useHistory) history.add(value)
          resume(Effect.succeed(value))
        }
        const openEditor = () => {
          const command = process.env["VISUAL"] || process.env["EDITOR"] || "vi"
          const folder = mkdtempSync(nodePath.join(tmpdir(), "agentloop-edit-"))
          const file = nodePath.join(folder, "prompt.md")
          writeFileSync(file, state.text, { mode: 0o600 })
          active = () => {}
          detach()
          write("\r\n")
          const child = spawn("/bin/sh", ["-c", `${command} "$1"`, "sh", file], { stdio: "inherit" })
          editor = child
          const back = () => {
            if (editor !== child) return
            editor = undefined
            let text = state.text
            try {
              text = readFileSync(file, "utf8").replace(/\r?\n$/, "")
            } catch {
              // the editor removed the file: the text stays as it was
            }
            rmSync(folder, { recursive: true, force: true })
            if (closed) return
            attach()
            if (done) return
            active = onKey
            state = { text, cursor: text.length }
            row = 0
            last = { prompt: "", text: "", cursor: 0 }
            render()
          }
          child.on("exit", back)
          child.on("error", back)
        }
        const find = (query: string, before: number) => {
          for (let i = before - 1; i >= 0; i--) if (entries[i]!.includes(query)) return i
          return undefined
        }
        const onSearchKey = (s: Search, key: Key) => {
          if (key.type !== "key") {
            const query = s.query + key.text.replace(/\s+/g, " ")
            search = { ...s, query, match: find(query, entries.length) }
            return
          }
          const accept = () => {
            search = undefined
            if (s.match !== undefined) state = { text: entries[s.match]!, cursor: entries[s.match]!.length }
          }
          switch (key.name) {
            case "search":
              search = { ...s, match: find(s.query, s.match ?? entries.length) ?? s.match }
              return
            case "backspace": {
              const query = s.query.slice(0, -1)
              search = { ...s, query, match: query.length === 0 ? undefined : find(query, entries.length) }
              return
            }
            case "enter":
              accept()
              finish(state.text)
              return
            case "interrupt":
            case "escape":
            case "editor":
              search = undefined
              state = s.saved
              return
            default:
              accept()
          }
        }
        const onKey = (key: Key) => {
          if (done) return
          if (search !== undefined) {
            onSearchKey(search, key)
            if (!done) render()
            return
          }
          if (key.type === "key") {
            switch (key.name) {
              case "enter":
                if (state.cursor > 0 && state.text[state.cursor - 1] === "\\") {
                  state = applyKey(applyKey(state, { type: "key", name: "backspace" }), {
                    type: "key",
                    name: "newline"
                  })
                  break
                }
                finish(state.text)
                return
              case "interrupt":
                if (state.text.length > 0) {
                  state = EMPTY
                  break
                }
                write("\r\n")
                row = 0
                last = { prompt: "", text: "", cursor: 0 }
                controller.interrupt()
                if (controller.exitRequested()) finish(undefined)
                // a question asked during a run (an approval) goes away with the aborted run
                else if (useHistory) render()
                return
              case "eof":
                if (state.text.length > 0) {
                  state = applyKey(state, { type: "key", name: "delete" })
                  break
                }
                // at an approval question: leave, aborting the run
                if (!useHistory) controller.requestExit(0)
                finish(undefined)
                return
              case "editor":
                openEditor()
                return
              case "search":
                if (useHistory) search = { query: "", match: undefined, saved: state }
                break
              case "tab": {
                if (complete === undefined || !useHistory) return
                const asked = state
                complete(asked.text.slice(0, asked.cursor)).then(([candidates, part]) => {
                  // the line changed meanwhile, or the read ended: the answer is stale
                  if (done || active !== onKey || state !== asked || candidates.length === 0) return
                  const common = candidates.reduce((a, b) => {
                    let n = 0
                    while (n < a.length && n < b.length && a[n] === b[n]) n++
                    return a.slice(0, n)
                  })
                  if (common.startsWith(part) && common.length > part.length) {
                    state = applyKey(state, { type: "text", text: common.slice(part.length) })
                  } else if (candidates.length > 1) {
                    // nothing to add: show the choices, then the prompt again
                    write(`\r\n${candidates.join("  ")}\r\n`)
                    row = 0
                    last = { prompt: "", text: "", cursor: 0 }
                  }
                  render()
                }, () => {})
                return
              }
              case "backTab":
                if (cycleMode === undefined || !useHistory) return
                // the new mode where the prompt was, the prompt (and the text being typed) below it
                write(`${row > 0 ? `\u001b[${row}A` : ""}\r\u001b[J${dim(cycleMode())}\r\n`)
                row = 0
                last = { prompt: "", text: "", cursor: 0 }
                break
              case "clearScreen":
                write("\u001b[H\u001b[2J")
                row = 0
                last = { prompt: "", text: "", cursor: 0 }
                break
              case "up":
                if (atEdge(state, "up") && index > 0) {
                  if (index === entries.length) draft = state
                  index--
                  state = { text: entries[index]!, cursor: entries[index]!.length }
                } else state = applyKey(state, key)
                break
              case "down":
                if (atEdge(state, "down") && index < entries.length) {
                  index++
                  state = index === entries.length ?
                    draft :
                    { text: entries[index]!, cursor: entries[index]!.length }
                } else state = applyKey(state, key)
                break
              default:
                state = applyKey(state, key)
            }
          } else {
            state = applyKey(state, key)
          }
          render()
        }

        active = onKey
        render()
        // a message sent too late for the run it was typed in, or a command typed meanwhile: answered at once
        const next = useHistory && running === undefined ? queued.shift() : undefined
        if (next !== undefined) {
          state = { text: next, cursor: next.length }
          finish(next)
          return
        }
        if (options?.edit === true) openEditor()
        // what was typed before the prompt came (while a run worked, or pasted with the last line)
        while (typeahead.length > 0 && !done && active === onKey) onKey(typeahead.shift()!)
        if (!done) {
          watcher = Effect.runFork(
            Deferred.await(controller.exit).pipe(Effect.andThen(Effect.sync(() => finish(undefined))))
          )
        }
        return Effect.sync(() => {
          watcher?.interruptUnsafe()
          if (done) return
          done = true
          active = undefined
          editor?.kill("SIGKILL")
          write("\r\n")
        })
      }))

    const whileRunning: LineInput["whileRunning"] = (effect, send) => {
      // sent one after another, in the order typed; the run is over only once every one was handed over
      let sending = Promise.resolve()
      return Effect.acquireUseRelease(
        Effect.andThen(
          Effect.sync(() => {
            running = (text, kind) => {
              sending = sending.then(() => Effect.runPromise(send(text, kind)), () => {})
            }
            // what was typed since the prompt that started the run goes to it too, before it starts
            while (typeahead.length > 0 && active === undefined && running !== undefined) onRunKey(typeahead.shift()!)
            drawPending()
          }),
          Effect.promise(() => sending)
        ),
        () => effect,
        () =>
          Effect.andThen(
            Effect.promise(() => sending),
            Effect.sync(() => {
              running = undefined
              screen.setBlock("input", undefined)
            })
          )
      )
    }

    const page: LineInput["page"] = (text) =>
      screen.suspend(Effect.callback<void>((resume) => {
        const rows = output.rows !== undefined && output.rows > 0 ? output.rows : 24
        const print = () => write(`${text.replace(/\r?\n/g, "\r\n")}${text.endsWith("\n") ? "" : "\r\n"}`)
        if (text.split("\n").length <= rows - 2 || closed) {
          print()
          resume(Effect.void)
          return
        }
        const command = process.env["PAGER"] || "less"
        const previous = active
        active = () => {}
        detach()
        const child = spawn("/bin/sh", ["-c", command], {
          stdio: ["pipe", "inherit", "inherit"],
          env: { ...process.env, LESS: process.env["LESS"] ?? "FRX" }
        })
        editor = child
        // a pager that quits before reading everything closes its end: nothing to report
        child.stdin?.on("error", () => {})
        child.stdin?.end(text)
        let back = false
        const done = (code: number | null) => {
          if (back) return
          back = true
          if (editor === child) editor = undefined
          if (closed) return resume(Effect.void)
          attach()
          active = previous
          // no pager to be found: the text is printed instead
          if (code === 127) print()
          resume(Effect.void)
        }
        child.on("exit", (code) => done(code))
        child.on("error", () => done(127))
        // the program leaving meanwhile takes the pager down
        const watcher = Effect.runFork(
          Deferred.await(controller.exit).pipe(Effect.andThen(Effect.sync(() => child.kill("SIGKILL"))))
        )
        child.on("exit", () => watcher.interruptUnsafe())
        return Effect.sync(() => {
          watcher.interruptUnsafe()
          child.kill("SIGKILL")
        })
      }))

    return {
      interactive: true,
      read,
      whileRunning,
      queue: (text) => {
        queued.push(text)
      },
      page
    } satisfies LineInput
  })
