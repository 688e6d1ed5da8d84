/**
 * What any process (a runner or a client-only process) does with durable runs: start one, read
 * its result, answer an approval, abort it, push steering and follow-up messages.
 *
 * @since 0.1.0
 */
import {
  isAcceptedAnswer,
  isOutputInput,
  outputSchemaFromJson,
  runInputError,
  toolCallsOf,
  toOutputSchema
} from "@agentloop/core"
import type {
  AgentRunResult,
  ApprovalAnswer,
  Message,
  OutputDecodeError,
  OutputInput,
  UserMessage
} from "@agentloop/core"
import { Clock, Duration, Effect, Option, Schedule, Schema } from "effect"
import { DurableDeferred, WorkflowEngine } from "effect/workflow"
import { DurableEventSink } from "./DurableEvent.ts"
import { DurableAgentRun, DurableOutput } from "./DurableRun.ts"
import { DurableStore } from "./DurableStore.ts"
import type { DurableStoreError, PendingApproval } from "./DurableStore.ts"
import { abortLocally } from "./internal/aborts.ts"

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
 * What starts a durable run: what `runAgentLoop` accepts that can travel with a run, and `runId`,
 * which names it (starting the same `runId` again joins the run).
 *
 * What is code stays on the runners (`durableRunnerLayer({ policy, transformContext, output })`);
 * what is live in one process has a durable counterpart (`abortRun`, `steer`, `followUp`). Passing
 * one of those here (`signal`, `steering`, `followUps`, `policy`, `transformContext`, or an
 * `output` that is not a JSON Schema) is refused with a `DurableRunInputError` naming where it
 * goes: never silently ignored.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableRunOptions {
  readonly runId: string
  readonly messages: ReadonlyArray<Message>
  readonly systemPrompt?: string | undefined
  readonly maxSteps?: number | undefined
  /** The run's time limit, measured from its first start (as `runAgentLoop`'s `timeout`). */
  readonly timeout?: Duration.Input | undefined
  /** How long an approval may wait before it is answered denied (default: the runner's). */
  readonly approvalTimeout?: Duration.Input | undefined
  /** The output schema, as JSON Schema (see `DurableOutput`); default: the runner's `output`. */
  readonly output?: DurableOutput | undefined
  readonly outputRetries?: number | undefined
}

/** What cannot travel with a durable run, and what to use instead. */
const refused: ReadonlyArray<readonly [string, string]> = [
  ["signal", "an AbortSignal lives in one process: abort a durable run with abortRun(runId), from any process"],
  ["steering", "a Queue lives in one process: push steering messages with steer(runId, message)"],
  ["followUps", "a Queue lives in one process: push follow-up messages with followUp(runId, message)"],
  ["policy", "a policy is code: give it to every runner, durableRunnerLayer({ policy })"],
  ["transformContext", "a function is code: give it to every runner, durableRunnerLayer({ transformContext })"]
]

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
  Effect.flatMap(
    checkOptions(options),
    (payload) => Effect.andThen(register(payload.runId), DurableAgentRun.execute(payload, { discard: true }))
  )

/**
 * Starts a run (or joins it) and waits for its result.
 *
 * @since 0.1.0
 * @category runs
 */
export const runDurable = (
  options: DurableRunOptions
): Effect.Effect<
  AgentRunResult,
  DurableRunInputError | DurableStoreError,
  WorkflowEngine.WorkflowEngine | DurableStore
> =>
  Effect.flatMap(
    checkOptions(options),
    (payload) => Effect.andThen(register(payload.runId), DurableAgentRun.execute(payload))
  )

