/**
 * @mariozechner/pi-agent-core under test: its low-level `runAgentLoop(prompts, context, config,
 * emit, signal, streamFn)` with a scripted stream function (an `AssistantMessageEventStream`
 * pushed from a prebuilt array, as pi-ai's own providers push), the `echo` tool with a TypeBox
 * schema (validated by pi's `validateToolArguments`) and a counting `emit`. Two configurations:
 * `pi`, pi at its cheapest (`convertToLlm` is the identity: the messages already are LLM
 * messages, so each request gets the live context array, no copy), and `piFilter`, with
 * `convertToLlm` as pi's `Agent` does by default (keep user, assistant and toolResult messages:
 * a filter over the whole history for every request).
 *
 * pi's stream protocol opens a message with `start` and carries the partial message on every
 * event; the scripted stream sends `start`, then exactly the same deltas as the other contenders
 * (one per text delta or per tool call, each pointing at the same partial object, as pi-ai's
 * providers do), then `done`.
 *
 * @since 0.1.0
 */
import { runAgentLoop } from "@mariozechner/pi-agent-core"
import type { AgentContext, AgentLoopConfig, AgentMessage, AgentTool, StreamFn } from "@mariozechner/pi-agent-core"
import { createAssistantMessageEventStream, Type } from "@mariozechner/pi-ai"
import type { AssistantMessage, AssistantMessageEvent, Message, Model, ToolCall, Usage } from "@mariozechner/pi-ai"
import { callId, DELTA, echoOutput, FINAL_TEXT, makeHistory, PROMPT, TOOL_NAME } from "../workloads.ts"
import type { Contender, Prepared, Probe } from "../workloads.ts"

const usage: Usage = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 }
}

const model: Model<"bench"> = {
  id: "scripted",
  name: "scripted",
  api: "bench",
  provider: "bench",
  baseUrl: "http://127.0.0.1:0",
  reasoning: false,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 1_000_000,
  maxTokens: 1_000_000
}

const assistant = (
  content: AssistantMessage["content"],
  stopReason: AssistantMessage["stopReason"]
): AssistantMessage => ({
  role: "assistant",
  content,
  api: "bench",
  provider: "bench",
  model: "scripted",
  usage,
  stopReason,
  timestamp: 0
})

const toolCall = (id: string, i: number): ToolCall => ({ type: "toolCall", id, name: TOOL_NAME, arguments: { i } })

/** The events of one scripted turn: `start`, the deltas, `done`. */
type Turn = ReadonlyArray<AssistantMessageEvent>

const textTurn = (deltas: number, text: string, delta: string): Turn => {
  const message = assistant([{ type: "text", text }], "stop")
  const partial = assistant([{ type: "text", text }], "stop")
  const events: Array<AssistantMessageEvent> = [{ type: "start", partial }]
  for (let i = 0; i < deltas; i++) events.push({ type: "text_delta", contentIndex: 0, delta, partial })
  events.push({ type: "done", reason: "stop", message })
  return events
}

