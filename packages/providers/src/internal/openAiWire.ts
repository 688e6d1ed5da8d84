/**
 * The Chat Completions wire format: the request body built from a `ModelRequest`, and the
 * decoder of the streamed `chat.completion.chunk`s (OpenAI and the servers that copy it, with
 * their differences: see the fixtures' README).
 */
import type { Message, ModelErrorReason, ModelEvent, ModelRequest, StopReason, Usage } from "@agentloop/core"
import { Result, Schema } from "effect"
import type { Sse } from "effect/encoding"
import { MessageAssembly } from "./assembly.ts"
import type { Cleaner } from "./text.ts"
import { fail, finish, isJsonObject, isOptionalFinite, isOptionalString, parseEventData, proceed } from "./transport.ts"
import type { Step, WireProtocol } from "./transport.ts"

// -----------------------------------------------------------------------------
// Request
// -----------------------------------------------------------------------------

/** What shapes the request body besides the transcript. */
export interface ChatSettings {
  readonly model: string
  readonly maxTokens: number | undefined
  readonly maxTokensField: "max_tokens" | "max_completion_tokens"
  readonly temperature: number | undefined
  readonly includeUsage: boolean
  readonly reasoningEffort: "low" | "medium" | "high" | undefined
}

type ChatContentPart =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "image_url"; readonly image_url: { readonly url: string } }

type ChatMessage =
  | { readonly role: "system"; readonly content: string }
  | { readonly role: "user"; readonly content: string | ReadonlyArray<ChatContentPart> }
  | {
    readonly role: "assistant"
    readonly content: string | null
    readonly tool_calls?: ReadonlyArray<{
      readonly id: string
      readonly type: "function"
      readonly function: { readonly name: string; readonly arguments: string }
    }>
  }
  | { readonly role: "tool"; readonly tool_call_id: string; readonly content: string }

const imagePart = (image: { readonly data: string; readonly mimeType: string }): ChatContentPart => ({
  type: "image_url",
  image_url: { url: `data:${image.mimeType};base64,${image.data}` }
})

/**
 * The transcript as Chat Completions messages. Thinking is not sent back (Chat Completions has
 * no field for it). Tool messages carry text only; images a tool returned follow the block of
 * tool messages as one user message. An assistant message with nothing to say is left out.
 */
export const toChatMessages = (
  systemPrompt: string | undefined,
  messages: ReadonlyArray<Message>
): Array<ChatMessage> => {
  const out: Array<ChatMessage> = []
  if (systemPrompt !== undefined && systemPrompt.length > 0) out.push({ role: "system", content: systemPrompt })
  let toolImages: Array<ChatContentPart> = []
  const flushToolImages = () => {
    if (toolImages.length > 0) out.push({ role: "user", content: toolImages })
    toolImages = []
  }
  for (const message of messages) {
    if (message.role !== "toolResult") flushToolImages()
    switch (message.role) {
      case "user":
        out.push({
          role: "user",
          content: typeof message.content === "string" ?
            message.content :
            message.content.map((part) => (part.type === "text" ? { type: "text", text: part.text } : imagePart(part)))
        })
        break
      case "assistant": {
        const text = message.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("")
        const calls = message.content.flatMap((part) =>
          part.type === "toolCall" ?
            [{
              id: part.id,
              type: "function" as const,
              function: { name: part.name, arguments: JSON.stringify(part.arguments) }
            }] :
            []
        )
        if (text.length === 0 && calls.length === 0) break
        out.push({
          role: "assistant",
          content: text.length > 0 ? text : null,
          ...(calls.length > 0 ? { tool_calls: calls } : {})
        })
        break
      }
      case "toolResult": {
        const images = message.content.filter((part) => part.type === "image")
        const text = message.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("\n")
        out.push({
          role: "tool",
          tool_call_id: message.toolCallId,
          content: text.length > 0 || images.length === 0 ? text : "(the result is the attached image)"
        })
        if (images.length > 0) {
          toolImages.push({
            type: "text",
            text: `Images from the result of tool call "${message.toolCallId}" (${message.toolName}):`
          })
          for (const image of images) toolImages.push(imagePart(image))
        }
        break
      }
    }
  }
  flushToolImages()
  return out
}

