/**
 * Messages the loop produced itself (SPEC §5; internal/trusted.ts): the loop freezes every
 * message it appends and remembers it, and `prepareTranscript` does not check such a message
 * again. The rule is "every message that did not come from this loop is checked", so:
 *
 * - everything the loop appends (assistant messages, tool results, skipped and error results,
 *   follow-up and steering messages) is frozen, and an attempt to change it throws (test modules
 *   are strict mode);
 * - a loop-produced transcript resumes with no message checked again (the shortcut is counted);
 * - a copy (`structuredClone`, a spread), a parsed file, a hand-built message is checked, and
 *   rejected when bad, also when smuggled in among trusted messages;
 * - the differential test: on transcripts mixing loop-produced messages, copies, mutated copies
 *   and hand-built ones, `prepareTranscript` gives exactly what it gives with the shortcut off.
 *
 * The shortcut is observed and switched off through `isTrusted`, the one place it is consulted.
 */
import { parseTranscript, prepareTranscript } from "@agentloop/core"
import type { AgentRunResult, AssistantMessage, Message, ToolResultMessage, UserMessage } from "@agentloop/core"
import { echoTool, runScripted, toolCall, turn, user } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Queue } from "effect"
import * as fc from "fast-check"
import { vi } from "vitest"
import { isTrusted, trust } from "../src/internal/trusted.ts"

const shortcut = vi.hoisted(() => ({ enabled: true, hits: 0 }))

vi.mock("../src/internal/trusted.ts", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../src/internal/trusted.ts")>()
  return {
    ...actual,
    isTrusted: (u: unknown) => {
      if (!shortcut.enabled) return false
      const trusted = actual.isTrusted(u)
      if (trusted) shortcut.hits++
      return trusted
    }
  }
})

/** `prepareTranscript`, with the number of messages it took on trust. */
const prepareCounting = (input: ReadonlyArray<unknown>) => {
  shortcut.hits = 0
  const checked = prepareTranscript(input)
  return { checked, trusted: shortcut.hits }
}

/** `prepareTranscript` with the shortcut off: every message checked. */
const prepareWithoutShortcut = (input: ReadonlyArray<unknown>) => {
  shortcut.enabled = false
  try {
    return prepareTranscript(input)
  } finally {
    shortcut.enabled = true
  }
}

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

