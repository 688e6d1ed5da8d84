/**
 * The tool side of the loop: the `Executor` service that runs one tool call, and the context a
 * running call receives.
 *
 * @since 0.1.0
 */
import { Context, Schema } from "effect"
import type { Effect } from "effect"
import type { ToolError } from "./Errors.ts"
import type { ToolCall, ToolResultMessage } from "./Message.ts"
import type { ToolDefinition } from "./Model.ts"

const AbortSignalSchema = Schema.declare((u: unknown): u is AbortSignal => u instanceof AbortSignal, {
  expected: "AbortSignal"
})

/**
 * What one running tool call gets from the loop.
 *
 * - `signal` fires when the call is interrupted (run aborted, fiber interrupted, timeout).
 * - `reportProgress(p)` becomes a `tool_progress` event for this call; calls after the call ended
 *   are ignored.
 * - `toolCallId` and `toolName` identify the call (additions to the SPEC §7 shape).
 * - `idempotencyKey`, when the engine gives one, is the same every time this very call is run
 *   (a durable engine runs a call again after a crash: a tool with outside effects can use the key
 *   to do them once). The in-memory loop runs a call once and gives none.
 * - `keepOnInterrupt(details)`, when the engine gives it: fields added to the `details` of this
 *   call's result should the call be interrupted or time out (a sub-agent keeps its child's
 *   transcript this way). Later calls add to earlier ones.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolContext = Schema.Struct({
  signal: AbortSignalSchema,
  reportProgress: Schema.declare(
    (u: unknown): u is (progress: unknown) => Effect.Effect<void> => typeof u === "function",
    { expected: "a function" }
  ),
  toolCallId: Schema.String,
  toolName: Schema.String,
  idempotencyKey: Schema.optionalKey(Schema.String),
  keepOnInterrupt: Schema.optionalKey(Schema.declare(
    (u: unknown): u is (details: Readonly<Record<string, unknown>>) => void => typeof u === "function",
    { expected: "a function" }
  ))
})
/**
 * @since 0.1.0
 * @category models
 */
export type ToolContext = typeof ToolContext.Type

/**
 * The service that runs tool calls.
 *
 * Contract: `execute` answers one call with a `ToolResultMessage` carrying the call's id and name,
 * or fails with a `ToolError`. The loop guards every other behaviour (defects, synchronous throws,
 * interruption, a result for the wrong call or of the wrong shape) and still pairs the call.
 *
 * @since 0.1.0
 * @category services
 */
export interface ExecutorShape {
  /**
   * The tools offered to the model. May change between turns (an MCP server whose tools changed):
   * the loop reads it once per model request, uses that array for the request and for the batch
   * that follows, and never reads it during a batch.
   */
  readonly definitions: ReadonlyArray<ToolDefinition>
  execute(call: ToolCall, context: ToolContext): Effect.Effect<ToolResultMessage, ToolError>
}

/**
 * @since 0.1.0
 * @category services
 */
export class Executor extends Context.Service<Executor, ExecutorShape>()("@agentloop/core/Executor") {}

/**
 * @since 0.1.0
 * @category schemas
 */
export { AbortSignalSchema }