/** The request body, in the key order OpenAI documents. */
export const chatRequestBody = (request: ModelRequest, settings: ChatSettings): Record<string, unknown> => ({
  model: settings.model,
  messages: toChatMessages(request.systemPrompt, request.messages),
  ...(request.tools.length > 0 ?
    {
      tools: request.tools.map((tool) => ({
        type: "function",
        function: { name: tool.name, description: tool.description, parameters: tool.parameters }
      }))
    } :
    {}),
  ...(settings.maxTokens === undefined ? {} : { [settings.maxTokensField]: settings.maxTokens }),
  ...(settings.temperature === undefined ? {} : { temperature: settings.temperature }),
  ...(settings.reasoningEffort === undefined ? {} : { reasoning_effort: settings.reasoningEffort }),
  stream: true,
  ...(settings.includeUsage ? { stream_options: { include_usage: true } } : {})
})

// -----------------------------------------------------------------------------
// Stream
// -----------------------------------------------------------------------------

const OptionalString = Schema.optional(Schema.NullOr(Schema.String))
const OptionalNumber = Schema.optional(Schema.NullOr(Schema.Finite))

const WireToolCall = Schema.Struct({
  index: OptionalNumber,
  id: OptionalString,
  function: Schema.optional(Schema.NullOr(Schema.Struct({ name: OptionalString, arguments: OptionalString })))
})

const WireChunk = Schema.Struct({
  model: OptionalString,
  choices: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
    index: OptionalNumber,
    delta: Schema.optional(Schema.NullOr(Schema.Struct({
      content: OptionalString,
      reasoning_content: OptionalString,
      reasoning: OptionalString,
      refusal: OptionalString,
      tool_calls: Schema.optional(Schema.NullOr(Schema.Array(WireToolCall)))
    }))),
    finish_reason: OptionalString
  })))),
  usage: Schema.optional(Schema.NullOr(Schema.Struct({
    prompt_tokens: OptionalNumber,
    completion_tokens: OptionalNumber,
    prompt_tokens_details: Schema.optional(Schema.NullOr(Schema.Struct({ cached_tokens: OptionalNumber }))),
    prompt_cache_hit_tokens: OptionalNumber
  }))),
  error: Schema.optional(Schema.NullOr(Schema.Union([
    Schema.String,
    Schema.Struct({ message: OptionalString, type: OptionalString, code: Schema.optional(Schema.Unknown) })
  ])))
})
type WireChunk = typeof WireChunk.Type

const decodeChunk = Schema.decodeUnknownResult(WireChunk)

const isOptionalToolCalls = (u: unknown): boolean => {
  if (u === undefined || u === null) return true
  if (!Array.isArray(u)) return false
  for (const call of u) {
    if (!isJsonObject(call) || !isOptionalFinite(call["index"]) || !isOptionalString(call["id"])) return false
    const fn = call["function"]
    if (fn !== undefined && fn !== null) {
      if (!isJsonObject(fn) || !isOptionalString(fn["name"]) || !isOptionalString(fn["arguments"])) return false
    }
  }
  return true
}

/**
 * The fast check of the chunks that make up most of a stream (content and tool-call deltas, the
 * finish reason): the chunk itself when it has `WireChunk`'s shape for sure, else `undefined`
 * (the schema decides). Chunks with `usage` or `error` (one or two a stream) always go to the schema.
 */
export const fastChunk = (u: unknown): WireChunk | undefined => {
  if (!isJsonObject(u) || !isOptionalString(u["model"])) return undefined
  if ((u["usage"] !== undefined && u["usage"] !== null) || (u["error"] !== undefined && u["error"] !== null)) {
    return undefined
  }
  const choices = u["choices"]
  if (choices !== undefined && choices !== null) {
    if (!Array.isArray(choices)) return undefined
    for (const choice of choices) {
      if (!isJsonObject(choice) || !isOptionalFinite(choice["index"]) || !isOptionalString(choice["finish_reason"])) {
        return undefined
      }
      const delta = choice["delta"]
      if (delta !== undefined && delta !== null) {
        if (
          !isJsonObject(delta) || !isOptionalString(delta["content"]) ||
          !isOptionalString(delta["reasoning_content"]) ||
          !isOptionalString(delta["reasoning"]) || !isOptionalString(delta["refusal"]) ||
          !isOptionalToolCalls(delta["tool_calls"])
        ) return undefined
      }
    }
  }
  return u as WireChunk
}

