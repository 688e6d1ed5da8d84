/**
 * Fast structural checks for the transcript's schemas, for the hot path: the loop checks every
 * input message, every final message and every tool result, and decoding with the effect
 * `Schema` costs about a microsecond per message (most of a resumed run's time on a long
 * transcript). Not part of the public API.
 *
 * This is a shortcut beside the real thing, and the only one: the schemas in Message.ts define a
 * message's shape, and nothing else in the packages restates it. Each message guard accepts a
 * value exactly when the corresponding schema decodes it; when it says no, the caller decodes with
 * the schema, which words the error. Guards.test.ts holds them to that on values generated from
 * the schemas themselves and on perturbations of them (both directions), and
 * Transcript.soundPath.test.ts holds `isSoundTranscriptFast` to `prepareTranscript`'s schema
 * check. So they mirror the schemas: an object is a non-null non-array object, a key is present
 * when `key in value` (the schema's rule), extra keys are ignored, an optional key present with
 * `undefined` is rejected, numbers are finite, identifiers and tool names non-empty. Anything that
 * throws while being read (a getter) is left to the schema. A change to a schema in Message.ts
 * that these do not follow fails those tests.
 */
import type { AssistantMessage, Message, ToolResultMessage } from "../../Message.ts"
import type { ToolDefinition } from "../../Model.ts"

/**
 * A non-null non-array object, read by known names.
 *
 * @internal
 */
