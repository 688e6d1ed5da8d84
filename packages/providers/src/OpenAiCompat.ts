/**
 * A `Model` for the OpenAI Chat Completions API and the servers that speak it: OpenAI itself,
 * Ollama, llama.cpp's `llama-server`, vLLM, LM Studio, OpenRouter, DeepSeek, Mistral...
 *
 * Requests stream (`"stream": true`, with usage requested by default). The transcript becomes
 * Chat Completions messages: the system prompt, user messages (text and images as data URLs),
 * assistant messages with `tool_calls`, and `tool` messages answering each call by
 * `tool_call_id`. Tools are sent as functions.
 *
 * Streaming: `content` deltas are `text_delta`s, `reasoning_content` / `reasoning` deltas
 * (DeepSeek, OpenRouter, llama.cpp) are `thinking_delta`s, tool-call argument fragments are
 * `toolcall_delta`s assembled per call `index` (parallel calls may interleave). The final
 * message carries the usage (`input` excludes cached prompt tokens, which are `cacheRead`).
 *
 * Stop mapping: `stop` (and `eos`, `eos_token`, `end_turn`, `stop_sequence`) → stop, `tool_calls`
 * → toolUse, `length` / `max_tokens` → length, `content_filter` → error, any other finish reason →
 * error naming it; a message with tool calls and a `stop` (or missing) finish reason is toolUse,
 * as local servers end tool calls that way. Arguments that are not a JSON object end the message
 * `error` naming the call; an error reported inside the stream ends it `error` with the server's
 * text.
 *
 * Failures: HTTP 408/409/429/5xx and connections that cannot be made are retried (see
 * `RetryOptions`; each retry is logged and recorded on the span); other statuses fail with a
 * `ModelError` carrying the server's message and a `reason`; a redirect is never followed; a
 * connection lost mid-stream, a malformed stream, an answer that is not an event stream or a time
 * limit reached (see `TimeoutOptions`) fails with a `ModelError`, unless the finish reason had
 * already come (the answer is then kept). The key and every header value not marked public are
 * scrubbed from every message. Interrupting the stream (an aborted run) cancels the HTTP request.
 *
 * @since 0.1.0
 */
import { Model } from "@agentloop/core"
import { Effect, Layer, Option, Redacted } from "effect"
import { FetchHttpClient, HttpClient } from "effect/http"
import { ProviderConfigError } from "./Errors.ts"
import { chatProtocol, chatRequestBody } from "./internal/openAiWire.ts"
import { checkCommonOptions, endpoint, resolveApiKey } from "./internal/options.ts"
import { makeProviderModel } from "./internal/transport.ts"
import type { ModelPrices } from "./Models.ts"
import type { RetryOptions } from "./Retry.ts"
import type { TimeoutOptions } from "./Timeouts.ts"

/**
 * OpenAI's own endpoint, the default `baseUrl`.
 *
 * @since 0.1.0
 * @category constants
 */
export const OPENAI_BASE_URL = "https://api.openai.com/v1"

/**
 * Options of an OpenAI-compatible model.
 *
 * - `model`: the model name the server knows (`gpt-4o`, `llama3.1`, `qwen2.5-coder:7b`...).
 * - `baseUrl`: the API root, up to and including `/v1` (default `OPENAI_BASE_URL`); requests go
 *   to `<baseUrl>/chat/completions`. Ollama: `http://127.0.0.1:11434/v1`; llama.cpp:
 *   `http://127.0.0.1:8080/v1`.
 * - `apiKey`: sent as `Authorization: Bearer <key>`. When omitted and `baseUrl` is OpenAI's, the
 *   key is read from `OPENAI_API_KEY` (through effect's `ConfigProvider`); other servers get no
 *   key unless one is passed here, so a local server never receives your OpenAI key.
 * - `maxTokens`: the output budget, sent as `maxTokensField` (default: `max_completion_tokens`
 *   for OpenAI's host, which newer models require, `max_tokens` elsewhere).
 * - `reasoningEffort`: `low`, `medium` or `high`, sent as `reasoning_effort` (OpenAI's reasoning
 *   models, and servers that take the same field); left out by default. A model that does not
 *   reason answers with an error naming the field.
 * - `temperature`, `headers` (extra request headers, e.g. `OpenAI-Organization`, or Azure's
 *   `api-key`), `includeUsage` (send `stream_options.include_usage`, default true: turn it off
 *   for servers that reject it), `retry`.
 * - `publicHeaders`: names of `headers` whose values are not secret. Every other header value is
 *   treated as a credential and scrubbed, like the key, from every message, log line and span.
 * - `timeouts`: `TimeoutOptions` (first byte, idle, whole request; see `defaultTimeouts`).
 * - `prices`: `ModelPrices` for `usage.cost` (default: `modelInfo(model).prices`); `false`: no cost.
 *
 * @since 0.1.0
 * @category models
 */
