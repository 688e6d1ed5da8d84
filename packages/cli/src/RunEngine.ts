/**
 * The one way the CLI runs an agent. `run`, `chat` and `demo` hand a `RunRequest` to the
 * `RunEngine` in context; what differs between them is picked as layers and parameters: the
 * engine (in memory here, or durable on the embedded engine with `--durable`), its model and
 * tools, its policy and context transform, and the consumer of the run's events (the session file
 * and the terminal for `run` and `chat`, the transcript and the summary for the demo).
 *
 * Every engine runs core's one loop and gives its consumer the loop's events plus `turn_start`:
 * core has no event for a model request, so the engines make one from the loop's per-request hook,
 * `transformContext`, which runs once before each request (inside the turn's step on a durable
 * run, so a turn answered from the journal makes none). The event carries the step it starts:
 * one more than the assistant messages of the run so far, the same on a run resumed by another
 * process (the hook is given the whole transcript, before any compaction).
 *
 * @since 0.1.0
 */
import { callbackSinkLayer, startAgentLoop } from "@agentloop/core"
import type {
  AgentLoopOptions,
  AgentRunResult,
  Executor,
  LoopEvent,
  Message,
  Model,
  OutputSchema,
  ToolCall,
  ToolPolicy,
  UserMessage
} from "@agentloop/core"
import { Context, Effect, Layer } from "effect"
import type { Queue } from "effect"
import type { CliError } from "./CliError.ts"
import type { Controller } from "./Terminal.ts"

/**
 * A model request is about to be sent: the step (1 for the run's first request) it starts.
 *
 * @since 0.1.0
 * @category models
 */
export interface TurnStart {
  readonly type: "turn_start"
  readonly step: number
}

/**
 * What a run tells its consumer: the loop's events, and the start of each turn.
 *
 * @since 0.1.0
 * @category models
 */
export type RunEvent = LoopEvent | TurnStart

/**
 * The loop's `transformContext`: the messages of a request, before it is sent.
 *
 * @since 0.1.0
 * @category models
 */
export type ContextTransform = NonNullable<AgentLoopOptions["transformContext"]>

/**
 * A call of a durable run that was waiting for an answer when its process stopped.
 *
 * @since 0.1.0
 * @category models
 */
export interface WaitingCall {
  readonly call: ToolCall
  readonly askedAt: number
}

/**
 * Where the messages typed while a run works go: steering joins the transcript at the run's next
 * safe boundary (after a batch's results, before a request), a follow-up when the run would stop
 * (core's `steering` and `followUps`).
 *
 * @since 0.1.0
 * @category models
 */
export interface RunInbox {
  readonly steering: Queue.Dequeue<UserMessage>
  readonly followUps: Queue.Dequeue<UserMessage>
}

/**
 * One run, as every command asks for it.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunRequest {
  readonly systemPrompt: string
  readonly messages: ReadonlyArray<Message>
  readonly maxSteps: number
  /** The final answer's schema (`run --output-schema`). */
  readonly output?: OutputSchema<unknown> | undefined
  /** The run's id, from the engine's `runIdOf` (an in-memory run has none). */
  readonly runId?: string | undefined
  /** A durable run taken over from an earlier process, with its calls that were waiting for an answer. */
  readonly resumed?: { readonly waiting: ReadonlyArray<WaitingCall> } | undefined
  /** Messages for the run while it works (chat). */
  readonly inbox?: RunInbox | undefined
}

/**
 * An engine: where runs run.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunEngineShape {
  /** The id of the `n`-th run (1-based) of a session, when the engine's runs have ids. */
  readonly runIdOf: (sessionId: string, n: number) => string | undefined
  /**
   * Runs to the end, giving every event of the run to `emit`; `undefined` when the program is
   * leaving while the run goes on (a durable run is kept, and resumes when the command runs again).
   */
  readonly run: (
    request: RunRequest,
    emit: (event: RunEvent) => Effect.Effect<void>
  ) => Effect.Effect<AgentRunResult | undefined, CliError>
}

/**
 * The engine the commands run their runs on.
 *
 * @since 0.1.0
 * @category services
 */
export class RunEngine extends Context.Service<RunEngine, RunEngineShape>()("@agentloop/cli/RunEngine") {}

/**
 * The step a request starts, from the transcript the loop hands to `transformContext`: one more
 * than the assistant messages after the run's input (every turn before it left exactly one).
 *
 * @since 0.1.0
 * @category runs
 */
export const stepOf = (messages: ReadonlyArray<Message>, inputLength: number): number => {
  let step = 1
  for (let i = inputLength; i < messages.length; i++) if (messages[i]!.role === "assistant") step++
  return step
}

/**
 * A run's `transformContext`: `transform` (when there is one), then a `turn_start` event for the
 * request, in that order, so that what `transform` writes (a compaction) comes before the turn.
 *
 * @since 0.1.0
 * @category runs
 */
export const withTurnStarts = (
  transform: ContextTransform | undefined,
  inputLength: number,
  emit: (event: RunEvent) => Effect.Effect<void>
): ContextTransform =>
(messages, context) =>
  Effect.flatMap(
    transform === undefined ? Effect.succeed(messages) : transform(messages, context),
    (shaped) => Effect.as(emit({ type: "turn_start", step: stepOf(messages, inputLength) }), shaped)
  )

/**
 * What the in-memory engine runs each run with.
 *
 * @since 0.1.0
 * @category models
 */
export interface InMemoryEngineOptions {
  /** Consulted before each call (default: allow all). */
  readonly policy?: ToolPolicy | undefined
  /** Shapes each request's messages (compaction). */
  readonly transformContext?: ContextTransform | undefined
  /**
   * Where a Ctrl-C finds the running run's abort. Without one the run is only stopped by
   * interrupting it (the demo stops that way).
   */
  readonly stop?: Pick<Controller, "setRun" | "exitRequested"> | undefined
}

/**
 * The in-memory engine: each run is core's loop in this process, on the layer's `Model` and
 * `Executor`.
 *
 * @since 0.1.0
 * @category layers
 */
export const inMemoryEngine = (options: InMemoryEngineOptions = {}): Layer.Layer<RunEngine, never, Model | Executor> =>
  Layer.effect(
    RunEngine,
    Effect.map(Effect.context<Model | Executor>(), (context) =>
      RunEngine.of({
        runIdOf: () => undefined,
        run: (request, emit) =>
          Effect.scoped(Effect.gen(function*() {
            const run = yield* startAgentLoop({
              systemPrompt: request.systemPrompt,
              messages: request.messages,
              maxSteps: request.maxSteps,
              ...(options.policy === undefined ? {} : { policy: options.policy }),
              transformContext: withTurnStarts(options.transformContext, request.messages.length, emit),
              ...(request.output === undefined ? {} : { output: request.output }),
              ...(request.inbox === undefined
                ? {}
                : { steering: request.inbox.steering, followUps: request.inbox.followUps })
            }).pipe(Effect.provide(callbackSinkLayer(emit)), Effect.provideContext(context))
            const { stop } = options
            if (stop !== undefined) {
              stop.setRun(run.abort)
              if (stop.exitRequested()) yield* Effect.forkChild(run.abort)
            }
            const result = yield* run.result
            stop?.setRun(undefined)
            return result
          }))
      }))
  )
