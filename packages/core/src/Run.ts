/**
 * What a run takes (`AgentLoopOptions`) and what it gives back (`AgentRunResult`).
 *
 * @since 0.1.0
 */
import type { Duration } from "effect"
import { Effect, Queue, Schema } from "effect"
import { ModelErrorReason } from "./Errors.ts"
import { AbortSignalSchema } from "./Executor.ts"
import { addUsageInto, positiveDuration } from "./internal/rules/common.ts"
import { RunReason } from "./LoopEvent.ts"
import { Message, Usage, UserMessage } from "./Message.ts"
import type { Model, ToolDefinition } from "./Model.ts"
import { isOutputInput } from "./Output.ts"
import type { OutputInput, OutputSchema } from "./Output.ts"
import type { ToolPolicy } from "./Policy.ts"

const isFunction = (u: unknown): u is (...args: ReadonlyArray<never>) => unknown => typeof u === "function"

const DurationInput = Schema.declare(
  (u: unknown): u is Duration.Input => positiveDuration(u) !== undefined,
  { expected: "a positive duration (milliseconds, \"30 seconds\", a Duration)" }
)

const UserMessageQueue = Schema.declare(
  (u: unknown): u is Queue.Dequeue<UserMessage> => Queue.isDequeue(u),
  { expected: "a Queue of user messages" }
)

/**
 * The number of model requests a run may make when `maxSteps` is not given.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_STEPS = 100

const MaxSteps = Schema.Int.check(Schema.isGreaterThan(0))

/**
 * What a `transformContext` is told about the request it shapes, besides its messages: the run's
 * model, system prompt and the tool definitions the request carries, the step the request will be,
 * and a way to count what shaping it cost (a summarising request, see Compaction.ts) in the run's
 * usage. Every engine gives the same: on a durable run the usage counted is recorded with the turn,
 * so a resumed run counts it once.
 *
 * @since 0.1.0
 * @category models
 */
export interface TurnContext {
  /** The model the run sends its requests to. */
  readonly model: Model["Service"]
  readonly systemPrompt: string | undefined
  /** The tool definitions the request carries (the executor's, and a run's final-answer tool). */
  readonly tools: ReadonlyArray<ToolDefinition>
  /** The step the request will be: 1 for the run's first request. */
  readonly step: number
  /** Adds `usage` to the run's usage (`AgentRunResult.usage`). */
  readonly addUsage: (usage: Usage) => Effect.Effect<void>
}

/**
 * A run's `transformContext`: the messages of the next request, from the whole transcript. It may
 * ignore its second argument.
 *
 * @since 0.1.0
 * @category models
 */
export type ContextTransform = (
  messages: ReadonlyArray<Message>,
  context: TurnContext
) => Effect.Effect<ReadonlyArray<Message>>

/**
 * @since 0.1.0
 * @category schemas
 */
