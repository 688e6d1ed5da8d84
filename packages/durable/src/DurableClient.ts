/**
 * What any process (a runner or a client-only process) does with durable runs: start one, read
 * its result, answer an approval, abort it, push steering and follow-up messages.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Option, Schedule, Schema } from "effect"
import { DurableDeferred, WorkflowEngine } from "effect/workflow"
import { prepareTranscript } from "@agentloop/core"
import type { AgentRunResult, ApprovalAnswer, Message, UserMessage } from "@agentloop/core"
import { DurableAgentRun } from "./DurableRun.ts"
import { DurableStore } from "./DurableStore.ts"
import { abortLocally } from "./internal/aborts.ts"
import type { DurableStoreError, PendingApproval } from "./DurableStore.ts"

/**
 * A run that cannot start: what is wrong with its input.
 *
 * @since 0.1.0
 * @category errors
 */
export class DurableRunInputError extends Schema.TaggedError<DurableRunInputError>()("DurableRunInputError", {
  message: Schema.String
}) {}

/**
 * What starts a durable run. `runId` names it: starting the same `runId` again joins the run.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableRunOptions {
  readonly runId: string
  readonly messages: ReadonlyArray<Message>
  readonly systemPrompt?: string | undefined
  readonly maxSteps?: number | undefined
}

/**
 * The workflow execution id of a run.
 *
 * @since 0.1.0
 * @category runs
 */
export const executionIdOf = (runId: string): Effect.Effect<string> =>
  DurableAgentRun.executionId({ runId, messages: [] })

/**
 * Starts a run (or joins it, if `runId` already exists) without waiting for it; returns its
 * execution id. The input is checked first: a malformed transcript or step limit is a
 * `DurableRunInputError` and nothing starts.
 *
 * @since 0.1.0
 * @category runs
 */
export const startRun = (
  options: DurableRunOptions
): Effect.Effect<string, DurableRunInputError | DurableStoreError, WorkflowEngine.WorkflowEngine | DurableStore> =>
  Effect.flatMap(checkOptions(options), (payload) =>
    Effect.andThen(register(payload.runId), DurableAgentRun.execute(payload, { discard: true })))

/**
 * Starts a run (or joins it) and waits for its result.
 *
 * @since 0.1.0
 * @category runs
 */
export const runDurable = (
  options: DurableRunOptions
): Effect.Effect<AgentRunResult, DurableRunInputError | DurableStoreError, WorkflowEngine.WorkflowEngine | DurableStore> =>
  Effect.flatMap(checkOptions(options), (payload) =>
    Effect.andThen(register(payload.runId), DurableAgentRun.execute(payload)))

const register = (runId: string) =>
  Effect.flatMap(DurableStore, (store) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => store.register(runId, now)))

/**
 * Where a run is: `running` (or not picked up by a runner yet), `waiting` (suspended: an
 * approval, a durable timer), `ended` (with its reason).
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableRunStatus {
  readonly runId: string
  readonly startedAt: number
  readonly state: "running" | "waiting" | "ended"
  readonly reason?: AgentRunResult["reason"] | undefined
  readonly steps?: number | undefined
  /** The calls waiting for an approval (answer with `approve(runId, call.id, answer)`), oldest first. */
  readonly approvals: ReadonlyArray<PendingApproval>
}

/**
 * Every run started through this store, oldest first, with its state.
 *
 * @since 0.1.0
 * @category runs
 */
export const listRuns = (): Effect.Effect<
  ReadonlyArray<DurableRunStatus>,
  DurableStoreError,
  WorkflowEngine.WorkflowEngine | DurableStore
> =>
  Effect.gen(function*() {
    const store = yield* DurableStore
    const runs = yield* store.runs
    const pending = yield* store.pendingApprovals()
    const statusOf = ({ runId, startedAt }: { readonly runId: string; readonly startedAt: number }) =>
      Effect.map(
        Effect.flatMap(executionIdOf(runId), (id) => DurableAgentRun.poll(id)),
        (polled): DurableRunStatus => {
          const approvals = pending.filter((a) => a.runId === runId)
          if (Option.isNone(polled)) return { runId, startedAt, state: "running", approvals }
          if (polled.value._tag === "Suspended") return { runId, startedAt, state: "waiting", approvals }
          const exit = polled.value.exit
          return exit._tag === "Success" ?
            { runId, startedAt, state: "ended", reason: exit.value.reason, steps: exit.value.steps, approvals: [] } :
            { runId, startedAt, state: "ended", reason: "error", approvals: [] }
        }
      )
    return yield* Effect.forEach(runs, statusOf)
  })

