/**
 * The Anthropic Messages wire format: the request body built from a `ModelRequest`, and the
 * decoder of the streamed events (`message_start`, `content_block_*`, `message_delta`,
 * `message_stop`, `ping`, `error`).
 */
import type { Message, ModelErrorReason, ModelEvent, ModelRequest, StopReason, Usage } from "@agentloop/core"
import { Result, Schema } from "effect"
import type { Sse } from "effect/encoding"
import { MessageAssembly } from "./assembly.ts"
import { clip } from "./text.ts"
import type { Cleaner } from "./text.ts"
import {
  decodeEvent,
  fail,
  finish,
  isJsonObject,
  isOptionalString,
  notJson,
  notJsonMessage,
  parseJson,
  proceed
} from "./transport.ts"
import type { Step, WireProtocol } from "./transport.ts"

// -----------------------------------------------------------------------------
// Request
// -----------------------------------------------------------------------------

/** What shapes the request body besides the transcript. */
export interface MessagesSettings {
  readonly model: string
  readonly maxTokens: number
  readonly temperature: number | undefined
  readonly thinkingBudget: number | undefined
  readonly promptCaching: boolean
}

/** The marker of a prompt-cache breakpoint: the prefix up to and including the block is cached. */
const cacheControl = { type: "ephemeral" } as const

type Block =
  & (
    | { readonly type: "text"; readonly text: string }
    | {
      readonly type: "image"
      readonly source: { readonly type: "base64"; readonly media_type: string; readonly data: string }
    }
    | { readonly type: "thinking"; readonly thinking: string; readonly signature: string }
    | { readonly type: "redacted_thinking"; readonly data: string }
    | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: unknown }
    | {
      readonly type: "tool_result"
      readonly tool_use_id: string
      readonly content?: ReadonlyArray<Block>
      readonly is_error?: true
    }
  )
  & { readonly cache_control?: typeof cacheControl }

type WireMessage = { readonly role: "user" | "assistant"; readonly content: string | ReadonlyArray<Block> }

type Part = Message["content"][number]

/** Anthropic rejects empty text blocks. */
const userBlock = (part: Extract<Part, { type: "text" | "image" }>): ReadonlyArray<Block> =>
  part.type === "text" ?
    (part.text.length > 0 ? [{ type: "text", text: part.text }] : []) :
    [{ type: "image", source: { type: "base64", media_type: part.mimeType, data: part.data } }]

/**
 * The transcript as Messages API messages. Tool results become `tool_result` blocks of one user
 * message following the assistant message. Thinking is replayed only with its signature
 * (`thinking`) or as `redacted_thinking`; thinking without a signature (from another provider)
 * cannot be verified by Anthropic and is left out. An assistant message with no blocks left is
 * left out.
 */
export const toAnthropicMessages = (
  messages: ReadonlyArray<Message>,
  options: { readonly textAsBlocks: boolean } = { textAsBlocks: false }
): Array<WireMessage> => {
  const out: Array<WireMessage> = []
  let results: Array<Block> = []
  const flushResults = () => {
    if (results.length > 0) out.push({ role: "user", content: results })
    results = []
  }
  for (const message of messages) {
    if (message.role !== "toolResult") flushResults()
    switch (message.role) {
      case "user":
        out.push({
          role: "user",
          content: typeof message.content === "string" ?
            (options.textAsBlocks ? userBlock({ type: "text", text: message.content }) : message.content) :
            message.content.flatMap(userBlock)
        })
        break
      case "assistant": {
        const blocks = message.content.flatMap((part): ReadonlyArray<Block> => {
          switch (part.type) {
            case "text":
              return part.text.length > 0 ? [{ type: "text", text: part.text }] : []
            case "thinking":
              return part.redacted === true && part.signature !== undefined ?
                [{ type: "redacted_thinking", data: part.signature }] :
                part.signature !== undefined && part.signature.length > 0 ?
                [{ type: "thinking", thinking: part.thinking, signature: part.signature }] :
                []
            case "toolCall":
              return [{ type: "tool_use", id: part.id, name: part.name, input: part.arguments }]
          }
        })
        if (blocks.length > 0) out.push({ role: "assistant", content: blocks })
        break
      }
      case "toolResult": {
        const content = message.content.flatMap(userBlock)
        results.push({
          type: "tool_result",
          tool_use_id: message.toolCallId,
          ...(content.length > 0 ? { content } : {}),
          ...(message.isError ? { is_error: true as const } : {})
        })
        break
      }
    }
  }
  flushResults()
  return out
}