const usageOf = (usage: NonNullable<WireChunk["usage"]>): Usage => {
  // OpenAI reports cached prompt tokens in prompt_tokens_details, DeepSeek as prompt_cache_hit_tokens
  const cached = usage.prompt_tokens_details?.cached_tokens ?? usage.prompt_cache_hit_tokens ?? undefined
  return {
    input: (usage.prompt_tokens ?? 0) - (cached ?? 0),
    output: usage.completion_tokens ?? 0,
    ...(cached === undefined ? {} : { cacheRead: cached })
  }
}

/** Finish reasons that mean the model ended its answer on its own (vendors and local servers differ). */
export const chatStopReasons: ReadonlyArray<string> = ["stop", "eos", "eos_token", "end_turn", "stop_sequence"]

/**
 * SPEC stop mapping for Chat Completions: `chatStopReasons` (`stop` and the synonyms local servers
 * use) → stop, `tool_calls` / `function_call` → toolUse, `length` / `max_tokens` → length,
 * `content_filter` → error. Local servers (older Ollama and vLLM builds, Kimi via OpenRouter) end
 * tool calls with `stop` or with no finish reason at all: when the message holds tool calls those
 * become toolUse, otherwise stop. Any other finish reason is an error naming it: the answer may
 * be cut short for a reason the client does not know.
 */
export const chatStopReason = (
  finishReason: string | undefined,
  hasToolCalls: boolean
): { readonly stopReason: StopReason; readonly unknown?: string } => {
  if (finishReason === undefined || chatStopReasons.includes(finishReason)) {
    return { stopReason: hasToolCalls ? "toolUse" : "stop" }
  }
  switch (finishReason) {
    case "tool_calls":
    case "function_call":
      return { stopReason: "toolUse" }
    case "length":
    case "max_tokens":
      return { stopReason: "length" }
    case "content_filter":
      return { stopReason: "error" }
    default:
      return { stopReason: "error", unknown: finishReason }
  }
}

const wireErrorReason = (label: string): ModelErrorReason =>
  /rate_limit|429/i.test(label) ?
    "rate_limit" :
    /overloaded|unavailable|503/i.test(label) ?
    "overloaded" :
    /timeout|408/i.test(label) ?
    "timeout" :
    "server"

const retryableErrorCode = (error: Exclude<NonNullable<WireChunk["error"]>, string>): boolean => {
  const code = error.code
  if (typeof code === "number") return code === 408 || code === 429 || code >= 500
  const label = `${typeof code === "string" ? code : ""} ${error.type ?? ""}`
  return /rate_limit|overloaded|server_error|timeout|unavailable/i.test(label)
}

