import { addUsage, runInputError } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"

describe("addUsage", () => {
  it("sums counts, counts missing cache fields as 0, sums cost once either has one, never changes its inputs", () => {
    const a = { input: 1, output: 2 }
    const b = { input: 10, output: 20, cacheRead: 3, cost: 0.5 }
    assert.deepStrictEqual(addUsage(a, b), { input: 11, output: 22, cacheRead: 3, cacheWrite: 0, cost: 0.5 })
    assert.deepStrictEqual(a, { input: 1, output: 2 })
    assert.deepStrictEqual(addUsage(undefined, a), { input: 1, output: 2, cacheRead: 0, cacheWrite: 0 })
    assert.strictEqual(addUsage(a, undefined), a)
    assert.isUndefined(addUsage(undefined, undefined))
    const full = { input: 1, output: 2, cacheRead: 3, cacheWrite: 4, cost: 0.5 }
    assert.deepStrictEqual(addUsage(full, { input: 10, output: 20, cacheRead: 30, cacheWrite: 40, cost: 0.25 }), {
      input: 11,
      output: 22,
      cacheRead: 33,
      cacheWrite: 44,
      cost: 0.75
    })
    assert.deepStrictEqual(full, { input: 1, output: 2, cacheRead: 3, cacheWrite: 4, cost: 0.5 }, "not mutated")
  })
})

describe("runInputError", () => {
  it("is the loop's own bad-input check: undefined for good input, the run's error otherwise", () => {
    assert.isUndefined(runInputError({ messages: [{ role: "user", content: "go" }] }))
    assert.match(runInputError({ messages: [{ role: "user", content: "go" }], maxSteps: 0 })!, /^bad input: /)
    assert.match(
      runInputError({
        messages: [{ role: "user", content: "go" }, { role: "assistant", content: [], stopReason: "stop" }]
      })!,
      /^bad input: the messages end with the model's answer/
    )
  })
})
