/**
 * Context compaction: a `transformContext` that keeps each request within a model's context window
 * by summarising the older part of the transcript, on any engine. Only requests change: the run's
 * transcript keeps every message.
 *
 * Before each request its size is estimated (`estimateTokens`: characters / 4, an image about 1,600
 * tokens, the system prompt and the tool definitions included; deliberately rough and cautious).
 * Past `threshold` of the window, the older messages are summarised by a model (the one given, or
 * the run's) into **one user message**, marked as a summary (`isCompactionSummary`):
 *
 * ```text
 * [agentloop: summary of the earlier conversation (N messages)]
 * <summary>
 * ...what the model wrote: the task, decisions, files touched, state, open questions...
 * </summary>
 * The latest messages follow verbatim.
 * ```
 *
 * What it promises:
 * - **No batch is cut.** The cut is always before a user or assistant message, so an assistant
 *   message with tool calls and all its results are kept together or summarised together; the
 *   request stays paired (the loop checks it anyway).
 * - **The latest turns stay verbatim**: as many as fit in `keep` of the window (less what the tool
 *   definitions take), at least the last one.
 * - **One summary at a time.** The summary in force (`CompactionState`) is reused for the next
 *   requests; when they grow past the threshold again, the old summary and the messages after it
 *   are summarised into a new one.
 * - **Its usage is counted** in the run's usage (`TurnContext.addUsage`); on a durable run it is
 *   recorded with the turn, so a resumed run counts it once.
 * - **A failed summary loses nothing**: the request is sent as it is and `onError` is told.
 *
 * The state lives in the compactor, not in the transcript: a durable run resumed in a new process
 * starts with no summary (the first request past the threshold makes one), unless `initial` gives
 * the one in force (the CLI keeps it in its session file).
 *
 * @since 0.1.0
 */
import { Effect, Schema, Stream } from "effect"
import type { ModelError } from "./Errors.ts"
import type { AssistantMessage, Message, Usage, UserMessage } from "./Message.ts"
import type { Model, ToolDefinition } from "./Model.ts"
import type { ContextTransform, TurnContext } from "./Run.ts"

/**
 * The share of the context window past which a request is compacted, when `threshold` is not given.
 *
 * @since 0.1.0
 * @category constants
 */
export const COMPACT_AT = 0.75

/**
 * The share of the context window the verbatim tail may take, when `keep` is not given.
 *
 * @since 0.1.0
 * @category constants
 */
export const KEEP_SHARE = 0.3

/**
 * The first line of a summary message, up to the count of messages it stands for.
 *
 * @since 0.1.0
 * @category constants
 */
export const SUMMARY_HEADER = "[agentloop: summary of the earlier conversation"

/**
 * The system prompt of a summarising request, when `prompt` is not given.
 *
 * @since 0.1.0
 * @category constants
 */
export const SUMMARIZER_PROMPT = "You summarise the earlier part of a session between a user and an agent that " +
  "uses tools, so the agent can continue without it. Write a concise summary: the user's task and requirements, " +
  "what was done and decided, files read or changed (with paths), commands run and their outcome, the current " +
  "state, and what is left. Do not call tools. Answer with the summary only."

/**
 * Compaction could not be done: its options are not valid, or the summary could not be made (the
 * summarising request failed, or answered with no text). The message says which.
 *
 * @since 0.1.0
 * @category errors
 */
export class CompactionError extends Schema.TaggedError<CompactionError>()("CompactionError", {
  message: Schema.String
}) {}

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
 * Schema, as providers send them): every request carries them, so they count towards the context
 * window as the messages do.
 *
 * @since 0.1.0
 * @category compaction
 */
export const toolDefinitionsChars = (definitions: ReadonlyArray<ToolDefinition>): number =>
  definitions.reduce((n, d) => n + d.name.length + d.description.length + JSON.stringify(d.parameters).length, 0)

