/**
 * What agentloop knows about well-known hosted models: their context window, their output limit
 * and their list prices, so each turn's `usage.cost` can be set and a CLI can decide when to
 * compact a transcript.
 *
 * Prices are list prices in US dollars per million tokens, as published by the vendors on the date
 * in `pricesAsOf`; they change, so pass `prices` to a provider to override them. Anthropic's
 * `cacheWrite` is the 5-minute cache write (1.25 × input). OpenAI has no cache-write charge.
 *
 * @since 0.1.0
 */
import type { Usage } from "@agentloop/core"

/**
 * Prices of one model, in US dollars per million tokens. `cacheRead` (input tokens served from the
 * prompt cache) and `cacheWrite` (input tokens written to it) cost `input` when left out.
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelPrices {
  readonly input: number
  readonly output: number
  readonly cacheRead?: number | undefined
  readonly cacheWrite?: number | undefined
}

/**
 * What is known about a model. Every field is optional: an unknown model is `{}`.
 *
 * - `contextWindow`: input plus output tokens the model can attend to.
 * - `maxOutput`: the most output tokens one answer may have.
 * - `prices`, and `pricesAsOf`: the date (`YYYY-MM-DD`) the prices were taken from the vendor.
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelInfo {
  readonly contextWindow?: number | undefined
  readonly maxOutput?: number | undefined
  readonly prices?: ModelPrices | undefined
  readonly pricesAsOf?: string | undefined
}

const openAi = (
  contextWindow: number,
  maxOutput: number,
  input: number,
  cacheRead: number,
  output: number
): ModelInfo => ({
  contextWindow,
  maxOutput,
  prices: { input, output, cacheRead, cacheWrite: input },
  pricesAsOf: "2025-10-01"
})

const anthropic = (maxOutput: number, input: number, output: number): ModelInfo => ({
  contextWindow: 200_000,
  maxOutput,
  prices: { input, output, cacheRead: input / 10, cacheWrite: input * 1.25 },
  pricesAsOf: "2025-10-15"
})

/**
 * The models agentloop knows, by their canonical names (see `modelInfo` for the names it also
 * accepts).
 *
 * @since 0.1.0
 * @category constants
 */
export const knownModels: Readonly<Record<string, ModelInfo>> = {
  "gpt-4.1": openAi(1_047_576, 32_768, 2, 0.5, 8),
  "gpt-4.1-mini": openAi(1_047_576, 32_768, 0.4, 0.1, 1.6),
  "gpt-4.1-nano": openAi(1_047_576, 32_768, 0.1, 0.025, 0.4),
  "gpt-4o": openAi(128_000, 16_384, 2.5, 1.25, 10),
  "gpt-4o-mini": openAi(128_000, 16_384, 0.15, 0.075, 0.6),
  "gpt-5": openAi(400_000, 128_000, 1.25, 0.125, 10),
  "gpt-5-mini": openAi(400_000, 128_000, 0.25, 0.025, 2),
  "gpt-5-nano": openAi(400_000, 128_000, 0.05, 0.005, 0.4),
  "o3": openAi(200_000, 100_000, 2, 0.5, 8),
  "o4-mini": openAi(200_000, 100_000, 1.1, 0.275, 4.4),
  "claude-sonnet-4-5": anthropic(64_000, 3, 15),
  "claude-sonnet-4-0": anthropic(64_000, 3, 15),
  "claude-3-7-sonnet": anthropic(64_000, 3, 15),
  "claude-haiku-4-5": anthropic(64_000, 1, 5),
  "claude-3-5-haiku": anthropic(8_192, 0.8, 4),
  "claude-opus-4-1": anthropic(32_000, 15, 75),
  "claude-opus-4-0": anthropic(32_000, 15, 75)
}

const aliases: Readonly<Record<string, string>> = {
  "claude-sonnet-4": "claude-sonnet-4-0",
  "claude-opus-4": "claude-opus-4-0"
}

const lookup = (name: string): ModelInfo | undefined => {
  const canonical = aliases[name] ?? name
  return Object.hasOwn(knownModels, canonical) ? knownModels[canonical] : undefined
}

/**
 * What is known about `model`. Besides the canonical names of `knownModels` it accepts a vendor
 * prefix (`openai/gpt-4.1`, `anthropic/claude-sonnet-4-5`), dots for dashes in Claude versions
 * (`claude-sonnet-4.5`), dated snapshots (`gpt-4.1-2025-04-14`, `claude-sonnet-4-5-20250929`) and
 * `-latest`. An unknown model gives `{}`.
 *
 * @since 0.1.0
 * @category getters
 */
export const modelInfo = (model: string): ModelInfo => {
  const base = model.trim().toLowerCase().replace(/^[a-z0-9_.-]+\//, "")
  const candidates = [
    base,
    base.replace(/-latest$/, ""),
    base.replace(/-\d{4}-\d{2}-\d{2}$/, ""),
    base.replace(/-\d{8}$/, "")
  ]
  for (const candidate of candidates) {
    const found = lookup(candidate) ??
      (candidate.startsWith("claude-") ? lookup(candidate.replace(/\./g, "-")) : undefined)
    if (found !== undefined) return found
  }
  return {}
}

/**
 * The price of `usage` in US dollars: `input`, `output`, `cacheRead` and `cacheWrite` tokens each
 * at their price per million (`cacheRead` and `cacheWrite` at `input` when the prices leave them
 * out).
 *
 * @since 0.1.0
 * @category getters
 */
export const usageCost = (usage: Usage, prices: ModelPrices): number =>
  (usage.input * prices.input +
    usage.output * prices.output +
    (usage.cacheRead ?? 0) * (prices.cacheRead ?? prices.input) +
    (usage.cacheWrite ?? 0) * (prices.cacheWrite ?? prices.input)) / 1_000_000
