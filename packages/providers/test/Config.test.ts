/**
 * Building a provider: options that cannot work, and API keys, fail with a
 * `ProviderConfigError` naming the option, before any request is made.
 */
import type { Model } from "@agentloop/core"
import { anthropicFetchLayer, openAiCompatFetchLayer, ProviderConfigError } from "@agentloop/providers"
import type { AnthropicOptions, OpenAiCompatOptions } from "@agentloop/providers"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"

const withEnv = <E>(layer: Layer.Layer<Model, E>, env: Record<string, string>) =>
  layer.pipe(Layer.provide(Layer.succeed(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env }))))

/** The error building the layer fails with. */
const buildError = (layer: Layer.Layer<Model, ProviderConfigError>, env: Record<string, string> = {}) =>
  Effect.flip(Layer.build(withEnv(layer, env)))

const openAi = (options: Partial<OpenAiCompatOptions>) =>
  openAiCompatFetchLayer({ model: "m", baseUrl: "http://127.0.0.1:1/v1", ...options } as OpenAiCompatOptions)
const anthropic = (options: Partial<AnthropicOptions>) =>
  anthropicFetchLayer({ model: "m", baseUrl: "http://127.0.0.1:1", ...options } as AnthropicOptions)

describe("API keys", () => {
  it.effect("OpenAI's host without a key fails, saying where a key comes from", () =>
    Effect.gen(function*() {
      const error = yield* buildError(openAiCompatFetchLayer({ model: "gpt-4o" }))
      assert.instanceOf(error, ProviderConfigError)
      assert.strictEqual(error.message, "missing API key: pass apiKey or set OPENAI_API_KEY")
    }))

  it.effect("Anthropic's host without a key fails, saying where a key comes from", () =>
    Effect.gen(function*() {
      const error = yield* buildError(anthropicFetchLayer({ model: "claude-sonnet-4-5" }))
      assert.strictEqual(error.message, "missing API key: pass apiKey or set ANTHROPIC_API_KEY")
    }))

  it.effect("the official hosts take their key from the environment (building makes no request)", () =>
    Effect.gen(function*() {
      yield* Layer.build(withEnv(openAiCompatFetchLayer({ model: "gpt-4o" }), { OPENAI_API_KEY: "sk-env" }))
      yield* Layer.build(withEnv(anthropicFetchLayer({ model: "claude" }), { ANTHROPIC_API_KEY: "sk-ant-env" }))
    }))

  it.effect("an empty key is refused", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* buildError(openAi({ apiKey: "" }))).message, "apiKey must not be empty")
      assert.strictEqual(
        (yield* buildError(anthropicFetchLayer({ model: "c" }), { ANTHROPIC_API_KEY: "" })).message,
        "missing API key: pass apiKey or set ANTHROPIC_API_KEY"
      )
    }))

  it.effect("local servers need no key", () =>
    Effect.gen(function*() {
      yield* Layer.build(withEnv(openAi({}), {}))
      yield* Layer.build(withEnv(anthropic({}), {}))
    }))
})