describe("messages the loop appended", () => {
  it.effect("are frozen, each part the schema reads, and a change throws", () =>
    Effect.gen(function*() {
      const result = yield* producedRun
      const roles = result.messages.map((m) => m.role)
      assert.deepStrictEqual(roles, [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "assistant",
        "user",
        "assistant",
        "toolResult"
      ])
      const [input, ...produced] = result.messages
      assert.isFalse(Object.isFrozen(input), "the caller's input message is the caller's: not frozen, not trusted")
      assert.isFalse(isTrusted(input))
      for (const message of produced) {
        assert.isTrue(isTrusted(message), JSON.stringify(message))
        assert.isTrue(Object.isFrozen(message))
        assert.isTrue(Object.isFrozen(message.content))
        if (Array.isArray(message.content)) { for (const part of message.content) assert.isTrue(Object.isFrozen(part)) }
      }
      const assistant = produced[0] as AssistantMessage
      const call = assistant.content.find((p) => p.type === "toolCall")!
      assert.isTrue(Object.isFrozen(call.type === "toolCall" ? call.arguments : undefined))
      const withUsage = produced[3] as AssistantMessage
      assert.isTrue(withUsage.usage !== undefined && Object.isFrozen(withUsage.usage))
      // the kinds: an executed result, an error result, a follow-up, a skipped result
      const [executed, unknownTool] = [produced[1] as ToolResultMessage, produced[2] as ToolResultMessage]
      assert.isFalse(executed.isError)
      assert.isTrue(unknownTool.isError)
      assert.deepStrictEqual((produced[6] as ToolResultMessage).details, { skipped: true, reason: "length" })
      // strict mode: every attempt to change a trusted message throws, and the message is unchanged
      const before = JSON.stringify(result.messages)
      assert.throws(() => {
        ;(assistant as { stopReason: string }).stopReason = "nonsense"
      }, TypeError)
      assert.throws(() => {
        ;(assistant.content as Array<unknown>).push({ type: "image" })
      }, TypeError)
      assert.throws(() => {
        ;(call as { id: string }).id = ""
      }, TypeError)
      assert.throws(() => {
        delete (executed as { toolName?: string }).toolName
      }, TypeError)
      assert.throws(() => Object.defineProperty(executed, "isError", { get: () => "yes" }), TypeError)
      assert.strictEqual(JSON.stringify(result.messages), before)
    }))

  it.effect("resume without being checked again; the caller's own messages still are", () =>
    Effect.gen(function*() {
      const result = yield* producedRun
      const resumed = [...result.messages, user("next prompt")]
      const { checked, trusted } = prepareCounting(resumed)
      assert.isTrue(checked.ok)
      // every assistant message and tool result the loop appended (user messages are guarded:
      // their guard costs about what the lookup would)
      const produced = result.messages.slice(1).filter((m) => m.role !== "user").length
      assert.strictEqual(trusted, produced, "every loop-produced assistant message and result, and only those")
      assert.deepStrictEqual(checked.ok ? checked.value : [], resumed)
      // a run resumed from them runs as usual
      const next = yield* runScripted([turn.text("again")], { messages: resumed })
      assert.deepStrictEqual(next.violations, [])
      assert.strictEqual(next.result.reason, "stop")
    }))

  it.effect("a transcript that opens with another's assistant message is guarded all the way", () =>
    Effect.gen(function*() {
      const result = yield* producedRun
      const foreign = structuredClone(result.messages)
      const mixed = [...foreign, ...result.messages.slice(1)]
      const { checked, trusted } = prepareCounting(mixed)
      assert.isTrue(checked.ok)
      assert.strictEqual(trusted, 0)
      // the outcome is the same as with no shortcut at all
      assert.deepStrictEqual(checked, prepareWithoutShortcut(mixed))
    }))

  it.effect("a copy is checked: structuredClone, a spread, a file's lines, a hand-built twin", () =>
    Effect.gen(function*() {
      const result = yield* producedRun
      const copies = [
        structuredClone(result.messages),
        result.messages.map((m) => ({ ...m })),
        (yield* parseTranscript(result.messages.map((m) => JSON.stringify(m) + "\n").join(""))).messages,
        JSON.parse(JSON.stringify(result.messages)) as Array<Message>
      ]
      for (const copy of copies) {
        const { checked, trusted } = prepareCounting(copy)
        assert.isTrue(checked.ok)
        assert.strictEqual(trusted, 0)
      }
      // a copy is not frozen: changed, it is checked and rejected, naming the message
      const clone = structuredClone(result.messages) as unknown as Array<Record<string, unknown>>
      clone[1]!["stopReason"] = "nonsense"
      const rejected = prepareCounting(clone)
      assert.isFalse(rejected.checked.ok)
      assert.include(rejected.checked.ok ? "" : rejected.checked.error, "messages[1] is not a valid message")
    }))

  it.effect("a bad message smuggled in among trusted ones is caught", () =>
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
        const { checked } = prepareCounting(smuggled)
        assert.isFalse(checked.ok, JSON.stringify(message))
        assert.include(checked.ok ? "" : checked.error, error)
      }
      // pairing is checked on every transcript, trusted messages or not: a trusted result moved out
      // of its block is an orphan
      const moved = [...result.messages]
      moved.push(moved.splice(2, 1)[0]!)
      const orphan = prepareCounting(moved)
      assert.isFalse(orphan.checked.ok)
      assert.include(orphan.checked.ok ? "" : orphan.checked.error, "orphan tool result")
    }))

  it.effect("differential: with and without the shortcut, prepareTranscript gives the same on any mix", () =>
    Effect.gen(function*() {
      const result = yield* producedRun
      const produced = result.messages
      const variants = (m: Message): ReadonlyArray<unknown> => [
        m,
        structuredClone(m),
        { ...m },
        mutate(m),
        { ...m, content: 7 },
        { ...m, timestamp: Number.NaN }
      ]
      fc.assert(
        fc.property(
          fc.array(fc.tuple(fc.nat({ max: produced.length - 1 }), fc.nat({ max: 5 })), { maxLength: 12 }),
          fc.boolean(),
          (picks, whole) => {
            const input: Array<unknown> = whole ? [...produced] : []
            for (const [i, v] of picks) {
              if (whole) input[i] = variants(produced[i]!)[v]
              else input.push(variants(produced[i]!)[v])
            }
            assert.deepStrictEqual(prepareTranscript(input), prepareWithoutShortcut(input))
          }
        ),
        { numRuns: 500 }
      )
    }))
})

describe("trust", () => {
  it("freezes and trusts a plain message, returns it, and copies nothing", () => {
    const message: UserMessage = { role: "user", content: [{ type: "text", text: "hi" }] }
    assert.strictEqual(trust(message), message)
    assert.isTrue(isTrusted(message))
    assert.isTrue(Object.isFrozen(message) && Object.isFrozen(message.content))
    assert.isFalse(isTrusted(structuredClone(message)))
    assert.isFalse(isTrusted({ ...message }))
    assert.isFalse(isTrusted(undefined))
  })

  it("a message that cannot be frozen (a proxy refusing it) is not trusted, and nothing throws", () => {
    const refusing = new Proxy({ role: "user", content: "hi" }, {
      preventExtensions: () => {
        throw new Error("no")
      }
    }) as UserMessage
    assert.doesNotThrow(() => trust(refusing))
    assert.isFalse(isTrusted(refusing))
  })
})