export interface OpenAiCompatOptions {
  readonly model: string
  readonly baseUrl?: string | undefined
  readonly apiKey?: string | Redacted.Redacted<string> | undefined
  readonly maxTokens?: number | undefined
  readonly maxTokensField?: "max_tokens" | "max_completion_tokens" | undefined
  readonly temperature?: number | undefined
  readonly reasoningEffort?: "low" | "medium" | "high" | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly includeUsage?: boolean | undefined
  readonly retry?: RetryOptions | undefined
  readonly timeouts?: TimeoutOptions | undefined
  readonly publicHeaders?: ReadonlyArray<string> | undefined
  readonly prices?: ModelPrices | false | undefined
}

const isOpenAiHost = (url: URL) => url.hostname === "api.openai.com"

/**
 * Builds the model from options, failing with a `ProviderConfigError` when they cannot work
 * (for example no API key for OpenAI's host). Needs an `HttpClient`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeOpenAiCompat = (
  options: OpenAiCompatOptions
): Effect.Effect<typeof Model.Service, ProviderConfigError, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const checked = yield* Effect.fromResult(checkCommonOptions(options, OPENAI_BASE_URL))
    const { includeUsage, maxTokensField } = options
    if (maxTokensField !== undefined && maxTokensField !== "max_tokens" && maxTokensField !== "max_completion_tokens") {
      return yield* new ProviderConfigError({
        message: "maxTokensField must be \"max_tokens\" or \"max_completion_tokens\""
      })
    }
    const effort = options.reasoningEffort
    if (effort !== undefined && effort !== "low" && effort !== "medium" && effort !== "high") {
      return yield* new ProviderConfigError({ message: "reasoningEffort must be \"low\", \"medium\" or \"high\"" })
    }
    if (includeUsage !== undefined && typeof includeUsage !== "boolean") {
      return yield* new ProviderConfigError({ message: "includeUsage must be a boolean" })
    }
    const official = isOpenAiHost(checked.baseUrl)
    const apiKey = yield* resolveApiKey({
      apiKey: options.apiKey,
      envVar: "OPENAI_API_KEY",
      useEnv: official,
      required: official
    })
    const client = yield* HttpClient.HttpClient
    const key = Option.map(apiKey, Redacted.value)
    const settings = {
      model: checked.model,
      maxTokens: checked.maxTokens,
      maxTokensField: maxTokensField ?? (official ? "max_completion_tokens" : "max_tokens"),
      temperature: checked.temperature,
      includeUsage: includeUsage ?? true,
      reasoningEffort: effort
    } as const
    const provider = official ? "OpenAI" : "the OpenAI-compatible server"
    return makeProviderModel(client, {
      provider,
      // the conventions name every server spoken to with OpenAI's API `openai` (server.address tells them apart)
      genAiProvider: "openai",
      url: endpoint(checked.baseUrl, "/chat/completions"),
      headers: {
        accept: "text/event-stream",
        ...checked.headers,
        ...(Option.isSome(key) ? { authorization: `Bearer ${key.value}` } : {})
      },
      model: checked.model,
      secrets: [...Option.toArray(key), ...checked.headerSecrets],
      retry: checked.retry,
      timeouts: checked.timeouts,
      prices: checked.prices,
      body: (request) => chatRequestBody(request, settings),
      protocol: ({ clean, idPrefix, timestamp }) =>
        chatProtocol({ provider, model: checked.model, timestamp, idPrefix, clean })
    })
  })

/**
 * The `Model` layer of an OpenAI-compatible server. Needs an `HttpClient`.
 *
 * @since 0.1.0
 * @category layers
 */
export const openAiCompatLayer = (
  options: OpenAiCompatOptions
): Layer.Layer<Model, ProviderConfigError, HttpClient.HttpClient> => Layer.effect(Model, makeOpenAiCompat(options))

/**
 * `openAiCompatLayer` with effect's fetch-based `HttpClient` built in: the layer a CLI needs.
 *
 * @since 0.1.0
 * @category layers
 */
export const openAiCompatFetchLayer = (options: OpenAiCompatOptions): Layer.Layer<Model, ProviderConfigError> =>
  Layer.provide(openAiCompatLayer(options), FetchHttpClient.layer)