/** The decoder of one Chat Completions stream. */
export const chatProtocol = (options: {
  readonly provider: string
  readonly model: string
  readonly timestamp: number
  readonly idPrefix: string
  readonly clean: Cleaner
  /** Whether hand-written checks may vouch for common chunks (default true; false: the schema decodes every chunk). */
  readonly fastChecks?: boolean
}): WireProtocol => {
  const fast = options.fastChecks === false ? undefined : fastChunk
  const assembly = new MessageAssembly(options.idPrefix)
  const toolKeys = new Map<number | string, string>()
  let lastToolKey: string | undefined
  let finishReason: string | undefined
  let usage: Usage | undefined
  let model: string | undefined
  let error: string | undefined
  let emitted = 0

  const toolKey = (call: typeof WireToolCall.Type, position: number): string => {
    const id = call.id ?? ""
    let slot: number | string
    if (typeof call.index === "number") slot = call.index
    else if (id !== "") slot = `id:${id}` // no index (Mistral): the call with this id
    else if (lastToolKey !== undefined) return lastToolKey // no index, no id: a continuation
    else slot = position
    let key = toolKeys.get(slot) ?? `tool:${slot}`
    // another id at a known index is another call (servers that send every call at index 0)
    const known = assembly.toolCallIdOf(key)
    if (known !== undefined && id !== "" && id !== known) key = `tool:${slot}:${id}`
    toolKeys.set(slot, key)
    lastToolKey = key
    return key
  }

  const complete = () => finishReason !== undefined || error !== undefined

  const finalize = (out: Array<ModelEvent>): Step => {
    const mapped = chatStopReason(finishReason, assembly.hasToolCalls())
    const stopReason: StopReason = error !== undefined ? "error" : mapped.stopReason
    const errorMessage = error !== undefined ?
      `${options.provider} reported an error in the stream: ${error}` :
      finishReason === "content_filter" ?
      `${options.provider} stopped the response with its content filter` :
      mapped.unknown !== undefined ?
      `${options.provider} ended the turn with an unknown finish reason "${options.clean(mapped.unknown, 100)}"` :
      undefined
    const message = assembly.finish({
      stopReason,
      errorMessage,
      usage,
      model: model ?? options.model,
      timestamp: options.timestamp
    })
    out.push({ type: "done", message })
    return finish
  }

  const onChunk = (chunk: WireChunk, events: Array<ModelEvent>): Step => {
    const before = events.length
    if (model === undefined && typeof chunk.model === "string" && chunk.model.length > 0) model = chunk.model
    if (chunk.usage !== undefined && chunk.usage !== null) usage = usageOf(chunk.usage)
    const choice = chunk.choices?.find((c) => (c.index ?? 0) === 0)
    if (choice !== undefined) {
      const delta = choice.delta
      if (delta !== undefined && delta !== null) {
        assembly.thinking("reasoning", delta.reasoning_content || delta.reasoning || "", events)
        assembly.text("text", delta.content ?? "", events)
        assembly.text("text", delta.refusal ?? "", events)
        const calls = delta.tool_calls
        if (calls !== undefined && calls !== null) {
          calls.forEach((call, position) => {
            assembly.toolCall(toolKey(call, position), {
              id: call.id,
              name: call.function?.name,
              fragment: call.function?.arguments
            }, events)
          })
        }
      }
      if (finishReason === undefined && typeof choice.finish_reason === "string" && choice.finish_reason !== "") {
        finishReason = choice.finish_reason
      }
    }
    if (chunk.error !== undefined && chunk.error !== null && error === undefined) {
      const wireError = chunk.error
      if (typeof wireError !== "string" && emitted + events.length - before === 0 && retryableErrorCode(wireError)) {
        const text = options.clean(wireError.message ?? "unknown error")
        const label = `${String(wireError.code ?? "")} ${wireError.type ?? ""} ${text}`
        return fail(`${options.provider} reported an error in the stream: ${text}`, wireErrorReason(label), true)
      }
      const code = typeof wireError === "string" ? undefined : wireError.code
      const text = typeof wireError === "string" ? wireError : wireError.message ?? wireError.type ?? "unknown error"
      const codeNote = typeof code === "string" || typeof code === "number"
        ? ` (code ${options.clean(String(code), 100)})`
        : ""
      error = `${options.clean(text)}${codeNote}`
    }
    emitted += events.length - before
    return proceed
  }

  return {
    onEvent: (event: Sse.Event, out: Array<ModelEvent>) => {
      const data = event.data.trim()
      if (data === "[DONE]") return finalize(out)
      const chunk = parseEventData(options.provider, options.clean, data, decodeChunk, fast)
      return Result.isFailure(chunk) ? fail(chunk.failure, "protocol") : onChunk(chunk.success, out)
    },
    onEnd: (out: Array<ModelEvent>) =>
      complete() ?
        finalize(out) :
        fail(`the stream from ${options.provider} ended before the response was complete`, "network", true),
    complete
  }
}