export interface Obj {
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

const isArray = Array.isArray
const isObject = (u: unknown): u is Obj => typeof u === "object" && u !== null && !isArray(u)
const isNonEmptyString = (u: unknown): u is string => typeof u === "string" && u.length >= 1
/** `x - x` is `0` for a finite number and `NaN` for `NaN` and the infinities: no call. */
const isFiniteNumber = (u: unknown): boolean => typeof u === "number" && u - u === 0

// These run for every input message, and on a resumed run they run mostly in V8's interpreter and
// baseline tiers (a fresh process does not optimize them in time), where each call and each
// property read costs. So each role is one flat function with the common shapes inline: one read
// per field, the optional keys tested with `in` only when the read gives `undefined` (a present
// key's value decides), and the content parts checked in a loop with no helper call. Every
// property is read with a literal name (not through a helper taking the key), so each read site
// stays monomorphic or polymorphic for V8.

/** `Array(Union([TextContent, ImageContent]))` */
const isResultContent = (u: unknown): boolean => {
  if (!isArray(u)) return false
  for (let i = 0; i < u.length; i++) {
    const part: unknown = u[i]
    if (typeof part !== "object" || part === null || isArray(part)) return false
    const type = (part as Obj).type
    if (type === "text") {
      if (typeof (part as Obj).text !== "string") return false
    } else if (type === "image") {
      if (typeof (part as Obj).data !== "string" || typeof (part as Obj).mimeType !== "string") return false
    } else return false
  }
  return true
}

/** `Array(Union([TextContent, ThinkingContent, ToolCall]))` */
const isAssistantContent = (u: unknown): boolean => {
  if (!isArray(u)) return false
  for (let i = 0; i < u.length; i++) {
    const part: unknown = u[i]
    if (typeof part !== "object" || part === null || isArray(part)) return false
    const o = part as Obj
    const type = o.type
    if (type === "toolCall") {
      const id = o.id
      const name = o.name
      const args = o.arguments
      if (
        typeof id !== "string" || id.length === 0 || typeof name !== "string" || name.length === 0 ||
        typeof args !== "object" || args === null || isArray(args)
      ) return false
    } else if (type === "text") {
      if (typeof o.text !== "string") return false
    } else if (type === "thinking") {
      if (typeof o.thinking !== "string") return false
      const signature = o.signature
      if (signature === undefined ? "signature" in o : typeof signature !== "string") return false
      const redacted = o.redacted
      if (redacted === undefined ? "redacted" in o : typeof redacted !== "boolean") return false
    } else return false
  }
  return true
}

const isUsage = (u: unknown): boolean =>
  isObject(u) && isFiniteNumber(u.input) && isFiniteNumber(u.output) &&
  (isFiniteNumber(u.cacheRead) || !("cacheRead" in u)) && (isFiniteNumber(u.cacheWrite) || !("cacheWrite" in u)) &&
  (isFiniteNumber(u.cost) || !("cost" in u))

/**
 * The fields of a user message (`o` is a non-null non-array object whose `role` is `"user"`):
 * with that, true only if `Message` decodes `o`. May throw on a value whose reading throws.
 * `timestamp: optionalKey(Finite)` here and in the two other roles.
 *
 * @internal
 */
export const isUserFields = (o: Obj): boolean => {
  const content = o.content
  if (typeof content !== "string" && !isResultContent(content)) return false
  const timestamp = o.timestamp
  return timestamp === undefined ? !("timestamp" in o) : typeof timestamp === "number" && timestamp - timestamp === 0
}

/**
 * The fields of an assistant message (`o` is a non-null non-array object whose `role` is
 * `"assistant"`): with that, true only if `AssistantMessage` decodes `o`. May throw on a value
 * whose reading throws.
 *
 * @internal
 */
export const isAssistantFields = (o: Obj): boolean => {
  if (!isAssistantContent(o.content)) return false
  const stopReason = o.stopReason
  if (
    stopReason !== "toolUse" && stopReason !== "stop" && stopReason !== "length" && stopReason !== "error" &&
    stopReason !== "aborted"
  ) return false
  const errorMessage = o.errorMessage
  if (errorMessage === undefined ? "errorMessage" in o : typeof errorMessage !== "string") return false
  const usage = o.usage
  if (usage === undefined ? "usage" in o : !isUsage(usage)) return false
  const model = o.model
  if (model === undefined ? "model" in o : typeof model !== "string") return false
  const timestamp = o.timestamp
  return timestamp === undefined ? !("timestamp" in o) : typeof timestamp === "number" && timestamp - timestamp === 0
}

/**
 * The fields of a tool result message (`o` is a non-null non-array object whose `role` is
 * `"toolResult"`): with that, true only if `ToolResultMessage` decodes `o`. May throw on a value
 * whose reading throws.
 *
 * @internal
 */
export const isToolResultFields = (o: Obj): boolean => {
  const toolCallId = o.toolCallId
  const toolName = o.toolName
  if (
    typeof toolCallId !== "string" || toolCallId.length === 0 || typeof toolName !== "string" ||
    toolName.length === 0 || typeof o.isError !== "boolean" || !isResultContent(o.content)
  ) return false
  // `details` is `optionalKey(Unknown)`: anything, or absent
  const timestamp = o.timestamp
  return timestamp === undefined ? !("timestamp" in o) : typeof timestamp === "number" && timestamp - timestamp === 0
}

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
  if (typeof u !== "object" || u === null || isArray(u)) return false
  const o = u as Obj
  switch (o.role) {
    case "user":
      return isUserFields(o)
    case "assistant":
      return isAssistantFields(o)
    case "toolResult":
      return isToolResultFields(o)
    default:
      return false
  }
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
 * The common case of `prepareTranscript` in one allocation-free pass: every message passes its
 * fast guard, no result is out of place, and each assistant message (of at most 8 calls, with
 * distinct ids) is followed by exactly its results, in call order, naming the right tool. Then
 * the transcript needs no repair. Anything else returns false and the full procedure decides (and
 * words the error), so this changes no outcome. Transcript.soundPath.test.ts compares it with the
 * schema.
 *
 * @internal
 */
export const isSoundTranscriptFast = (input: ReadonlyArray<unknown>): boolean => {
  // The guards' per-role checks are called directly (one role read, no dispatch): on a resumed
  // run this loop runs mostly unoptimized, where every call and property read counts.
  try {
    const length = input.length
    let i = 0
    while (i < length) {
      const message = input[i++]
      if (typeof message !== "object" || message === null || Array.isArray(message)) return false
      const role = (message as Obj).role
      if (role === "user") {
        if (!isUserFields(message as Obj)) return false
        continue
      }
      if (role !== "assistant") return false
      if (!isAssistantFields(message as Obj)) return false
      const content = (message as AssistantMessage).content
      let calls = 0
      for (let p = 0; p < content.length; p++) {
        const part = content[p]!
        if (part.type !== "toolCall") continue
        if (++calls > 8) return false
        const id = part.id
        for (let q = 0; q < p; q++) {
          const other = content[q]!
          if (other.type === "toolCall" && other.id === id) return false
        }
        const result = input[i++]
        if (
          typeof result !== "object" || result === null || Array.isArray(result) ||
          (result as Obj).role !== "toolResult" ||
          !isToolResultFields(result as Obj) ||
          (result as ToolResultMessage).toolCallId !== id || (result as ToolResultMessage).toolName !== part.name
        ) return false
      }
      // a result after the block is out of place (the next pass guards the message itself)
      const next = input[i] as { readonly role?: unknown } | null | undefined
      if (typeof next === "object" && next !== null && next.role === "toolResult") return false
    }
    return true
  } catch {
    // a value whose reading throws: the full procedure reports it
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
