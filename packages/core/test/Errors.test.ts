/** `ModelError`: a message is all it needs; providers may say why, with the status and the retries. */
import { ModelError, ToolError } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"

describe("ModelError", () => {
  it("is built from a message alone, as SPEC §7 shows", () => {
    const error = new ModelError({ message: "boom" })
    assert.strictEqual(error._tag, "ModelError")
    assert.strictEqual(error.message, "boom")
    assert.isUndefined(error.reason)
    assert.isUndefined(error.status)
  })

  it("carries the reason, the status and the retries when a provider knows them", () => {
    const error = new ModelError({
      message: "slow down",
      reason: "rate_limit",
      status: 429,
      retried: true,
      attempts: 4
    })
    assert.deepStrictEqual(
      [error.reason, error.status, error.retried, error.attempts],
      ["rate_limit", 429, true, 4]
    )
  })

  it("encodes and decodes with its optional fields", () => {
    const error = new ModelError({ message: "m", reason: "redirect", status: 301 })
    const encoded = Schema.encodeSync(ModelError)(error)
    assert.deepStrictEqual(encoded, { _tag: "ModelError", message: "m", reason: "redirect", status: 301 })
    assert.strictEqual(Schema.decodeUnknownSync(ModelError)(encoded).reason, "redirect")
    assert.throws(() => Schema.decodeUnknownSync(ModelError)({ _tag: "ModelError", message: "m", reason: "nope" }))
  })

  it("ToolError is unchanged: a message", () => {
    assert.strictEqual(new ToolError({ message: "x" }).message, "x")
  })
})
