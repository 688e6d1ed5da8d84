/**
 * Deterministic generators of large streamed responses in each provider's real wire format, with
 * the framing of the streams recorded from the real APIs (`packages/providers/test/fixtures`): OpenAI's
 * `chat.completion.chunk`s (id, created, model, system fingerprint, `obfuscation` padding, one
 * `data:` line per chunk, `[DONE]` at the end) and Anthropic's named events (`message_start`,
 * `content_block_*`, `ping`, `message_delta`, `message_stop`).
 *
 * One response is a long text answer in small deltas (a few characters each, with quotes,
 * newlines, backslashes and non-ASCII text to escape), then several tool calls whose JSON
 * arguments (a file to write) arrive in small fragments.
 *
 * @since 0.1.0
 */

/**
 * A generated response and what a client should make of it.
 *
 * @since 0.1.0
 * @category models
 */
export interface GeneratedStream {
  /** The response body, UTF-8. */
  readonly body: Buffer
  /** Server-sent events in the body (every `data:` event, pings and `[DONE]` included). */
  readonly wireEvents: number
  /** Text deltas and tool-argument fragments in the body. */
  readonly textDeltas: number
  readonly argumentDeltas: number
  /** What the assembled message holds. */
  readonly textLength: number
  readonly toolCalls: number
  readonly argumentsLength: number
}

