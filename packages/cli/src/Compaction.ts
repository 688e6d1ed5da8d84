/**
 * Context compaction. Before each model request, the request's size is estimated (characters / 4,
 * a deliberately rough and cautious count); past `COMPACT_AT` of the model's context window, the
 * older part of the transcript is summarised by the model into **one user message** of this shape:
 *
 * ```text
 * [agentloop: summary of the earlier conversation (N messages)]
 * <summary>
 * ...what the model wrote: the task, decisions, files touched, state, open questions...
 * </summary>
 * The latest messages follow verbatim.
 * ```
 *
 * The latest turns stay verbatim (as many as fit in `KEEP_SHARE` of the window, at least the last
 * one). The cut is always before a user or assistant message, so no tool call is split from its
 * result. Only requests change: the session file keeps the full history, with a `compaction`
 * record holding the summary and how many messages it replaced (a resumed session reuses it).
 *
 * @since 0.1.0
 */
import type { AssistantMessage, Message, Model, ModelError, ToolDefinition, Usage, UserMessage } from "@agentloop/core"
import { modelInfo } from "@agentloop/providers"
import { Effect, Stream } from "effect"

/**
 * Share of the context window past which a request is compacted.
 *
 * @since 0.1.0
 * @category constants
 */
export const COMPACT_AT = 0.75

/**
 * Share of the context window the verbatim tail may take.
 *
 * @since 0.1.0
 * @category constants
 */
export const KEEP_SHARE = 0.3

/**
 * The first line of a summary message.
 *
 * @since 0.1.0
 * @category constants
 */
export const SUMMARY_HEADER = "[agentloop: summary of the earlier conversation"

/**
 * Context windows (tokens) of a few well-known models, used when neither `--context-window` nor
 * the config sets one. Names match by prefix.
 *
 * @since 0.1.0
 * @category constants
 */
export const KNOWN_CONTEXT_WINDOWS: ReadonlyArray<readonly [string, number]> = [
  ["gpt-4.1", 1_047_576],
  ["gpt-4o", 128_000],
  ["gpt-5", 400_000],
  ["o3", 200_000],
  ["o4-mini", 200_000],
  ["claude-", 200_000],
  ["qwen2.5-coder", 32_768],
  ["llama3", 8_192]
]

/**
 * The context window of `model`: from the providers' model table (`modelInfo`), else from the
 * small built-in table above, else unknown (no automatic compaction).
 *
 * @since 0.1.0
 * @category compaction
 */
export const knownContextWindow = (model: string): number | undefined => {
  const known = modelInfo(model).contextWindow
  if (known !== undefined) return known
  const name = model.includes("/") ? model.slice(model.lastIndexOf("/") + 1) : model
  return KNOWN_CONTEXT_WINDOWS.find(([prefix]) => name.startsWith(prefix))?.[1]
}

/** What an image counts for in the estimate: about 1,600 tokens (a large image, as providers bill it). */
const IMAGE_STAND_IN = "x".repeat(1600 * 4)

/** Images count as `IMAGE_STAND_IN`, not as their base64 text (which no provider bills as text). */
const imagesAsStandIns = (_key: string, value: unknown): unknown =>
  typeof value === "object" && value !== null && (value as { type?: unknown }).type === "image" ?
    IMAGE_STAND_IN :
    value

/**
 * A cautious estimate of the tokens of a request (4 characters a token; an image about 1,600
 * tokens): its messages, its system prompt and `extraChars` (the tool definitions sent with it,
 * see `toolDefinitionsChars`).
 *
 * @since 0.1.0
 * @category compaction
 */
export const estimateTokens = (messages: ReadonlyArray<Message>, systemPrompt = "", extraChars = 0): number =>
  Math.ceil((JSON.stringify(messages, imagesAsStandIns).length + systemPrompt.length + extraChars) / 4)

/**
 * The characters the tool definitions take in a request (each tool's name, description and JSON
 * Schema, as the providers send them): every request carries them, so they count towards the
 * context window as the messages do.
 *
 * @since 0.1.0
 * @category compaction
 */
export const toolDefinitionsChars = (definitions: ReadonlyArray<ToolDefinition>): number =>
  definitions.reduce((n, d) => n + d.name.length + d.description.length + JSON.stringify(d.parameters).length, 0)

/**
 * The summary in force: the message and how many leading transcript messages it stands for.
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactionState {
  readonly summary: UserMessage
  readonly covered: number
}

/**
 * Where to cut `messages` so that the tail fits in `keepTokens`: the smallest index above `from`
 * that starts a user or assistant message and whose tail fits, or the last such index when none
 * fits (the last turn always stays). `undefined` when there is no place to cut.
 *
 * @since 0.1.0
 * @category compaction
 */
export const chooseCut = (messages: ReadonlyArray<Message>, from: number, keepTokens: number): number | undefined => {
  let last: number | undefined
  for (let i = messages.length - 1; i > from; i--) {
    if (messages[i]!.role === "toolResult") continue
    if (last === undefined) last = i
    if (estimateTokens(messages.slice(i)) > keepTokens) break
    last = i
  }
  return last
}

