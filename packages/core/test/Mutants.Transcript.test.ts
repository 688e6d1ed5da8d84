/**
 * The transcript checks on the paths the loop tests do not reach (found by mutation testing):
 * large batches (more than 8 calls, looked up by id), transcripts the fast path must hand to the
 * full procedure, values whose reading throws, and each violation `pairingViolations` reports.
 */
import {
  checkAssistantMessage,
  checkToolResult,
  duplicateCallId,
  errorResult,
  pairingViolations,
  prepareTranscript
} from "@agentloop/core"
import type { Message, ToolCall, ToolResultMessage } from "@agentloop/core"
import { assistant, toolCall, user } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"

const resultFor = (call: ToolCall, text = `${call.id} result`): ToolResultMessage => ({
  role: "toolResult",
  toolCallId: call.id,
  toolName: call.name,
  content: [{ type: "text", text }],
  isError: false
})

const calls = (n: number): Array<ToolCall> => Array.from({ length: n }, (_, i) => toolCall(`c${i}`, "e"))

const prepared = (input: ReadonlyArray<unknown>): Array<Message> => {
  const checked = prepareTranscript(input)
  if (!checked.ok) assert.fail(`expected the transcript to be accepted, got: ${checked.error}`)
  return checked.value
}

const rejected = (input: ReadonlyArray<unknown>): string => {
  const checked = prepareTranscript(input)
  if (checked.ok) assert.fail("expected the transcript to be rejected")
  return checked.error
}

const ids = (messages: ReadonlyArray<Message>) => messages.map((m) => m.role === "toolResult" ? m.toolCallId : m.role)

describe("duplicate call ids, in batches of any size", () => {
  for (const n of [2, 8, 9, 20]) {
    it(`a batch of ${n} calls: the repeated id is found wherever it is, and distinct ids pass`, () => {
      const distinct = calls(n)
      assert.strictEqual(duplicateCallId(distinct), undefined)
      const repeated = [...distinct.slice(0, n - 1), toolCall("c0", "e")]
      assert.strictEqual(duplicateCallId(repeated), "c0")
      const message = assistant("toolUse", { calls: repeated })
      const checked = checkAssistantMessage(message)
      assert.isFalse(checked.ok)
      if (!checked.ok) assert.match(checked.error, /repeats tool call id "c0"/)
      assert.isTrue(checkAssistantMessage(assistant("toolUse", { calls: distinct })).ok)
    })
  }
})

describe("prepareTranscript: transcripts the fast path hands to the full procedure", () => {
  it("an Array subclass comes back as a plain array (the caller's class never leaks into the run)", () => {
    class Log extends Array<unknown> {}
    const input = Log.from([user("hi"), assistant("stop", { text: "hello" }), user("more")])
    const out = prepared(input)
    assert.strictEqual(Object.getPrototypeOf(out), Array.prototype)
    assert.deepStrictEqual([...out], [...input])
  })

  it("a batch of 9 calls with its results in another order is put into call order", () => {
    const batch = calls(9)
    const shuffled = [...batch].reverse().map((c) => resultFor(c))
    const out = prepared([user("hi"), assistant("toolUse", { calls: batch }), ...shuffled, user("go on")])
    assert.deepStrictEqual(ids(out), ["user", "assistant", ...batch.map((c) => c.id), "user"])
  })

  it("a batch of 9 calls in call order, complete, is kept as it is", () => {
    const batch = calls(9)
    const input = [user("hi"), assistant("toolUse", { calls: batch }), ...batch.map((c) => resultFor(c))]
    const out = prepared(input)
    assert.deepStrictEqual(out, input)
    assert.notStrictEqual(out, input)
  })

  it("a batch of 9 calls whose last result is missing: that call is paired with a skipped result (interrupted)", () => {
    const batch = calls(9)
    const out = prepared([
      user("hi"),
      assistant("toolUse", { calls: batch }),
      ...batch.slice(0, 8).map((c) => resultFor(c)),
      user("go on")
    ])
    assert.deepStrictEqual(ids(out), ["user", "assistant", ...batch.map((c) => c.id), "user"])
    const last = out[10] as ToolResultMessage
    assert.deepStrictEqual(last.details, { skipped: true, reason: "interrupted" })
  })

  it("a batch of 9 calls whose last result answers a call it did not make: an orphan, named", () => {
    const batch = calls(9)
    const error = rejected([
      user("hi"),
      assistant("toolUse", { calls: batch }),
      ...batch.slice(0, 8).map((c) => resultFor(c)),
      resultFor(toolCall("zz", "e"))
    ])
    assert.match(
      error,
      /^messages\[10\] is a tool result for call "zz", which the assistant message before it did not make/
    )
  })

  it("results for two calls with one id are refused, even when each call has a result", () => {
    const a = toolCall("a", "e")
    const error = rejected([user("hi"), assistant("toolUse", { calls: [a, a] }), resultFor(a), resultFor(a)])
    assert.strictEqual(error, "messages[1] repeats tool call id \"a\"")
  })

  it("a result for the only call of a message, naming another tool, is refused", () => {
    const a = toolCall("a", "e")
    const error = rejected([
      user("hi"),
      assistant("toolUse", { calls: [a] }),
      { ...resultFor(a), toolName: "x" },
      user("go on")
    ])
    assert.strictEqual(error, "messages[2] answers call \"a\" as tool \"x\", but that call is to \"e\"")
  })

  it("a user message in the place of a result is not taken for one, whatever extra keys it carries", () => {
    const a = toolCall("a", "e")
    const lookalike = { role: "user", content: "a done", toolCallId: "a", toolName: "e" }
    const out = prepared([user("hi"), assistant("toolUse", { calls: [a] }), lookalike])
    assert.deepStrictEqual(ids(out), ["user", "assistant", "a", "user"])
    assert.deepStrictEqual((out[2] as ToolResultMessage).details, { skipped: true, reason: "interrupted" })
    assert.strictEqual(out[3], lookalike as unknown)
  })

  it("a second result for the only call of a message is refused", () => {
    const a = toolCall("a", "e")
    const error = rejected([user("hi"), assistant("toolUse", { calls: [a] }), resultFor(a), resultFor(a, "again")])
    assert.strictEqual(error, "messages[3] is a second tool result for call \"a\"")
  })

  it("a message whose reading throws is reported as not a valid message, never thrown", () => {
    const hostile = new Proxy({}, {
      get: () => {
        throw new Error("no reading me")
      },
      getPrototypeOf: () => Object.prototype
    })
    const checked = prepareTranscript([user("hi"), hostile])
    assert.isFalse(checked.ok)
    if (!checked.ok) assert.match(checked.error, /^messages\[1\] is not a valid message/)
  })
})

