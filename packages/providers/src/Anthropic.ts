/**
 * A `Model` for the Anthropic Messages API, streaming.
 *
 * The system prompt goes in `system`; tool results become `tool_result` blocks of the user
 * message that follows the assistant message; images are base64 `image` blocks; thinking blocks
 * are replayed with their signatures (and redacted thinking as `redacted_thinking`), as the API
 * requires when tools and extended thinking are used together.
 *
 * Streaming: `text_delta` → `text_delta`, `thinking_delta` → `thinking_delta` (signatures are
 * kept for replay, not streamed), `input_json_delta` fragments → `toolcall_delta`s per content
 * block. The final message carries the usage (`input`, `output`, `cacheRead`, `cacheWrite`).
 *
 * Stop mapping: `end_turn` and `stop_sequence` → stop, `tool_use` → toolUse, `max_tokens` →
 * length, `refusal` → error. Tool arguments that are not a JSON object end the message `error`
 * naming the call. An `error` event ends the message `error` with Anthropic's text, unless it
 * came before anything was streamed and says the API is overloaded or failing: then the request
 * is retried like an HTTP 529.
 *
 * Failures: HTTP 408/409/429/5xx/529 and connections that cannot be made are retried (see
 * `RetryOptions`, honouring `Retry-After` and `x-should-retry`; each retry is logged and recorded
 * on the span); other statuses fail with a `ModelError` carrying Anthropic's message and a
 * `reason`; a redirect is never followed; a connection lost mid-stream, a malformed stream or a
 * time limit reached (see `TimeoutOptions`) fails with a `ModelError`, unless the stop reason had
 * already come (the answer is then kept). The key and every header value not marked public are
 * scrubbed from every message. Interrupting the stream cancels the HTTP request.
 *
 * Prompt caching (on by default): `cache_control` breakpoints on the last tool, the system prompt
 * and the two latest user turns.
 *
 * @since 0.1.0
 */
import { Model } from "@agentloop/core"
import { Effect, Layer, Option, Redacted } from "effect"
import { FetchHttpClient, HttpClient } from "effect/http"
import { ProviderConfigError } from "./Errors.ts"
import { messagesProtocol, messagesRequestBody } from "./internal/anthropicWire.ts"
import { checkCommonOptions, endpoint, resolveApiKey } from "./internal/options.ts"
import { makeProviderModel } from "./internal/transport.ts"
import type { ModelPrices } from "./Models.ts"
import type { RetryOptions } from "./Retry.ts"
import type { TimeoutOptions } from "./Timeouts.ts"

/**
 * Anthropic's endpoint, the default `baseUrl`.
 *
 * @since 0.1.0
 * @category constants
 */
export const ANTHROPIC_BASE_URL = "https://api.anthropic.com"

/**
 * The `anthropic-version` header sent unless `anthropicVersion` says otherwise.
 *
 * @since 0.1.0
 * @category constants
 */
export const ANTHROPIC_VERSION = "2023-06-01"

/**
 * The output budget when `maxTokens` is not given (the API requires one): 4096, which every
 * Claude model accepts.
 *
 * @since 0.1.0
 * @category constants
 */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096

/**
 * Options of an Anthropic model.
 *
 * - `model`: e.g. `claude-sonnet-4-5`.
 * - `baseUrl`: the API root without `/v1` (default `ANTHROPIC_BASE_URL`); requests go to
 *   `<baseUrl>/v1/messages`.
 * - `apiKey`: sent as `x-api-key`. When omitted and `baseUrl` is Anthropic's, the key is read
 *   from `ANTHROPIC_API_KEY` (through effect's `ConfigProvider`); another host (a proxy) gets no
 *   key unless one is passed here.
 * - `maxTokens`: the output budget (default `ANTHROPIC_DEFAULT_MAX_TOKENS`).
 * - `thinking`: `{ budgetTokens }` turns extended thinking on; the budget must be at least 1024
 *   and less than `maxTokens`, and `temperature` must then be left out (or 1).
 * - `temperature`, `anthropicVersion`, `headers` (extra request headers, e.g. `anthropic-beta`),
 *   `retry`.
 * - `publicHeaders`: names of `headers` whose values are not secret. Every other header value is
 *   treated as a credential and scrubbed, like the key, from every message, log line and span.
 * - `timeouts`: `TimeoutOptions` (first byte, idle, whole request; see `defaultTimeouts`).
 * - `promptCaching`: cache breakpoints on the tools, the system prompt and the two latest user
 *   turns (default true); `false` sends no `cache_control`.
 * - `prices`: `ModelPrices` for `usage.cost` (default: `modelInfo(model).prices`); `false`: no cost.
 *
 * @since 0.1.0
 * @category models
 */
