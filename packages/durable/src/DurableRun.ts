/**
 * A durable agent run: core's one loop (`runAgentLoop`) as an `effect/workflow` `Workflow`. This
 * module holds no loop of its own: it gives the loop a durable `RunJournal` and `RunControl`.
 *
 * - The journal runs each step of the run as an `Activity` under the step's stable name
 *   (`turn/<n>`, `policy/<n>/<i>`, `call/<n>/<i>`, `stop/<n>`, `answer/<n>`, `end`): its value
 *   is journaled, and a replay answers it from the journal without running it (a journaled step
 *   never runs again; its events are not emitted again). A call step claims its start in the
 *   store first: a call found started (its process died while it ran) runs again with the same
 *   idempotency key, or is answered interrupted for tools that run at most once.
 * - `ask` waits on a `DurableDeferred` per call, answered by `approve(runId, callId, answer)` from
 *   any process, raced against the abort and an optional durable approval timeout.
 * - The control's abort fires at once in the process that runs the run (`abortRun` there), is
 *   read from the journal when a run is replayed, and is polled for an abort from another
 *   process; steering and follow-ups are read from the store inside the steps that take them.
 *
 * The workflow body replays on every wake: it re-runs the loop, whose steps come from the journal
 * until the first that is not journaled yet.
 *
 * @since 0.1.0
 */
import {
  AgentRunResult,
  EventSink,
  Message,
  outputSchemaFromJson,
  runAgentLoop,
  RunControl,
  RunJournal,
  stepName,
  toolCallsOf,
  toOutputSchema
} from "@agentloop/core"
import type {
  AgentLoopOptions,
  ApprovalAnswer,
  ApprovalOutcome,
  CallClaim,
  LoopEvent,
  OutputInput,
  RunControlShape,
  RunJournalShape,
  ToolPolicy
} from "@agentloop/core"
import { Clock, Context, Deferred, Duration, Effect, Fiber, Option, Schedule, Schema } from "effect"
import { Activity, DurableClock, DurableDeferred, Workflow, WorkflowEngine } from "effect/workflow"
import { DurableEventSink } from "./DurableEvent.ts"
import { DurableStore } from "./DurableStore.ts"
import type { DurableStoreError } from "./DurableStore.ts"
import { registerRun } from "./internal/aborts.ts"

// -----------------------------------------------------------------------------
// Definitions
// -----------------------------------------------------------------------------

/**
 * A run's output schema as JSON Schema (what can travel with a run: `outputSchemaFromJson` makes
 * it on every runner).
 *
 * @since 0.1.0
 * @category schemas
 */
export const DurableOutput = Schema.Struct({
  jsonSchema: Schema.Unknown,
  name: Schema.optionalKey(Schema.String),
  description: Schema.optionalKey(Schema.String)
})
/**
 * @since 0.1.0
 * @category schemas
 */
export type DurableOutput = typeof DurableOutput.Type

const PositiveMillis = Schema.Number.check(Schema.isGreaterThan(0))

/**
 * The durable run's workflow. Its execution id is derived from `runId`: starting the same run
 * twice joins it.
 *
 * @since 0.1.0
 * @category workflows
 */
export const DurableAgentRun = Workflow.make("agentloop/DurableRun", {
  payload: {
    runId: Schema.NonEmptyString,
    systemPrompt: Schema.optionalKey(Schema.String),
    messages: Schema.Array(Message),
    maxSteps: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThan(0))),
    /** The run's timeout in milliseconds, measured from its first start. */
    timeoutMs: Schema.optionalKey(PositiveMillis),
    /** How long an approval may wait, in milliseconds (default: the runner's `approvalTimeout`). */
    approvalTimeoutMs: Schema.optionalKey(PositiveMillis),
    output: Schema.optionalKey(DurableOutput),
    outputRetries: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)))
  },
  success: AgentRunResult,
  idempotencyKey: ({ runId }) => runId
})

/**
 * An answer to an approval request (the same shape as core's `ApprovalAnswer`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ApprovalAnswerSchema = Schema.Struct({
  approved: Schema.Boolean,
  always: Schema.optionalKey(Schema.Boolean),
  reason: Schema.optionalKey(Schema.String)
})

/** The deferred one call's approval is written to. */
const approvalDeferred = (callId: string) =>
  DurableDeferred.make(`approval/${callId}`, { success: ApprovalAnswerSchema })

