import { decideTurn, skippedResult, skipText } from "@agentloop/core"
import type { SkipReason, StopReason, TurnDecision } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"

const finish = (decision: TurnDecision) => {
  assert.strictEqual(decision._tag, "Finish")
  return decision as Extract<TurnDecision, { _tag: "Finish" }>
}

describe("decideTurn (SPEC §2, one row each)", () => {
  it("stop with no calls finishes the run with stop", () => {
    const d = finish(decideTurn("stop", 0))
    assert.strictEqual(d.reason, "stop")
    assert.strictEqual(d.skip, undefined)
    assert.strictEqual(d.error, undefined)
  })

  it("toolUse with calls executes them", () => {
    assert.deepStrictEqual(decideTurn("toolUse", 1), { _tag: "Execute" })
    assert.deepStrictEqual(decideTurn("toolUse", 7), { _tag: "Execute" })
  })

  it("toolUse with no call ends the run with error and nothing to pair", () => {
    const d = finish(decideTurn("toolUse", 0))
    assert.strictEqual(d.reason, "error")
    assert.strictEqual(d.skip, undefined)
    assert.match(d.error!, /toolUse.*no tool call/)
  })

  it("stop with calls is a protocol contradiction: skip them (unexpected-stop), end with error", () => {
    const d = finish(decideTurn("stop", 2))
    assert.strictEqual(d.reason, "error")
    assert.strictEqual(d.skip, "unexpected-stop")
    assert.strictEqual(
      d.error,
      "protocol violation: the model ended its turn with stopReason \"stop\" but made 2 tool call(s); they were " +
        "not executed"
    )
  })

  for (const calls of [0, 1, 3]) {
    it(`length with ${calls} call(s) executes nothing and ends with length`, () => {
      const d = finish(decideTurn("length", calls))
      assert.strictEqual(d.reason, "length")
      assert.strictEqual(d.skip, "length")
    })

    it(`error with ${calls} call(s) executes nothing and ends with error, using the model's message`, () => {
      const d = finish(decideTurn("error", calls, "overloaded"))
      assert.strictEqual(d.reason, "error")
      assert.strictEqual(d.skip, "error")
      assert.strictEqual(d.error, "overloaded")
      // without the model's own message the run still says what happened
      assert.strictEqual(finish(decideTurn("error", calls)).error, "the model ended its turn with an error")
    })

    it(`aborted with ${calls} call(s) executes nothing and ends with aborted`, () => {
      const d = finish(decideTurn("aborted", calls))
      assert.strictEqual(d.reason, "aborted")
      assert.strictEqual(d.skip, "aborted")
    })
  }

  it("only toolUse with calls ever executes", () => {
    const reasons: ReadonlyArray<StopReason> = ["stop", "toolUse", "length", "error", "aborted"]
    for (const reason of reasons) {
      for (const calls of [0, 1, 2]) {
        assert.strictEqual(decideTurn(reason, calls)._tag === "Execute", reason === "toolUse" && calls > 0)
      }
    }
  })

  it("a skipped result is an error result with details { skipped, reason } and a text saying why", () => {
    const result = skippedResult({ type: "toolCall", id: "c1", name: "read", arguments: {} }, "length")
    assert.deepStrictEqual(result, {
      role: "toolResult",
      toolCallId: "c1",
      toolName: "read",
      content: [{ type: "text", text: "Tool call was not executed because the model response was truncated." }],
      details: { skipped: true, reason: "length" },
      isError: true
    })
    assert.match(skipText("interrupted"), /interrupted/)
  })

  it("each skip reason has its own text, telling the model why the call has no real result", () => {
    const texts: Record<SkipReason, string> = {
      "unexpected-stop": "Tool call was not executed because the model ended its turn without asking for tool use.",
      length: "Tool call was not executed because the model response was truncated.",
      error: "Tool call was not executed because the model response ended with an error.",
      aborted: "Tool call was not executed because the run was aborted.",
      interrupted: "Tool call has no result because the run that made it was interrupted before it finished.",
      denied: "Tool call was not executed because it was denied."
    }
    for (const [reason, text] of Object.entries(texts) as Array<[SkipReason, string]>) {
      assert.strictEqual(skipText(reason), text, reason)
      const result = skippedResult({ type: "toolCall", id: "c1", name: "t", arguments: {} }, reason)
      assert.deepStrictEqual(result.content, [{ type: "text", text }], reason)
    }
  })
})
