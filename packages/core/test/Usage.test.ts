/**
 * `addUsage`, the one way usages are summed (the CLI's session totals and the viewer's use it).
 */
import { assert, describe, it } from "@effect/vitest"
import { addUsage } from "@agentloop/core"

describe("addUsage", () => {
  it("sums every field; undefined is no usage, and the other side is returned as it is", () => {
    const a = { input: 1, output: 2, cacheRead: 3, cacheWrite: 4, cost: 0.5 }
    const b = { input: 10, output: 20, cacheRead: 30, cacheWrite: 40, cost: 0.25 }
    assert.deepStrictEqual(addUsage(a, b), { input: 11, output: 22, cacheRead: 33, cacheWrite: 44, cost: 0.75 })
    assert.strictEqual(addUsage(a, undefined), a)
    assert.strictEqual(addUsage(undefined, b), b)
    assert.isUndefined(addUsage(undefined, undefined))
    assert.deepStrictEqual(a, { input: 1, output: 2, cacheRead: 3, cacheWrite: 4, cost: 0.5 }, "not mutated")
  })

  it("keeps a field missing on both sides missing, and counts one missing on one side as 0", () => {
    const sum = addUsage({ input: 1, output: 1 }, { input: 2, output: 3 })
    assert.deepStrictEqual(sum, { input: 3, output: 4 })
    assert.isFalse(sum !== undefined && "cost" in sum)
    assert.deepStrictEqual(addUsage({ input: 1, output: 1, cost: 2 }, { input: 0, output: 0, cacheRead: 5 }), {
      input: 1,
      output: 1,
      cacheRead: 5,
      cost: 2
    })
  })
})