/**
 * How many of the latest user turns get a cache breakpoint (with the system prompt and the tools: 4, the API's
 * maximum).
 */
const CACHED_TURNS = 2

/**
 * The messages with a cache breakpoint on the last block of each of the `CACHED_TURNS` latest user
 * messages (tool results included). The latest caches the whole prompt for the next request; the
 * one before it is where the previous request wrote its cache, so this request reads it.
 */
const withTurnBreakpoints = (messages: ReadonlyArray<WireMessage>): Array<WireMessage> => {
  const out = [...messages]
  let marked = 0
  for (let i = out.length - 1; i >= 0 && marked < CACHED_TURNS; i--) {
    const message = out[i]!
    if (message.role !== "user" || typeof message.content === "string" || message.content.length === 0) continue
    const blocks = [...message.content]
    blocks[blocks.length - 1] = { ...blocks[blocks.length - 1]!, cache_control: cacheControl }
    out[i] = { role: "user", content: blocks }
    marked++
  }
  return out
}

/**
 * The request body, in the key order Anthropic documents. With prompt caching, breakpoints go on
 * the last tool definition, the system prompt (sent as a text block) and the latest user turns;
 * user text is always sent as blocks so that a turn reads the same whether or not it carries the
 * breakpoint (the cached prefix must not change under the cache).
 */
export const messagesRequestBody = (request: ModelRequest, settings: MessagesSettings): Record<string, unknown> => {
  const caching = settings.promptCaching
  const hasSystem = request.systemPrompt !== undefined && request.systemPrompt.length > 0
  const messages = toAnthropicMessages(request.messages, { textAsBlocks: caching })
  const tools = request.tools.map((tool, index) => ({
    name: tool.name,
    description: tool.description,
    input_schema: tool.parameters,
    ...(caching && index === request.tools.length - 1 ? { cache_control: cacheControl } : {})
  }))
  return {
    model: settings.model,
    max_tokens: settings.maxTokens,
    ...(!hasSystem ?
      {} :
      caching ?
      { system: [{ type: "text", text: request.systemPrompt, cache_control: cacheControl }] } :
      { system: request.systemPrompt }),
    messages: caching ? withTurnBreakpoints(messages) : messages,
    ...(tools.length > 0 ? { tools } : {}),
    ...(settings.temperature === undefined ? {} : { temperature: settings.temperature }),
    ...(settings.thinkingBudget === undefined ?
      {} :
      { thinking: { type: "enabled", budget_tokens: settings.thinkingBudget } }),
    stream: true
  }
}

// -----------------------------------------------------------------------------
// Stream
// -----------------------------------------------------------------------------

const OptionalString = Schema.optional(Schema.NullOr(Schema.String))
const OptionalNumber = Schema.optional(Schema.NullOr(Schema.Finite))

const WireUsage = Schema.Struct({
  input_tokens: OptionalNumber,
  output_tokens: OptionalNumber,
  cache_read_input_tokens: OptionalNumber,
  cache_creation_input_tokens: OptionalNumber
})
type WireUsage = typeof WireUsage.Type

const Envelope = Schema.Struct({ type: Schema.String })

const MessageStart = Schema.Struct({
  message: Schema.Struct({ model: OptionalString, usage: Schema.optional(Schema.NullOr(WireUsage)) })
})
const BlockStart = Schema.Struct({
  index: Schema.Finite,
  content_block: Schema.Struct({
    type: Schema.String,
    id: OptionalString,
    name: OptionalString,
    input: Schema.optional(Schema.Unknown),
    text: OptionalString,
    thinking: OptionalString,
    signature: OptionalString,
    data: OptionalString
  })
})
const BlockDelta = Schema.Struct({
  index: Schema.Finite,
  delta: Schema.Struct({
    type: Schema.String,
    text: OptionalString,
    thinking: OptionalString,
    signature: OptionalString,
    partial_json: OptionalString
  })
})
const MessageDelta = Schema.Struct({
  delta: Schema.Struct({ stop_reason: OptionalString }),
  usage: Schema.optional(Schema.NullOr(WireUsage))
})
const ErrorEvent = Schema.Struct({ error: Schema.Struct({ type: OptionalString, message: OptionalString }) })

/**
 * The fast check of the event that makes up most of a stream (`content_block_delta`): the event
 * itself when it has `BlockDelta`'s shape for sure, else `undefined` (the schema decides).
 */
