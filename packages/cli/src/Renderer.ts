/**
 * Live terminal rendering of `LoopEvent`s: streamed text as it arrives, a status line per running
 * tool with a spinner and elapsed time (on a terminal), results summarised in one line each with
 * the true size of their output, and under it a short excerpt (the last lines of `bash`, the diff
 * of an `edit`, the first lines of a `write`: ToolOutput.ts); errors in colour when the terminal
 * supports it.
 *
 * On a terminal the status line is the top of the screen's footer, redrawn in place (Screen.ts);
 * elsewhere (pipes, CI, `NO_COLOR` alone does not change this) every event is a plain line and
 * tool output is shown as `│ ` lines as it comes.
 *
 * @since 0.1.0
 */
import type { LoopEvent, Message, ToolCall, ToolResultMessage, Usage } from "@agentloop/core"
import { Clock, Effect } from "effect"
import { deniedTextOf } from "./approvals/Denial.ts"
import { stripControl } from "./Sanitize.ts"
import { makeScreen } from "./Screen.ts"
import type { Screen } from "./Screen.ts"
import type { Style } from "./Style.ts"
import { CUT_NOTE, describeSize, excerptOf, formatCount, outputSizeOf, resultText, wasCut } from "./ToolOutput.ts"

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
  /** The screen to draw on (default: one over `write`, live when `live` is). */
  readonly screen?: Screen | undefined
  /** How the whole output of a call is shown, named where an excerpt leaves lines out (chat: `/last`). */
  readonly expandHint?: string | undefined
  /**
   * The model's context window in tokens: the status line then shows how much of it the last request
   * filled (`context: 12.3k of 200.0k (6%)`), updated as each answer reports its usage.
   */
  readonly contextWindow?: (() => number | undefined) | undefined
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
  /**
   * The output a call of the last batch streamed while it ran (its `tool_progress` text, at most
   * `STREAMED_MAX_CHARS`; `omitted` when more came, or the tool stopped sending it): for `/last`, of a call
   * interrupted before its result could carry its output.
   */
  readonly streamed?: ((toolCallId: string) => Streamed | undefined) | undefined
}

/**
 * What a call streamed while it ran (see `Renderer.streamed`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Streamed {
  readonly text: string
  readonly omitted: boolean
}

/**
 * The most of a call's streamed output a renderer keeps for `/last`: 1 MiB of text (`bash` streams at most
 * its first 100,000 characters anyway).
 *
 * @since 0.1.0
 * @category constants
 */
export const STREAMED_MAX_CHARS = 1024 * 1024

/**
 * The context the last request filled: its input (cached or not) plus its answer, from the last
 * assistant message's usage (what the next request starts from); undefined when none reported it.
 *
 * @since 0.1.0
 * @category rendering
 */
export const contextUsed = (messages: ReadonlyArray<Message>): number | undefined => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!
    if (m.role === "assistant" && m.usage !== undefined) return contextOf(m.usage)
  }
  return undefined
}

const contextOf = (usage: Usage) => usage.input + (usage.cacheRead ?? 0) + (usage.cacheWrite ?? 0) + usage.output

/**
 * A token count as the terminal shows it: `1234`, `12.3k`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const formatTokens = (n: number): string => (n >= 10_000 ? `${(n / 1000).toFixed(1)}k` : String(n))

/**
 * `context: 12.3k of 200.0k (6%)`: how much of the model's window the last request filled.
 *
 * @since 0.1.0
 * @category rendering
 */
export const describeContext = (used: number, window: number): string =>
  `context: ${formatTokens(used)} of ${formatTokens(window)} (${Math.round(used / window * 100)}%)`

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
 * One line summing up a result, using what the coding tools put in `details`: for `bash` how it
 * ended and the true size of its whole output (`exit 0 · 300,000 lines, 1.9 MB`), with a note when
 * the model was sent it cut.
 *
 * @since 0.1.0
 * @category rendering
 */
export const describeResult = (result: ToolResultMessage): string => {
  const text = resultText(result)
  const d = (result.details ?? {}) as Record<string, unknown>
  const cut = wasCut(result) ? ` · ${CUT_NOTE}` : ""
  // a denied call: the text the model was sent of its denial
  const denied = deniedTextOf(result)
  if (denied !== undefined) return oneLine(`denied: ${denied}`, 100)
  if (d["skipped"] === true || result.isError && d["exitCode"] === undefined) return oneLine(text, 100)
  if (typeof d["totalLines"] === "number") return `lines ${d["firstLine"]}-${d["lastLine"]} of ${d["totalLines"]}`
  if (typeof d["replacements"] === "number") return oneLine(text.split("\n")[0] ?? "", 100)
  if (d["exitCode"] !== undefined || d["timedOut"] !== undefined) {
    const how = d["timedOut"] === true
      ? "timed out"
      : d["signal"]
      ? `killed by ${stripControl(String(d["signal"]))}`
      : `exit ${d["exitCode"]}`
    const size = outputSizeOf(result)
    return `${how}${size === undefined ? "" : ` · ${describeSize(size)}`}${cut}`
  }
  const lines = text.split("\n").filter((l) => l.length > 0).length
  const firstLine = text.split("\n").find((l) => l.trim().length > 0) ?? ""
  return `${lines > 1 ? `${oneLine(firstLine, 80)} (${lines} lines)` : oneLine(firstLine, 100)}${cut}`
}

