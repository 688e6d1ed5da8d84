/**
 * The transcript's vocabulary: content parts, tool calls and the three message roles (SPEC §6).
 *
 * Each schema is exported as a value (an effect `Schema`) and a type of the same name. The JSON
 * shapes are compatible with pi-ai; extra fields that a provider needs to replay a message (for
 * example a thinking signature) are allowed and preserved by the loop.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * Identifiers (tool-call ids) are non-empty strings.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Id = Schema.NonEmptyString.annotate({ description: "a non-empty identifier" })

/**
 * @since 0.1.0
 * @category schemas
 */
export const TextContent = Schema.Struct({
  type: Schema.Literal("text"),
  text: Schema.String
})
/**
 * @since 0.1.0
 * @category models
 */
export type TextContent = typeof TextContent.Type

/**
 * Model reasoning. `signature` (and `redacted`) let providers replay thinking blocks verbatim.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ThinkingContent = Schema.Struct({
  type: Schema.Literal("thinking"),
  thinking: Schema.String,
  signature: Schema.optionalKey(Schema.String),
  redacted: Schema.optionalKey(Schema.Boolean)
})
/**
 * @since 0.1.0
 * @category models
 */
export type ThinkingContent = typeof ThinkingContent.Type

/**
 * A base64-encoded image.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ImageContent = Schema.Struct({
  type: Schema.Literal("image"),
  data: Schema.String,
  mimeType: Schema.String
})
/**
 * @since 0.1.0
 * @category models
 */
export type ImageContent = typeof ImageContent.Type

/**
 * One action the model proposes. `arguments` must be a JSON object.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolCall = Schema.Struct({
  type: Schema.Literal("toolCall"),
  id: Id,
  name: Schema.NonEmptyString,
  arguments: Schema.Record(Schema.String, Schema.Unknown)
})
/**
 * @since 0.1.0
 * @category models
 */
export type ToolCall = typeof ToolCall.Type

/**
 * Why the model ended its turn. The loop's decision table (SPEC §2) is keyed on it.
 *
 * @since 0.1.0
 * @category schemas
 */
export const StopReason = Schema.Literals(["stop", "toolUse", "length", "error", "aborted"])
/**
 * @since 0.1.0
 * @category models
 */
export type StopReason = typeof StopReason.Type

/**
 * Token counts of one model turn (or, summed, of a run). `input` excludes cached tokens:
 * `cacheRead` are input tokens served from a provider's prompt cache, `cacheWrite` input tokens
 * written to it. `cost` is the turn's price in US dollars, when a price table knows the model.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Usage = Schema.Struct({
  input: Schema.Finite,
  output: Schema.Finite,
  cacheRead: Schema.optionalKey(Schema.Finite),
  cacheWrite: Schema.optionalKey(Schema.Finite),
  cost: Schema.optionalKey(Schema.Finite)
})
/**
 * @since 0.1.0
 * @category models
 */
export type Usage = typeof Usage.Type

/**
 * @since 0.1.0
 * @category schemas
 */
export const UserMessage = Schema.Struct({
  role: Schema.Literal("user"),
  content: Schema.Union([Schema.String, Schema.Array(Schema.Union([TextContent, ImageContent]))]),
  timestamp: Schema.optionalKey(Schema.Finite)
})
/**
 * @since 0.1.0
 * @category models
 */
export type UserMessage = typeof UserMessage.Type

/**
 * The final message of one model turn.
 *
 * @since 0.1.0
 * @category schemas
 */
export const AssistantMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  content: Schema.Array(Schema.Union([TextContent, ThinkingContent, ToolCall])),
  stopReason: StopReason,
  errorMessage: Schema.optionalKey(Schema.String),
  usage: Schema.optionalKey(Usage),
  model: Schema.optionalKey(Schema.String),
  timestamp: Schema.optionalKey(Schema.Finite)
})
/**
 * @since 0.1.0
 * @category models
 */
export type AssistantMessage = typeof AssistantMessage.Type

/**
 * The answer to one tool call, matched to it by `toolCallId`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolResultMessage = Schema.Struct({
  role: Schema.Literal("toolResult"),
  toolCallId: Id,
  toolName: Schema.NonEmptyString,
  content: Schema.Array(Schema.Union([TextContent, ImageContent])),
  details: Schema.optionalKey(Schema.Unknown),
  isError: Schema.Boolean,
  timestamp: Schema.optionalKey(Schema.Finite)
})
/**
 * @since 0.1.0
 * @category models
 */
export type ToolResultMessage = typeof ToolResultMessage.Type

/**
 * @since 0.1.0
 * @category schemas
 */
export const Message = Schema.Union([UserMessage, AssistantMessage, ToolResultMessage])
/**
 * @since 0.1.0
 * @category models
 */
export type Message = typeof Message.Type

/**
 * The tool calls of an assistant message, in the order the model wrote them.
 *
 * @since 0.1.0
 * @category getters
 */
export const toolCallsOf = (message: AssistantMessage): ReadonlyArray<ToolCall> => {
  const calls: Array<ToolCall> = []
  for (const part of message.content) {
    if (part.type === "toolCall") calls.push(part)
  }
  return calls
}

/**
 * A plain text content list.
 *
 * @since 0.1.0
 * @category constructors
 */
export const textContent = (text: string): ReadonlyArray<TextContent> => [{ type: "text", text }]
