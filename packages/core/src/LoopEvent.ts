/**
 * The events a run emits, in the order a UI can render without guessing, and the reasons a run
 * ends with.
 *
 * Documented choices (SPEC §8):
 * - `tool_end` is emitted for **every** result that joins the transcript, including skipped
 *   results and results made up for interrupted calls; `tool_start` only for calls that actually
 *   start. So the `assistant_message` and `tool_end` events alone rebuild the transcript.
 * - The model's final `done` event is **not** forwarded as a `model_event`: the validated
 *   `assistant_message` event stands for it (an invalid final message is never shown as if it
 *   were part of the transcript).
 * - `approval_request` carries the `Deferred` the caller completes to answer it (see Policy.ts).
 * - `user_message` announces a steering or follow-up message as it joins the transcript, and the
 *   loop's own request for a final answer (`kind: "repair"`, see Output.ts).
 * - The message of an `assistant_message`, `tool_end` or `user_message` event is the very object
 *   that joined the transcript: a sink reads it, and copies it to change it.
 *
 * @since 0.1.0
 */
import { Deferred, Schema } from "effect"
import { AssistantMessage, ToolCall, ToolResultMessage, UserMessage } from "./Message.ts"
import { ModelEvent } from "./Model.ts"
import type { ApprovalAnswer } from "./Policy.ts"

/**
 * Why a run ended.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunReason = Schema.Literals(["stop", "length", "error", "aborted", "maxSteps"])
/**
 * @since 0.1.0
 * @category models
 */
export type RunReason = typeof RunReason.Type

/**
 * @since 0.1.0
 * @category schemas
 */
export const LoopEvent = Schema.Union([
  Schema.Struct({ type: Schema.Literal("model_event"), event: ModelEvent }),
  Schema.Struct({ type: Schema.Literal("assistant_message"), message: AssistantMessage }),
  Schema.Struct({ type: Schema.Literal("tool_start"), call: ToolCall }),
  Schema.Struct({ type: Schema.Literal("tool_progress"), toolCallId: Schema.String, progress: Schema.Unknown }),
  Schema.Struct({ type: Schema.Literal("tool_end"), result: ToolResultMessage }),
  Schema.Struct({
    type: Schema.Literal("approval_request"),
    call: ToolCall,
    /**
     * A serializable id for this request, to answer it by id: the call's id in an in-memory run
     * (unique within the run), `<runId>/<callId>` in a durable one.
     */
    id: Schema.optionalKey(Schema.String),
    answer: Schema.declare((u: unknown): u is Deferred.Deferred<ApprovalAnswer> => Deferred.isDeferred(u), {
      expected: "a Deferred<ApprovalAnswer>"
    })
  }),
  Schema.Struct({
    type: Schema.Literal("user_message"),
    message: UserMessage,
    /** `repair`: the loop's own request for the final answer, after a turn that ended without one. */
    kind: Schema.Literals(["steering", "followUp", "repair"])
  }),
  Schema.Struct({
    type: Schema.Literal("turn_end"),
    reason: RunReason,
    steps: Schema.Int,
    error: Schema.optionalKey(Schema.String)
  })
])
/**
 * @since 0.1.0
 * @category models
 */
export type LoopEvent = typeof LoopEvent.Type