/** Completed once, by `abortRun`. */
const AbortDeferred = DurableDeferred.make("agentloop/abort")

const ApprovalOutcomeSchema = Schema.Union([
  Schema.TaggedStruct("Answered", { answer: ApprovalAnswerSchema }),
  Schema.TaggedStruct("Aborted", {})
])

/**
 * How runners run durable runs: what cannot travel with a run because it is code (the policy,
 * `transformContext`, an output schema written with effect's `Schema`), how long an approval may
 * wait, the tools that must never run twice, and how often a run polls for an abort from another
 * process. Every runner must be given the same configuration.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableRunnerConfig {
  /** Consulted before each call (in a step, so its answer is journaled). Default: allow all. */
  readonly policy?: ToolPolicy | undefined
  /** An approval not answered within this time is answered denied. Default: it waits forever. */
  readonly approvalTimeout?: Duration.Input | undefined
  /**
   * More tools to run at most once, by name, besides those whose definition says
   * `atMostOnce: true` (for tools whose definitions you do not write: an MCP server's, a tool
   * package's). A call of such a tool that was running when its process died is answered with the
   * interrupted result instead of running again; the other calls run again (at least once). The
   * list only adds: a tool is at most once when its definition says so *or* it is listed, so a
   * tool marked in its definition runs at most once whatever this list says.
   */
  readonly atMostOnce?: ReadonlyArray<string> | undefined
  /** Shapes each request's messages, as `runAgentLoop`'s `transformContext` (it runs inside the turn's step). */
  readonly transformContext?: AgentLoopOptions["transformContext"]
  /**
   * The output schema of runs started without one of their own (`output` of `startRun` wins):
   * as `runAgentLoop`'s `output`, with its `outputRetries` from the run.
   */
  readonly output?: OutputInput<unknown> | undefined
  /** How often a running run looks for an abort sent from another process (default 1 second). */
  readonly abortPollInterval?: Duration.Input | undefined
}

/**
 * The stable key of one tool call of a run, the same on every attempt: tools that call external
 * services pass it on as their idempotency key.
 *
 * @since 0.1.0
 * @category models
 */
export const idempotencyKeyOf = (runId: string, step: number, callIndex: number): string =>
  `agentloop:${runId}:${step}:${callIndex}`

/**
 * The serializable id of a call's approval request, `<runId>/<callId>`: the `id` of the
 * `approval_request` event (answer it with `approve(runId, callId, answer)`).
 *
 * @since 0.1.0
 * @category models
 */
export const approvalIdOf = (runId: string, callId: string): string => `${runId}/${callId}`

const retryStore = <A>(effect: Effect.Effect<A, DurableStoreError>): Effect.Effect<A> =>
  effect.pipe(
    Effect.retry({ schedule: Schedule.exponential("50 millis"), times: 5 }),
    Effect.orDie
  )

// -----------------------------------------------------------------------------
// The journal and the control
// -----------------------------------------------------------------------------

/** The step an event is emitted in (its `step`, and the call index of a call's events). */
interface StepAt {
  readonly step: number
  readonly index: number | undefined
  /** User messages announced in this step so far (each gets its own index). */
  users: number
}
const CurrentStep = Context.Reference<StepAt>("@agentloop/durable/CurrentStep", {
  defaultValue: () => ({ step: 0, index: undefined, users: 0 })
})

const inStep = <A, E, R>(effect: Effect.Effect<A, E, R>, step: number, index: number | undefined) =>
  Effect.provideService(effect, CurrentStep, { step, index, users: 0 })

/**
 * A step of the journal as the loop sees it: the engine's services (`WorkflowEngine`,
 * `WorkflowInstance`) are there whenever the loop runs, because it runs inside the workflow body.
 */
const inWorkflow = <A>(
  effect: Effect.Effect<A, never, WorkflowEngine.WorkflowEngine | WorkflowEngine.WorkflowInstance>
) => effect as Effect.Effect<A>