const toolTurn = (turn: number, calls: number): Turn => {
  const parts: Array<ToolCall> = []
  for (let k = 0; k < calls; k++) parts.push(toolCall(callId(turn, k), k))
  const message = assistant(parts, "toolUse")
  const partial = assistant(parts, "toolUse")
  const events: Array<AssistantMessageEvent> = [{ type: "start", partial }]
  for (let k = 0; k < calls; k++) {
    events.push({ type: "toolcall_delta", contentIndex: k, delta: `{"i":${k}}`, partial })
  }
  events.push({ type: "done", reason: "toolUse", message })
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

/** Events pushed per burst: the stream's queue never holds more than this. */
const BURST = 64

/**
 * Pushes the events in bursts of `BURST`, yielding to the event loop between bursts (as a network
 * stream delivers packets), so the consumer drains the queue before the next burst. Pushing every
 * event at once, or one per microtask (pi-ai's faux provider; the consumer takes several
 * microtasks per event, so the queue still grows), queues up to 100,000 events, and `EventStream`
 * reads its queue with `Array.shift`, which is O(n) on an array that large: O(n²) in all, a cost
 * of the scripted producer rather than of the loop.
 */
const produce = async (stream: ReturnType<typeof createAssistantMessageEventStream>, events: Turn) => {
  for (let i = 0; i < events.length; i++) {
    stream.push(events[i]!)
    if ((i + 1) % BURST === 0) await new Promise<void>((resolve) => setImmediate(resolve))
  }
  stream.end()
}

const scriptedStream = (turns: ReadonlyArray<Turn>, probe: Probe, onRequest: () => void): StreamFn => {
  let next = 0
  return () => {
    const index = next++
    onRequest()
    probe.onRequest?.(index)
    const stream = createAssistantMessageEventStream()
    void produce(stream, turns[index] ?? [])
    return stream
  }
}

/** pi's `Agent` default `convertToLlm`: keep the messages an LLM understands. */
const filterToLlm = (messages: Array<AgentMessage>): Array<Message> =>
  messages.filter((m): m is Message => m.role === "user" || m.role === "assistant" || m.role === "toolResult")

/** pi at its cheapest: the context holds only LLM messages, handed over as they are. */
const identityToLlm = (messages: Array<AgentMessage>): Array<Message> => messages as Array<Message>

const echoParameters = Type.Object({ i: Type.Number() })

/** Tool executions of the run in progress, and its probe (runs never overlap). */
const current = { executions: 0, probe: {} as Probe }

/** The tool, defined once as a program defines its tools; it counts for the run in progress. */
const echo: AgentTool<typeof echoParameters, undefined> = {
  name: TOOL_NAME,
  label: TOOL_NAME,
  description: "Answers ok <i>.",
  parameters: echoParameters,
  execute: async (_id, params) => {
    const index = current.executions++
    current.probe.onToolExecute?.(index)
    return { content: [{ type: "text", text: echoOutput(params.i) }], details: undefined }
  }
}

const prepare = (
  convertToLlm: AgentLoopConfig["convertToLlm"],
  turns: ReadonlyArray<Turn>,
  history: Array<AgentMessage>,
  probe: Probe
): Prepared => {
  let events = 0
  let requests = 0
  const context: AgentContext = { systemPrompt: "", messages: history, tools: [echo] }
  const config: AgentLoopConfig = { model, convertToLlm }
  const prompt: Message = { role: "user", content: PROMPT, timestamp: 0 }
  const streamFn = scriptedStream(turns, probe, () => {
    requests++
  })
  const emit = () => {
    events++
  }
  return () => {
    current.executions = 0
    current.probe = probe
    return runAgentLoop([prompt], context, config, emit, undefined, streamFn).then((newMessages) => {
      const last = newMessages[newMessages.length - 1]
      if (last === undefined || last.role !== "assistant" || last.stopReason !== "stop") {
        throw new Error("pi-agent-core run did not end with a stop turn")
      }
      return {
        events,
        toolRuns: current.executions,
        requests,
        messages: history.length + newMessages.length,
        result: newMessages
      }
    })
  }
}

const makePi = (
  key: "pi" | "piFilter",
  label: string,
  convertToLlm: AgentLoopConfig["convertToLlm"]
): Contender => ({
  key,
  label,
  streamDeltas: (deltas, probe) => prepare(convertToLlm, [textTurn(deltas, DELTA.repeat(deltas), DELTA)], [], probe),
  toolSteps: (steps, probe) => prepare(convertToLlm, toolTurns(steps, 1), [], probe),
  toolBatch: (calls, probe) => prepare(convertToLlm, [toolTurn(0, calls), finalTurn()], [], probe),
  growingRun: (turns, calls, probe) => prepare(convertToLlm, toolTurns(turns, calls), [], probe),
  longTranscript: (history, probe) => {
    const messages: Array<AgentMessage> = makeHistory(history).map((entry): Message => {
      switch (entry.kind) {
        case "user":
          return { role: "user", content: entry.text, timestamp: 0 }
        case "call":
          return assistant([toolCall(entry.id, entry.i)], "toolUse")
        case "result":
          return {
            role: "toolResult",
            toolCallId: entry.id,
            toolName: TOOL_NAME,
            content: [{ type: "text", text: entry.text }],
            isError: false,
            timestamp: 0
          }
        case "answer":
          return assistant([{ type: "text", text: entry.text }], "stop")
      }
    })
    return prepare(convertToLlm, [toolTurn(0, 1), finalTurn()], messages, probe)
  }
})

/**
 * pi-agent-core at its cheapest: `convertToLlm` is the identity (every message in the context is
 * an LLM message), so a request costs nothing per message. The reference for the ratios.
 *
 * @since 0.1.0
 * @category contenders
 */
export const pi: Contender = makePi("pi", "pi-agent-core (cheapest)", identityToLlm)

/**
 * pi-agent-core with the `Agent` class's default `convertToLlm`, a filter over the whole history
 * on every request (so its cost per step grows with the transcript).
 *
 * @since 0.1.0
 * @category contenders
 */
export const piFilter: Contender = makePi("piFilter", "pi-agent-core (default filter)", filterToLlm)