const checkOptions = (options: DurableRunOptions) =>
  Effect.gen(function*() {
    if (typeof options.runId !== "string" || options.runId.length === 0) {
      return yield* new DurableRunInputError({ message: "bad input: runId must be a non-empty string" })
    }
    if (options.maxSteps !== undefined && !(Number.isInteger(options.maxSteps) && options.maxSteps > 0)) {
      return yield* new DurableRunInputError({ message: "bad input: maxSteps must be a positive integer" })
    }
    const prepared = prepareTranscript(options.messages)
    if (!prepared.ok) return yield* new DurableRunInputError({ message: `bad input: ${prepared.error}` })
    return {
      runId: options.runId,
      messages: prepared.value,
      ...(options.systemPrompt === undefined ? {} : { systemPrompt: options.systemPrompt }),
      ...(options.maxSteps === undefined ? {} : { maxSteps: options.maxSteps })
    }
  })

/**
 * The result of a run once it has ended; none while it runs, waits, or does not exist.
 *
 * @since 0.1.0
 * @category runs
 */
export const pollRun = (runId: string): Effect.Effect<Option.Option<AgentRunResult>, never, WorkflowEngine.WorkflowEngine> =>
  Effect.gen(function*() {
    const polled = yield* DurableAgentRun.poll(yield* executionIdOf(runId))
    if (Option.isNone(polled) || polled.value._tag !== "Complete") return Option.none()
    const exit = polled.value.exit
    return exit._tag === "Success" ? Option.some(exit.value) : Option.none()
  })

/**
 * Waits for a run's result, polling every `interval` (default 100 ms).
 *
 * @since 0.1.0
 * @category runs
 */
export const awaitRun = (
  runId: string,
  options: { readonly interval?: `${number} millis` | undefined } = {}
): Effect.Effect<AgentRunResult, never, WorkflowEngine.WorkflowEngine> =>
  pollRun(runId).pipe(
    Effect.flatMap(Option.match({ onNone: () => Effect.fail("running" as const), onSome: Effect.succeed })),
    Effect.retry({ schedule: Schedule.spaced(options.interval ?? "100 millis") }),
    Effect.orDie
  )

/**
 * The calls waiting for an approval, oldest first: of run `runId`, or of every run. A call is
 * listed from its `approval_request` until its approval is settled (answered and taken by the
 * run, timed out, or aborted).
 *
 * @since 0.1.0
 * @category approvals
 */
export const pendingApprovals = (
  runId?: string
): Effect.Effect<ReadonlyArray<PendingApproval>, DurableStoreError, DurableStore> =>
  Effect.flatMap(DurableStore, (store) => store.pendingApprovals(runId))

/**
 * Answers the approval request of call `callId` of run `runId`, from any process, at any later
 * time (even while no runner holds the run). The first answer counts.
 *
 * @since 0.1.0
 * @category approvals
 */
export const approve = (
  runId: string,
  callId: string,
  answer: ApprovalAnswer
): Effect.Effect<void, never, WorkflowEngine.WorkflowEngine> =>
  Effect.gen(function*() {
    const executionId = yield* executionIdOf(runId)
    const deferred = DurableDeferred.make(`approval/${callId}`, {
      success: Schema.Struct({
        approved: Schema.Boolean,
        always: Schema.optionalKey(Schema.Boolean),
        reason: Schema.optionalKey(Schema.String)
      })
    })
    yield* DurableDeferred.succeed(deferred, {
      token: DurableDeferred.tokenFromExecutionId(deferred, { workflow: DurableAgentRun, executionId }),
      value: {
        approved: answer.approved,
        ...(answer.always === undefined ? {} : { always: answer.always }),
        ...(answer.reason === undefined ? {} : { reason: answer.reason })
      }
    })
  })

/**
 * Aborts a run from any process. It is taken at the safe boundaries: calls waiting for approval
 * or not started yet are answered skipped (`aborted`), calls running finish, no model request is
 * made after it, and the run ends `aborted` with its transcript.
 *
 * @since 0.1.0
 * @category runs
 */
export const abortRun = (runId: string): Effect.Effect<void, never, WorkflowEngine.WorkflowEngine> =>
  Effect.gen(function*() {
    // the process that runs it stops its turn or calls now; every other one reads it from the journal
    abortLocally(runId)
    const executionId = yield* executionIdOf(runId)
    const deferred = DurableDeferred.make("agentloop/abort")
    yield* DurableDeferred.succeed(deferred, {
      token: DurableDeferred.tokenFromExecutionId(deferred, { workflow: DurableAgentRun, executionId }),
      value: undefined
    })
  })

/**
 * Pushes a steering message: it joins the transcript at the run's next safe boundary (after the
 * current batch's results, before the next request).
 *
 * @since 0.1.0
 * @category runs
 */
export const steer = (runId: string, message: UserMessage) =>
  Effect.flatMap(DurableStore, (store) => store.push(runId, "steering", message))

/**
 * Pushes a follow-up message: when the run would stop, it joins the transcript and the run goes
 * on. A message pushed after the run ended is not read.
 *
 * @since 0.1.0
 * @category runs
 */
export const followUp = (runId: string, message: UserMessage) =>
  Effect.flatMap(DurableStore, (store) => store.push(runId, "followUp", message))