const textOf = (m: Message): string => {
  if (m.role === "user") {
    return typeof m.content === "string"
      ? m.content
      : m.content.map((c) => (c.type === "text" ? c.text : "[image]")).join("")
  }
  if (m.role === "toolResult") {
    const text = m.content.map((c) => (c.type === "text" ? c.text : "[image]")).join("")
    return text.length > 2000 ? `${text.slice(0, 2000)}… [${text.length - 2000} more characters]` : text
  }
  return m.content.map((c) =>
    c.type === "text" ? c.text : c.type === "thinking" ? "" : `[calls ${c.name} ${JSON.stringify(c.arguments)}]`
  ).join("\n")
}

const SUMMARIZER_PROMPT = "You summarise the earlier part of a coding session between a user and a coding agent, so " +
  "the agent can continue without it. Write a concise summary: the user's task and requirements, what was done and " +
  "decided, files read or changed (with paths), commands run and their outcome, the current state, and what is " +
  "left. Do not call tools. Answer with the summary only."

/**
 * The summary message for `text` (see the module's description of its shape).
 *
 * @since 0.1.0
 * @category compaction
 */
export const summaryMessage = (text: string, count: number): UserMessage => ({
  role: "user",
  content:
    `${SUMMARY_HEADER} (${count} messages)]\n<summary>\n${text.trim()}\n</summary>\nThe latest messages follow ` +
    `verbatim.`
})

/**
 * Asks the model for a summary of `messages` (after a previous summary, if any).
 *
 * @since 0.1.0
 * @category compaction
 */
export const summarizeWith = (
  model: Model["Service"],
  previous: UserMessage | undefined,
  messages: ReadonlyArray<Message>,
  count: number
): Effect.Effect<{ readonly summary: UserMessage; readonly usage: Usage | undefined }, ModelError> =>
  Effect.gen(function*() {
    const lines = [
      ...(previous === undefined ? [] : [`(earlier summary) ${textOf(previous)}`]),
      ...messages.map((m) => `${m.role === "toolResult" ? `tool result (${m.toolName})` : m.role}: ${textOf(m)}`)
    ]
    const events = yield* Stream.runCollect(model.stream({
      systemPrompt: SUMMARIZER_PROMPT,
      messages: [{ role: "user", content: `Summarise this conversation:\n\n${lines.join("\n\n")}` }],
      tools: []
    }))
    const done = events.find((e): e is { readonly type: "done"; readonly message: AssistantMessage } =>
      e.type === "done"
    )
    const text = done?.message.content.map((c) => (c.type === "text" ? c.text : "")).join("") ?? ""
    return {
      summary: summaryMessage(text.length > 0 ? text : "(the model gave no summary)", count),
      usage: done?.message.usage
    }
  })

/**
 * What a compactor needs.
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactorOptions {
  readonly contextWindow: number | undefined
  readonly systemPrompt: string
  /** The characters of the tool definitions each request carries (read before each request: they may change). */
  readonly toolChars?: (() => number) | undefined
  readonly model: Model["Service"]
  readonly initial: CompactionState | undefined
  /** Called with each new summary (to record it in the session and show a line). */
  readonly onCompact: (
    state: CompactionState,
    info: { readonly kept: number; readonly usage: Usage | undefined }
  ) => Effect.Effect<void>
  /** Called when summarising failed (the request is then sent uncompacted). */
  readonly onError: (message: string) => Effect.Effect<void>
}

/**
 * A compactor: `transform` for `AgentLoopOptions.transformContext`, `compactNow` for `/compact`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Compactor {
  readonly transform: (messages: ReadonlyArray<Message>) => Effect.Effect<ReadonlyArray<Message>>
  readonly compactNow: (messages: ReadonlyArray<Message>) => Effect.Effect<boolean>
  readonly state: () => CompactionState | undefined
  readonly reset: () => void
}

/**
 * Makes a compactor (see the module's description).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeCompactor = (options: CompactorOptions): Compactor => {
  let state = options.initial
  const apply = (messages: ReadonlyArray<Message>): ReadonlyArray<Message> =>
    state !== undefined && state.covered <= messages.length
      ? [state.summary, ...messages.slice(state.covered)]
      : messages
  const compact = (messages: ReadonlyArray<Message>, keepTokens: number) =>
    Effect.gen(function*() {
      const from = state !== undefined && state.covered <= messages.length ? state.covered : 0
      const cut = chooseCut(messages, from, keepTokens)
      if (cut === undefined) return false
      const result = yield* Effect.result(
        summarizeWith(options.model, from > 0 ? state?.summary : undefined, messages.slice(from, cut), cut)
      )
      if (result._tag === "Failure") {
        yield* options.onError(`compaction failed (${result.failure.message}); the request is sent as it is`)
        return false
      }
      state = { summary: result.success.summary, covered: cut }
      yield* options.onCompact(state, { kept: messages.length - cut, usage: result.success.usage })
      return true
    })
  return {
    transform: (messages) =>
      Effect.gen(function*() {
        const window = options.contextWindow
        const current = apply(messages)
        if (window === undefined) return current
        const tools = options.toolChars?.() ?? 0
        if (estimateTokens(current, options.systemPrompt, tools) <= window * COMPACT_AT) return current
        // the verbatim tail gets its share of the window less what the tools take in every request
        yield* compact(messages, Math.max(0, window * KEEP_SHARE - Math.ceil(tools / 4)))
        return apply(messages)
      }),
    // on demand: everything but the last turn
    compactNow: (messages) => compact(messages, 0),
    state: () => state,
    reset: () => {
      state = undefined
    }
  }
}