describe("options", () => {
  const cases: ReadonlyArray<readonly [string, Layer.Layer<Model, ProviderConfigError>, string]> = [
    ["empty model", openAi({ model: " " }), "model must be a non-empty string"],
    ["not a URL", openAi({ baseUrl: "localhost:11434" }), "baseUrl must be an http:// or https:// URL"],
    ["not http", anthropic({ baseUrl: "ftp://example.com" }), "baseUrl must be an http:// or https:// URL"],
    [
      "credentials in the URL",
      openAi({ baseUrl: "http://user:pw@127.0.0.1/v1" }),
      "baseUrl must not contain credentials; pass apiKey or headers instead"
    ],
    ["zero tokens", openAi({ maxTokens: 0 }), "maxTokens must be a positive integer"],
    ["fractional tokens", anthropic({ maxTokens: 10.5 }), "maxTokens must be a positive integer"],
    ["negative temperature", openAi({ temperature: -1 }), "temperature must be a finite number >= 0"],
    ["NaN temperature", anthropic({ temperature: Number.NaN }), "temperature must be a finite number >= 0"],
    ["bad header name", openAi({ headers: { "bad name": "x" } }), "headers: \"bad name\" is not a valid header name"],
    [
      "header injection",
      anthropic({ headers: { "x-a": "1\r\nx-b: 2" } }),
      "headers: the value of \"x-a\" must be a string without line breaks"
    ],
    ["bad retry", openAi({ retry: { maxRetries: -2 } }), "retry.maxRetries must be an integer >= 0"],
    [
      "bad max tokens field",
      openAi({ maxTokensField: "max_output_tokens" as "max_tokens" }),
      "maxTokensField must be \"max_tokens\" or \"max_completion_tokens\""
    ],
    [
      "thinking budget too small",
      anthropic({ thinking: { budgetTokens: 500 } }),
      "thinking.budgetTokens must be an integer >= 1024 and less than maxTokens (4096)"
    ],
    [
      "thinking budget not below maxTokens",
      anthropic({ maxTokens: 2000, thinking: { budgetTokens: 2000 } }),
      "thinking.budgetTokens must be an integer >= 1024 and less than maxTokens (2000)"
    ],
    [
      "temperature with thinking",
      anthropic({ temperature: 0.3, thinking: { budgetTokens: 1024 } }),
      "temperature must be left out (or 1) when thinking is on"
    ]
  ]
  for (const [name, layer, message] of cases) {
    it.effect(name, () =>
      Effect.gen(function*() {
        const error = yield* buildError(layer)
        assert.instanceOf(error, ProviderConfigError)
        assert.strictEqual(error.message, message)
      }))
  }

  it.effect("an error never contains the API key", () =>
    Effect.gen(function*() {
      const error = yield* buildError(openAi({ apiKey: "sk-secret-999", maxTokens: -1 }))
      assert.notInclude(JSON.stringify(error), "sk-secret-999")
      assert.notInclude(String(error), "sk-secret-999")
    }))
})

describe("timeouts, public headers, prices and caching options", () => {
  const cases: ReadonlyArray<readonly [string, Partial<OpenAiCompatOptions>, string]> = [
    [
      "negative idle",
      { timeouts: { idle: -1 } },
      "timeouts.idle must be a positive duration (or Infinity for no limit)"
    ],
    [
      "zero first byte",
      { timeouts: { firstByte: 0 } },
      "timeouts.firstByte must be a positive duration (or Infinity for no limit)"
    ],
    [
      "unparseable request",
      { timeouts: { request: "soon" as unknown as number } },
      "timeouts.request must be a positive duration (or Infinity for no limit)"
    ],
    ["timeouts not an object", { timeouts: 5 as unknown as object }, "timeouts must be an object"],
    [
      "publicHeaders not a list",
      { publicHeaders: "x-title" as unknown as Array<string> },
      "publicHeaders must be an array of header names"
    ],
    [
      "negative price",
      { prices: { input: -1, output: 1 } },
      "prices.input must be a finite number >= 0 (US dollars per million tokens)"
    ],
    [
      "missing output price",
      { prices: { input: 1 } as unknown as { input: number; output: number } },
      "prices.output must be a finite number >= 0 (US dollars per million tokens)"
    ]
  ]
  for (const [name, options, message] of cases) {
    it.effect(`${name} is refused, naming the option`, () =>
      Effect.gen(function*() {
        const error = yield* buildError(openAi(options))
        assert.strictEqual(error.message, message)
      }))
  }

  it.effect("promptCaching must be a boolean", () =>
    Effect.gen(function*() {
      const error = yield* buildError(anthropic({ apiKey: "k", promptCaching: "yes" as unknown as boolean }))
      assert.strictEqual(error.message, "promptCaching must be a boolean")
    }))

  it.effect("Infinity turns a limit off", () =>
    Effect.gen(function*() {
      yield* Layer.build(
        withEnv(openAi({ timeouts: { firstByte: "Infinity", idle: Infinity, request: "Infinity" } }), {})
      )
    }))
})