export const fastBlockDelta = (u: unknown): typeof BlockDelta.Type | undefined => {
  if (!isJsonObject(u)) return undefined
  const index = u["index"]
  const delta = u["delta"]
  if (typeof index !== "number" || !Number.isFinite(index) || !isJsonObject(delta)) return undefined
  return typeof delta["type"] === "string" && isOptionalString(delta["text"]) &&
      isOptionalString(delta["thinking"]) && isOptionalString(delta["signature"]) &&
      isOptionalString(delta["partial_json"]) ?
    u as typeof BlockDelta.Type :
    undefined
}

const decoders = {
  envelope: Schema.decodeUnknownResult(Envelope),
  message_start: Schema.decodeUnknownResult(MessageStart),
  content_block_start: Schema.decodeUnknownResult(BlockStart),
  content_block_delta: Schema.decodeUnknownResult(BlockDelta),
  message_delta: Schema.decodeUnknownResult(MessageDelta),
  error: Schema.decodeUnknownResult(ErrorEvent)
}

/**
 * SPEC stop mapping for Messages: `end_turn` and `stop_sequence` → stop, `tool_use` → toolUse,
 * `max_tokens` (and `model_context_window_exceeded`) → length, `refusal` → error. Any other
 * reason (`pause_turn`, which only server tools produce, or a future one) is an error naming it.
 */
export const anthropicStopReason = (
  stopReason: string
): { readonly stopReason: StopReason; readonly error?: string } => {
  switch (stopReason) {
    case "end_turn":
    case "stop_sequence":
      return { stopReason: "stop" }
    case "tool_use":
      return { stopReason: "toolUse" }
    case "max_tokens":
    case "model_context_window_exceeded":
      return { stopReason: "length" }
    case "refusal":
      return { stopReason: "error", error: "Anthropic: the model refused to answer (stop reason \"refusal\")" }
    default:
      return {
        stopReason: "error",
        error: `Anthropic ended the turn with an unsupported stop reason "${clip(stopReason, 100)}"`
      }
  }
}

/** The in-band error types worth a retry (when nothing was streamed yet), and what they mean. */
const retryableErrorTypes: Readonly<Record<string, ModelErrorReason>> = {
  overloaded_error: "overloaded",
  api_error: "server",
  rate_limit_error: "rate_limit",
  timeout_error: "timeout"
}

