/**
 * What the terminal shows of a tool call's output: its true size — the whole output's, which the
 * tool reports (`bash`: `outputLines`, `outputBytes`), not the size of the text the model was sent,
 * which for a long output is its start and end around a notice —, whether the model got it cut, a
 * short excerpt under the call's line (the last lines of `bash`, the diff of an `edit`, the first
 * lines of a `write`), and the whole output for `/last` (a cut `bash` output from the file the tool
 * kept it in).
 *
 * Everything here is text from a model or a tool: each line is sanitized (`stripControl`).
 *
 * @since 0.1.0
 */
import type { ToolCall, ToolResultMessage } from "@agentloop/core"
import { stripControl } from "./Sanitize.ts"

/**
 * The size of a whole output.
 *
 * @since 0.1.0
 * @category models
 */
export interface OutputSize {
  readonly lines: number
  readonly bytes: number
}

const detailsOf = (result: ToolResultMessage): Record<string, unknown> =>
  typeof result.details === "object" && result.details !== null ? result.details as Record<string, unknown> : {}

/** Whether the result is a `bash` one (its details say how the command ended). */
const isCommand = (result: ToolResultMessage): boolean => {
  const d = detailsOf(result)
  return d["exitCode"] !== undefined || d["timedOut"] !== undefined
}

/**
 * The whole output's size, when the tool reports it (`bash` does: `outputLines`, `outputBytes`).
 *
 * @since 0.1.0
 * @category output
 */
export const outputSizeOf = (result: ToolResultMessage): OutputSize | undefined => {
  const d = detailsOf(result)
  const lines = d["outputLines"]
  const bytes = d["outputBytes"]
  return typeof lines === "number" && typeof bytes === "number" ? { lines, bytes } : undefined
}

/**
 * Whether the model was sent a cut version of the output (`details.truncated`).
 *
 * @since 0.1.0
 * @category output
 */
export const wasCut = (result: ToolResultMessage): boolean => detailsOf(result)["truncated"] === true

/**
 * A count as people read it: `300,000`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const formatCount = (n: number): string => n.toLocaleString("en-US")

/**
 * A size in bytes as people read it: `512 bytes`, `4.2 KB`, `1.9 MB` (1,024 a step).
 *
 * @since 0.1.0
 * @category rendering
 */
export const formatBytes = (bytes: number): string =>
  bytes < 1024 ?
    `${bytes} byte${bytes === 1 ? "" : "s"}` :
    bytes < 1024 * 1024 ?
    `${(bytes / 1024).toFixed(1)} KB` :
    `${(bytes / 1024 / 1024).toFixed(1)} MB`

/**
 * `300,000 lines, 1.9 MB`, `1 line, 4 bytes`, or `no output`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const describeSize = (size: OutputSize): string =>
  size.bytes === 0 ?
    "no output" :
    `${formatCount(size.lines)} line${size.lines === 1 ? "" : "s"}, ${formatBytes(size.bytes)}`

/**
 * The note on a result whose output the model got cut.
 *
 * @since 0.1.0
 * @category constants
 */
export const CUT_NOTE = "the model saw it cut to its start and end"

/**
 * The text of a result: its text parts, an image as `[image]`.
 *
 * @since 0.1.0
 * @category output
 */
export const resultText = (result: ToolResultMessage): string =>
  result.content.map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join("\n")

