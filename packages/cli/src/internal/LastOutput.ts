/**
 * `/last`: the whole output of the last tool calls — those of the transcript's last assistant
 * message that made any —, each under its call's line. A `bash` output the model got cut is read
 * back whole from the file the tool kept it in: only a file of the tools' output folder, through
 * the workspace's confined layer (a session file may come from anywhere and name any path); when
 * that file is gone (it lives as long as the session that ran the call), what the model was sent,
 * saying so. A call interrupted (or stopped at its time limit) before it could answer has no output in its
 * result: what it had streamed meanwhile is shown, when the renderer still has it. The result's line says
 * how the call ended; its text is not repeated under it. Everything shown is sanitized.
 */
import type { Message, ToolCall, ToolResultMessage } from "@agentloop/core"
import { OUTPUT_FOLDER, OUTPUT_KEEP_MAX_BYTES } from "@agentloop/tools"
import { Effect } from "effect"
import { describeResult, resultLine } from "../Renderer.ts"
import type { Streamed } from "../Renderer.ts"
import { stripControl } from "../Sanitize.ts"
import type { Style } from "../Style.ts"
import { wholeOutputOf } from "../ToolOutput.ts"
import { readTextFile } from "../WorkspaceIO.ts"

/** The calls of the last assistant message that made any, each with its result (when it has one). */
export const lastCalls = (
  messages: ReadonlyArray<Message>
): Array<{ readonly call: ToolCall; readonly result: ToolResultMessage | undefined }> => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!
    if (m.role !== "assistant") continue
    const calls = m.content.filter((c): c is ToolCall => c.type === "toolCall")
    if (calls.length === 0) continue
    const results = new Map<string, ToolResultMessage>()
    for (const later of messages.slice(i + 1)) if (later.role === "toolResult") results.set(later.toolCallId, later)
    return calls.map((call) => ({ call, result: results.get(call.id) }))
  }
  return []
}

/** Whether `file` (from a result's details) is a file of the tools' output folder. */
const isKeptOutput = (file: string): boolean => file.startsWith(`${OUTPUT_FOLDER}/`) && !file.split("/").includes("..")

/** The text `/last` shows for `messages` (undefined when no call was made yet). */
export const lastOutput = (
  root: string,
  messages: ReadonlyArray<Message>,
  style: Style,
  /** What a call of the last batch streamed while it ran (the renderer's `streamed`). */
  streamed?: ((toolCallId: string) => Streamed | undefined) | undefined
): Effect.Effect<string | undefined> =>
  Effect.gen(function*() {
    const calls = lastCalls(messages)
    if (calls.length === 0) return undefined
    const parts: Array<string> = []
    for (const { call, result } of calls) {
      if (result === undefined) {
        parts.push(`${style.dim("·")} ${stripControl(call.name)} (no result)`)
        continue
      }
      const whole = wholeOutputOf(call, result)
      let text = whole.text
      let note: string | undefined
      if (whole.file !== undefined) {
        const read = isKeptOutput(whole.file)
          ? yield* Effect.result(readTextFile(root, whole.file, OUTPUT_KEEP_MAX_BYTES))
          : undefined
        if (read?._tag === "Success") text = read.success
        else {note =
            "its whole output is no longer kept (it lives as long as its session's process): what the model was sent"}
      }
      // stopped before it answered (core's made-up result): what it had printed meanwhile
      const d = (result.details ?? {}) as Record<string, unknown>
      const stopped = d["interrupted"] === true || d["timedOut"] === true && d["exitCode"] === undefined
      const printed = stopped ? streamed?.(call.id) : undefined
      if (printed !== undefined && printed.text.length > 0) {
        text = printed.text
        note = `what it printed before it was ${d["interrupted"] === true ? "interrupted" : "stopped"}${
          printed.omitted ? ", as far as it was shown" : ""
        }`
      }
      parts.push(resultLine(call, result, style))
      if (note !== undefined) parts.push(style.dim(`  (${note})`))
      const body = stripControl(text)
      // (the result's line already says it all: a one-line error)
      const said = body.trim() === describeResult(result)
      if (body.length > 0 && !said) parts.push(body.endsWith("\n") ? body.slice(0, -1) : body)
    }
    return `${parts.join("\n")}\n`
  })