/**
 * Where to cut `messages` so that the tail fits in `keepTokens`: the smallest index above `from`
 * that starts a user or assistant message and whose tail fits, or the last such index when none
 * fits (the last turn always stays). `undefined` when there is no place to cut. A cut never falls
 * before a tool result, so no call is parted from its result.
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

/**
 * The summary message for `text`, standing for `count` messages (see the module's description of
 * its shape).
 *
 * @since 0.1.0
 * @category constructors
 */
export const summaryMessage = (text: string, count: number): UserMessage => ({
  role: "user",
  content:
    `${SUMMARY_HEADER} (${count} messages)]\n<summary>\n${text.trim()}\n</summary>\nThe latest messages follow ` +
    `verbatim.`
})

const SUMMARY_PATTERN = /^\[agentloop: summary of the earlier conversation \((\d+) messages\)\]\n<summary>\n/

/**
 * Whether `message` is a compaction's summary (`summaryMessage`): a user message that starts with
 * the summary's header.
 *
 * @since 0.1.0
 * @category guards
 */
export const isCompactionSummary = (message: Message): message is UserMessage =>
  message.role === "user" && typeof message.content === "string" && SUMMARY_PATTERN.test(message.content)

const partsText = (parts: ReadonlyArray<{ readonly type: string; readonly text?: string }>) =>
  parts.map((c) => (c.type === "text" ? c.text : "[image]")).join("")

/** A message as the summariser reads it: its text, calls as one line each, long results cut. */
const textOf = (m: Message): string => {
  if (m.role === "user") return typeof m.content === "string" ? m.content : partsText(m.content)
  if (m.role === "toolResult") {
    const text = partsText(m.content)
    return text.length > 2000 ? `${text.slice(0, 2000)}… [${text.length - 2000} more characters]` : text
  }
  return m.content.map((c) =>
    c.type === "text" ? c.text : c.type === "thinking" ? "" : `[calls ${c.name} ${JSON.stringify(c.arguments)}]`
  ).join("\n")
}

const speakerOf = (m: Message): string =>
  m.role === "toolResult" ? `tool result (${m.toolName})` : isCompactionSummary(m) ? "(earlier summary)" : m.role

/**
 * Asks `model` for a summary of `messages` (which may start with an earlier summary), standing
 * for `count` transcript messages. Fails when the request fails or answers with no text.
 *
 * @since 0.1.0
 * @category compaction
 */
export const summarizeMessages = (
  model: Model["Service"],
  messages: ReadonlyArray<Message>,
  count: number,
  prompt: string = SUMMARIZER_PROMPT
): Effect.Effect<{ readonly summary: UserMessage; readonly usage: Usage | undefined }, CompactionError> =>
  Effect.gen(function*() {
    const lines = messages.map((m) => `${speakerOf(m)}: ${textOf(m)}`)
    const events = yield* Stream.runCollect(model.stream({
      systemPrompt: prompt,
      messages: [{ role: "user", content: `Summarise this conversation:\n\n${lines.join("\n\n")}` }],
      tools: []
    })).pipe(
      Effect.mapError((e: ModelError) =>
        new CompactionError({ message: `the summarising request failed: ${e.message}` })
      )
    )
    const done = events.find((e): e is { readonly type: "done"; readonly message: AssistantMessage } =>
      e.type === "done"
    )
    if (done === undefined) {
      return yield* new CompactionError({ message: "the summarising request ended without a final message" })
    }
    const { message } = done
    if (message.stopReason === "error" || message.stopReason === "aborted") {
      return yield* new CompactionError({
        message: `the summarising request ended ${message.stopReason}${
          message.errorMessage === undefined ? "" : `: ${message.errorMessage}`
        }`
      })
    }
    const text = message.content.map((c) => (c.type === "text" ? c.text : "")).join("").trim()
    if (text.length === 0) return yield* new CompactionError({ message: "the summarising request gave no text" })
    return { summary: summaryMessage(text, count), usage: message.usage }
  })

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
 * A new summary, as `onCompact` is told of it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Compacted {
  readonly state: CompactionState
  /** How many messages after the summary stay verbatim. */
  readonly kept: number
  /** What the summarising request cost (when the model reported it). */
  readonly usage: Usage | undefined
  /**
   * The compaction shaped a run's request: its usage is counted in that run's usage. `false` for
   * `compactNow`, which runs outside a run: count its usage yourself.
   */
  readonly inRun: boolean
}

