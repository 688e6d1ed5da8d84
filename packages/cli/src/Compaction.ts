/**
 * Context compaction for `run` and `chat`: core's compactor (`makeCompactor` in @agentloop/core,
 * see its Compaction.ts for what it promises and the summary's shape) with what the CLI adds: the
 * context window of a named model (`knownContextWindow`), `/compact` on the model in use, and its
 * failures shown rather than logged. The summary is marked as one (`isCompactionSummary`); only
 * requests change: the session file keeps the full history, with a `compaction` record holding the
 * summary and how many messages it replaced (a resumed session reuses it).
 *
 * @since 0.1.0
 */
import { makeCompactor as makeCoreCompactor } from "@agentloop/core"
import type { CompactionState, ContextTransform, Message, Model, Usage } from "@agentloop/core"
import { modelInfo } from "@agentloop/providers"
import { Effect } from "effect"

export {
  chooseCut,
  COMPACT_AT,
  estimateTokens,
  isCompactionSummary,
  KEEP_SHARE,
  SUMMARY_HEADER,
  summaryMessage,
  toolDefinitionsChars
} from "@agentloop/core"
export type { CompactionState } from "@agentloop/core"

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

/**
 * The system prompt of the CLI's summarising requests: a coding session's summary.
 *
 * @since 0.1.0
 * @category constants
 */
export const CODING_SUMMARIZER_PROMPT = "You summarise the earlier part of a coding session between a user and a " +
  "coding agent, so the agent can continue without it. Write a concise summary: the user's task and requirements, " +
  "what was done and decided, files read or changed (with paths), commands run and their outcome, the current " +
  "state, and what is left. Do not call tools. Answer with the summary only."

/**
 * What a compactor needs.
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactorOptions {
  /**
   * The context window of the model in use, asked before each request (a `/model` switch changes
   * it); `undefined`: no automatic compaction (`/compact` still works).
   */
  readonly contextWindow: () => number | undefined
  /** The model that summarises (the one in use: `/model` changes it). */
  readonly model: Model["Service"]
  readonly initial: CompactionState | undefined
  /**
   * Called with each new summary (to record it in the session and show a line). `inRun`: it shaped
   * a run's request, and its usage is counted in that run's usage (`/compact` is not in a run).
   */
  readonly onCompact: (
    state: CompactionState,
    info: { readonly kept: number; readonly usage: Usage | undefined; readonly inRun: boolean }
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
  readonly transform: ContextTransform
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
  const windowNow = () => options.contextWindow() ?? Number.POSITIVE_INFINITY
  const build = (contextWindow: number, initial: CompactionState | undefined) =>
    makeCoreCompactor({
      contextWindow,
      model: options.model,
      prompt: CODING_SUMMARIZER_PROMPT,
      initial,
      onCompact: (compacted) =>
        options.onCompact(compacted.state, { kept: compacted.kept, usage: compacted.usage, inRun: compacted.inRun }),
      onError: (error) => options.onError(`compaction failed (${error.message}); the request is sent as it is`)
    })
  let window = windowNow()
  let compactor = build(window, options.initial)
  // the window of the model in use (`/model` may change it): the summary in force carries over
  const current = () => {
    const now = windowNow()
    if (now !== window) {
      window = now
      compactor = build(now, compactor.state())
    }
    return compactor
  }
  return {
    transform: (messages, context) => current().transformContext(messages, context),
    // on demand: everything but the last turn
    compactNow: (messages) =>
      Effect.catch(
        current().compactNow(messages),
        (error) => Effect.as(options.onError(`compaction failed (${error.message})`), false)
      ),
    state: () => compactor.state(),
    reset: () => compactor.reset()
  }
}
