/**
 * Running the real loop against a provider layer, and reading the recorded provider fixtures
 * (`packages/providers/test/fixtures`).
 */
import { runAgentLoop, toolExecutorLayer } from "@agentloop/core"
import type {
  AgentRunResult,
  AnyTool,
  AssistantMessage,
  Executor,
  LoopEvent,
  Message,
  Model,
  ModelEvent,
  ToolResultMessage
} from "@agentloop/core"
import { checkInvariants, makeRecordingSink } from "@agentloop/testkit"
import type { InvariantViolation } from "@agentloop/testkit"
import { Effect, Layer } from "effect"
import { readFileSync } from "node:fs"

const fixtureRoot = new URL("../fixtures/", import.meta.url)

/** The recorded body of a fixture, e.g. `openai-chat/text-with-usage.sse`. */
export const fixture = (name: string): string => readFileSync(new URL(name, fixtureRoot), "utf8")

/** What the fixtures' README says each fixture must produce (`expected.json`). */
export const expected: Record<string, Record<string, unknown>> = JSON.parse(
  readFileSync(new URL("expected.json", fixtureRoot), "utf8")
)

export interface LoopRun {
  readonly result: AgentRunResult
  readonly events: ReadonlyArray<LoopEvent>
  readonly violations: ReadonlyArray<InvariantViolation>
}

/** Runs `runAgentLoop` with `model`, the tools and a recording sink; checks the invariants. */
export const runLoop = <E>(
  model: Layer.Layer<Model, E>,
  setup: {
    readonly messages?: ReadonlyArray<Message>
    readonly tools?: ReadonlyArray<AnyTool>
    readonly systemPrompt?: string
    readonly signal?: AbortSignal
    readonly maxSteps?: number
  } = {}
): Effect.Effect<LoopRun, E> =>
  Effect.gen(function*() {
    const sink = yield* makeRecordingSink()
    const messages = setup.messages ?? [{ role: "user", content: "hello" }]
    const result = yield* runAgentLoop({
      messages,
      ...(setup.systemPrompt === undefined ? {} : { systemPrompt: setup.systemPrompt }),
      ...(setup.signal === undefined ? {} : { signal: setup.signal }),
      ...(setup.maxSteps === undefined ? {} : { maxSteps: setup.maxSteps })
    }).pipe(
      Effect.provide(Layer.mergeAll(model, sink.layer, toolExecutorLayer(setup.tools ?? []) as Layer.Layer<Executor>))
    )
    const events = yield* sink.events
    return { result, events, violations: checkInvariants({ input: messages, result, events }) }
  })

/** The assistant messages of a transcript. */
export const assistants = (messages: ReadonlyArray<Message>): Array<AssistantMessage> =>
  messages.filter((m): m is AssistantMessage => m.role === "assistant")

/** The tool results of a transcript. */
export const toolResults = (messages: ReadonlyArray<Message>): Array<ToolResultMessage> =>
  messages.filter((m): m is ToolResultMessage => m.role === "toolResult")

/** The model events the loop forwarded. */
export const modelEvents = (events: ReadonlyArray<LoopEvent>): Array<ModelEvent> =>
  events.flatMap((e) => (e.type === "model_event" ? [e.event] : []))

/** The concatenated deltas of one kind (and, for tool calls, one call id). */
export const deltas = (events: ReadonlyArray<LoopEvent>, type: ModelEvent["type"], id?: string): string =>
  modelEvents(events)
    .flatMap((e) =>
      e.type === type && e.type !== "done" && (id === undefined || (e.type === "toolcall_delta" && e.id === id)) ?
        [e.delta] :
        []
    )
    .join("")