export interface AnthropicOptions {
  readonly model: string
  readonly baseUrl?: string | undefined
  readonly apiKey?: string | Redacted.Redacted<string> | undefined
  readonly maxTokens?: number | undefined
  readonly temperature?: number | undefined
  readonly thinking?: { readonly budgetTokens: number } | undefined
  readonly anthropicVersion?: string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly retry?: RetryOptions | undefined
  readonly timeouts?: TimeoutOptions | undefined
  readonly publicHeaders?: ReadonlyArray<string> | undefined
  readonly prices?: ModelPrices | false | undefined
  readonly promptCaching?: boolean | undefined
}

/**
 * Builds the model from options, failing with a `ProviderConfigError` when they cannot work
 * (for example no API key for Anthropic's host). Needs an `HttpClient`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeAnthropic = (
  options: AnthropicOptions
): Effect.Effect<typeof Model.Service, ProviderConfigError, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const checked = yield* Effect.fromResult(checkCommonOptions(options, ANTHROPIC_BASE_URL))
    const maxTokens = checked.maxTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS
    const budget = options.thinking?.budgetTokens
    if (options.thinking !== undefined) {
      if (budget === undefined || !Number.isInteger(budget) || budget < 1024 || budget >= maxTokens) {
        return yield* new ProviderConfigError({
          message: `thinking.budgetTokens must be an integer >= 1024 and less than maxTokens (${maxTokens})`
        })
      }
      if (checked.temperature !== undefined && checked.temperature !== 1) {
        return yield* new ProviderConfigError({ message: "temperature must be left out (or 1) when thinking is on" })
      }
    }
    const version = options.anthropicVersion ?? ANTHROPIC_VERSION
    if (typeof version !== "string" || version.length === 0 || /[\r\n]/.test(version)) {
      return yield* new ProviderConfigError({ message: "anthropicVersion must be a non-empty string" })
    }
    const official = checked.baseUrl.hostname === "api.anthropic.com"
    const apiKey = yield* resolveApiKey({
      apiKey: options.apiKey,
      envVar: "ANTHROPIC_API_KEY",
      useEnv: official,
      required: official
    })
    const client = yield* HttpClient.HttpClient
    const key = Option.map(apiKey, Redacted.value)
    const promptCaching = options.promptCaching ?? true
    if (typeof promptCaching !== "boolean") {
      return yield* new ProviderConfigError({ message: "promptCaching must be a boolean" })
    }
    const settings = {
      model: checked.model,
      maxTokens,
      temperature: checked.temperature,
      thinkingBudget: budget,
      promptCaching
    }
    const provider = "Anthropic"
    return makeProviderModel(client, {
      provider,
      genAiProvider: "anthropic",
      url: endpoint(checked.baseUrl, "/v1/messages"),
      headers: {
        accept: "text/event-stream",
        "anthropic-version": version,
        ...checked.headers,
        ...(Option.isSome(key) ? { "x-api-key": key.value } : {})
      },
      model: checked.model,
      secrets: [...Option.toArray(key), ...checked.headerSecrets],
      retry: checked.retry,
      timeouts: checked.timeouts,
      prices: checked.prices,
      body: (request) => messagesRequestBody(request, settings),
      protocol: ({ clean, idPrefix, timestamp }) =>
        messagesProtocol({ provider, model: checked.model, timestamp, idPrefix, clean })
    })
  })

/**
 * The `Model` layer of Anthropic's Messages API. Needs an `HttpClient`.
 *
 * @since 0.1.0
 * @category layers
 */
export const anthropicLayer = (
  options: AnthropicOptions
): Layer.Layer<Model, ProviderConfigError, HttpClient.HttpClient> => Layer.effect(Model, makeAnthropic(options))

/**
 * `anthropicLayer` with effect's fetch-based `HttpClient` built in: the layer a CLI needs.
 *
 * @since 0.1.0
 * @category layers
 */
export const anthropicFetchLayer = (options: AnthropicOptions): Layer.Layer<Model, ProviderConfigError> =>
  Layer.provide(anthropicLayer(options), FetchHttpClient.layer)