/** A small deterministic generator (mulberry32), so every run streams the same bytes. */
const random = (seed: number) => {
  let state = seed >>> 0
  return (): number => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const words = [
  "the",
  "loop",
  "reads",
  "a",
  "file",
  "and",
  "then",
  "calls",
  "tool",
  "with",
  "arguments",
  "\"quoted\"",
  "path/to/src",
  "index.ts",
  "\n",
  "\n\n",
  "Ünïcödé",
  "naïve",
  "—",
  "→",
  "async",
  "function",
  "return",
  "{",
  "}",
  "\\n",
  "tab\there",
  "x",
  "42",
  "é",
  "日本語",
  "emoji 🙂",
  "const",
  "await",
  "Effect.gen",
  "(",
  ")",
  ";"
]

/** Cuts `text` into pieces of 1 to `max` characters, never between the two halves of a surrogate pair. */
const pieces = (text: string, next: () => number, max: number): Array<string> => {
  const out: Array<string> = []
  let i = 0
  while (i < text.length) {
    let end = Math.min(text.length, i + 1 + Math.floor(next() * max))
    const code = text.charCodeAt(end - 1)
    if (code >= 0xd800 && code <= 0xdbff && end < text.length) end++
    out.push(text.slice(i, end))
    i = end
  }
  return out
}

const textDeltas = (next: () => number, bytes: number): Array<string> => {
  const out: Array<string> = []
  let size = 0
  while (size < bytes) {
    const word = words[Math.floor(next() * words.length)]!
    const delta = next() < 0.7 ? ` ${word}` : word
    out.push(delta)
    size += Buffer.byteLength(delta) + 20
  }
  return out
}

/** The arguments of one `write_file` call: a path and about `size` characters of content. */
const toolArguments = (next: () => number, index: number, size: number): string => {
  const lines: Array<string> = []
  let length = 0
  while (length < size) {
    const line = Array.from({ length: 3 + Math.floor(next() * 8) }, () => words[Math.floor(next() * words.length)]!)
      .join(" ")
    lines.push(line)
    length += line.length + 1
  }
  return JSON.stringify({ path: `src/generated/file_${index}.ts`, content: lines.join("\n"), overwrite: true })
}

/**
 * The shape of a response: how many bytes of it are text deltas and how many tool calls (with
 * how many characters of arguments each) follow.
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamShape {
  readonly targetBytes: number
  readonly argumentsPerCall: number
  readonly seed: number
}

/**
 * The default shape for a response of about `megabytes` MB: about 60% of the bytes are text
 * deltas, the rest tool calls with 4 KB of arguments each.
 *
 * @since 0.1.0
 * @category constructors
 */
export const shapeOf = (megabytes: number): StreamShape => ({
  targetBytes: Math.round(megabytes * 1024 * 1024),
  argumentsPerCall: 4096,
  seed: 20251201
})

const openAiHead = {
  id: "chatcmpl-CoDWpGC47t2wtJ7PYJq9LCn0IZunc",
  object: "chat.completion.chunk",
  created: 1766084439,
  model: "gpt-4o-2024-08-06",
  service_tier: "default",
  system_fingerprint: "fp_e413f45763",
  usage: null
}

/**
 * A Chat Completions stream (OpenAI's framing, as recorded).
 *
 * @since 0.1.0
 * @category constructors
 */
export const openAiStream = (shape: StreamShape): GeneratedStream => {
  const next = random(shape.seed)
  const parts: Array<string> = []
  let wireEvents = 0
  let bytes = 0
  const obfuscation = (delta: string) =>
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP".slice(0, Math.max(1, 16 - delta.length))
  const chunk = (choiceDelta: unknown, finish: string | null, padding: string) => {
    const line = `data: ${
      JSON.stringify({
        ...openAiHead,
        choices: [{ index: 0, delta: choiceDelta, logprobs: null, finish_reason: finish }],
        obfuscation: padding
      })
    }\n\n`
    parts.push(line)
    bytes += Buffer.byteLength(line)
    wireEvents++
  }
  chunk({ role: "assistant", content: "", refusal: null }, null, "j9Z9Y9WcWYn")
  const text = textDeltas(next, shape.targetBytes * 0.6 / 14)
  let textLength = 0
  for (const delta of text) {
    chunk({ content: delta }, null, obfuscation(delta))
    textLength += delta.length
  }
  let toolCalls = 0
  let argumentDeltas = 0
  let argumentsLength = 0
  while (bytes < shape.targetBytes) {
    const args = toolArguments(next, toolCalls, shape.argumentsPerCall)
    chunk(
      {
        tool_calls: [{
          index: toolCalls,
          id: `call_${String(toolCalls).padStart(20, "0")}`,
          type: "function",
          function: { name: "write_file", arguments: "" }
        }]
      },
      null,
      ""
    )
    for (const fragment of pieces(args, next, 8)) {
      chunk({ tool_calls: [{ index: toolCalls, function: { arguments: fragment } }] }, null, obfuscation(fragment))
      argumentDeltas++
    }
    argumentsLength += args.length
    toolCalls++
  }
  chunk({}, "tool_calls", "pL")
  const usage = `data: ${
    JSON.stringify({
      ...openAiHead,
      choices: [],
      usage: {
        prompt_tokens: 1200,
        completion_tokens: 900000,
        total_tokens: 901200,
        prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0 }
      },
      obfuscation: "x8"
    })
  }\n\ndata: [DONE]\n\n`
  parts.push(usage)
  wireEvents += 2
  return {
    body: Buffer.from(parts.join("")),
    wireEvents,
    textDeltas: text.length,
    argumentDeltas,
    textLength,
    toolCalls,
    argumentsLength
  }
}

/**
 * A Messages stream (Anthropic's framing, as recorded: `event:` and `data:` lines, pings).
 *
 * @since 0.1.0
 * @category constructors
 */
export const anthropicStream = (shape: StreamShape): GeneratedStream => {
  const next = random(shape.seed)
  const parts: Array<string> = []
  let wireEvents = 0
  let bytes = 0
  const event = (type: string, data: unknown) => {
    const line = `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`
    parts.push(line)
    bytes += Buffer.byteLength(line)
    wireEvents++
  }
  event("message_start", {
    type: "message_start",
    message: {
      model: "claude-sonnet-4-5-20250929",
      id: "msg_01JdU4xqNHXL9QCFWkwCDKGr",
      type: "message",
      role: "assistant",
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: 1200,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
        cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
        output_tokens: 8,
        service_tier: "standard"
      }
    }
  })
  event("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } })
  event("ping", { type: "ping" })
  const text = textDeltas(next, shape.targetBytes * 0.6 / 5.5)
  let textLength = 0
  for (const delta of text) {
    event("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: delta } })
    textLength += delta.length
  }
  event("content_block_stop", { type: "content_block_stop", index: 0 })
  let toolCalls = 0
  let argumentDeltas = 0
  let argumentsLength = 0
  while (bytes < shape.targetBytes) {
    const index = toolCalls + 1
    const args = toolArguments(next, toolCalls, shape.argumentsPerCall)
    event("content_block_start", {
      type: "content_block_start",
      index,
      content_block: {
        type: "tool_use",
        id: `toolu_${String(toolCalls).padStart(24, "0")}`,
        name: "write_file",
        input: {}
      }
    })
    event("content_block_delta", {
      type: "content_block_delta",
      index,
      delta: { type: "input_json_delta", partial_json: "" }
    })
    for (const fragment of pieces(args, next, 8)) {
      event("content_block_delta", {
        type: "content_block_delta",
        index,
        delta: { type: "input_json_delta", partial_json: fragment }
      })
      argumentDeltas++
    }
    event("content_block_stop", { type: "content_block_stop", index })
    argumentsLength += args.length
    toolCalls++
  }
  event("message_delta", {
    type: "message_delta",
    delta: { stop_reason: "tool_use", stop_sequence: null },
    usage: { input_tokens: 1200, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 900000 }
  })
  event("message_stop", { type: "message_stop" })
  return {
    body: Buffer.from(parts.join("")),
    wireEvents,
    textDeltas: text.length,
    argumentDeltas,
    textLength,
    toolCalls,
    argumentsLength
  }
}
