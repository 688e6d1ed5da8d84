/**
 * What a run takes (`AgentLoopOptions`) and what it gives back (`AgentRunResult`).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { AbortSignalSchema } from "./Executor.ts"
import { RunReason } from "./LoopEvent.ts"
import { Message } from "./Message.ts"

/**
 * The number of model requests a run may make when `maxSteps` is not given.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_STEPS = 100

const MaxSteps = Schema.Int.check(Schema.isGreaterThan(0))

/**
 * @since 0.1.0
 * @category schemas
 */
export const AgentLoopOptions = Schema.Struct({
  systemPrompt: Schema.optionalKey(Schema.String),
  messages: Schema.Array(Message),
  maxSteps: Schema.optionalKey(MaxSteps),
  signal: Schema.optionalKey(AbortSignalSchema)
})
/**
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
  error: Schema.optionalKey(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type AgentRunResult = typeof AgentRunResult.Type
