/**
 * Option checks and API-key lookup shared by the providers. Every problem is a
 * `ProviderConfigError` naming the option; no message ever contains a key.
 */
import { Config, Effect, Option, Redacted, Result } from "effect"
import { ProviderConfigError } from "../Errors.ts"
import type { ModelPrices } from "../Models.ts"
import { makeRetryPolicy } from "../Retry.ts"
import type { RetryOptions, RetryPolicy } from "../Retry.ts"
import { makeTimeoutPolicy } from "../Timeouts.ts"
import type { TimeoutOptions, TimeoutPolicy } from "../Timeouts.ts"

/** The options both providers take. */
export interface CommonOptions {
  readonly model: string
  readonly baseUrl?: string | undefined
  readonly apiKey?: string | Redacted.Redacted<string> | undefined
  readonly maxTokens?: number | undefined
  readonly temperature?: number | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly publicHeaders?: ReadonlyArray<string> | undefined
  readonly retry?: RetryOptions | undefined
  readonly timeouts?: TimeoutOptions | undefined
  readonly prices?: ModelPrices | false | undefined
}

/** `CommonOptions` checked, with the base URL normalised and the retry policy resolved. */
export interface CheckedOptions {
  readonly model: string
  readonly baseUrl: URL
  readonly maxTokens: number | undefined
  readonly temperature: number | undefined
  readonly headers: Readonly<Record<string, string>>
  /** The values of `headers` not marked public: scrubbed from every message. */
  readonly headerSecrets: ReadonlyArray<string>
  readonly retry: RetryPolicy
  readonly timeouts: TimeoutPolicy
  /** `undefined`: look the model up in the price table; `false`: no cost. */
  readonly prices: ModelPrices | false | undefined
}

const configError = (message: string) => Result.fail(new ProviderConfigError({ message }))

const headerName = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/** Checks the common options; `defaultBaseUrl` applies when `baseUrl` is absent. */
export const checkCommonOptions = (
  options: CommonOptions,
  defaultBaseUrl: string
): Result.Result<CheckedOptions, ProviderConfigError> => {
  if (typeof options !== "object" || options === null) return configError("options must be an object")
  const { maxTokens, model, temperature } = options
  if (typeof model !== "string" || model.trim().length === 0) return configError("model must be a non-empty string")
  if (maxTokens !== undefined && !(Number.isInteger(maxTokens) && maxTokens > 0)) {
    return configError("maxTokens must be a positive integer")
  }
  if (temperature !== undefined && !(Number.isFinite(temperature) && temperature >= 0)) {
    return configError("temperature must be a finite number >= 0")
  }
  const rawUrl = options.baseUrl ?? defaultBaseUrl
  const parsed = Result.try(() => new URL(rawUrl))
  if (Result.isFailure(parsed) || (parsed.success.protocol !== "http:" && parsed.success.protocol !== "https:")) {
    return configError("baseUrl must be an http:// or https:// URL")
  }
  const baseUrl = parsed.success
  if (baseUrl.username !== "" || baseUrl.password !== "") {
    return configError("baseUrl must not contain credentials; pass apiKey or headers instead")
  }
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(options.headers ?? {})) {
    if (!headerName.test(name)) return configError(`headers: "${name}" is not a valid header name`)
    if (typeof value !== "string" || /[\r\n]/.test(value)) {
      return configError(`headers: the value of "${name}" must be a string without line breaks`)
    }
    headers[name.toLowerCase()] = value
  }
  const publicHeaders = options.publicHeaders ?? []
  if (!Array.isArray(publicHeaders) || !publicHeaders.every((name) => typeof name === "string")) {
    return configError("publicHeaders must be an array of header names")
  }
  const publicNames = new Set(publicHeaders.map((name) => name.toLowerCase()))
  const headerSecrets = Object.entries(headers).flatMap(([name, value]) => (publicNames.has(name) ? [] : [value]))
  if (options.apiKey !== undefined && Redacted.value(toRedacted(options.apiKey)).length === 0) {
    return configError("apiKey must not be empty")
  }
  const prices = options.prices
  if (prices !== undefined && prices !== false) {
    const problem = checkPrices(prices)
    if (problem !== undefined) return configError(problem)
  }
  return Result.gen(function*() {
    const retry = yield* makeRetryPolicy(options.retry)
    const timeouts = yield* makeTimeoutPolicy(options.timeouts)
    return { model, baseUrl, maxTokens, temperature, headers, headerSecrets, retry, timeouts, prices }
  })
}

const checkPrices = (prices: ModelPrices): string | undefined => {
  if (typeof prices !== "object" || prices === null) return "prices must be an object or false"
  for (const field of ["input", "output", "cacheRead", "cacheWrite"] as const) {
    const value = prices[field]
    const required = field === "input" || field === "output"
    if (value === undefined && !required) continue
    if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
      return `prices.${field} must be a finite number >= 0 (US dollars per million tokens)`
    }
  }
  return undefined
}

const toRedacted = (key: string | Redacted.Redacted<string>): Redacted.Redacted<string> =>
  Redacted.isRedacted(key) ? key : Redacted.make(key)

/** `base` joined with `path` (`https://host/v1` + `/chat/completions`), query kept. */
export const endpoint = (base: URL, path: string): string => {
  const url = new URL(base.href)
  url.pathname = `${url.pathname.replace(/\/+$/, "")}${path}`
  return url.href
}

/**
 * The API key: the `apiKey` option, else the environment variable `envVar` (read through effect's
 * `ConfigProvider`) when the base URL is the provider's own host. A key from the environment is
 * never sent to another host, so pointing a provider at a local or third-party server cannot leak
 * it. `required`: whether a missing key is an error.
 */
export const resolveApiKey = (options: {
  readonly apiKey: string | Redacted.Redacted<string> | undefined
  readonly envVar: string
  readonly useEnv: boolean
  readonly required: boolean
}): Effect.Effect<Option.Option<Redacted.Redacted<string>>, ProviderConfigError> => {
  if (options.apiKey !== undefined) return Effect.succeed(Option.some(toRedacted(options.apiKey)))
  const fromEnv = options.useEnv ?
    Effect.mapError(
      Config.option(Config.Redacted(options.envVar)),
      () => new ProviderConfigError({ message: `${options.envVar} could not be read` })
    ) :
    Effect.succeed(Option.none<Redacted.Redacted<string>>())
  return Effect.flatMap(fromEnv, (key) => {
    const present = Option.filter(key, (k) => Redacted.value(k).length > 0)
    if (Option.isNone(present) && options.required) {
      return Effect.fail(
        new ProviderConfigError({
          message: options.useEnv ?
            `missing API key: pass apiKey or set ${options.envVar}` :
            "missing API key: pass apiKey (the environment's key is only sent to the provider's own host)"
        })
      )
    }
    return Effect.succeed(present)
  })
}