export const AgentLoopOptions = Schema.Struct({
  systemPrompt: Schema.optionalKey(Schema.String),
  messages: Schema.Array(Message),
  maxSteps: Schema.optionalKey(MaxSteps),
  signal: Schema.optionalKey(AbortSignalSchema),
  /** Consulted before each call runs: allow, deny or ask (see Policy.ts). Default: allow all. */
  policy: Schema.optionalKey(
    Schema.declare((u: unknown): u is ToolPolicy => isFunction(u), { expected: "a ToolPolicy function" })
  ),
  /**
   * User messages pushed while the run works. Each is appended at the next safe boundary (after
   * the current batch's results, before the next request), never between a call and its result.
   */
  steering: Schema.optionalKey(UserMessageQueue),
  /** User messages that restart the run when it would otherwise stop (reason `stop`). */
  followUps: Schema.optionalKey(UserMessageQueue),
  /**
   * Bounds the whole run by time. When it passes, the run is aborted as by `signal`: running tools
   * are interrupted, every call is paired, and the run ends `aborted` with an error naming the
   * limit, returning its transcript (unlike `Effect.timeout`, which interrupts the caller).
   */
  timeout: Schema.optionalKey(DurationInput),
  /**
   * How long an `ask` decision waits for its answer. Past it, the call is denied with the reason
   * "approval timed out" and the batch goes on. Default: no limit.
   */
  approvalTimeout: Schema.optionalKey(DurationInput),
  /**
   * Shapes the messages of each request (pruning, compaction); the transcript keeps everything.
   * Its output is checked: messages that do not decode, or that split a call from its result, end
   * the run `error` instead of being sent. It is told about the request (`TurnContext`): the run's
   * model, system prompt and tools, and how to count usage it spends. `compaction` (Compaction.ts)
   * is one.
   */
  transformContext: Schema.optionalKey(
    Schema.declare(
      (u: unknown): u is ContextTransform => isFunction(u),
      { expected: "a function from messages to an Effect of messages" }
    )
  ),
  /**
   * The final answer's schema: an effect `Schema` or an `OutputSchema` (see Output.ts). The model
   * gives the answer by calling the built-in final-answer tool; the run ends `stop` with the decoded
   * answer in `output` once one is accepted.
   */
  output: Schema.optionalKey(
    Schema.declare((u: unknown): u is OutputInput<unknown> => isOutputInput(u), {
      expected: "an effect Schema or an OutputSchema"
    })
  ),
  /**
   * How many rejected final answers (invalid, not alone in their message, or a turn that ended
   * without one) are sent back to the model for repair before the run ends `error`. Default
   * `DEFAULT_OUTPUT_RETRIES` (2).
   */
  outputRetries: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)))
})
/**
 * The options of a run. With `output: Schema<A>` (or an `OutputSchema<A>`), the run's result is an
 * `AgentRunResult<A>`.
 *
 * @since 0.1.0
 * @category models
 */
export type AgentLoopOptions = typeof AgentLoopOptions.Type

/**
 * The options other than `messages` (which `prepareTranscript` checks message by message).
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunSettings = AgentLoopOptions.mapFields(({ messages: _, ...rest }) => rest)

/**
 * @since 0.1.0
 * @category schemas
 */
export const AgentRunResult = Schema.Struct({
  messages: Schema.Array(Message),
  steps: Schema.Int,
  reason: RunReason,
  error: Schema.optionalKey(Schema.String),
  /**
   * Why the model failed, when the run ended on a typed `ModelError` that says (`auth`,
   * `rate_limit`, `context_length`, ...): lets a caller tell a rate limit from a bad key.
   */
  errorReason: Schema.optionalKey(ModelErrorReason),
  /**
   * Token usage summed over the run's turns, and over the runs of its sub-agents (present when any
   * reported usage).
   */
  usage: Schema.optionalKey(Usage),
  /**
   * The decoded final answer, for a run with an `output` schema: present exactly when the run ended
   * `stop`, which such a run does only once an answer was accepted.
   */
  output: Schema.optionalKey(Schema.Unknown)
})
/**
 * What a run gives back. `A` is the type of the final answer of a run with an `output` schema
 * (`unknown` when not known; `never` for a run without one).
 *
 * `messages` is a fresh array, yours to change; its messages are the very objects the run
 * appended (and events carried). A run resumed from them checks each again, like any input.
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentRunResult<A = unknown> extends Omit<typeof AgentRunResult.Type, "output"> {
  readonly output?: A
}

/**
 * The type of the final answer that an `output` option asks for: `A` for a `Schema<A>` or an
 * `OutputSchema<A>`.
 *
 * @since 0.1.0
 * @category models
 */
export type AnswerOf<S> = S extends OutputSchema<infer A> ? A : S extends Schema.Top ? S["Type"] : unknown

/**
 * The sum of two usages (`undefined` stands for none): the counts added, `cacheRead` and
 * `cacheWrite` counted as 0 where missing, `cost` summed once either has one. The run's own usage
 * is summed this way over its turns and its sub-agents; use it for totals over several runs.
 *
 * @since 0.1.0
 * @category constructors
 */
export const addUsage = (total: Usage | undefined, usage: Usage | undefined): Usage | undefined =>
  usage === undefined ?
    total :
    addUsageInto(total === undefined ? undefined : { cacheRead: 0, cacheWrite: 0, ...total }, usage)