// bash's own lines: its closing note, its placeholder for nothing printed, the notice of a cut
const BASH_NOTE = /\n?\[Command (?:exited with code|was killed by signal|timed out after) [^\n]*\]$/
const NO_OUTPUT = "(no output)"
const CUT_NOTICE = /^\[\.\.\. [\d,]+ characters omitted /

/** A bash result's output as the model was sent it, without bash's closing note and placeholder. */
const commandOutput = (result: ToolResultMessage): string => {
  const text = resultText(result).replace(BASH_NOTE, "")
  return text === NO_OUTPUT ? "" : text
}

/** The lines of `text` (a last line break ends the last line; it does not start another). */
const linesOf = (text: string): Array<string> => {
  if (text.length === 0) return []
  const lines = text.split("\n")
  if (lines[lines.length - 1] === "") lines.pop()
  return lines
}

/**
 * One line of an excerpt: output, or a line of a diff (added, removed, unchanged).
 *
 * @since 0.1.0
 * @category models
 */
export interface ExcerptLine {
  readonly kind: "output" | "added" | "removed" | "context"
  /** Sanitized, without a diff's `+` / `-` / ` ` mark. */
  readonly text: string
}

/**
 * A short excerpt of an output, to show under its call's line.
 *
 * @since 0.1.0
 * @category models
 */
export interface Excerpt {
  readonly lines: ReadonlyArray<ExcerptLine>
  /** Lines of the whole output not shown. */
  readonly more: number
  /** Where they are: before the excerpt (the last lines of a command are shown) or after it. */
  readonly moreAt: "before" | "after"
}

/**
 * How many lines an excerpt has at most.
 *
 * @since 0.1.0
 * @category constants
 */
export const EXCERPT_LINES = { command: 5, diff: 12, write: 5 } as const

const diffLine = (line: string): ExcerptLine => ({
  kind: line.startsWith("+") ? "added" : line.startsWith("-") ? "removed" : "context",
  text: line.slice(1)
})

/**
 * The excerpt of a call's output: the last lines of `bash` (of the output the model was sent,
 * whose end is the output's end), the diff of an `edit`, the first lines of a `write`'s content;
 * none for other tools, skipped calls and results with no output.
 *
 * @since 0.1.0
 * @category output
 */
export const excerptOf = (call: ToolCall | undefined, result: ToolResultMessage): Excerpt | undefined => {
  const d = detailsOf(result)
  if (d["skipped"] === true) return undefined
  if (isCommand(result)) {
    const lines = linesOf(commandOutput(result))
    // of a cut output, only its tail: the notice and the start are not its last lines
    const notice = lines.findLastIndex((l) => CUT_NOTICE.test(l))
    const tail = (notice >= 0 ? lines.slice(notice + 1) : lines).slice(-EXCERPT_LINES.command)
    if (tail.length === 0) return undefined
    const total = outputSizeOf(result)?.lines ?? lines.length
    return {
      lines: tail.map((l) => ({ kind: "output", text: stripControl(l) })),
      more: Math.max(0, total - tail.length),
      moreAt: "before"
    }
  }
  if (result.isError) return undefined
  if (typeof d["diff"] === "string") {
    const lines = linesOf(stripControl(d["diff"])).filter((l) => !l.startsWith("@@"))
    if (lines.length === 0) return undefined
    const shown = lines.slice(0, EXCERPT_LINES.diff)
    return { lines: shown.map(diffLine), more: lines.length - shown.length, moreAt: "after" }
  }
  const content = call?.name === "write" ? call.arguments["content"] : undefined
  if (typeof content === "string") {
    const lines = linesOf(stripControl(content))
    const shown = lines.slice(0, EXCERPT_LINES.write)
    if (shown.length === 0) return undefined
    return {
      lines: shown.map((text) => ({ kind: "added", text })),
      more: lines.length - shown.length,
      moreAt: "after"
    }
  }
  return undefined
}

/**
 * The whole output of a call, for `/last`: a cut `bash` output's `file` (the one the tool kept it
 * in, relative to the workspace) when there is one, and the text there is without it (what the
 * model was sent); an `edit`'s whole diff; a `write`'s content; the result's text for other tools.
 * Not sanitized yet (a file read later is not either): show it through `stripControl`.
 *
 * @since 0.1.0
 * @category output
 */
export const wholeOutputOf = (
  call: ToolCall | undefined,
  result: ToolResultMessage
): { readonly text: string; readonly file?: string } => {
  const d = detailsOf(result)
  if (isCommand(result)) {
    const file = wasCut(result) && typeof d["fullOutput"] === "string" ? { file: d["fullOutput"] } : {}
    return { text: commandOutput(result), ...file }
  }
  if (!result.isError && typeof d["diff"] === "string") return { text: d["diff"] }
  const content = call?.name === "write" && !result.isError ? call.arguments["content"] : undefined
  return { text: typeof content === "string" ? content : resultText(result) }
}
