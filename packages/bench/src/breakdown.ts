/**
 * Where agentloop's remaining cost goes: the cost per step of workload (b) with parts of the
 * setup swapped for cheaper ones, the Effect primitives the loop is built from, and the input
 * validation of workload (d). Measured in tight loops (steady state): `npm run breakdown`.
 *
 * @since 0.1.0
 */
import {
  callbackSinkLayer,
  defineTool,
  Executor,
  Model,
  noopSinkLayer,
  prepareTranscript,
  runAgentLoop,
  toolExecutorLayer
} from "@agentloop/core"
import type { EventSink, Message, ModelEvent, ToolCall } from "@agentloop/core"
import { Channel, Effect, Layer, Schema, Stream } from "effect"
import { fileURLToPath } from "node:url"
import { floor } from "./contenders/floor.ts"
import { pi } from "./contenders/pi.ts"
import { median } from "./measure.ts"
import { makeHistoryMessages, TOOL_NAME } from "./workloads.ts"

/**
 * One line of the breakdown.
 *
 * @since 0.1.0
 * @category models
 */
export interface BreakdownLine {
  readonly what: string
  readonly micros: number
  readonly unit: string
}

const STEPS = 100

const toolTurn = (t: number): Array<ModelEvent> => {
  const call: ToolCall = { type: "toolCall", id: `c${t}`, name: TOOL_NAME, arguments: { i: t } }
  return [
    { type: "toolcall_delta", id: call.id, name: TOOL_NAME, delta: `{"i":${t}}` },
    { type: "done", message: { role: "assistant", content: [call], stopReason: "toolUse" } }
  ]
}
const turns: Array<ReadonlyArray<ModelEvent>> = [
  ...Array.from({ length: STEPS }, (_, t) => toolTurn(t)),
  [{ type: "done", message: { role: "assistant", content: [{ type: "text", text: "ok" }], stopReason: "stop" } }]
]
const echo = defineTool({
  name: TOOL_NAME,
  description: "Answers ok <i>.",
  parameters: Schema.Struct({ i: Schema.Number }),
  execute: ({ i }) => Effect.succeed(`ok ${i}`)
})
/** An executor with no argument decoding and no services: answers every call at once. */
const rawExecutor = Layer.succeed(
  Executor,
  Executor.of({
    definitions: [echo.definition],
    execute: (call) =>
      Effect.succeed({
        role: "toolResult",
        toolCallId: call.id,
        toolName: call.name,
        content: [{ type: "text", text: "ok" }],
        isError: false
      })
  })
)
const prompt: ReadonlyArray<Message> = [{ role: "user", content: "go" }]

const agentloopSteps = (layers: () => Layer.Layer<Executor | EventSink>) => () => {
  let next = 0
  const model = Layer.succeed(Model, Model.of({ stream: () => Stream.fromIterable(turns[next++]!) }))
  return Effect.runPromise(
    runAgentLoop({ messages: prompt, maxSteps: STEPS + 1 }).pipe(Effect.provide(Layer.mergeAll(model, layers())))
  )
}

/** Median time of `f` over `reps` runs after `warm` runs, in microseconds per `per` units. */
const measure = async (f: () => Promise<unknown>, per: number, reps = 300, warm = 300): Promise<number> => {
  for (let i = 0; i < warm; i++) await f()
  const samples: Array<number> = []
  for (let i = 0; i < reps; i++) {
    const start = performance.now()
    await f()
    samples.push(performance.now() - start)
  }
  return (median(samples) * 1000) / per
}

const effectLoop = (n: number, body: () => Effect.Effect<unknown, unknown>) => () =>
  Effect.runPromise(Effect.gen(function*() {
    for (let i = 0; i < n; i++) yield* Effect.exit(body())
  }))

/**
 * Runs the breakdown (about ten seconds).
 *
 * @since 0.1.0
 * @category measurements
 */
