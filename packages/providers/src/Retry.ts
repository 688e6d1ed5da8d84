/**
 * When and how long a provider request is retried: rate limits (HTTP 429), overloaded or failing
 * servers (5xx, Anthropic's 529), request timeouts (408), connections that could not be made, and
 * streams that failed before they produced anything. Retries back off exponentially with jitter;
 * a `Retry-After` (or `retry-after-ms`) header sets the delay instead. A provider's
 * `x-should-retry` header, when present, overrides the status rule.
 *
 * Nothing is retried once a stream has emitted an event: a retry would repeat deltas the caller
 * has already seen. Redirects and the client's own time limits (`TimeoutOptions`) are never
 * retried.
 *
 * @since 0.1.0
 */
import { Duration, Option, Result } from "effect"
import { Headers } from "effect/http"
import { ProviderConfigError } from "./Errors.ts"

/**
 * How failed requests are retried. Every field is optional.
 *
 * - `maxRetries`: how many times a request is retried (at most `maxRetries + 1` attempts).
 *   Default 3.
 * - `initialDelay`: the delay before the first retry; it doubles with each retry. Default 500 ms.
 * - `maxDelay`: the cap of the exponential delay. Default 20 s.
 * - `jitter`: the fraction of each delay that is randomised away, in `[0, 1]` (0: none, 1: "full
 *   jitter"). Default 0.25.
 * - `maxRetryAfter`: the longest `Retry-After` the client is willing to wait; a server asking for
 *   longer fails the request at once. Default 60 s.
 *
 * @since 0.1.0
 * @category models
 */
export interface RetryOptions {
  readonly maxRetries?: number | undefined
  readonly initialDelay?: Duration.Input | undefined
  readonly maxDelay?: Duration.Input | undefined
  readonly jitter?: number | undefined
  readonly maxRetryAfter?: Duration.Input | undefined
}

/**
 * Validated `RetryOptions` with every default filled in.
 *
 * @since 0.1.0
 * @category models
 */
export interface RetryPolicy {
  readonly maxRetries: number
  readonly initialDelay: Duration.Duration
  readonly maxDelay: Duration.Duration
  readonly jitter: number
  readonly maxRetryAfter: Duration.Duration
}

/**
 * The policy used when no `retry` option is given.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultRetryPolicy: RetryPolicy = {
  maxRetries: 3,
  initialDelay: Duration.millis(500),
  maxDelay: Duration.seconds(20),
  jitter: 0.25,
  maxRetryAfter: Duration.seconds(60)
}

const duration = (
  field: string,
  input: Duration.Input | undefined,
  fallback: Duration.Duration
): Result.Result<Duration.Duration, ProviderConfigError> => {
  if (input === undefined) return Result.succeed(fallback)
  const parsed = Duration.fromInput(input)
  if (Option.isNone(parsed) || !Duration.isFinite(parsed.value) || Duration.isNegative(parsed.value)) {
    return Result.fail(new ProviderConfigError({ message: `retry.${field} must be a finite, non-negative duration` }))
  }
  return Result.succeed(parsed.value)
}

/**
 * Validates `RetryOptions` and fills in the defaults.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeRetryPolicy = (options: RetryOptions = {}): Result.Result<RetryPolicy, ProviderConfigError> => {
  const { jitter, maxRetries } = options
  if (maxRetries !== undefined && !(Number.isInteger(maxRetries) && maxRetries >= 0)) {
    return Result.fail(new ProviderConfigError({ message: "retry.maxRetries must be an integer >= 0" }))
  }
  if (jitter !== undefined && !(Number.isFinite(jitter) && jitter >= 0 && jitter <= 1)) {
    return Result.fail(new ProviderConfigError({ message: "retry.jitter must be a number between 0 and 1" }))
  }
  return Result.gen(function*() {
    const initialDelay = yield* duration("initialDelay", options.initialDelay, defaultRetryPolicy.initialDelay)
    const maxDelay = yield* duration("maxDelay", options.maxDelay, defaultRetryPolicy.maxDelay)
    const maxRetryAfter = yield* duration("maxRetryAfter", options.maxRetryAfter, defaultRetryPolicy.maxRetryAfter)
    if (Duration.isLessThan(maxDelay, initialDelay)) {
      return yield* Result.fail(
        new ProviderConfigError({ message: "retry.maxDelay must not be less than retry.initialDelay" })
      )
    }
    return {
      maxRetries: maxRetries ?? defaultRetryPolicy.maxRetries,
      initialDelay,
      maxDelay,
      jitter: jitter ?? defaultRetryPolicy.jitter,
      maxRetryAfter
    }
  })
}

/**
 * The delay before retry number `retry` (0 for the first retry) when the server gave no
 * `Retry-After`: `min(maxDelay, initialDelay * 2^retry)`, of which a random fraction of up to
 * `jitter` is taken away. `random` is a number in `[0, 1)`.
 *
 * @since 0.1.0
 * @category getters
 */
export const backoffDelay = (policy: RetryPolicy, retry: number, random: number): Duration.Duration => {
  const exponential = Duration.toMillis(policy.initialDelay) * Math.pow(2, retry)
  const capped = Math.min(Duration.toMillis(policy.maxDelay), exponential)
  return Duration.millis(capped * (1 - policy.jitter * random))
}

/**
 * Whether a response with this status is worth retrying: 408, 409, 429 and every 5xx (Anthropic
 * answers 529 when it is overloaded).
 *
 * @since 0.1.0
 * @category predicates
 */
export const isRetryableStatus = (status: number): boolean =>
  status === 408 || status === 409 || status === 429 || status >= 500

/**
 * Whether a failed response should be retried: the provider's `x-should-retry` header when it
 * says `true` or `false`, otherwise `isRetryableStatus`.
 *
 * @since 0.1.0
 * @category predicates
 */
export const shouldRetryResponse = (status: number, headers: Headers.Headers): boolean => {
  const hint = headers["x-should-retry"]
  if (hint === "true") return true
  if (hint === "false") return false
  return isRetryableStatus(status)
}

/**
 * The delay a response asks for: `retry-after-ms` (milliseconds, sent by OpenAI) or `Retry-After`
 * (seconds or an HTTP date, measured from `nowMillis`). `undefined` when neither is present or
 * valid.
 *
 * @since 0.1.0
 * @category getters
 */
export const retryAfterOf = (headers: Headers.Headers, nowMillis: number): Duration.Duration | undefined => {
  const millis = headers["retry-after-ms"]
  if (millis !== undefined) {
    const value = Number(millis.trim())
    if (millis.trim() !== "" && Number.isFinite(value) && value >= 0) return Duration.millis(value)
  }
  const header = headers["retry-after"]
  if (header === undefined) return undefined
  const parsed = Headers.parseRetryAfter(header)
  return Result.isSuccess(parsed) ? Headers.retryAfterDelay(parsed.success, nowMillis) : undefined
}
