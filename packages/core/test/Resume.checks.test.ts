/**
 * Every message of a resumed run is checked (SPEC §5): the loop takes no message on trust, not
 * even one it appended itself in this process. (SPEC §5 allows skipping the check of messages the
 * loop produced and froze; measured, skipping it saved nothing — the fast guard costs what looking
 * for a brand costs — and the brand cost about 40 bytes a message, so the loop checks all.) So:
 *
 * - a loop-produced transcript resumes as it is (checked, unchanged);
 * - a message of `result.messages` changed in place afterwards is checked like any other, and
 *   rejected when bad, naming the message;
 * - a copy (`structuredClone`, a spread, a parsed file) is checked;
 * - a bad message smuggled in among the loop's own is caught, and pairing is checked on every
 *   transcript.
 */
import { parseTranscript, prepareTranscript } from "@agentloop/core"
import type { AgentRunResult, Message, UserMessage } from "@agentloop/core"
import { echoTool, runScripted, toolCall, turn, user } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Queue } from "effect"

/**
 * A run that appends every kind of message: an assistant message with usage and calls, a tool
 * result, an error result (unknown tool), a follow-up message, skipped results (a turn cut by
 * the token limit) and a final text.
 */
const producedRun: Effect.Effect<AgentRunResult> = Effect.gen(function*() {
  const followUps = yield* Queue.unbounded<UserMessage>()
  yield* Queue.offer(followUps, { role: "user", content: "and once more" })
  const run = yield* runScripted(
    [
      turn.toolCalls([toolCall("c1", "echo", { text: "hi" }), toolCall("c2", "missing")]),
      turn.text("first answer", { input: 3, output: 4, cacheRead: 1 }),
      turn.truncated([toolCall("c3", "echo")]),
      turn.text("never asked")
    ].slice(0, 3),
    { tools: [echoTool("echo")], followUps, messages: [user("start")] }
  )
  assert.deepStrictEqual(run.violations, [])
  return run.result
})

const mutate = (message: Message): unknown => ({ ...message, role: "nobody" })

describe("a run resumed from messages the loop appended", () => {
  it.effect("resumes as it is: checked, unchanged, and runs as usual", () =>
    Effect.gen(function*() {
      const result = yield* producedRun
      assert.deepStrictEqual(result.messages.map((m) => m.role), [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "assistant",
        "user",
        "assistant",
        "toolResult"
      ])
      const resumed = [...result.messages, user("next prompt")]
      const checked = prepareTranscript(resumed)
      assert.deepStrictEqual(checked.ok ? checked.value : [], resumed)
      const next = yield* runScripted([turn.text("again")], { messages: resumed })
      assert.deepStrictEqual(next.violations, [])
      assert.strictEqual(next.result.reason, "stop")
    }))

  it.effect("checks a message of result.messages changed in place afterwards, and names it", () =>
    Effect.gen(function*() {
      const changes: Array<[number, (m: Record<string, unknown>) => void]> = [
        [1, (m) => void (m["stopReason"] = "nonsense")],
        [2, (m) => void (m["toolCallId"] = "")],
        [4, (m) => void (m["usage"] = { input: "many", output: 1 })],
        [5, (m) => void (m["content"] = 42)],
        [1, (m) => void ((m["content"] as Array<Record<string, unknown>>)[0]!["arguments"] = "not an object")]
      ]
      for (const [at, change] of changes) {
        const result = yield* producedRun
        change(result.messages[at] as unknown as Record<string, unknown>)
        const checked = prepareTranscript([...result.messages, user("next")])
        assert.isFalse(checked.ok, `messages[${at}] changed`)
        assert.include(checked.ok ? "" : checked.error, `messages[${at}] is not a valid message`)
        // the run says the same, and the model is never asked
        const next = yield* runScripted([turn.text("never")], { messages: [...result.messages, user("next")] })
        assert.strictEqual(next.result.reason, "error")
        assert.include(next.result.error ?? "", `messages[${at}] is not a valid message`)
      }
    }))

  it.effect("checks a copy: structuredClone, a spread, a file's lines, JSON", () =>
    Effect.gen(function*() {
      const result = yield* producedRun
      const copies = [
        structuredClone(result.messages),
        result.messages.map((m) => ({ ...m })),
        (yield* parseTranscript(result.messages.map((m) => JSON.stringify(m) + "\n").join(""))).messages,
        JSON.parse(JSON.stringify(result.messages)) as Array<Message>
      ]
      for (const copy of copies) assert.isTrue(prepareTranscript(copy).ok)
      const clone = structuredClone(result.messages) as unknown as Array<Record<string, unknown>>
      clone[1]!["stopReason"] = "nonsense"
      const rejected = prepareTranscript(clone)
      assert.isFalse(rejected.ok)
      assert.include(rejected.ok ? "" : rejected.error, "messages[1] is not a valid message")
    }))

  it.effect("catches a bad message smuggled in among the loop's own, and checks pairing", () =>
    Effect.gen(function*() {
      const result = yield* producedRun
      const bad: Array<[number, unknown, string]> = [
        [1, mutate(result.messages[1]!), "messages[1] is not a valid message"],
        [5, { role: "user", content: 42 }, "messages[5] is not a valid message"],
        [2, { ...result.messages[2]!, toolCallId: "" }, "messages[2] is not a valid message"],
        [4, { ...result.messages[4]!, usage: { input: "many", output: 1 } }, "messages[4] is not a valid message"]
      ]
      for (const [at, message, error] of bad) {
        const smuggled: Array<unknown> = [...result.messages]
        smuggled[at] = message
        const checked = prepareTranscript(smuggled)
        assert.isFalse(checked.ok, JSON.stringify(message))
        assert.include(checked.ok ? "" : checked.error, error)
      }
      // a result moved out of its block is an orphan
      const moved = [...result.messages]
      moved.push(moved.splice(2, 1)[0]!)
      const orphan = prepareTranscript(moved)
      assert.isFalse(orphan.ok)
      assert.include(orphan.ok ? "" : orphan.error, "orphan tool result")
    }))
})