const register = (runId: string) =>
  Effect.flatMap(DurableStore, (store) => Effect.flatMap(Clock.currentTimeMillis, (now) => store.register(runId, now)))

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
    if (typeof options !== "object" || options === null) {
      return yield* new DurableRunInputError({ message: "bad input: options must be an object" })
    }
    if (typeof options.runId !== "string" || options.runId.length === 0) {
      return yield* new DurableRunInputError({ message: "bad input: runId must be a non-empty string" })
    }
    for (const [key, instead] of refused) {
      if ((options as unknown as Record<string, unknown>)[key] !== undefined) {
        return yield* refuse(options.runId, `a durable run cannot take "${key}": ${instead}`)
      }
    }
    const output = options.output
    if (output !== undefined && (isOutputInput(output) || !Schema.is(DurableOutput)(output))) {
      return yield* refuse(
        options.runId,
        "a durable run takes its output schema as JSON Schema ({ jsonSchema, name?, description? }); an effect " +
          "Schema or an OutputSchema is code: give it to every runner, durableRunnerLayer({ output })"
      )
    }
    // the loop's own check of its input, so a refusal says what an in-memory run would end with
    const error = runInputError({
      messages: options.messages,
      ...(options.systemPrompt === undefined ? {} : { systemPrompt: options.systemPrompt }),
      ...(options.maxSteps === undefined ? {} : { maxSteps: options.maxSteps }),
      ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
      ...(options.approvalTimeout === undefined ? {} : { approvalTimeout: options.approvalTimeout }),
      ...(options.outputRetries === undefined ? {} : { outputRetries: options.outputRetries })
    })
    if (error !== undefined) return yield* refuse(options.runId, error)
    if (output !== undefined) {
      yield* Effect.catch(
        Effect.asVoid(outputSchemaFromJson(output.jsonSchema, output.name === undefined ? {} : { name: output.name })),
        (e) => refuse(options.runId, `bad input: output: ${e.message}`)
      )
    }
    const millis = (input: Duration.Input | undefined) =>
      input === undefined ? undefined : Duration.toMillis(Duration.fromInputUnsafe(input))
    const timeoutMs = millis(options.timeout)
    const approvalTimeoutMs = millis(options.approvalTimeout)
    return {
      runId: options.runId,
      // checked above; the loop repairs dangling calls itself, as in memory
      messages: options.messages,
      ...(options.systemPrompt === undefined ? {} : { systemPrompt: options.systemPrompt }),
      ...(options.maxSteps === undefined ? {} : { maxSteps: options.maxSteps }),
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
      ...(approvalTimeoutMs === undefined ? {} : { approvalTimeoutMs }),
      ...(output === undefined ? {} : { output }),
      ...(options.outputRetries === undefined ? {} : { outputRetries: options.outputRetries })
    }
  })

/**
 * Refuses a run: its one `turn_end` (reason `error`, no steps) goes to the `DurableEventSink`, as an
 * in-memory run with bad input ends, and the caller gets the typed error; nothing starts.
 */
const refuse = (runId: string, message: string) =>
  Effect.andThen(
    Effect.flatMap(DurableEventSink, (sink) =>
      Effect.catchCause(
        Effect.suspend(() =>
          sink.emit({ runId, step: 0, event: { type: "turn_end", reason: "error", steps: 0, error: message } })
        ),
        () => Effect.void
      )),
    Effect.fail(new DurableRunInputError({ message }))
  )

/**
 * The result of a run once it has ended; none while it runs, waits, or does not exist.
 *
 * @since 0.1.0
 * @category runs
 */
export const pollRun = (
  runId: string
): Effect.Effect<Option.Option<AgentRunResult>, never, WorkflowEngine.WorkflowEngine> =>
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

/**
 * A durable run's result with its `output` decoded by `output`, the schema its runner used. A
 * result crosses processes as JSON, so its `output` is the answer's JSON form (an effect `Schema`
 * that turns a string into a `Date` gives the string); this decodes the accepted final answer the
 * transcript holds, as the run did. A result without an output is returned as it is.
 *
 * @since 0.1.0
 * @category runs
 */
export const decodeOutput = <A>(
  result: AgentRunResult,
  output: OutputInput<A>
): Effect.Effect<AgentRunResult<A>, OutputDecodeError> =>
  Effect.suspend(() => {
    if (result.reason !== "stop" || !("output" in result)) return Effect.succeed(result as AgentRunResult<A>)
    const schema = toOutputSchema(output)
    const last = result.messages.at(-1)
    const call = last?.role === "toolResult" && isAcceptedAnswer(last.details) ?
      result.messages.flatMap((m) => m.role === "assistant" ? toolCallsOf(m) : []).findLast((c) =>
        c.id === last.toolCallId
      ) :
      undefined
    if (call === undefined) return Effect.succeed(result as AgentRunResult<A>)
    return Effect.map(schema.decode(call.arguments), (value) => ({ ...result, output: value }))
  })