describe("pairingViolations names every way a transcript breaks pairing", () => {
  const a = toolCall("a", "e")
  const b = toolCall("b", "e")
  const callAB = assistant("toolUse", { calls: [a, b] })

  it("a sound transcript has none", () => {
    assert.deepStrictEqual(pairingViolations([user("hi"), callAB, resultFor(a), resultFor(b), user("more")]), [])
  })

  it("a result that follows no assistant message", () => {
    assert.deepStrictEqual(pairingViolations([user("hi"), resultFor(a)]), [
      "messages[1]: tool result for \"a\" does not answer the calls before it"
    ])
  })

  it("a result beyond the calls of its message", () => {
    assert.deepStrictEqual(
      pairingViolations([user("hi"), callAB, resultFor(a), resultFor(b), resultFor(toolCall("x", "e"))]),
      [
        "messages[4]: extra tool result for \"x\""
      ]
    )
  })

  it("results out of call order", () => {
    assert.deepStrictEqual(pairingViolations([user("hi"), callAB, resultFor(b), resultFor(a)]), [
      "messages[2]: expected the result for call \"a\" (call order), found \"b\"",
      "messages[3]: expected the result for call \"b\" (call order), found \"a\""
    ])
  })

  it("a call with no result, at the end or before another message", () => {
    assert.deepStrictEqual(pairingViolations([user("hi"), callAB, resultFor(a)]), [
      "messages[2]: tool call \"b\" has no result"
    ])
    assert.deepStrictEqual(pairingViolations([user("hi"), callAB, user("wait")]), [
      "messages[1]: tool call \"a\" has no result",
      "messages[1]: tool call \"b\" has no result"
    ])
  })
})

describe("results built for and checked against a call", () => {
  const call = toolCall("a", "e")

  it("an error result given no details has no details key at all (not one holding undefined)", () => {
    const result = errorResult(call, "nope")
    assert.deepStrictEqual(result, {
      role: "toolResult",
      toolCallId: "a",
      toolName: "e",
      content: [{ type: "text", text: "nope" }],
      isError: true
    })
    assert.isFalse("details" in result)
  })

  it("a result the schema accepts is kept as it is, also one the fast guard leaves to the schema", () => {
    const plain = resultFor(call)
    assert.strictEqual(checkToolResult(call, plain), plain)
    // `details` is `unknown`: present and undefined is valid (the guard only refuses it for typed keys)
    const withUndefined = { ...resultFor(call), details: undefined }
    assert.strictEqual(checkToolResult(call, withUndefined), withUndefined)
  })

  it("a malformed result, or one answering another call, becomes an error result marked invalidResult", () => {
    const malformed = checkToolResult(call, { role: "toolResult", toolCallId: "a" })
    assert.isTrue(malformed.isError)
    assert.deepStrictEqual(malformed.details, { invalidResult: true })
    assert.match((malformed.content[0] as { text: string }).text, /^Tool "e" returned a malformed result: /)
    const other = checkToolResult(call, resultFor(toolCall("b", "e")))
    assert.deepStrictEqual(other.details, { invalidResult: true })
    assert.strictEqual(
      (other.content[0] as { text: string }).text,
      "Tool \"e\" returned a result for another call (id \"b\", tool \"e\")"
    )
    assert.deepStrictEqual(checkToolResult(call, resultFor(toolCall("a", "x"))).details, { invalidResult: true })
  })

  it("a schema error of several lines is indented under the line that names the problem", () => {
    const checked = checkAssistantMessage({
      role: "assistant",
      content: [{ type: "toolCall", id: "a" }],
      stopReason: "stop"
    })
    assert.isFalse(checked.ok)
    if (!checked.ok) {
      const [first, ...rest] = checked.error.split("\n")
      assert.match(first!, /^the model's final message is malformed: /)
      assert.isAbove(rest.length, 0, checked.error)
      for (const line of rest) assert.match(line, /^ {2}/, checked.error)
    }
    const input = prepareTranscript([user("hi"), {
      role: "assistant",
      content: [{ type: "toolCall", id: "a" }],
      stopReason: "stop"
    }])
    assert.isFalse(input.ok)
    if (!input.ok) {
      const [first, ...rest] = input.error.split("\n")
      assert.match(first!, /^messages\[1\] is not a valid message: /)
      assert.isAbove(rest.length, 0, input.error)
      for (const line of rest) assert.match(line, /^ {2}/, input.error)
    }
  })
})
