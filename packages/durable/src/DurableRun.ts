/**
 * A durable agent run: `runAgentLoop`'s semantics as an `effect/workflow` `Workflow`.
 *
 * - Each model turn is an `Activity` (`turn/<step>`) whose outcome (the checked assistant message,
 *   or why the run ends) is journaled as data, never as a failure.
 * - Each tool call is an `Activity` (`call/<step>/<index>`) journaling its result; calls of a
 *   message run concurrently up to `ToolConcurrency`, `exclusive` tools alone (core's
 *   `batchStages`), each within its time limit; results join the transcript in call order.
 * - Policies run in an activity per call (`policy/<step>/<index>`); `ask` waits on a
 *   `DurableDeferred` per call, answered by `approve(runId, callId, answer)` from any process,
 *   optionally raced against a durable approval timeout that answers it denied.
 * - Abort, steering and follow-ups come from any process and are read by journaled activities at
 *   the same safe boundaries as the in-memory loop.
 * - The final result is computed once, by the `end` activity, which emits the one `turn_end`.
 *
 * The workflow body replays on every wake; it only rebuilds the transcript from journaled data
 * and emits nothing. Events come from activities (see DurableEvent.ts).
 *
 * @since 0.1.0
 */
import { Clock, Deferred, Duration, Effect, Option, Schedule, Schema } from "effect"
import { Activity, DurableClock, DurableDeferred, Workflow, WorkflowEngine } from "effect/workflow"
import {
  AgentRunResult,
  AssistantMessage,
  batchStages,
  decide,
  decideTurn,
  DEFAULT_MAX_STEPS,
  deniedResult,
  Executor,
  interruptedResult,
  Message,
  Model,
  ModelErrorReason,
  prepareTranscript,
  RunReason,
  runToolCall,
  skippedResult,
  streamTurn,
  ToolConcurrency,
  ToolResultMessage,
  ToolTimeout,
  toolCallsOf,
  UserMessage
} from "@agentloop/core"
import type { ApprovalAnswer, LoopEvent, SkipReason, ToolCall, ToolPolicy, Usage } from "@agentloop/core"
import { DurableEventSink } from "./DurableEvent.ts"
import { DurableStore } from "./DurableStore.ts"
import type { DurableStoreError } from "./DurableStore.ts"

// -----------------------------------------------------------------------------
// Definitions
// -----------------------------------------------------------------------------

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
    maxSteps: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThan(0)))
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
const approvalDeferred = (callId: string) => DurableDeferred.make(`approval/${callId}`, { success: ApprovalAnswerSchema })

/** Completed once, by `abortRun`. */
const AbortDeferred = DurableDeferred.make("agentloop/abort")

/** Whether a call's result says it was skipped because the run was aborted (`skippedResult(call, "aborted")`). */
const skippedByAbort = (result: ToolResultMessage): boolean => {
  const details = result.details as { readonly skipped?: unknown; readonly reason?: unknown } | undefined
  return details?.skipped === true && details.reason === "aborted"
}

const Verdict = Schema.Union([
  Schema.TaggedStruct("Run", { always: Schema.optionalKey(Schema.Boolean) }),
  Schema.TaggedStruct("Denied", { reason: Schema.optionalKey(Schema.String), always: Schema.optionalKey(Schema.Boolean) }),
  Schema.TaggedStruct("Aborted", {})
])
type Verdict = typeof Verdict.Type
/** Whether the verdict came from an approval request (which the call's activity then settles). */
interface Asked {
  readonly asked?: boolean | undefined
}

const PolicyDecisionSchema = Schema.Union([
  Schema.TaggedStruct("Allow", {}),
  Schema.TaggedStruct("Deny", { reason: Schema.String }),
  Schema.TaggedStruct("Ask", {})
])

/** Core's `TurnOutcome`, journaled. */
const TurnOutcomeSchema = Schema.Union([
  Schema.TaggedStruct("Message", { message: AssistantMessage }),
  Schema.TaggedStruct("Ended", {
    outcome: Schema.Struct({
      reason: RunReason,
      error: Schema.optional(Schema.String),
      errorReason: Schema.optional(ModelErrorReason)
    })
  })
])

/** What a turn activity journals: the boundary before the request, and the turn's outcome. */
const TurnRecordSchema = Schema.Union([
  Schema.TaggedStruct("Aborted", {}),
  Schema.TaggedStruct("Turn", { steering: Schema.Array(UserMessage), outcome: TurnOutcomeSchema })
])

const Boundary = Schema.Struct({
  aborted: Schema.Boolean,
  steering: Schema.Array(UserMessage),
  followUps: Schema.Array(UserMessage)
})

