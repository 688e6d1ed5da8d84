/**
 * Fast structural checks for the transcript's schemas, for the hot path: the loop checks every
 * input message, every final message and every tool result, and decoding with the effect
 * `Schema` costs about a microsecond per message (most of a resumed run's time on a long
 * transcript). Not part of the public API.
 *
 * Each guard accepts a value only if the corresponding schema in Message.ts decodes it; it may
 * reject a value the schema accepts (then the caller decodes with the schema, which decides and
 * words the error), never the other way round. So they mirror the schemas exactly where they
 * accept: an object is a non-null non-array object, a key is present when `key in value` (the
 * schema's rule), extra keys are ignored, an optional key present with `undefined` is rejected,
 * numbers are finite, identifiers and tool names non-empty. Anything that throws while being read
 * (a getter) is left to the schema. Keep them in step with Message.ts.
 */
import type { AssistantMessage, Message, ToolResultMessage } from "../Message.ts"
import type { ToolDefinition } from "../Model.ts"

/** A non-null non-array object, read by known names. */
interface Obj {
  readonly [key: string]: unknown
  readonly role?: unknown
  readonly type?: unknown
  readonly content?: unknown
  readonly text?: unknown
  readonly data?: unknown
  readonly mimeType?: unknown
  readonly thinking?: unknown
  readonly signature?: unknown
  readonly redacted?: unknown
  readonly id?: unknown
  readonly name?: unknown
  readonly arguments?: unknown
  readonly input?: unknown
  readonly output?: unknown
  readonly cacheRead?: unknown
  readonly cacheWrite?: unknown
  readonly timestamp?: unknown
  readonly stopReason?: unknown
  readonly errorMessage?: unknown
  readonly usage?: unknown
  readonly model?: unknown
  readonly toolCallId?: unknown
  readonly toolName?: unknown
  readonly isError?: unknown
  readonly description?: unknown
  readonly parameters?: unknown
  readonly systemPrompt?: unknown
  readonly maxSteps?: unknown
  readonly signal?: unknown
}

const isObject = (u: unknown): u is Obj => typeof u === "object" && u !== null && !Array.isArray(u)
const isNonEmptyString = (u: unknown): u is string => typeof u === "string" && u.length >= 1
const isFiniteNumber = (u: unknown): boolean => typeof u === "number" && Number.isFinite(u)

// Every property is read with a literal name (not through a helper taking the key), so each read
// site stays monomorphic or polymorphic for V8: about twice as fast on long transcripts.

const isTextContent = (o: Obj): boolean => typeof o.text === "string"
const isImageContent = (o: Obj): boolean => typeof o.data === "string" && typeof o.mimeType === "string"
const isThinkingContent = (o: Obj): boolean =>
  typeof o.thinking === "string" &&
  (typeof o.signature === "string" || !("signature" in o)) &&
  (typeof o.redacted === "boolean" || !("redacted" in o))
const isToolCallPart = (o: Obj): boolean => isNonEmptyString(o.id) && isNonEmptyString(o.name) && isObject(o.arguments)

/** `Array(Union([TextContent, ImageContent]))` */
const isResultContent = (u: unknown): boolean => {
  if (!Array.isArray(u)) return false
  for (let i = 0; i < u.length; i++) {
    const part: unknown = u[i]
    if (!isObject(part)) return false
    const type = part.type
    if (type === "text" ? !isTextContent(part) : type === "image" ? !isImageContent(part) : true) return false
  }
  return true
}

/** `Array(Union([TextContent, ThinkingContent, ToolCall]))` */
const isAssistantContent = (u: unknown): boolean => {
  if (!Array.isArray(u)) return false
  for (let i = 0; i < u.length; i++) {
    const part: unknown = u[i]
    if (!isObject(part)) return false
    const type = part.type
    if (
      type === "text" ?
        !isTextContent(part) :
        type === "toolCall" ?
        !isToolCallPart(part) :
        type === "thinking" ?
        !isThinkingContent(part) :
        true
    ) return false
  }
  return true
}

const isStopReason = (u: unknown): boolean =>
  u === "stop" || u === "toolUse" || u === "length" || u === "error" || u === "aborted"

const isUsage = (u: unknown): boolean =>
  isObject(u) && isFiniteNumber(u.input) && isFiniteNumber(u.output) &&
  (isFiniteNumber(u.cacheRead) || !("cacheRead" in u)) && (isFiniteNumber(u.cacheWrite) || !("cacheWrite" in u)) &&
  (isFiniteNumber(u.cost) || !("cost" in u))

