/**
 * The table of known models: names a user or a server may give, context windows for compaction,
 * dated prices, and the cost of a usage.
 */
import { knownModels, modelInfo, usageCost } from "@agentloop/providers"
import { assert, describe, it } from "@effect/vitest"

describe("modelInfo", () => {
  it("knows the models the README names, with a context window and dated prices", () => {
    for (const name of ["gpt-4.1", "gpt-4o", "claude-sonnet-4-5"]) {
      const info = modelInfo(name)
      assert.isAbove(info.contextWindow ?? 0, 0, name)
      assert.isDefined(info.prices, name)
      assert.match(info.pricesAsOf ?? "", /^\d{4}-\d{2}-\d{2}$/, name)
    }
    assert.deepStrictEqual(modelInfo("gpt-4.1").prices, { input: 2, output: 8, cacheRead: 0.5, cacheWrite: 2 })
    assert.deepStrictEqual(modelInfo("claude-sonnet-4-5").prices, {
      input: 3,
      output: 15,
      cacheRead: 0.3,
      cacheWrite: 3.75
    })
    assert.strictEqual(modelInfo("claude-sonnet-4-5").contextWindow, 200_000)
    assert.strictEqual(modelInfo("gpt-4.1").contextWindow, 1_047_576)
  })

  it("accepts dated snapshots, vendor prefixes, dotted Claude versions and -latest", () => {
    for (const name of ["gpt-4.1-2025-04-14", "openai/gpt-4.1", "GPT-4.1"]) {
      assert.strictEqual(modelInfo(name), knownModels["gpt-4.1"], name)
    }
    for (const name of ["claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4.5", "claude-sonnet-4-5-latest"]) {
      assert.strictEqual(modelInfo(name), knownModels["claude-sonnet-4-5"], name)
    }
    assert.strictEqual(modelInfo("claude-sonnet-4-20250514"), knownModels["claude-sonnet-4-0"])
  })

  it("an unknown model is {}, and so are names that only look like table keys", () => {
    assert.deepStrictEqual(modelInfo("qwen2.5-coder:7b"), {})
    assert.deepStrictEqual(modelInfo("gpt-4.1-turbo-preview"), {})
    assert.deepStrictEqual(modelInfo("constructor"), {})
    assert.deepStrictEqual(modelInfo("__proto__"), {})
  })
})

describe("usageCost", () => {
  it("prices each kind of token, cache tokens at input price when the prices leave them out", () => {
    const usage = { input: 1_000_000, output: 500_000, cacheRead: 2_000_000, cacheWrite: 100_000 }
    assert.closeTo(
      usageCost(usage, { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 }),
      3 + 7.5 + 0.6 + 0.375,
      1e-9
    )
    assert.closeTo(usageCost(usage, { input: 1, output: 2 }), 1 + 1 + 2 + 0.1, 1e-9)
    assert.strictEqual(usageCost({ input: 0, output: 0 }, { input: 1, output: 1 }), 0)
  })
})
