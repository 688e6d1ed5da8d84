/**
 * Live terminal rendering of `LoopEvent`s: streamed text as it arrives, a status line per running
 * tool with a spinner and elapsed time (on a terminal), results summarised in one line each,
 * errors in colour when the terminal supports it.
 *
 * On a terminal the status line is redrawn in place; elsewhere (pipes, CI, `NO_COLOR` alone does
 * not change this) every event is a plain line and tool output is shown as `│ ` lines.
 *
 * @since 0.1.0
 */
import type { LoopEvent, ToolCall, ToolResultMessage } from "@agentloop/core"
import { Clock, Effect } from "effect"
import { stripControl } from "./Sanitize.ts"
import type { Style } from "./Style.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface RendererOptions {
  readonly write: (text: string) => void
  readonly style: Style
  /** Redraw a status line in place (a terminal). */
  readonly live: boolean
  readonly columns?: number | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Renderer {
  readonly render: (event: LoopEvent) => Effect.Effect<void>
  /** Print a line between events (keeps the status line intact). */
  readonly line: (text: string) => Effect.Effect<void>
  /** Runs `effect` with the status line cleared and not redrawn (e.g. while asking a question). */
  readonly hold: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

const oneLine = (text: string, max: number) => {
  const flat = stripControl(text).replace(/\s+/g, " ").trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

/**
 * A short description of a call, e.g. `bash npm test` or `read src/a.ts`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const describeCall = (call: ToolCall): string => {
  const args = call.arguments
  const main = args["command"] ?? args["path"]
  return typeof main === "string"
    ? `${call.name} ${oneLine(main, 60)}`
    : `${call.name} ${oneLine(JSON.stringify(args), 60)}`
}

/**
 * One line summing up a result, using what the coding tools put in `details`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const describeResult = (result: ToolResultMessage): string => {
  const text = result.content.map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join(" ")
  const d = (result.details ?? {}) as Record<string, unknown>
  if (d["skipped"] === true || result.isError && d["exitCode"] === undefined) return oneLine(text, 100)
  const lines = text.split("\n").filter((l) => l.length > 0).length
  if (typeof d["totalLines"] === "number") return `lines ${d["firstLine"]}-${d["lastLine"]} of ${d["totalLines"]}`
  if (typeof d["replacements"] === "number") return oneLine(text.split("\n")[0] ?? "", 100)
  if (d["exitCode"] !== undefined || d["timedOut"] !== undefined) {
    const how = d["timedOut"] === true
      ? "timed out"
      : d["signal"]
      ? `killed by ${d["signal"]}`
      : `exit ${d["exitCode"]}`
    return `${how}, ${lines} line(s) of output`
  }
  const firstLine = text.split("\n").find((l) => l.trim().length > 0) ?? ""
  return lines > 1 ? `${oneLine(firstLine, 80)} (${lines} lines)` : oneLine(firstLine, 100)
}

/** The diff lines of an edit result, to show under it. */
const diffLines = (result: ToolResultMessage): ReadonlyArray<string> => {
  const diff = (result.details as { diff?: unknown } | undefined)?.diff
  if (typeof diff !== "string" || result.isError) return []
  const lines = stripControl(diff).split("\n").filter((l) => l.length > 0 && !l.startsWith("@@"))
  return lines.length > 12 ? [...lines.slice(0, 12), `… ${lines.length - 12} more line(s)`] : lines
}

/**
 * Makes a renderer. On a live terminal it runs a spinner fiber while tools run; the fiber lives
 * in the current scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeRenderer = Effect.fnUntraced(function*(options: RendererOptions) {
  const { write, style, live } = options
  const columns = options.columns ?? 100
  const running = new Map<string, { call: ToolCall; started: number; last: string }>()
  let streaming: "text" | "thinking" | undefined
  let statusShown = false
  let frame = 0
  let held = 0

  const clearStatus = () => {
    if (statusShown) write("\r\u001b[K")
    statusShown = false
  }
  const drawStatus = (now: number) => {
    if (!live || running.size === 0 || streaming !== undefined || held > 0) return
    const parts = [...running.values()].map((r) => {
      const seconds = ((now - r.started) / 1000).toFixed(1)
      return `${describeCall(r.call)} ${style.dim(`${seconds}s`)}${r.last ? style.dim(` ${r.last}`) : ""}`
    })
    const line = `${style.yellow(FRAMES[frame % FRAMES.length]!)} ${parts.join(" · ")}`
    write(`\r\u001b[K${line.slice(0, columns + (style.color ? 40 : 0))}`)
    statusShown = true
  }
  const endStream = () => {
    if (streaming !== undefined) write("\n")
    streaming = undefined
  }
  const println = (text: string) => {
    clearStatus()
    endStream()
    write(`${text}\n`)
  }

  if (live) {
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.sleep("100 millis").pipe(
          Effect.andThen(Clock.currentTimeMillis),
          Effect.map((now) => {
            frame++
            if (running.size > 0 && streaming === undefined) drawStatus(now)
          })
        )
      )
    )
  }

  const render = (event: LoopEvent): Effect.Effect<void> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.sync(() => {
        switch (event.type) {
          case "model_event": {
            const e = event.event
            if (e.type !== "text_delta" && e.type !== "thinking_delta") return
            const kind = e.type === "text_delta" ? "text" : "thinking"
            clearStatus()
            if (streaming !== kind) {
              endStream()
              write(kind === "text" ? style.cyan("assistant ") : style.dim("thinking  "))
              streaming = kind
            }
            const delta = stripControl(e.delta)
            write(kind === "text" ? delta : style.dim(delta))
            return
          }
          case "assistant_message": {
            endStream()
            const m = event.message
            if (m.stopReason !== "toolUse" && m.stopReason !== "stop") {
              println(
                style.yellow(
                  `  model stopped: ${m.stopReason}${m.errorMessage ? ` (${stripControl(m.errorMessage)})` : ""}`
                )
              )
            }
            return
          }
          case "tool_start": {
            running.set(event.call.id, { call: event.call, started: now, last: "" })
            println(style.yellow(`▶ ${describeCall(event.call)}`))
            drawStatus(now)
            return
          }
          case "tool_progress": {
            const entry = running.get(event.toolCallId)
            const p = event.progress as { text?: unknown } | string
            const text = typeof p === "string" ? p : typeof p?.text === "string" ? p.text : undefined
            if (text === undefined) return
            if (entry !== undefined) entry.last = oneLine(text.split("\n").filter((l) => l.trim()).pop() ?? "", 40)
            if (live) {
              drawStatus(now)
            } else {
              for (const l of stripControl(text).split("\n").filter((l) => l.length > 0)) {
                println(style.dim(`  │ ${l}`))
              }
            }
            return
          }
          case "tool_end": {
            const r = event.result
            const entry = running.get(r.toolCallId)
            running.delete(r.toolCallId)
            const elapsed = entry ? style.dim(` ${((now - entry.started) / 1000).toFixed(1)}s`) : ""
            const name = entry ? describeCall(entry.call) : r.toolName
            const skipped = (r.details as { skipped?: boolean } | undefined)?.skipped === true
            const mark = skipped ? style.yellow("⊘") : r.isError ? style.red("✗") : style.green("✓")
            const summary = skipped
              ? style.yellow(describeResult(r))
              : r.isError
              ? style.red(describeResult(r))
              : describeResult(r)
            println(`${mark} ${name}${elapsed}  ${summary}`)
            for (const l of diffLines(r)) {
              println(
                l.startsWith("+")
                  ? style.green(`    ${l}`)
                  : l.startsWith("-")
                  ? style.red(`    ${l}`)
                  : style.dim(`    ${l}`)
              )
            }
            drawStatus(now)
            return
          }
          case "approval_request": {
            println(style.yellow(`? ${describeCall(event.call)} is waiting for approval`))
            return
          }
          case "user_message": {
            const text = typeof event.message.content === "string" ?
              event.message.content :
              event.message.content.map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join(" ")
            println(`${style.dim(event.kind === "steering" ? "steering" : "follow-up")} ${oneLine(text, 100)}`)
            return
          }
          case "turn_end": {
            const color = event.reason === "stop" ? style.green : event.reason === "error" ? style.red : style.yellow
            println(
              color(
                `■ run ended: ${event.reason} after ${event.steps} step(s)${
                  event.error ? ` — ${stripControl(event.error)}` : ""
                }`
              )
            )
            return
          }
        }
      }))

  return {
    render,
    line: (text: string) => Effect.sync(() => println(text)),
    hold: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          held++
          clearStatus()
          endStream()
        }),
        () => effect,
        () =>
          Effect.sync(() => {
            held--
          })
      )
  } satisfies Renderer
})