/** `text` cut to `max` columns (one a code point), with `…` where it was cut. */
const clipTo = (text: string, max: number): string => {
  const chars = [...text.replace(/\t/g, "  ")]
  return chars.length > max ? `${chars.slice(0, Math.max(1, max - 1)).join("")}…` : chars.join("")
}

/**
 * The lines shown under a call's line: a short excerpt of its output (ToolOutput.ts), each cut to
 * the width, and how many lines it leaves out (naming `expandHint`, when given, to see them).
 *
 * @since 0.1.0
 * @category rendering
 */
export const excerptLines = (
  call: ToolCall | undefined,
  result: ToolResultMessage,
  options: { readonly style: Style; readonly columns: number; readonly expandHint?: string | undefined }
): Array<string> => {
  const excerpt = excerptOf(call, result)
  if (excerpt === undefined) return []
  const { style } = options
  const width = Math.max(20, options.columns - 6)
  const lines = excerpt.lines.map((l) =>
    l.kind === "output"
      ? style.dim(`  │ ${clipTo(l.text, width)}`)
      : l.kind === "added"
      ? style.green(`    +${clipTo(l.text, width)}`)
      : l.kind === "removed"
      ? style.red(`    -${clipTo(l.text, width)}`)
      : style.dim(`     ${clipTo(l.text, width)}`)
  )
  if (excerpt.more === 0) return lines
  const hint = options.expandHint === undefined ? "" : ` (${options.expandHint})`
  const count = `${formatCount(excerpt.more)} ${excerpt.moreAt === "before" ? "earlier" : "more"} line${
    excerpt.more === 1 ? "" : "s"
  }${hint}`
  return excerpt.moreAt === "before" ? [style.dim(`  … ${count}`), ...lines] : [...lines, style.dim(`    … ${count}`)]
}

/** The mark of a result: done, failed, or skipped. */
const markOf = (result: ToolResultMessage, style: Style) =>
  (result.details as { skipped?: boolean } | undefined)?.skipped === true
    ? style.yellow("⊘")
    : result.isError
    ? style.red("✗")
    : style.green("✓")

/**
 * A call and how it ended, in one line: `✓ bash npm test  exit 0 · 4 lines, 120 bytes`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const resultLine = (call: ToolCall, result: ToolResultMessage, style: Style): string =>
  `${markOf(result, style)} ${describeCall(call)}  ${style.dim(describeResult(result))}`

/** The text of a user message, without what it attaches (a note says how many). */
const promptText = (content: string | ReadonlyArray<{ readonly type: string; readonly text?: string }>): string => {
  if (typeof content === "string") return content
  const first = content.find((c) => c.type === "text")?.text ?? ""
  return content.length > 1 ? `${first} [+${content.length - 1} attached]` : first
}

/** The first `max` lines of `text`, and a line saying how many more there are. */
const headLines = (text: string, max: number): Array<string> => {
  const lines = stripControl(text).trim().split("\n")
  return lines.length > max ? [...lines.slice(0, max), `… ${lines.length - max} more line(s)`] : lines
}

/**
 * A conversation told compactly, for `--continue` and `--resume`: each user message (its first
 * lines), each assistant text (its first lines), and one line per tool call (the call and how it
 * ended, as `tool_end` shows it); only the last `prompts` user messages (default 20) and what
 * follows them.
 *
 * @since 0.1.0
 * @category rendering
 */
export const describeHistory = (
  messages: ReadonlyArray<Message>,
  options: { readonly style: Style; readonly prompts?: number | undefined }
): Array<string> => {
  const { style } = options
  const results = new Map<string, ToolResultMessage>()
  for (const m of messages) if (m.role === "toolResult") results.set(m.toolCallId, m)
  const users = messages.flatMap((m, i) => (m.role === "user" ? [i] : []))
  const keep = Math.max(1, options.prompts ?? 20)
  const from = users.length > keep ? users[users.length - keep]! : 0
  const lines: Array<string> = []
  if (from > 0) lines.push(style.dim(`… ${users.length - keep} earlier message(s) not shown`))
  for (const m of messages.slice(from)) {
    if (m.role === "user") {
      const [first, ...rest] = headLines(promptText(m.content), 4)
      lines.push(`${style.cyan(">")} ${first}`, ...rest.map((l) => `  ${l}`))
    } else if (m.role === "assistant") {
      const text = m.content.flatMap((c) => (c.type === "text" ? [c.text] : [])).join("").trim()
      if (text.length > 0) {
        const [first, ...rest] = headLines(text, 6)
        lines.push(`${style.cyan("assistant")} ${first}`, ...rest)
      }
      for (const part of m.content) {
        if (part.type !== "toolCall") continue
        const result = results.get(part.id)
        lines.push(result === undefined ? `${style.dim("·")} ${describeCall(part)}` : resultLine(part, result, style))
      }
    }
  }
  return lines
}