/**
 * The options of `compaction` and `makeCompactor`.
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactionOptions {
  /** The model's context window, in tokens (`Infinity`: never compact on its own; `compactNow` still does). */
  readonly contextWindow: number
  /** The share of the window past which a request is compacted: more than 0, at most 1. Default `COMPACT_AT`. */
  readonly threshold?: number | undefined
  /** The share of the window the verbatim tail may take: 0 to 1. Default `KEEP_SHARE`. */
  readonly keep?: number | undefined
  /** The model that summarises. Default: the run's (`TurnContext.model`). */
  readonly model?: Model["Service"] | undefined
  /** The summarising request's system prompt. Default `SUMMARIZER_PROMPT`. */
  readonly prompt?: string | undefined
  /** The summary in force when the compactor starts (e.g. read back from a session file). */
  readonly initial?: CompactionState | undefined
  /** Told of each new summary (to record it, or show it). */
  readonly onCompact?: ((compacted: Compacted) => Effect.Effect<void>) | undefined
  /** Told when a summary could not be made; the request is then sent as it is. Default: a warning in the log. */
  readonly onError?: ((error: CompactionError) => Effect.Effect<void>) | undefined
}

/**
 * A compactor: `transformContext` for a run's options, `compactNow` to summarise on demand (a
 * `/compact` command), and the summary in force.
 *
 * @since 0.1.0
 * @category models
 */
export interface Compactor {
  readonly transformContext: ContextTransform
  /**
   * Summarises everything but the last turn of `messages` now, with the compactor's model or
   * `model`. `false` when there is nothing to summarise.
   */
  readonly compactNow: (
    messages: ReadonlyArray<Message>,
    model?: Model["Service"]
  ) => Effect.Effect<boolean, CompactionError>
  /** The summary in force, if any. */
  readonly state: () => CompactionState | undefined
  /** Forgets the summary in force (a new conversation). */
  readonly reset: () => void
}

const isShare = (u: unknown, low: "open" | "closed") =>
  typeof u === "number" && (low === "open" ? u > 0 : u >= 0) && u <= 1

/** What is wrong with the options, if anything. */
const checkOptions = (options: CompactionOptions): string | undefined => {
  const { contextWindow, keep, threshold } = options
  if (typeof contextWindow !== "number" || !(contextWindow > 0)) {
    return `contextWindow must be a positive number of tokens, got ${String(contextWindow)}`
  }
  if (threshold !== undefined && !isShare(threshold, "open")) {
    return `threshold must be a share of the window (more than 0, at most 1), got ${String(threshold)}`
  }
  if (keep !== undefined && !isShare(keep, "closed")) {
    return `keep must be a share of the window (0 to 1), got ${String(keep)}`
  }
  return undefined
}

/**
 * Whether `messages` begins with `covered` (the messages a summary was made from): the same
 * objects, or equal ones (a transcript read back from a file). A summary is only applied to the
 * conversation it was made from.
 */
const beginsWith = (messages: ReadonlyArray<Message>, covered: ReadonlyArray<Message>): boolean => {
  if (messages.length < covered.length) return false
  for (let i = 0; i < covered.length; i++) {
    if (messages[i] !== covered[i] && JSON.stringify(messages[i]) !== JSON.stringify(covered[i])) return false
  }
  return true
}