/**
 * How runners run durable runs: the policy consulted before each call, how long an approval may
 * wait before it is answered denied, and the tools that must never run twice.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableRunnerConfig {
  /** Consulted before each call (in an activity, so its answer is journaled). Default: allow all. */
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

interface Outcome {
  readonly reason: RunReason
  readonly error?: string | undefined
  readonly errorReason?: ModelErrorReason | undefined
}

const retryStore = <A>(effect: Effect.Effect<A, DurableStoreError>): Effect.Effect<A> =>
  effect.pipe(
    Effect.retry({ schedule: Schedule.exponential("50 millis"), times: 5 }),
    Effect.orDie
  )

// -----------------------------------------------------------------------------
// The workflow body
// -----------------------------------------------------------------------------

const body = (config: DurableRunnerConfig) =>
(payload: typeof DurableAgentRun.payloadSchema.Type) =>
  Effect.gen(function*() {
    const model = yield* Model
    const executor = yield* Executor
    const store = yield* DurableStore
    const sink = yield* DurableEventSink
    const concurrency = yield* ToolConcurrency
    const defaultTimeout = yield* ToolTimeout
    const { runId, systemPrompt } = payload
    const maxSteps = payload.maxSteps ?? DEFAULT_MAX_STEPS
    const definitions = new Map(executor.definitions.map((d) => [d.name, d]))
    const listedAtMostOnce = new Set(config.atMostOnce ?? [])
    const isAtMostOnce = (name: string) => definitions.get(name)?.atMostOnce === true || listedAtMostOnce.has(name)
    const policy = config.policy
    const approvalTimeout = config.approvalTimeout === undefined ?
      undefined :
      Duration.fromInputUnsafe(config.approvalTimeout)

    const emit = (step: number, callIndex: number | undefined, event: LoopEvent): Effect.Effect<void> =>
      Effect.suspend(() => sink.emit({ runId, step, callIndex, event })).pipe(
        Effect.catchCause((cause) => Effect.logError("agentloop durable: the event sink failed; the run goes on", cause))
      )
    const isAborted = Effect.flatMap(WorkflowEngine.WorkflowEngine, (engine) => engine.deferredResult(AbortDeferred))
      .pipe(Effect.map(Option.isSome))

    // the run's state, rebuilt from journaled values on every replay
    const prepared = prepareTranscript(payload.messages)
    const transcript: Array<Message> = prepared.ok ? prepared.value : []
    let steps = 0
    let usage: { input: number; output: number; cacheRead: number; cacheWrite: number; cost?: number } | undefined
    let steeringRead = 0
    let followUpsRead = 0
    const remembered = new Map<string, ApprovalAnswer>()

    const addUsage = (u: Usage | undefined) => {
      if (u === undefined) return
      const sum = usage ?? { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }
      sum.input += u.input
      sum.output += u.output
      sum.cacheRead += u.cacheRead ?? 0
      sum.cacheWrite += u.cacheWrite ?? 0
      if (u.cost !== undefined) sum.cost = (sum.cost ?? 0) + u.cost
      usage = sum
    }

    /** Reads a safe boundary: the abort flag and the messages pushed since the last one. */
    const readBoundary = (step: number, withFollowUps: boolean) => {
      const fromSteering = steeringRead
      const fromFollowUps = followUpsRead
      return Effect.gen(function*() {
        if (yield* isAborted) return { aborted: true, steering: [], followUps: [] }
        const steering = yield* retryStore(store.read(runId, "steering", fromSteering))
        const followUps = withFollowUps ? yield* retryStore(store.read(runId, "followUp", fromFollowUps)) : []
        yield* Effect.forEach(steering, (message, i) =>
          emit(step, fromSteering + i, { type: "user_message", message, kind: "steering" }), { discard: true })
        yield* Effect.forEach(followUps, (message, i) =>
          emit(step, fromFollowUps + i, { type: "user_message", message, kind: "followUp" }), { discard: true })
        return { aborted: false, steering, followUps }
      })
    }

    /** A safe boundary on its own (when the run would stop, or at its step limit), journaled. */
    const boundary = (name: string, step: number, withFollowUps: boolean) =>
      Activity.make({ name, success: Boundary, execute: readBoundary(step, withFollowUps) })

    /**
     * The safe boundary before a model request and the request itself, journaled together (one
     * journal write a step instead of two): aborted, or the steering messages read and the turn's
     * outcome with them in its request.
     */
    const turn = (step: number) => {
      const boundaryRead = readBoundary(step - 1, false)
      return Activity.make({
        name: `turn/${step}`,
        success: TurnRecordSchema,
        execute: Effect.gen(function*() {
          const top = yield* boundaryRead
          if (top.aborted) return { _tag: "Aborted" as const }
          const messages = [...transcript, ...top.steering]
          const request = systemPrompt === undefined ?
            { messages, tools: executor.definitions } :
            { systemPrompt, messages, tools: executor.definitions }
          // no signal: an abort is taken at the next boundary, a running turn finishes
          const outcome = yield* streamTurn(model, request, (event) => emit(step, undefined, event), undefined)
          if (outcome._tag === "Message") {
            yield* emit(step, undefined, { type: "assistant_message", message: outcome.message })
          }
          return { _tag: "Turn" as const, steering: top.steering, outcome }
        })
      })
    }

    const skipAll = (step: number, calls: ReadonlyArray<ToolCall>, reason: SkipReason) =>
      Activity.make({
        name: `skip/${step}`,
        success: Schema.Array(ToolResultMessage),
        execute: Effect.gen(function*() {
          const results = calls.map((call) => skippedResult(call, reason))
          yield* Effect.forEach(results, (result, i) => emit(step, i, { type: "tool_end", result }), { discard: true })
          return results
        })
      })

    const callActivity = (step: number, index: number, call: ToolCall, verdict: Verdict, asked: boolean) =>
      Activity.make({
        name: `call/${step}/${index}`,
        success: ToolResultMessage,
        execute: Effect.gen(function*() {
          // the approval it waited for is settled (answered, timed out or aborted)
          if (asked) yield* retryStore(store.settleApproval(runId, call.id))
          const end = (result: ToolResultMessage) =>
            Effect.as(emit(step, index, { type: "tool_end", result }), result)
          if (verdict._tag === "Denied") return yield* end(deniedResult(call, verdict.reason))
          if (verdict._tag === "Aborted") return yield* end(skippedResult(call, "aborted"))
          const key = idempotencyKeyOf(runId, step, index)
          const aborted = yield* isAborted
          const first = yield* retryStore(store.claimStart(key))
          // it had started before: it was running when its process died
          if (aborted) return yield* end(first ? skippedResult(call, "aborted") : interruptedResult(call))
          if (!first && isAtMostOnce(call.name)) return yield* end(interruptedResult(call))
          const limit = definitions.get(call.name)?.timeoutMs ?? defaultTimeout
          const timeout = limit === undefined ? undefined : Duration.fromInputUnsafe(limit)
          yield* emit(step, index, { type: "tool_start", call })
          const result = yield* runToolCall(executor, call, (event) => emit(step, index, event), timeout, {
            idempotencyKey: key
          })
          return yield* end(result)
        })
      })

    const approval = (step: number, index: number, call: ToolCall) =>
      Effect.gen(function*() {
        yield* Activity.make({
          name: `ask/${step}/${index}`,
          execute: Effect.gen(function*() {
            const requestedAt = yield* Clock.currentTimeMillis
            yield* retryStore(store.requestApproval({ runId, call, requestedAt }))
            yield* emit(step, index, {
              type: "approval_request",
              call,
              id: approvalIdOf(runId, call.id),
              answer: Deferred.makeUnsafe<ApprovalAnswer>()
            })
          })
        })
        const answered = Effect.map(DurableDeferred.await(approvalDeferred(call.id)), (answer): Verdict =>
          answer.approved ?
            { _tag: "Run", ...(answer.always === undefined ? {} : { always: answer.always }) } :
            {
              _tag: "Denied",
              ...(answer.reason === undefined ? {} : { reason: answer.reason }),
              ...(answer.always === undefined ? {} : { always: answer.always })
            })
        const aborted = Effect.as(DurableDeferred.await(AbortDeferred), { _tag: "Aborted" } as Verdict)
        const timedOut = approvalTimeout === undefined ? [] : [
          Effect.as(
            DurableClock.sleep({ name: `approval-timeout/${step}/${index}`, duration: approvalTimeout }),
            { _tag: "Denied", reason: `no answer to the approval request within ${Duration.format(approvalTimeout)}` } as Verdict
          )
        ]
        return yield* DurableDeferred.raceAll({
          name: `approval/${step}/${index}`,
          success: Verdict,
          error: Schema.Never,
          effects: [answered, aborted, ...timedOut]
        })
      })

    /** The policy's decision for a call, journaled, or undefined when there is no policy. */
    const policyOf = (step: number, index: number, call: ToolCall) =>
      policy === undefined ? Effect.succeed(undefined) : Activity.make({
        name: `policy/${step}/${index}`,
        success: PolicyDecisionSchema,
        execute: Effect.map(
          Effect.exit(decide(policy, call, definitions.get(call.name))),
          (exit) =>
            exit._tag === "Success" ?
              exit.value :
              { _tag: "Deny" as const, reason: "the run's policy failed on this call" }
        )
      })

    const verdictOf = (
      step: number,
      index: number,
      call: ToolCall,
      decision: typeof PolicyDecisionSchema.Type | undefined
    ) =>
      Effect.gen(function*() {
        if (decision === undefined || decision._tag === "Allow") return { _tag: "Run" } as Verdict & Asked
        if (decision._tag === "Deny") return { _tag: "Denied", reason: decision.reason } as Verdict & Asked
        const known = remembered.get(call.name)
        if (known !== undefined) {
          return known.approved ?
            { _tag: "Run" } as Verdict & Asked :
            { _tag: "Denied", ...(known.reason === undefined ? {} : { reason: known.reason }) } as Verdict & Asked
        }
        const verdict = yield* approval(step, index, call)
        if (verdict._tag !== "Aborted" && verdict.always === true) {
          const reason = verdict._tag === "Denied" ? verdict.reason : undefined
          remembered.set(call.name, { approved: verdict._tag === "Run", always: true, reason })
        }
        return { ...verdict, asked: true }
      })

    // A stage first journals the policy's decision for each of its calls; then the calls that may
    // run start while those that ask wait. The engine suspends the run once every branch is parked
    // on a durable wait and no activity is in flight, so the calls that need no answer are already
    // running by the time an approval parks.
    const batch = (step: number, calls: ReadonlyArray<ToolCall>) =>
      Effect.gen(function*() {
        const results: Array<ToolResultMessage> = new Array(calls.length)
        yield* Effect.forEach(
          batchStages(calls, definitions),
          (stage) =>
            Effect.gen(function*() {
              const decisions = yield* Effect.forEach(stage, (index) => policyOf(step, index, calls[index]!), {
                concurrency
              })
              const order = stage.map((index, i) => ({ index, decision: decisions[i] }))
                .sort((a, b) => Number(a.decision?._tag === "Ask") - Number(b.decision?._tag === "Ask"))
              yield* Effect.forEach(order, ({ decision, index }) =>
                Effect.gen(function*() {
                  const call = calls[index]!
                  const verdict = yield* verdictOf(step, index, call, decision)
                  results[index] = yield* callActivity(step, index, call, verdict, verdict.asked === true)
                }), { concurrency, discard: true })
            }),
          { discard: true }
        )
        return results
      })

    const drive = Effect.gen(function*() {
      if (!prepared.ok) return { reason: "error", error: `bad input: ${prepared.error}` } satisfies Outcome
      while (true) {
        if (steps >= maxSteps) {
          const top = yield* boundary(`boundary/${steps}`, steps, false)
          if (top.aborted) return { reason: "aborted" } satisfies Outcome
          steeringRead += top.steering.length
          transcript.push(...top.steering)
          return { reason: "maxSteps" } satisfies Outcome
        }
        const step = steps + 1
        const record = yield* turn(step)
        if (record._tag === "Aborted") return { reason: "aborted" } satisfies Outcome
        steeringRead += record.steering.length
        transcript.push(...record.steering)
        steps = step
        const outcome = record.outcome
        if (outcome._tag === "Ended") return outcome.outcome satisfies Outcome
        const message = outcome.message
        const calls = toolCallsOf(message)
        const decision = decideTurn(message.stopReason, calls.length, message.errorMessage)
        transcript.push(message)
        addUsage(message.usage)
        if (decision._tag === "Finish") {
          if (decision.skip !== undefined) transcript.push(...yield* skipAll(step, calls, decision.skip))
          if (decision.reason === "stop") {
            const more = yield* boundary(`stop/${step}`, step, true)
            steeringRead += more.steering.length
            followUpsRead += more.followUps.length
            if (more.steering.length + more.followUps.length > 0) {
              transcript.push(...more.steering, ...more.followUps)
              continue
            }
          }
          return { reason: decision.reason, error: decision.error } satisfies Outcome
        }
        const results = yield* batch(step, calls)
        transcript.push(...results)
        // a batch that took the abort (a call skipped because of it) ends the run here: the next
        // boundary's own read of the abort flag was seen to miss it once under load, and the run
        // then asked the model again (the results are journaled, so this holds on every replay)
        if (results.some(skippedByAbort)) return { reason: "aborted" } satisfies Outcome
      }
    })

    const outcome: Outcome = yield* drive
    const result: AgentRunResult = {
      messages: transcript,
      steps,
      reason: outcome.reason,
      ...(outcome.error === undefined ? {} : { error: outcome.error }),
      ...(outcome.errorReason === undefined ? {} : { errorReason: outcome.errorReason }),
      ...(usage === undefined ? {} : { usage })
    }
    return yield* Activity.make({
      name: "end",
      success: AgentRunResult,
      execute: Effect.as(
        emit(steps, undefined, {
          type: "turn_end",
          reason: result.reason,
          steps: result.steps,
          ...(result.error === undefined ? {} : { error: result.error })
        }),
        result
      )
    })
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