/**
 * Makes a renderer. On a live terminal it runs a spinner fiber while tools run; the fiber lives
 * in the current scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeRenderer = Effect.fnUntraced(function*(options: RendererOptions) {
  const { style, live } = options
  const screen = options.screen ?? makeScreen({ write: options.write, live })
  const write = screen.write
  const columns = options.columns ?? 100
  const running = new Map<
    string,
    { call: ToolCall; started: number; last: string; printed: boolean; omitted: boolean }
  >()
  // what each call of the last batch streamed (a batch's first call forgets the one before)
  const streamed = new Map<string, { text: string; omitted: boolean }>()
  let streaming: "text" | "thinking" | undefined
  let frame = 0
  let held = 0
  // since when the run waits for the model after a batch of calls ended (undefined: it does not)
  let waitingSince: number | undefined
  // what the last request filled of the context (from its answer's usage)
  let context: number | undefined

  const clearStatus = () => screen.setBlock("status", undefined)
  const statusShown = () => running.size > 0 || waitingSince !== undefined
  const drawStatus = (now: number) => {
    if (!live || !statusShown() || streaming !== undefined || held > 0) return
    const parts = running.size > 0 ?
      [...running.values()].map((r) => {
        const seconds = ((now - r.started) / 1000).toFixed(1)
        return `${describeCall(r.call)} ${style.dim(`${seconds}s`)}${r.last ? style.dim(` ${r.last}`) : ""}`
      }) :
      [`waiting for the model ${style.dim(`${((now - waitingSince!) / 1000).toFixed(1)}s`)}`]
    const window = options.contextWindow?.()
    if (context !== undefined && window !== undefined) parts.push(style.dim(describeContext(context, window)))
    screen.setBlock("status", { lines: [`${style.yellow(FRAMES[frame % FRAMES.length]!)} ${parts.join(" · ")}`] })
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
            if (statusShown() && streaming === undefined) drawStatus(now)
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
            waitingSince = undefined
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
            waitingSince = undefined
            clearStatus()
            endStream()
            const m = event.message
            if (m.usage !== undefined) context = contextOf(m.usage)
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
            waitingSince = undefined
            if (running.size === 0) streamed.clear()
            streamed.set(event.call.id, { text: "", omitted: false })
            running.set(event.call.id, { call: event.call, started: now, last: "", printed: false, omitted: false })
            println(style.yellow(`▶ ${describeCall(event.call)}`))
            drawStatus(now)
            return
          }
          case "tool_progress": {
            const entry = running.get(event.toolCallId)
            const p = event.progress as { text?: unknown; omitted?: unknown } | string
            if (typeof p === "object" && p?.omitted === true && entry !== undefined) entry.omitted = true
            const text = typeof p === "string" ? p : typeof p?.text === "string" ? p.text : undefined
            const kept = streamed.get(event.toolCallId)
            if (kept !== undefined && typeof p === "object" && p?.omitted === true) kept.omitted = true
            if (text === undefined) return
            if (kept !== undefined && !kept.omitted) {
              const room = STREAMED_MAX_CHARS - kept.text.length
              kept.text += text.slice(0, room)
              if (text.length > room) kept.omitted = true
            }
            if (entry !== undefined) entry.last = oneLine(text.split("\n").filter((l) => l.trim()).pop() ?? "", 40)
            if (live) {
              drawStatus(now)
            } else {
              for (const l of stripControl(text).split("\n").filter((l) => l.length > 0)) {
                if (entry !== undefined) entry.printed = true
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
            const name = entry ? describeCall(entry.call) : stripControl(r.toolName)
            const skipped = (r.details as { skipped?: boolean } | undefined)?.skipped === true
            const summary = skipped
              ? style.yellow(describeResult(r))
              : r.isError
              ? style.red(describeResult(r))
              : describeResult(r)
            // the batch done: the next request goes out
            if (running.size === 0) waitingSince = now
            println(`${markOf(r, style)} ${name}${elapsed}  ${summary}`)
            // (in a pipe the output was printed as it came: its excerpt only when some of it was not)
            const printedWhole = entry !== undefined && entry.printed && !entry.omitted
            if (!printedWhole) {
              for (const l of excerptLines(entry?.call, r, { style, columns, expandHint: options.expandHint })) {
                println(l)
              }
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
            waitingSince = undefined
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
    streamed: (toolCallId: string) => streamed.get(toolCallId),
    hold: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          held++
          clearStatus()
          endStream()
        }),
        () => screen.suspend(effect),
        () =>
          Effect.sync(() => {
            held--
          })
      )
  } satisfies Renderer
})