const makeJournal = (
  runId: string,
  store: typeof DurableStore.Service,
  isAtMostOnce: (name: string) => boolean
): RunJournalShape => ({
  replays: true,
  step: (kind, step, index, schema, run, replayed) =>
    Effect.suspend(() => {
      // the step's effect ran here (and made its change itself), or its value came from the journal
      let ran = false
      const activity = Activity.make({
        name: stepName(kind, step, index),
        success: schema as unknown as Schema.Codec<unknown, unknown>,
        execute: inStep(
          Effect.tap(Effect.suspend(run), () =>
            Effect.sync(() => {
              ran = true
            })),
          step,
          index
        )
      })
      return inWorkflow(
        Effect.flatMap(activity, (value) => ran ? Effect.succeed(value) : Effect.as(replayed(value), value))
      )
    }),
  approval: (step, index, call, emit, timeout) =>
    inWorkflow(Effect.gen(function*() {
      yield* Activity.make({
        name: `ask/${step}/${index}`,
        execute: inStep(
          Effect.gen(function*() {
            const requestedAt = yield* Clock.currentTimeMillis
            yield* retryStore(store.requestApproval({ runId, call, requestedAt }))
            yield* emit({
              type: "approval_request",
              call,
              id: approvalIdOf(runId, call.id),
              answer: Deferred.makeUnsafe<ApprovalAnswer>()
            })
          }),
          step,
          index
        )
      })
      const answered = Effect.map(
        DurableDeferred.await(approvalDeferred(call.id)),
        (answer): ApprovalOutcome => ({ _tag: "Answered", answer })
      )
      const aborted = Effect.as(DurableDeferred.await(AbortDeferred), { _tag: "Aborted" } as ApprovalOutcome)
      const timedOut = timeout === undefined ? [] : [
        Effect.as(
          DurableClock.sleep({ name: `approval-timeout/${step}/${index}`, duration: timeout }),
          {
            _tag: "Answered",
            answer: {
              approved: false,
              reason: `no answer to the approval request within ${Duration.format(timeout)}`
            }
          } as ApprovalOutcome
        )
      ]
      const outcome: ApprovalOutcome = yield* DurableDeferred.raceAll({
        name: `approval/${step}/${index}`,
        success: ApprovalOutcomeSchema,
        error: Schema.Never,
        effects: [answered, aborted, ...timedOut]
      })
      // the approval it waited for is settled (answered, timed out or aborted)
      yield* Activity.make({
        name: `settle/${step}/${index}`,
        execute: retryStore(store.settleApproval(runId, call.id))
      })
      return outcome
    })),
  timeLeft: (limit) =>
    inWorkflow(Effect.gen(function*() {
      const startedAt = yield* Activity.make({
        name: "start",
        success: Schema.Number,
        execute: Clock.currentTimeMillis
      })
      const now = yield* Clock.currentTimeMillis
      return Duration.millis(Math.max(0, startedAt + Duration.toMillis(limit) - now))
    })),
  within: (step, index, effect) => inStep(effect, step, index),
  claim: (step, index, call, definition) =>
    Effect.map(retryStore(store.claimStart(idempotencyKeyOf(runId, step, index))), (first): CallClaim => ({
      idempotencyKey: idempotencyKeyOf(runId, step, index),
      again: !first,
      atMostOnce: definition?.atMostOnce === true || isAtMostOnce(call.name)
    }))
})

/** Whether the run's abort is recorded (by `abortRun`, from any process). */
const abortRecorded = Effect.flatMap(WorkflowEngine.WorkflowEngine, (engine) => engine.deferredResult(AbortDeferred))
  .pipe(Effect.map(Option.isSome))

const makeControl = (runId: string, store: typeof DurableStore.Service, signal: AbortSignal): RunControlShape => ({
  signal,
  steering: (from) => retryStore(store.read(runId, "steering", from)),
  followUps: (from) => retryStore(store.read(runId, "followUp", from))
})

/** The loop's events, as durable events of run `runId` tagged with the step that emits them. */
const durableSink = (runId: string, sink: typeof DurableEventSink.Service) =>
  EventSink.of({
    emit: (event: LoopEvent) =>
      Effect.withFiber((fiber) => {
        const at = fiber.getRef(CurrentStep)
        const callIndex = event.type === "user_message" ? at.users++ : at.index
        return sink.emit({ runId, step: at.step, callIndex, event })
      })
  })

