/**
 * What the CLI shows of the program's log: one readable line per entry, never a timestamped log
 * record. A provider's retry (logged with its attempt, delay and reason as annotations) reads
 * "rate limited, retrying in 0.4 s (2/4)"; any other warning or error is its first line. Debug and
 * trace entries are not shown.
 *
 * @since 0.1.0
 */
import { Layer, Logger, LogLevel, References } from "effect"
import { stripControl } from "./Sanitize.ts"
import { activeScreen } from "./Screen.ts"
import { makeStyle, wantsColor } from "./Style.ts"

/** Clears the line the cursor is on (a status line a renderer without a screen draws there). */
const CLEAR_LINE = "\r\u001b[K"

const REASONS: Readonly<Record<string, string>> = {
  rate_limit: "rate limited",
  overloaded: "the server is overloaded",
  server: "server error",
  timeout: "the request timed out",
  network: "the connection failed",
  protocol: "the response broke off"
}

/** `0.4 s`, `12 s`. */
const seconds = (ms: number) => `${ms >= 10_000 ? (ms / 1000).toFixed(0) : (ms / 1000).toFixed(1)} s`

/**
 * The line for a provider's retry, from its log annotations (undefined when they are not a retry's):
 * what failed, the wait, and the attempt about to be made out of those allowed.
 *
 * @since 0.1.0
 * @category formatting
 */
export const describeRetry = (annotations: Readonly<Record<string, unknown>>): string | undefined => {
  const attempt = annotations["agentloop.retry.attempt"]
  const attempts = annotations["agentloop.retry.attempts"]
  const delay = annotations["agentloop.retry.delay_ms"]
  if (typeof attempt !== "number" || typeof attempts !== "number" || typeof delay !== "number") return undefined
  const reason = String(annotations["agentloop.error.reason"] ?? "")
  const status = annotations["http.response.status_code"]
  const what = REASONS[reason] ?? (reason.length > 0 ? reason.replace(/_/g, " ") : "the request failed")
  const http = typeof status === "number" && reason !== "rate_limit" ? ` (HTTP ${status})` : ""
  return `${what}${http}, retrying in ${seconds(delay)} (${attempt + 1}/${attempts})`
}

/** The first non-empty line of a log message. */
const firstLine = (message: unknown): string => {
  const parts = Array.isArray(message) ? message : [message]
  const text = parts.map((p) => (typeof p === "string" ? p : String(p))).join(" ")
  return text.split("\n").find((l) => l.trim().length > 0)?.trim() ?? ""
}

/**
 * A logger writing one line per entry at `Info` or above (a retry as `describeRetry` says).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeCliLogger = (
  write: (line: string) => void,
  options: { readonly color: boolean; readonly terminal: boolean }
): Logger.Logger<unknown, void> => {
  const style = makeStyle(options.color)
  return Logger.make((entry) => {
    if (LogLevel.isLessThan(entry.logLevel, "Info")) return
    const retry = describeRetry(entry.fiber.getRef(References.CurrentLogAnnotations))
    const text = stripControl(retry ?? firstLine(entry.message))
    if (text.length === 0) return
    const warn = retry !== undefined || LogLevel.isGreaterThanOrEqualTo(entry.logLevel, "Warn")
    // on a terminal, first clear a status line being drawn (the renderer draws it again)
    write(`${options.terminal ? CLEAR_LINE : ""}${warn ? style.yellow(`⚠ ${text}`) : style.dim(text)}\n`)
  })
}

/**
 * The CLI's logger, on stderr, in place of effect's default one.
 *
 * @since 0.1.0
 * @category layers
 */
export const cliLoggerLayer: Layer.Layer<never> = Layer.suspend(() =>
  Logger.layer([
    makeCliLogger((line) => {
      // a command drawing a screen on this terminal: above its footer (no status line to clear then)
      const screen = activeScreen()
      if (screen !== undefined && process.stderr.isTTY === true) screen.write(line.replace(CLEAR_LINE, ""))
      else if (!process.stderr.destroyed) process.stderr.write(line)
    }, { color: wantsColor(process.stderr.isTTY, process.env), terminal: process.stderr.isTTY === true })
  ])
)
