import {
  backoffDelay,
  defaultRetryPolicy,
  isRetryableStatus,
  makeRetryPolicy,
  retryAfterOf,
  shouldRetryResponse
} from "@agentloop/providers"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Result } from "effect"
import { Headers } from "effect/http"

const millis = (d: Duration.Duration) => Duration.toMillis(d)
const failureMessage = <A>(result: Result.Result<A, { readonly message: string }>) =>
  Result.isFailure(result) ? result.failure.message : "no failure"

describe("makeRetryPolicy", () => {
  it("fills in the defaults", () => {
    assert.deepStrictEqual(makeRetryPolicy(), Result.succeed(defaultRetryPolicy))
    assert.strictEqual(defaultRetryPolicy.maxRetries, 3)
  })

  it("takes durations in any effect form", () => {
    const policy = makeRetryPolicy({
      maxRetries: 0,
      initialDelay: 10,
      maxDelay: "2 seconds",
      maxRetryAfter: Duration.minutes(5)
    })
    assert.isTrue(Result.isSuccess(policy))
    if (Result.isSuccess(policy)) {
      assert.deepStrictEqual(
        [policy.success.maxRetries, millis(policy.success.initialDelay), millis(policy.success.maxDelay)],
        [0, 10, 2000]
      )
      assert.strictEqual(millis(policy.success.maxRetryAfter), 300_000)
    }
  })

  it("rejects options that cannot work, naming the option", () => {
    assert.strictEqual(failureMessage(makeRetryPolicy({ maxRetries: -1 })), "retry.maxRetries must be an integer >= 0")
    assert.strictEqual(failureMessage(makeRetryPolicy({ maxRetries: 1.5 })), "retry.maxRetries must be an integer >= 0")
    assert.strictEqual(failureMessage(makeRetryPolicy({ jitter: 2 })), "retry.jitter must be a number between 0 and 1")
    assert.strictEqual(
      failureMessage(makeRetryPolicy({ initialDelay: -5 })),
      "retry.initialDelay must be a finite, non-negative duration"
    )
    assert.strictEqual(
      failureMessage(makeRetryPolicy({ maxRetryAfter: "Infinity" })),
      "retry.maxRetryAfter must be a finite, non-negative duration"
    )
    assert.strictEqual(
      failureMessage(makeRetryPolicy({ initialDelay: "2 seconds", maxDelay: "1 second" })),
      "retry.maxDelay must not be less than retry.initialDelay"
    )
  })
})

describe("backoffDelay", () => {
  it("doubles from initialDelay, is capped at maxDelay, and jitter takes up to its fraction away", () => {
    const policy = {
      ...defaultRetryPolicy,
      initialDelay: Duration.millis(500),
      maxDelay: Duration.seconds(5),
      jitter: 0.25
    }
    assert.deepStrictEqual([0, 1, 2, 3, 4, 10].map((retry) => millis(backoffDelay(policy, retry, 0))), [
      500,
      1000,
      2000,
      4000,
      5000,
      5000
    ])
    assert.strictEqual(millis(backoffDelay(policy, 1, 0.5)), 875)
    assert.strictEqual(millis(backoffDelay(policy, 1, 0.999999)), 750.00025)
    assert.strictEqual(millis(backoffDelay({ ...policy, jitter: 0 }, 2, 0.9)), 2000)
  })
})

describe("which responses are retried", () => {
  it("408, 409, 429 and 5xx (Anthropic's 529 included); not other 4xx", () => {
    assert.deepStrictEqual(
      [400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 504, 529].filter(isRetryableStatus),
      [408, 409, 429, 500, 502, 503, 504, 529]
    )
  })

  it("x-should-retry overrides the status rule both ways", () => {
    assert.isFalse(shouldRetryResponse(503, Headers.fromInput({ "x-should-retry": "false" })))
    assert.isTrue(shouldRetryResponse(400, Headers.fromInput({ "x-should-retry": "true" })))
    assert.isTrue(shouldRetryResponse(503, Headers.fromInput({ "x-should-retry": "maybe" })))
  })
})

describe("retryAfterOf", () => {
  const now = Date.UTC(2025, 0, 1, 12, 0, 0)
  const delay = (input: Record<string, string>) => {
    const d = retryAfterOf(Headers.fromInput(input), now)
    return d === undefined ? undefined : millis(d)
  }

  it("reads seconds, an HTTP date, and OpenAI's retry-after-ms (which wins)", () => {
    assert.strictEqual(delay({ "retry-after": "7" }), 7000)
    assert.strictEqual(delay({ "retry-after": "Wed, 01 Jan 2025 12:00:30 GMT" }), 30_000)
    assert.strictEqual(delay({ "retry-after-ms": "250", "retry-after": "7" }), 250)
  })

  it("ignores what it cannot read", () => {
    assert.isUndefined(delay({}))
    assert.isUndefined(delay({ "retry-after": "soon" }))
    assert.strictEqual(delay({ "retry-after-ms": "x", "retry-after": "1" }), 1000)
  })
})
