/**
 * One call that runs an agent against a script and returns everything a test asserts on:
 * the result, the events, the requests the model saw and the invariant check.
 *
 * @since 0.1.0
 */
import { Effect, Layer } from "effect"
import { runAgentLoop, toolExecutorLayer } from "@agentloop/core"
import type { AgentLoopOptions, AgentRunResult, AnyTool, Executor, LoopEvent, Message, ModelRequest } from "@agentloop/core"
import { checkInvariants } from "./Invariants.ts"
import type { InvariantViolation } from "./Invariants.ts"
import { makeRecordingSink } from "./RecordingSink.ts"
import { makeScriptedModel } from "./ScriptedModel.ts"
import type { ScriptedTurn } from "./ScriptedModel.ts"

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
    const result = yield* runAgentLoop({ ...options, messages }).pipe(
      Effect.provide(Layer.mergeAll(model.layer, sink.layer, executorLayer))
    )
    yield* model.verify()
    const events = yield* sink.events
    const requests = yield* model.requests
    return { result, events, requests, violations: checkInvariants({ input: messages, result, events, requests }) }
  })