export const runBreakdown = async (): Promise<Array<BreakdownLine>> => {
  const lines: Array<BreakdownLine> = []
  const add = (what: string, micros: number, unit: string) => lines.push({ what, micros, unit })
  const perStep = "µs per step"

  add(
    "agentloop, as benchmarked (callback sink, tool with a schema)",
    await measure(agentloopSteps(() => Layer.mergeAll(toolExecutorLayer([echo]), callbackSinkLayer(() => {}))), STEPS),
    perStep
  )
  add(
    "agentloop, no-op sink",
    await measure(agentloopSteps(() => Layer.mergeAll(toolExecutorLayer([echo]), noopSinkLayer)), STEPS),
    perStep
  )
  add(
    "agentloop, no-op sink, executor without decoding or services",
    await measure(agentloopSteps(() => Layer.mergeAll(rawExecutor, noopSinkLayer)), STEPS),
    perStep
  )
  add("pi-agent-core, as benchmarked", await measure(() => pi.toolSteps(STEPS, {})(), STEPS), perStep)
  add("floor, as benchmarked", await measure(() => floor.toolSteps(STEPS, {})(), STEPS), perStep)
  add(
    "agentloop, a run of 0 steps (layers, options, one final turn)",
    await measure(
      () => {
        const model = Layer.succeed(Model, Model.of({ stream: () => Stream.fromIterable(turns[STEPS]!) }))
        return Effect.runPromise(
          runAgentLoop({ messages: prompt }).pipe(
            Effect.provide(Layer.mergeAll(model, toolExecutorLayer([echo]), callbackSinkLayer(() => {})))
          )
        )
      },
      1
    ),
    "µs per run"
  )
  add(
    "  of which: building the three layers",
    await measure(
      () =>
        Effect.runPromise(Effect.void.pipe(Effect.provide(Layer.mergeAll(
          Layer.succeed(Model, Model.of({ stream: () => Stream.empty })),
          toolExecutorLayer([echo]),
          callbackSinkLayer(() => {})
        )))),
      1
    ),
    "µs per run"
  )

  // Effect primitives on the path of every step
  const N = 2_000
  const twoEvents = turns[0]!
  add(
    "Effect: consume a 2-event model stream (as the loop does)",
    await measure(
      effectLoop(N, () => Channel.runForEach(Stream.fromIterable(twoEvents).channel, () => Effect.void)),
      N,
      60,
      20
    ),
    "µs per turn"
  )
  add(
    "Effect: Effect.forEach of 2 effects, unbounded concurrency (a fiber each)",
    await measure(
      effectLoop(N, () => Effect.forEach([1, 2], () => Effect.void, { concurrency: "unbounded", discard: true })),
      N,
      60,
      20
    ),
    "µs per batch"
  )
  add(
    "Effect: onInterrupt + exit + map around a call",
    await measure(
      effectLoop(N, () => Effect.map(Effect.exit(Effect.onInterrupt(Effect.void, () => Effect.void)), () => 1)),
      N,
      60,
      20
    ),
    "µs per call"
  )
  add(
    "Effect: an event through a guarded callback sink",
    await measure(
      effectLoop(N, () => Effect.catchCause(Effect.suspend(() => Effect.void), () => Effect.void)),
      N,
      60,
      20
    ),
    "µs per event"
  )

  // (d): validating the input transcript
  const history = makeHistoryMessages(20_000)
  add(
    "prepareTranscript (check and copy) of 20,000 messages",
    await measure(async () => prepareTranscript(history), 1, 60, 30),
    "µs per run"
  )
  add("  copying 20,000 messages (Array.slice)", await measure(async () => history.slice(), 1, 60, 30), "µs per run")
  add(
    "  pi's convertToLlm (filter) over 20,000 messages, done per request",
    await measure(
      async () => history.filter((m) => m.role === "user" || m.role === "assistant" || m.role === "toolResult"),
      1,
      60,
      30
    ),
    "µs per request"
  )
  return lines
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const lines = await runBreakdown()
  process.stdout.write("| measurement | µs | per |\n| --- | ---: | --- |\n")
  for (const line of lines) {
    process.stdout.write(`| ${line.what} | ${line.micros.toFixed(2)} | ${line.unit.replace("µs per ", "")} |\n`)
  }
}
