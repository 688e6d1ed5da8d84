/**
 * The Vercel AI SDK (`ai`) under test: `streamText`'s multi-step tool loop (`stopWhen:
 * isLoopFinished()`, so it runs until the model stops asking for tools) against the SDK's own
 * `MockLanguageModelV4` from `ai/test`, whose `doStream` answers each request with a prebuilt
 * array of stream parts (`convertArrayToReadableStream`, also from `ai/test`). The `echo` tool is
 * an SDK `tool` with a zod input schema; the sink is a loop over `fullStream` counting parts.
 *
 * The SDK's stream protocol frames a turn with `stream-start` and `finish` and a text block with
 * `text-start`/`text-end`; a tool call is one `tool-call` part carrying its JSON input. So every
 * turn streams exactly the same deltas (one per text delta or per tool call) as the other
 * contenders, plus that framing. The mock records every call's options; the scripted `doStream`
 * clears that record so the mock itself holds no transcript copies (which would count against
 * the SDK's memory).
 *
 * @since 0.1.0
 */
import { isLoopFinished, simulateReadableStream, streamText, tool } from "ai"
import type { ModelMessage, StreamTextEndEvent } from "ai"
import { MockLanguageModelV4 } from "ai/test"
import { z } from "zod"
import { callId, DELTA, echoOutput, FINAL_TEXT, makeHistory, PROMPT, TOOL_NAME } from "../workloads.ts"
import type { Contender, Prepared, Probe } from "../workloads.ts"

/** A part of a V4 model stream (the type `doStream` streams; not re-exported by `ai`). */
type LanguageModelV4StreamPart = Awaited<ReturnType<MockLanguageModelV4["doStream"]>>["stream"] extends
  ReadableStream<infer Part> ? Part : never

type Turn = ReadonlyArray<LanguageModelV4StreamPart>

const usage = {
  inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 }
}

const textTurn = (deltas: number, delta: string): Turn => {
  const parts: Array<LanguageModelV4StreamPart> = [
    { type: "stream-start", warnings: [] },
    { type: "text-start", id: "t" }
  ]
  for (let i = 0; i < deltas; i++) parts.push({ type: "text-delta", id: "t", delta })
  parts.push({ type: "text-end", id: "t" })
  parts.push({ type: "finish", usage, finishReason: { unified: "stop", raw: undefined } })
  return parts
}

const toolTurn = (turn: number, calls: number): Turn => {
  const parts: Array<LanguageModelV4StreamPart> = [{ type: "stream-start", warnings: [] }]
  for (let k = 0; k < calls; k++) {
    parts.push({ type: "tool-call", toolCallId: callId(turn, k), toolName: TOOL_NAME, input: `{"i":${k}}` })
  }
  parts.push({ type: "finish", usage, finishReason: { unified: "tool-calls", raw: undefined } })
  return parts
}

const finalTurn = (): Turn => textTurn(1, FINAL_TEXT)

/** `turns` tool turns of `calls` calls each, then the final turn. */
const toolTurns = (turns: number, calls: number): Array<Turn> => {
  const out: Array<Turn> = []
  for (let t = 0; t < turns; t++) out.push(toolTurn(t, calls))
  out.push(finalTurn())
  return out
}

/** Tool executions of the run in progress, and its probe (runs never overlap). */
const current = { executions: 0, probe: {} as Probe }

/** The tool, defined once as a program defines its tools; it counts for the run in progress. */
const echo = tool({
  description: "Answers ok <i>.",
  inputSchema: z.object({ i: z.number() }),
  execute: async ({ i }) => {
    const index = current.executions++
    current.probe.onToolExecute?.(index)
    return echoOutput(i)
  }
})

const prepare = (turns: ReadonlyArray<Turn>, history: Array<ModelMessage>, probe: Probe): Prepared => {
  let events = 0
  let requests = 0
  const model: MockLanguageModelV4 = new MockLanguageModelV4({
    doStream: async () => {
      const index = requests++
      model.doStreamCalls.length = 0
      probe.onRequest?.(index)
      // pull-based: one part per read, as a network stream delivers them (`convertArrayToReadableStream`
      // enqueues every part up front, and a 100,000-part queue makes every read O(n) in Node's web streams)
      return {
        stream: simulateReadableStream({ chunks: turns[index]!.slice(), initialDelayInMs: null, chunkDelayInMs: null })
      }
    }
  })
  const messages: Array<ModelMessage> = [...history, { role: "user", content: PROMPT }]
  const run = async () => {
    // the end of the run comes from `onEnd`: the result's promise getters (`response`, `steps`...)
    // start a second consumer of the replayed stream, which would go on after the clock stops
    current.executions = 0
    current.probe = probe
    let end: StreamTextEndEvent | undefined
    const result = streamText({
      model,
      messages,
      tools: { [TOOL_NAME]: echo },
      stopWhen: isLoopFinished(),
      onEnd: (event) => {
        end = event
      }
    })
    for await (const _ of result.fullStream) events++
    if (end === undefined) throw new Error("AI SDK run: fullStream ended before onEnd")
    if (end.finishReason !== "stop") throw new Error(`AI SDK run ended ${end.finishReason}`)
    return {
      events,
      toolRuns: current.executions,
      requests,
      messages: messages.length + end.responseMessages.length,
      result: end
    }
  }
  return run
}

/**
 * @since 0.1.0
 * @category contenders
 */
export const aisdk: Contender = {
  key: "aisdk",
  label: "AI SDK (streamText)",
  streamDeltas: (deltas, probe) => prepare([textTurn(deltas, DELTA)], [], probe),
  toolSteps: (steps, probe) => prepare(toolTurns(steps, 1), [], probe),
  growingRun: (turns, calls, probe) => prepare(toolTurns(turns, calls), [], probe),
  toolBatch: (calls, probe) => prepare([toolTurn(0, calls), finalTurn()], [], probe),
  longTranscript: (history, probe) => {
    const messages = makeHistory(history).map((entry): ModelMessage => {
      switch (entry.kind) {
        case "user":
          return { role: "user", content: entry.text }
        case "call":
          return {
            role: "assistant",
            content: [{ type: "tool-call", toolCallId: entry.id, toolName: TOOL_NAME, input: { i: entry.i } }]
          }
        case "result":
          return {
            role: "tool",
            content: [{
              type: "tool-result",
              toolCallId: entry.id,
              toolName: TOOL_NAME,
              output: { type: "text", value: entry.text }
            }]
          }
        case "answer":
          return { role: "assistant", content: entry.text }
      }
    })
    return prepare([toolTurn(0, 1), finalTurn()], messages, probe)
  }
}
