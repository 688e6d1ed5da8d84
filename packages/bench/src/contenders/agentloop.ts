/**
 * agentloop under test: `runAgentLoop` with a scripted `Model` (each request answered by a
 * prebuilt array of `ModelEvent`s through `Stream.fromIterable`), the `echo` tool built with
 * `defineTool` and a schema, and `callbackSinkLayer` counting events.
 *
 * @since 0.1.0
 */
import { callbackSinkLayer, defineTool, Model, ModelError, runAgentLoop, toolExecutorLayer } from "@agentloop/core"
import type { AssistantMessage, Message, ModelEvent, ToolCall } from "@agentloop/core"
import { Effect, Layer, Schema, Stream } from "effect"
import { callId, DELTA, echoOutput, FINAL_TEXT, makeHistoryMessages, PROMPT, TOOL_NAME } from "../workloads.ts"
import type { Contender, Prepared, Probe } from "../workloads.ts"

const finalTurn = (): ReadonlyArray<ModelEvent> => [
  { type: "text_delta", delta: FINAL_TEXT },
  { type: "done", message: { role: "assistant", content: [{ type: "text", text: FINAL_TEXT }], stopReason: "stop" } }
]

const toolCall = (id: string, i: number): ToolCall => ({ type: "toolCall", id, name: TOOL_NAME, arguments: { i } })

/** One tool turn: one `toolcall_delta` per call, then `done`. */
const toolTurn = (turn: number, calls: number): ReadonlyArray<ModelEvent> => {
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

/** `turns` tool turns of `calls` calls each, then the final turn. */
const toolTurns = (turns: number, calls: number): Array<ReadonlyArray<ModelEvent>> => {
  const out: Array<ReadonlyArray<ModelEvent>> = []
  for (let t = 0; t < turns; t++) out.push(toolTurn(t, calls))
  out.push(finalTurn())
  return out
}

async function* replay(events: ReadonlyArray<ModelEvent>): AsyncGenerator<ModelEvent> {
  for (const event of events) yield event
}

/**
 * The scripted model: `Stream.fromIterable` over the turn's events (as the testkit's scripted
 * model), or, with `async`, `Stream.fromAsyncIterable` over an async generator: one promise per
 * event, as the floor's model, for a comparison where the source costs the same.
 */
const modelLayer = (
  turns: ReadonlyArray<ReadonlyArray<ModelEvent>>,
  probe: Probe,
  async = false
): Layer.Layer<Model> => {
  let next = 0
  return Layer.succeed(
    Model,
    Model.of({
      stream: () => {
        const index = next++
        probe.onRequest?.(index)
        const events = turns[index] ?? []
        return async ?
          Stream.fromAsyncIterable(replay(events), (error) => new ModelError({ message: String(error) })) :
          Stream.fromIterable(events)
      }
    })
  )
}

/** Tool executions of the run in progress, and its probe (runs never overlap). */
const current = { executions: 0, probe: {} as Probe }

/** The tool, defined once as a program defines its tools; it counts for the run in progress. */
const echoTool = defineTool({
  name: TOOL_NAME,
  description: "Answers ok <i>.",
  parameters: Schema.Struct({ i: Schema.Number }),
  execute: ({ i }) =>
    Effect.sync(() => {
      const index = current.executions++
      current.probe.onToolExecute?.(index)
      return echoOutput(i)
    })
})

/** Builds everything a run needs except what a user builds per run (the layers provided to it). */
const prepare = (
  turns: ReadonlyArray<ReadonlyArray<ModelEvent>>,
  messages: ReadonlyArray<Message>,
  probe: Probe,
  asyncSource = false
): Prepared => {
  let events = 0
  let requests = 0
  const model = modelLayer(turns, {
    ...probe,
    onRequest: (i) => {
      requests++
      probe.onRequest?.(i)
    }
  }, asyncSource)
  const sink = callbackSinkLayer(() => {
    events++
  })
  return () => {
    current.executions = 0
    current.probe = probe
    return Effect.runPromise(
      runAgentLoop({ messages, maxSteps: turns.length + 1 }).pipe(
        Effect.provide(Layer.mergeAll(model, toolExecutorLayer([echoTool]), sink))
      )
    ).then((result) => {
      if (result.reason !== "stop") throw new Error(`agentloop run ended ${result.reason}: ${result.error}`)
      return { events, toolRuns: current.executions, requests, messages: result.messages.length, result }
    })
  }
}

const prompt: Message = { role: "user", content: PROMPT }

const deltaTurn = (deltas: number): Array<ModelEvent> => {
  const events: Array<ModelEvent> = []
  for (let i = 0; i < deltas; i++) events.push({ type: "text_delta", delta: DELTA })
  const message: AssistantMessage = {
    role: "assistant",
    content: [{ type: "text", text: DELTA.repeat(deltas) }],
    stopReason: "stop"
  }
  events.push({ type: "done", message })
  return events
}

/**
 * Workload (a) with the model's events coming from an async generator (one promise per event,
 * like the floor's model) instead of an array: shows what the loop costs when the source is not
 * synchronous.
 *
 * @since 0.1.0
 * @category contenders
 */
export const streamDeltasAsyncSource = (deltas: number, probe: Probe): Prepared =>
  prepare([deltaTurn(deltas)], [prompt], probe, true)

/**
 * @since 0.1.0
 * @category contenders
 */
export const agentloop: Contender = {
  key: "agentloop",
  label: "agentloop",
  streamDeltas: (deltas, probe) => prepare([deltaTurn(deltas)], [prompt], probe),
  toolSteps: (steps, probe) => prepare(toolTurns(steps, 1), [prompt], probe),
  growingRun: (turns, calls, probe) => prepare(toolTurns(turns, calls), [prompt], probe),
  toolBatch: (calls, probe) => prepare([toolTurn(0, calls), finalTurn()], [prompt], probe),
  longTranscript: (history, probe) => {
    const messages: Array<Message> = makeHistoryMessages(history)
    messages.push(prompt)
    return prepare([toolTurn(0, 1), finalTurn()], messages, probe)
  }
}