/** The decoder of one Messages stream. */
export const messagesProtocol = (options: {
  readonly provider: string
  readonly model: string
  readonly timestamp: number
  readonly idPrefix: string
  readonly clean: Cleaner
  /** Whether hand-written checks may vouch for common events (default true; false: the schema decodes every event). */
  readonly fastChecks?: boolean
}): WireProtocol => {
  const fast = options.fastChecks ?? true
  const assembly = new MessageAssembly(options.idPrefix)
  const usage: { input?: number; output?: number; cacheRead?: number; cacheWrite?: number } = {}
  let wireStop: string | undefined
  let model: string | undefined
  let emitted = 0

  const addUsage = (wire: WireUsage | null | undefined) => {
    if (wire === undefined || wire === null) return
    if (typeof wire.input_tokens === "number") usage.input = wire.input_tokens
    if (typeof wire.output_tokens === "number") usage.output = wire.output_tokens
    if (typeof wire.cache_read_input_tokens === "number") usage.cacheRead = wire.cache_read_input_tokens
    if (typeof wire.cache_creation_input_tokens === "number") usage.cacheWrite = wire.cache_creation_input_tokens
  }

  const finalize = (out: Array<ModelEvent>, inBandError?: string): Step => {
    const mapped = inBandError !== undefined ?
      { stopReason: "error" as const, error: inBandError } :
      anthropicStopReason(wireStop ?? "")
    const finalUsage: Usage | undefined = usage.input === undefined && usage.output === undefined ?
      undefined :
      {
        input: usage.input ?? 0,
        output: usage.output ?? 0,
        ...(usage.cacheRead === undefined ? {} : { cacheRead: usage.cacheRead }),
        ...(usage.cacheWrite === undefined ? {} : { cacheWrite: usage.cacheWrite })
      }
    const message = assembly.finish({
      stopReason: mapped.stopReason,
      errorMessage: mapped.error,
      usage: finalUsage,
      model: model ?? options.model,
      timestamp: options.timestamp
    })
    out.push({ type: "done", message })
    return finish
  }

  const decode = <A>(
    json: unknown,
    decoder: (u: unknown) => Result.Result<A, Schema.SchemaError>,
    check?: (u: unknown) => A | undefined
  ) => decodeEvent(options.provider, options.clean, json, fast ? check : undefined, decoder)

  const typeOf = (json: unknown): Result.Result<string, string> =>
    Result.map(decode(json, decoders.envelope), (envelope) => envelope.type)

  // one key string per content block index, not one per event
  const blockKeys: Array<string> = []
  const keyOf = (index: number): string =>
    Number.isInteger(index) && index >= 0 && index < 1024 ?
      (blockKeys[index] ??= `block:${index}`) :
      `block:${index}`

  const onBlockDelta = (event: typeof BlockDelta.Type, events: Array<ModelEvent>): void => {
    const key = keyOf(event.index)
    const delta = event.delta
    switch (delta.type) {
      case "text_delta":
        assembly.text(key, delta.text ?? "", events)
        break
      case "thinking_delta":
        assembly.thinking(key, delta.thinking ?? "", events)
        break
      case "signature_delta":
        assembly.signature(key, delta.signature ?? "")
        break
      case "input_json_delta":
        assembly.toolCall(key, { fragment: delta.partial_json }, events)
        break
    }
  }

  const onEvent = (data: string, events: Array<ModelEvent>): Step => {
    // the JSON is parsed once, then decoded by the shape its `type` names
    const json = parseJson(data)
    if (json === notJson) return fail(notJsonMessage(options.provider, options.clean, data), "protocol")
    const before = events.length
    // the event most of a stream is made of, without a `Result` per step
    const quick = fast && isJsonObject(json) && json["type"] === "content_block_delta"
      ? fastBlockDelta(json)
      : undefined
    if (quick !== undefined) {
      onBlockDelta(quick, events)
      emitted += events.length - before
      return proceed
    }
    const type = fast && isJsonObject(json) && typeof json["type"] === "string" ?
      Result.succeed(json["type"]) :
      typeOf(json)
    if (Result.isFailure(type)) return fail(type.failure, "protocol")
    switch (type.success) {
      case "message_start": {
        const event = decode(json, decoders.message_start)
        if (Result.isFailure(event)) return fail(event.failure, "protocol")
        const start = event.success.message
        if (typeof start.model === "string" && start.model.length > 0) model = start.model
        addUsage(start.usage)
        break
      }
      case "content_block_start": {
        const event = decode(json, decoders.content_block_start)
        if (Result.isFailure(event)) return fail(event.failure, "protocol")
        const key = keyOf(event.success.index)
        const block = event.success.content_block
        switch (block.type) {
          case "text":
            assembly.text(key, block.text ?? "", events)
            break
          case "thinking":
            assembly.thinking(key, block.thinking ?? "", events)
            assembly.signature(key, block.signature ?? "")
            break
          case "redacted_thinking":
            assembly.redactedThinking(key, block.data ?? "")
            break
          case "tool_use":
            assembly.toolCall(key, { id: block.id, name: block.name, initial: block.input }, events)
            break
        }
        break
      }
      case "content_block_delta": {
        const event = decode(json, decoders.content_block_delta, fastBlockDelta)
        if (Result.isFailure(event)) return fail(event.failure, "protocol")
        onBlockDelta(event.success, events)
        break
      }
      case "message_delta": {
        const event = decode(json, decoders.message_delta)
        if (Result.isFailure(event)) return fail(event.failure, "protocol")
        const stop = event.success.delta.stop_reason
        if (typeof stop === "string" && stop.length > 0) wireStop = stop
        addUsage(event.success.usage)
        break
      }
      case "message_stop":
        return finalize(events)
      case "error": {
        const event = decode(json, decoders.error)
        if (Result.isFailure(event)) return fail(event.failure, "protocol")
        const { message, type } = event.success.error
        const text = `${options.provider} reported an error in the stream: ${options.clean(type ?? "error", 100)}: ` +
          options.clean(message ?? "unknown error")
        // nothing shown yet: a retry is invisible to the caller
        const retryAs = type != null && Object.hasOwn(retryableErrorTypes, type) ? retryableErrorTypes[type] : undefined
        if (emitted === 0 && retryAs !== undefined) return fail(text, retryAs, true)
        return finalize(events, text)
      }
        // ping, content_block_stop and event types added later carry nothing to keep
    }
    emitted += events.length - before
    return proceed
  }

  return {
    onEvent: (event: Sse.Event, out: Array<ModelEvent>) => onEvent(event.data, out),
    onEnd: (out: Array<ModelEvent>) =>
      wireStop !== undefined ?
        finalize(out) :
        fail(`the stream from ${options.provider} ended before the response was complete`, "network", true),
    complete: () => wireStop !== undefined
  }
}