/** The JSON form of a result's accepted answer: the final-answer call's arguments (unwrapped). */
const answerJsonOf = (result: AgentRunResult, output: OutputInput<unknown>): unknown => {
  const last = result.messages.at(-1)
  if (last?.role !== "toolResult") return result.output
  const call = result.messages.flatMap((m) => m.role === "assistant" ? toolCallsOf(m) : []).findLast((c) =>
    c.id === last.toolCallId
  )
  return call === undefined ? result.output : toOutputSchema(output).answerOf(call.arguments)
}

// -----------------------------------------------------------------------------
// The workflow body
// -----------------------------------------------------------------------------

const body = (config: DurableRunnerConfig) => (payload: typeof DurableAgentRun.payloadSchema.Type) =>
  Effect.gen(function*() {
    const store = yield* DurableStore
    const sink = yield* DurableEventSink
    const { runId } = payload
    const listed = new Set(config.atMostOnce ?? [])
    const output = payload.output === undefined ? config.output : yield* Effect.orDie(outputSchemaFromJson(
      payload.output.jsonSchema,
      {
        ...(payload.output.name === undefined ? {} : { name: payload.output.name }),
        ...(payload.output.description === undefined ? {} : { description: payload.output.description })
      }
    ))
    const approvalTimeout = payload.approvalTimeoutMs ?? config.approvalTimeout
    const options: AgentLoopOptions = {
      messages: payload.messages,
      ...(payload.systemPrompt === undefined ? {} : { systemPrompt: payload.systemPrompt }),
      ...(payload.maxSteps === undefined ? {} : { maxSteps: payload.maxSteps }),
      ...(payload.timeoutMs === undefined ? {} : { timeout: payload.timeoutMs }),
      ...(approvalTimeout === undefined ? {} : { approvalTimeout }),
      ...(config.policy === undefined ? {} : { policy: config.policy }),
      ...(config.transformContext === undefined ? {} : { transformContext: config.transformContext }),
      ...(output === undefined ? {} : { output }),
      ...(payload.outputRetries === undefined ? {} : { outputRetries: payload.outputRetries })
    }
    // the abort: at once from `abortRun` in this process, from the journal on a replay, by polling
    // for one sent from another process
    const controller = new AbortController()
    if (yield* abortRecorded) controller.abort()
    const poll = Effect.repeat(
      Effect.andThen(abortRecorded, (aborted) => Effect.sync(() => aborted && controller.abort())),
      { schedule: Schedule.spaced(config.abortPollInterval ?? "1 second"), until: () => controller.signal.aborted }
    )
    const run = runAgentLoop(options).pipe(
      Effect.provideService(RunJournal, makeJournal(runId, store, (name) => listed.has(name))),
      Effect.provideService(RunControl, makeControl(runId, store, controller.signal)),
      Effect.provideService(EventSink, durableSink(runId, sink))
    )
    const result = yield* Effect.acquireUseRelease(
      Effect.sync(() => registerRun(runId, controller)),
      () => Effect.flatMap(Effect.forkChild(poll), (poller) => Effect.ensuring(run, Fiber.interrupt(poller))),
      (unregister) => Effect.sync(unregister)
    )
    // the result crosses processes as JSON: its output in its JSON form, the model's answer
    // (`decodeOutput` decodes it with the schema)
    return output === undefined || !("output" in result) ? result : { ...result, output: answerJsonOf(result, output) }
  })

/**
 * Registers the durable run's workflow with the engine: provide it on every runner (with the
 * runner's `Model`, `Executor` and `DurableStore`; `DurableEventSink`, `ToolConcurrency` and
 * `ToolTimeout` are optional). Every runner must be given the same configuration and tools: a run
 * moves between runners and replays its journal on each.
 *
 * @since 0.1.0
 * @category layers
 */
export const durableRunnerLayer = (config: DurableRunnerConfig = {}) =>
  DurableAgentRun.toLayer((payload) => body(config)(payload))
