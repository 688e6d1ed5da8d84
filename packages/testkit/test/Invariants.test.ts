import type { AgentRunResult, LoopEvent, Message, ModelRequest } from "@agentloop/core"
import { assistant, checkInvariants, toolCall, user } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"

const call = toolCall("a", "t")
const ask = assistant("toolUse", { calls: [call] })
const answer: Message = { role: "toolResult", toolCallId: "a", toolName: "t", content: [], isError: false }
const final = assistant("stop", { text: "ok" })
const input = [user("go")]

const goodEvents: ReadonlyArray<LoopEvent> = [
  { type: "assistant_message", message: ask },
  { type: "tool_start", call },
  { type: "tool_end", result: answer as never },
  { type: "assistant_message", message: final },
  { type: "turn_end", reason: "stop", steps: 2 }
]
const goodResult: AgentRunResult = { messages: [...input, ask, answer, final], steps: 2, reason: "stop" }
const goodRequests: ReadonlyArray<ModelRequest> = [
  { messages: input, tools: [] },
  { messages: [...input, ask, answer], tools: [] }
]

const invariantsOf = (record: Partial<Parameters<typeof checkInvariants>[0]>) =>
  checkInvariants({ input, result: goodResult, events: goodEvents, requests: goodRequests, ...record }).map((v) =>
    v.invariant
  )

describe("checkInvariants finds each kind of violation", () => {
  it("a sound run has none", () => {
    assert.deepStrictEqual(invariantsOf({}), [])
  })

  it("invariant 3: no turn_end, two turn_ends, events after turn_end, turn_end disagreeing with the result", () => {
    assert.include(invariantsOf({ events: goodEvents.slice(0, -1) }), 3)
    assert.include(invariantsOf({ events: [...goodEvents, goodEvents[4]!] }), 3)
    assert.include(
      invariantsOf({ events: [...goodEvents, { type: "model_event", event: { type: "text_delta", delta: "" } }] }),
      3
    )
    assert.include(
      invariantsOf({
        events: [...goodEvents.slice(0, -1), { type: "turn_end", reason: "error", steps: 2, error: "x" }]
      }),
      3
    )
  })

  it("invariant 1: a final message appended twice, or one that no event announced", () => {
    assert.include(invariantsOf({ result: { ...goodResult, messages: [...goodResult.messages, final] } }), 1)
    const invented = assistant("stop", { text: "invented" })
    assert.include(invariantsOf({ result: { ...goodResult, messages: [...goodResult.messages, invented] } }), 1)
    assert.include(
      invariantsOf({ requests: [goodRequests[0]!, { messages: [...input, ask, answer, ask], tools: [] }] }),
      1
    )
  })

  it("invariant 2: a call without result, results out of call order, in a request or in the result", () => {
    assert.include(invariantsOf({ result: { ...goodResult, messages: [...input, ask, final] } }), 2)
    assert.include(invariantsOf({ requests: [goodRequests[0]!, { messages: [...input, ask], tools: [] }] }), 2)
    const two = assistant("toolUse", { calls: [toolCall("a", "t"), toolCall("b", "t")] })
    const resultB: Message = { ...answer, toolCallId: "b" } as Message
    assert.include(invariantsOf({ result: { ...goodResult, messages: [...input, two, resultB, answer, final] } }), 2)
  })

  it("invariant 2 in events: a started call without tool_end, a call answered twice", () => {
    assert.include(invariantsOf({ events: goodEvents.filter((e) => e.type !== "tool_end") }), 2)
    assert.include(invariantsOf({ events: [...goodEvents.slice(0, 3), goodEvents[2]!, ...goodEvents.slice(3)] }), 2)
  })

  it("consistency: steps against requests, an error without message, a transcript not led by the input", () => {
    assert.include(invariantsOf({ requests: goodRequests.slice(0, 1) }), "consistency")
    const errorRun = { ...goodResult, reason: "error" as const }
    assert.include(
      checkInvariants({
        result: errorRun,
        events: [...goodEvents.slice(0, -1), { type: "turn_end", reason: "error", steps: 2 }]
      }).map((v) => v.invariant),
      "consistency"
    )
    assert.include(invariantsOf({ input: [user("other")] }), "consistency")
  })
})
