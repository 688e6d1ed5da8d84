/**
 * One call that runs an agent against a script and returns everything a test asserts on:
 * the result, the events, the requests the model saw and the invariant check.
 *
 * @since 0.1.0
 */
import { callbackSinkLayer, runAgentLoop, toolExecutorLayer } from "@agentloop/core"
import type {
  AgentLoopOptions,
  AgentRunResult,
  AnyTool,
  Executor,
  LoopEvent,
  Message,
  ModelRequest
} from "@agentloop/core"
import { Deferred, Effect, Exit, Fiber, Layer } from "effect"
import type { FaultEngine } from "./FaultInjection.ts"
import { checkInvariants } from "./Invariants.ts"
import type { InvariantViolation } from "./Invariants.ts"
import { makeRecordingSink } from "./RecordingSink.ts"
import { makeScriptedModel } from "./ScriptedModel.ts"
import type { ScriptedModel, ScriptedTurn } from "./ScriptedModel.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface ScriptedRun {
  readonly result: AgentRunResult
  readonly events: ReadonlyArray<LoopEvent>
  readonly requests: ReadonlyArray<ModelRequest>
  readonly violations: ReadonlyArray<InvariantViolation>
}

/**
 * A user message.
 *
 * @since 0.1.0
 * @category constructors
 */
export const user = (text: string): Message => ({ role: "user", content: text })

/**
 * Runs `runAgentLoop` against `script` with the given tools (or executor layer). `messages`
 * defaults to one user message. A request the script has no turn for makes it die with
 * `UnscriptedRequestError`, failing the test.
 *
 * @since 0.1.0
 * @category runs
 */
export const runScripted = (
  script: ReadonlyArray<ScriptedTurn>,
  setup: {
    readonly tools?: ReadonlyArray<AnyTool>
    readonly executor?: Layer.Layer<Executor>
  } & Partial<AgentLoopOptions> = {}
): Effect.Effect<ScriptedRun> =>
  Effect.gen(function*() {
    const { tools, executor, ...options } = setup
    const model = yield* makeScriptedModel(script)
    const sink = yield* makeRecordingSink()
    const messages = options.messages ?? [user("start")]
    const executorLayer = executor ?? (toolExecutorLayer(tools ?? []) as Layer.Layer<Executor>)
    const layers = Layer.mergeAll(model.layer, sink.layer, executorLayer)
    const engine = scriptedEngine
    const result = engine === undefined ?
      yield* runAgentLoop({ ...options, messages }).pipe(Effect.provide(layers)) :
      yield* engine.run({ ...options, messages }, layers)
    yield* model.verify()
    const events = yield* sink.events
    const requests = yield* model.requests
    return { result, events, requests, violations: checkInvariants({ input: messages, result, events, requests }) }
  })

let scriptedEngine: FaultEngine | undefined

/**
 * Makes `runScripted` run its runs on `engine` (a durable one, say) instead of `runAgentLoop`, or
 * in memory again (`undefined`): to run a suite written against `runScripted` on another engine.
 *
 * @since 0.1.0
 * @category runs
 */
export const useScriptedEngine = (engine: FaultEngine | undefined): void => {
  scriptedEngine = engine
}

/**
 * A scripted run started in the background, for tests that act while it runs (release gates,
 * abort, answer approvals, push steering messages).
 *
 * @since 0.1.0
 * @category models
 */
export interface LiveScriptedRun {
  readonly fiber: Fiber.Fiber<AgentRunResult>
  /** The events so far (a live array). */
  readonly events: ReadonlyArray<LoopEvent>
  readonly model: ScriptedModel
  /** Waits, on a Deferred (no polling), until an event matching `test` has been emitted. */
  readonly awaitEvent: (test: (event: LoopEvent) => boolean) => Effect.Effect<void>
  /** Violations found so far (give the result once there is one). */
  readonly check: (result?: AgentRunResult) => Effect.Effect<ReadonlyArray<InvariantViolation>>
  /** Joins the run and checks it. */
  readonly finish: Effect.Effect<ScriptedRun>
}

/**
 * Starts `runAgentLoop` against `script` in a child fiber, with a live sink that calls `onEvent`
 * for each event (it may abort, answer an approval, push a message...).
 *
 * @since 0.1.0
 * @category runs
 */
export const startScripted = (
  script: ReadonlyArray<ScriptedTurn>,
  setup: {
    readonly tools?: ReadonlyArray<AnyTool>
    /** An executor of your own (instead of `tools`), e.g. MCP tools or a custom executor. */
    readonly executor?: Layer.Layer<Executor>
    readonly onEvent?: (event: LoopEvent) => void
  } & Partial<AgentLoopOptions> = {}
): Effect.Effect<LiveScriptedRun> =>
  Effect.gen(function*() {
    const { executor, tools, onEvent, ...options } = setup
    const model = yield* makeScriptedModel(script)
    const events: Array<LoopEvent> = []
    const waiters: Array<{ readonly test: (event: LoopEvent) => boolean; readonly done: Deferred.Deferred<void> }> = []
    const sink = callbackSinkLayer((event) => {
      events.push(event)
      onEvent?.(event)
      for (const w of waiters) if (w.test(event)) Deferred.doneUnsafe(w.done, Exit.void)
    })
    const awaitEvent = (test: (event: LoopEvent) => boolean) =>
      Effect.suspend(() => {
        if (events.some(test)) return Effect.void
        const done = Deferred.makeUnsafe<void>()
        waiters.push({ test, done })
        return Deferred.await(done)
      })
    const input = options.messages ?? [user("go")]
    const fiber = yield* runAgentLoop({ ...options, messages: input }).pipe(
      Effect.provide(
        Layer.mergeAll(model.layer, sink, executor ?? toolExecutorLayer(tools ?? []) as Layer.Layer<Executor>)
      ),
      Effect.forkChild
    )
    const check = (result?: AgentRunResult) =>
      Effect.map(model.requests, (requests) => checkInvariants({ input, result, events, requests }))
    const finish = Effect.gen(function*() {
      const result = yield* Fiber.join(fiber)
      const requests = yield* model.requests
      return { result, events, requests, violations: checkInvariants({ input, result, events, requests }) }
    })
    return { fiber, events, model, awaitEvent, check, finish }
  })
