/**
 * How long a provider request may wait. Three limits, each ending the turn with a `ModelError`
 * (reason `timeout`) that names the limit and how long it was:
 *
 * - `firstByte`: from sending the request until the response headers arrive. Default 2 minutes:
 *   hosted APIs answer in seconds; a local server (Ollama) may first load the model from disk.
 * - `idle`: between two events of the stream, and from the headers to the first event. Default
 *   3 minutes: reasoning models may think for minutes before their first token without sending
 *   anything (OpenAI's Chat Completions sends no keep-alive), and a local server may process a
 *   long prompt first. It stays below the 5 minutes after which Node's fetch gives up on its own
 *   with an unclear error.
 * - `request`: one HTTP attempt from start to end of stream. Default 20 minutes: a long answer
 *   (32k output tokens at 30 tokens a second) takes about that long.
 *
 * Once the provider has said why the answer ended (a finish reason), the stream gets at most
 * `FINISH_GRACE` more to send its trailing usage and end marker; after that, or if the connection
 * drops then, the answer is kept as it is.
 *
 * A timeout is not retried: the limits are the caller's bound on waiting.
 *
 * @since 0.1.0
 */
import { Duration, Option, Result } from "effect"
import { ProviderConfigError } from "./Errors.ts"

/**
 * The time limits of a request. Every field is optional; `Infinity` (or `"Infinity"`) turns a
 * limit off.
 *
 * @since 0.1.0
 * @category models
 */
export interface TimeoutOptions {
  readonly firstByte?: Duration.Input | undefined
  readonly idle?: Duration.Input | undefined
  readonly request?: Duration.Input | undefined
}

/**
 * Validated `TimeoutOptions` with every default filled in.
 *
 * @since 0.1.0
 * @category models
 */
export interface TimeoutPolicy {
  readonly firstByte: Duration.Duration
  readonly idle: Duration.Duration
  readonly request: Duration.Duration
}

/**
 * The limits used when no `timeouts` option is given: `firstByte` 2 minutes, `idle` 3 minutes,
 * `request` 20 minutes.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultTimeouts: TimeoutPolicy = {
  firstByte: Duration.minutes(2),
  idle: Duration.minutes(3),
  request: Duration.minutes(20)
}

/**
 * How long a stream may stay open after the provider said why the answer ended, waiting for the
 * trailing usage and end marker (or the idle limit, if it is shorter): 5 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const FINISH_GRACE: Duration.Duration = Duration.seconds(5)

const limit = (
  field: keyof TimeoutOptions,
  input: Duration.Input | undefined
): Result.Result<Duration.Duration, ProviderConfigError> => {
  if (input === undefined) return Result.succeed(defaultTimeouts[field])
  const parsed = Duration.fromInput(input)
  if (Option.isNone(parsed) || Duration.isNegative(parsed.value) || Duration.isZero(parsed.value)) {
    return Result.fail(
      new ProviderConfigError({ message: `timeouts.${field} must be a positive duration (or Infinity for no limit)` })
    )
  }
  return Result.succeed(parsed.value)
}

/**
 * Validates `TimeoutOptions` and fills in the defaults.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeTimeoutPolicy = (options: TimeoutOptions = {}): Result.Result<TimeoutPolicy, ProviderConfigError> => {
  if (typeof options !== "object" || options === null) {
    return Result.fail(new ProviderConfigError({ message: "timeouts must be an object" }))
  }
  return Result.gen(function*() {
    return {
      firstByte: yield* limit("firstByte", options.firstByte),
      idle: yield* limit("idle", options.idle),
      request: yield* limit("request", options.request)
    }
  })
}
