/**
 * The floor: a hand-written minimal async loop doing the same work as the others with no loop
 * events, no validation and no error handling. The model is an async iterable (an async
 * generator over the same prebuilt events agentloop gets); text deltas go straight to the sink;
 * the final message is appended; its calls run concurrently with `Promise.all` and their results
 * are appended in call order; repeat until a turn has no call. Each request gets the live
 * transcript array (no copy).
 *
 * @since 0.1.0
 */
import type { AssistantMessage, Message, ModelEvent, ToolCall, ToolResultMessage } from "@agentloop/core"
import { callId, DELTA, echoOutput, FINAL_TEXT, makeHistoryMessages, PROMPT, TOOL_NAME } from "../workloads.ts"
import type { Contender, Prepared, Probe } from "../workloads.ts"

type Turn = ReadonlyArray<ModelEvent>

async function* replay(events: Turn): AsyncGenerator<ModelEvent> {
  for (const event of events) yield event
}

const toolCall = (id: string, i: number): ToolCall => ({ type: "toolCall", id, name: TOOL_NAME, arguments: { i } })

const textTurn = (deltas: number, text: string, delta: string): Turn => {
  const events: Array<ModelEvent> = []
  for (let i = 0; i < deltas; i++) events.push({ type: "text_delta", delta })
  events.push({ type: "done", message: { role: "assistant", content: [{ type: "text", text }], stopReason: "stop" } })
  return events
}

const toolTurn = (turn: number, calls: number): Turn => {
  const parts: Array<ToolCall> = []
  const events: Array<ModelEvent> = []
  for (let k = 0; k < calls; k++) {
    const call = toolCall(callId(turn, k), k)
    parts.push(call)
    events.push({ type: "toolcall_delta", id: call.id, name: TOOL_NAME, delta: `{"i":${k}}` })
  }
  events.push({ type: "done", message: { role: "assistant", content: parts, stopReason: "toolUse" } })
  return events
}

const finalTurn = (): Turn => textTurn(1, FINAL_TEXT, FINAL_TEXT)

/** `turns` tool turns of `calls` calls each, then the final turn. */
const toolTurns = (turns: number, calls: number): Array<Turn> => {
  const out: Array<Turn> = []
  for (let t = 0; t < turns; t++) out.push(toolTurn(t, calls))
  out.push(finalTurn())
  return out
}

/**
 * The whole loop.
 *
 * @since 0.1.0
 * @category loop
 */
export const floorLoop = async (
  input: ReadonlyArray<Message>,
  model: (messages: ReadonlyArray<Message>) => AsyncIterable<ModelEvent>,
  tools: Record<string, (args: Record<string, unknown>) => Promise<string>>,
  sink: (event: ModelEvent) => void
): Promise<Array<Message>> => {
  const transcript = input.slice()
  while (true) {
    let final: AssistantMessage | undefined
    for await (const event of model(transcript)) {
      if (event.type === "done") final = event.message
      else sink(event)
    }
    if (final === undefined) throw new Error("no final message")
    transcript.push(final)
    const calls = final.content.filter((part): part is ToolCall => part.type === "toolCall")
    if (calls.length === 0) return transcript
    const results = await Promise.all(calls.map(async (call): Promise<ToolResultMessage> => ({
      role: "toolResult",
      toolCallId: call.id,
      toolName: call.name,
      content: [{ type: "text", text: await tools[call.name]!(call.arguments) }],
      isError: false
    })))
    for (const result of results) transcript.push(result)
  }
}

const prepare = (turns: ReadonlyArray<Turn>, input: ReadonlyArray<Message>, probe: Probe): Prepared => {
  let executions = 0
  let events = 0
  let requests = 0
  const model = () => {
    const index = requests++
    probe.onRequest?.(index)
    return replay(turns[index] ?? [])
  }
  const tools = {
    [TOOL_NAME]: async (args: Record<string, unknown>) => {
      const index = executions++
      probe.onToolExecute?.(index)
      return echoOutput(args["i"] as number)
    }
  }
  return () =>
    floorLoop(input, model, tools, () => {
      events++
    }).then((messages) => ({ events, toolRuns: executions, requests, messages: messages.length, result: messages }))
}

const prompt: Message = { role: "user", content: PROMPT }

/**
 * @since 0.1.0
 * @category contenders
 */
export const floor: Contender = {
  key: "floor",
  label: "floor (minimal loop)",
  streamDeltas: (deltas, probe) => prepare([textTurn(deltas, DELTA.repeat(deltas), DELTA)], [prompt], probe),
  toolSteps: (steps, probe) => prepare(toolTurns(steps, 1), [prompt], probe),
  growingRun: (turns, calls, probe) => prepare(toolTurns(turns, calls), [prompt], probe),
  toolBatch: (calls, probe) => prepare([toolTurn(0, calls), finalTurn()], [prompt], probe),
  longTranscript: (history, probe) => {
    const messages: Array<Message> = makeHistoryMessages(history)
    messages.push(prompt)
    return prepare([toolTurn(0, 1), finalTurn()], messages, probe)
  }
}
