/**
 * Test harness: a durable run on `WorkflowEngine.layerMemory` with the testkit's scripted model
 * and fake tools, every event recorded, and `checkInvariants` over the result.
 */
import { Model, toolExecutorLayer } from "@agentloop/core"
import type { AgentRunResult, AnyTool, Executor, LoopEvent, Message, ModelRequest } from "@agentloop/core"
import { assistant, checkInvariants, makeScriptedModel, toolCall } from "@agentloop/testkit"
import type { InvariantViolation, ScriptedModel, ScriptedTurn } from "@agentloop/testkit"
import { Deferred, Effect, Exit, Layer, Stream } from "effect"
import type { Scope } from "effect"
import { WorkflowEngine } from "effect/workflow"
import { DurableEventSink, durableRunnerLayer, latestEvents, memoryStoreLayer } from "../src/index.ts"
import type { DurableEvent, DurableRunnerConfig, DurableStore } from "../src/index.ts"

/**
 * A model for runners in other processes and on PostgreSQL (where a scripted model's turn count
 * would not survive a replay): until the transcript holds a tool result, it asks for one call of
 * `tool` (id `<tool>-1`); then it answers "done".
 */
export const oneCallModel = (tool: string): Layer.Layer<Model> =>
  Layer.succeed(
    Model,
    Model.of({
      stream: (request) =>
        Stream.make({
          type: "done" as const,
          message: request.messages.some((m) => m.role === "toolResult") ?
            assistant("stop", { text: "done" }) :
            assistant("toolUse", { calls: [toolCall(`${tool}-1`, tool, {})] })
        })
    })
  )

/**
 * Messages that crossed a serialization boundary (the payload, the journal) are equal but not
 * identical to the ones the events carry; `checkInvariants` compares identities. This maps every
 * message of `input` and of the events onto the transcript's own object with the same JSON, in
 * order, so a duplicated or invented message still shows.
 */
export const canonical = (
  input: ReadonlyArray<Message>,
  result: AgentRunResult,
  events: ReadonlyArray<LoopEvent>
): { readonly input: ReadonlyArray<Message>; readonly events: ReadonlyArray<LoopEvent> } => {
  const pick = (used: Set<Message>) => (message: Message): Message => {
    const text = JSON.stringify(message)
    const found = result.messages.find((m) => !used.has(m) && JSON.stringify(m) === text)
    if (found === undefined) return message
    used.add(found)
    return found
  }
  const forInput = pick(new Set())
  const forEvents = pick(new Set())
  return {
    input: input.map(forInput),
    events: events.map((event) =>
      event.type === "assistant_message" ? { ...event, message: forEvents(event.message) as never } : event
    )
  }
}

/** Violations of a finished durable run. */
export const violationsOf = (
  input: ReadonlyArray<Message>,
  result: AgentRunResult,
  durableEvents: ReadonlyArray<DurableEvent>,
  requests?: ReadonlyArray<ModelRequest>
): ReadonlyArray<InvariantViolation> => {
  const c = canonical(input, result, latestEvents(durableEvents))
  return checkInvariants({ input: c.input, result, events: c.events, requests })
}

export interface Harness {
  readonly layer: Layer.Layer<WorkflowEngine.WorkflowEngine | DurableStore>
  /** Provides the one engine of this harness (built once, in the test's scope). */
  readonly provide: <A, E, R>(
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, Exclude<R, WorkflowEngine.WorkflowEngine | DurableStore>>
  readonly model: ScriptedModel
  readonly events: Array<DurableEvent>
  /** Waits, on a Deferred, until an event matching `test` was emitted. */
  readonly awaitEvent: (test: (event: DurableEvent) => boolean) => Effect.Effect<void>
}

export const makeHarness = (
  script: ReadonlyArray<ScriptedTurn>,
  tools: ReadonlyArray<AnyTool>,
  config: DurableRunnerConfig = {},
  extra: Layer.Layer<never> = Layer.empty
): Effect.Effect<Harness, never, Scope.Scope> =>
  Effect.gen(function*() {
    const model = yield* makeScriptedModel(script)
    const events: Array<DurableEvent> = []
    const waiters: Array<{ readonly test: (event: DurableEvent) => boolean; readonly done: Deferred.Deferred<void> }> =
      []
    const sink = Layer.succeed(DurableEventSink, {
      emit: (event) =>
        Effect.sync(() => {
          events.push(event)
          for (const w of waiters) if (w.test(event)) Deferred.doneUnsafe(w.done, Exit.void)
        })
    })
    const awaitEvent = (test: (event: DurableEvent) => boolean) =>
      Effect.suspend(() => {
        if (events.some(test)) return Effect.void
        const done = Deferred.makeUnsafe<void>()
        waiters.push({ test, done })
        return Deferred.await(done)
      })
    const layer = durableRunnerLayer(config).pipe(
      Layer.provideMerge(WorkflowEngine.layerMemory),
      Layer.provideMerge(memoryStoreLayer),
      Layer.provide(Layer.mergeAll(model.layer, toolExecutorLayer(tools) as Layer.Layer<Executor>, extra)),
      // the client's calls see the sink too (a refused run's turn_end)
      Layer.provideMerge(sink)
    )
    const context = yield* Layer.build(layer)
    return { layer, provide: (effect) => Effect.provide(effect, context), model, events, awaitEvent }
  })