/** `timestamp: optionalKey(Finite)`, shared by the three roles. */
const hasTimestamp = (o: Obj): boolean => isFiniteNumber(o.timestamp) || !("timestamp" in o)

const isUserFields = (o: Obj): boolean => {
  const content = o.content
  return (typeof content === "string" || isResultContent(content)) && hasTimestamp(o)
}

const isAssistantFields = (o: Obj): boolean =>
  isAssistantContent(o.content) && isStopReason(o.stopReason) &&
  (typeof o.errorMessage === "string" || !("errorMessage" in o)) &&
  (isUsage(o.usage) || !("usage" in o)) &&
  (typeof o.model === "string" || !("model" in o)) &&
  hasTimestamp(o)

const isToolResultFields = (o: Obj): boolean =>
  isNonEmptyString(o.toolCallId) && isNonEmptyString(o.toolName) && isResultContent(o.content) &&
  typeof o.isError === "boolean" && hasTimestamp(o)
// `details` is `optionalKey(Unknown)`: anything, or absent

// Each exported guard catches: a value whose reading throws (a getter, a revoked proxy) is not
// fast-accepted, and the schema then reports it as it always did.

/**
 * True only if `Message` decodes `u`.
 *
 * @internal
 */
export const isMessageFast = (u: unknown): u is Message => {
  try {
    return isMessageUnguarded(u)
  } catch {
    return false
  }
}

/**
 * `isMessageFast` without its `try`: may throw on a value whose reading throws. For loops that
 * guard many values inside one `try`.
 *
 * @internal
 */
export const isMessageUnguarded = (u: unknown): u is Message => {
  if (!isObject(u)) return false
  const role = u.role
  return role === "user" ?
    isUserFields(u) :
    role === "assistant" ?
    isAssistantFields(u) :
    role === "toolResult" && isToolResultFields(u)
}

/**
 * True only if `AssistantMessage` decodes `u`.
 *
 * @internal
 */
export const isAssistantMessageFast = (u: unknown): u is AssistantMessage => {
  try {
    return isObject(u) && u.role === "assistant" && isAssistantFields(u)
  } catch {
    return false
  }
}

/**
 * True only if `ToolResultMessage` decodes `u`.
 *
 * @internal
 */
export const isToolResultMessageFast = (u: unknown): u is ToolResultMessage => {
  try {
    return isObject(u) && u.role === "toolResult" && isToolResultFields(u)
  } catch {
    return false
  }
}

/**
 * True only if `Array(ToolDefinition)` decodes `u`.
 *
 * @internal
 */
export const isToolDefinitionsFast = (u: unknown): u is ReadonlyArray<ToolDefinition> => {
  try {
    if (!Array.isArray(u)) return false
    for (let i = 0; i < u.length; i++) {
      const d: unknown = u[i]
      if (
        !isObject(d) || !isNonEmptyString(d.name) || typeof d.description !== "string" || !isObject(d.parameters) ||
        !(typeof d["readOnly"] === "boolean" || !("readOnly" in d)) ||
        !(typeof d["exclusive"] === "boolean" || !("exclusive" in d)) ||
        !(typeof d["atMostOnce"] === "boolean" || !("atMostOnce" in d)) ||
        !((typeof d["timeoutMs"] === "number" && Number.isFinite(d["timeoutMs"]) && d["timeoutMs"] > 0) ||
          !("timeoutMs" in d))
      ) return false
    }
    return true
  } catch {
    return false
  }
}

/**
 * True only if `RunSettings` (the options other than `messages`) decodes `u`.
 *
 * @internal
 */
export const isRunSettingsFast = (u: unknown): boolean => {
  try {
    if (!isObject(u)) return false
    const maxSteps = u.maxSteps
    return (typeof u.systemPrompt === "string" || !("systemPrompt" in u)) &&
      ((typeof maxSteps === "number" && Number.isSafeInteger(maxSteps) && maxSteps > 0) || !("maxSteps" in u)) &&
      (u.signal instanceof AbortSignal || !("signal" in u)) &&
      // the control options are rare: when one is given, the schema decides
      !("policy" in u) && !("steering" in u) && !("followUps" in u) && !("transformContext" in u) &&
      !("timeout" in u) && !("approvalTimeout" in u) && !("output" in u) && !("outputRetries" in u)
  } catch {
    return false
  }
}