/**
 * Makes a compactor (see the module's description). Options that are not valid make every use of
 * it fail with a `CompactionError` naming the option (a run using it ends `error`, its transcript
 * kept).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeCompactor = (options: CompactionOptions): Compactor => {
  const invalid = checkOptions(options)
  const threshold = options.threshold ?? COMPACT_AT
  const keep = options.keep ?? KEEP_SHARE
  const onError = options.onError ?? ((error: CompactionError) => Effect.logWarning(`compaction: ${error.message}`))
  let state = options.initial
  // the messages the summary stands for; undefined for an `initial` summary (trusted)
  let covered: ReadonlyArray<Message> | undefined
  const inForce = (messages: ReadonlyArray<Message>): CompactionState | undefined =>
    state !== undefined && state.covered <= messages.length &&
      (covered === undefined || beginsWith(messages, covered)) ?
      state :
      undefined
  const apply = (messages: ReadonlyArray<Message>): ReadonlyArray<Message> => {
    const current = inForce(messages)
    return current === undefined ? messages : [current.summary, ...messages.slice(current.covered)]
  }
  const badOptions = () => new CompactionError({ message: `compaction: ${invalid}` })

  /** A new summary of `messages` up to a cut whose tail fits `keepTokens`; `undefined` when there is no cut. */
  const compact = (
    messages: ReadonlyArray<Message>,
    keepTokens: number,
    model: Model["Service"],
    addUsage: ((usage: Usage) => Effect.Effect<void>) | undefined
  ) =>
    Effect.gen(function*() {
      const current = inForce(messages)
      const from = current?.covered ?? 0
      const cut = chooseCut(messages, from, keepTokens)
      if (cut === undefined) return false
      const earlier = current === undefined ? messages.slice(0, cut) : [current.summary, ...messages.slice(from, cut)]
      const made = yield* summarizeMessages(model, earlier, cut, options.prompt)
      state = { summary: made.summary, covered: cut }
      covered = messages.slice(0, cut)
      if (made.usage !== undefined && addUsage !== undefined) yield* addUsage(made.usage)
      if (options.onCompact !== undefined) {
        yield* options.onCompact({
          state,
          kept: messages.length - cut,
          usage: made.usage,
          inRun: addUsage !== undefined
        })
      }
      return true
    })

  const transformContext: ContextTransform = (messages, context: TurnContext) =>
    Effect.gen(function*() {
      if (invalid !== undefined) return yield* Effect.die(badOptions())
      const current = apply(messages)
      const toolChars = toolDefinitionsChars(context.tools)
      const window = options.contextWindow
      if (estimateTokens(current, context.systemPrompt, toolChars) <= window * threshold) return current
      // the verbatim tail gets its share of the window less what the tools take in every request
      const keepTokens = Math.max(0, window * keep - Math.ceil(toolChars / 4))
      const done = yield* Effect.result(compact(messages, keepTokens, options.model ?? context.model, context.addUsage))
      if (done._tag === "Failure") yield* onError(done.failure)
      return apply(messages)
    })

  return {
    transformContext,
    compactNow: (messages, model) =>
      Effect.suspend(() => {
        if (invalid !== undefined) return Effect.fail(badOptions())
        const summariser = options.model ?? model
        if (summariser === undefined) {
          return Effect.fail(
            new CompactionError({ message: "compactNow needs a model: give one to it or to the compactor's options" })
          )
        }
        return compact(messages, 0, summariser, undefined)
      }),
    state: () => state,
    reset: () => {
      state = undefined
      covered = undefined
    }
  }
}

/**
 * Compaction as a run's `transformContext` (see the module's description): `makeCompactor(options)`'s
 * `transformContext`.
 *
 * ```ts
 * import { compaction, runAgentLoop } from "@agentloop/core"
 *
 * const run = runAgentLoop({
 *   messages: [{ role: "user", content: "Refactor the parser" }],
 *   transformContext: compaction({ contextWindow: 200_000 })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const compaction = (options: CompactionOptions): ContextTransform => makeCompactor(options).transformContext
