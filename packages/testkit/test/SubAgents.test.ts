/**
 * The testkit for structured output and sub-agents: scripted final answers, scripted sub-agents,
 * and `checkInvariants` over the tree of runs (a parent and the children kept in its results'
 * details, with their events found in the parent's by path).
 */
import { FINAL_ANSWER_TOOL, outputSchema } from "@agentloop/core"
import type { AgentRunResult, LoopEvent, Message, SubAgentRun, ToolResultMessage } from "@agentloop/core"
import { checkInvariants, echoTool, runScripted, Script, scriptedSubAgent, toolCall, turn } from "@agentloop/testkit"
import type { ScriptedRun } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"

const delegate = (id: string, agent: string) => toolCall(id, agent, { task: "go" })

/** A sound run with a sub-agent (which itself calls a tool) under a sub-agent. */
const treeRun = Effect.gen(function*() {
  const leaf = yield* scriptedSubAgent({
    name: "leaf",
    tools: [echoTool("look")],
    script: [turn.toolCalls([toolCall("l1", "look")]), turn.text("leaf done")]
  })
  const middle = yield* scriptedSubAgent({
    name: "middle",
    tools: [leaf.tool],
    script: [turn.toolCalls([delegate("m1", "leaf")]), turn.text("middle done")]
  })
  return yield* runScripted([turn.toolCalls([delegate("c1", "middle")]), turn.text("done")], { tools: [middle.tool] })
})

/** `run` with the sub-agent run kept in `details` replaced along `path` (call ids) by `f` of it. */
const withChild = (run: ScriptedRun, path: ReadonlyArray<string>, f: (child: SubAgentRun) => SubAgentRun) => {
  const rewrite = (messages: ReadonlyArray<Message>, rest: ReadonlyArray<string>): Array<Message> =>
    messages.map((m) => {
      if (m.role !== "toolResult" || m.toolCallId !== rest[0]) return m
      const details = m.details as { readonly subAgent: SubAgentRun }
      const child = rest.length === 1 ?
        f(details.subAgent) :
        { ...details.subAgent, messages: rewrite(details.subAgent.messages, rest.slice(1)) }
      return { ...m, details: { ...details, subAgent: child } }
    })
  return { ...run.result, messages: rewrite(run.result.messages, path) } as AgentRunResult
}

const check = (run: ScriptedRun, changes: { result?: AgentRunResult; events?: ReadonlyArray<LoopEvent> }) =>
  checkInvariants({
    input: run.result.messages.slice(0, 1),
    result: changes.result ?? run.result,
    events: changes.events ?? run.events,
    requests: run.requests
  })

const isResult = (m: Message): m is ToolResultMessage => m.role === "toolResult"

describe("checkInvariants over a tree of runs", () => {
  it.effect("a sound tree of three runs has no violation, and each run's events are checked", () =>
    Effect.gen(function*() {
      const run = yield* treeRun
      assert.deepStrictEqual(run.violations, [])
      assert.deepStrictEqual(check(run, {}), [])
    }))

  it.effect("a child whose kept transcript lost a result: invariant 2, named by its place in the tree", () =>
    Effect.gen(function*() {
      const run = yield* treeRun
      const broken = withChild(
        run,
        ["c1"],
        (child) => ({ ...child, messages: child.messages.filter((m) => !isResult(m)) })
      )
      const found = check(run, { result: broken })
      assert.isTrue(
        found.some((v) =>
          v.invariant === 2 && v.message.startsWith("sub-agent middle (call c1): result transcript: ") &&
          v.message.includes("\"m1\"")
        ),
        JSON.stringify(found)
      )
    }))

  it.effect("a grandchild with a broken transcript is found too, with its whole path", () =>
    Effect.gen(function*() {
      const run = yield* treeRun
      const broken = withChild(run, ["c1", "m1"], (leaf) => ({
        ...leaf,
        messages: leaf.messages.filter((m) => !isResult(m))
      }))
      const found = check(run, { result: broken })
      assert.isTrue(
        found.some((v) =>
          v.invariant === 2 && v.message.startsWith("sub-agent middle (call c1) > sub-agent leaf (call m1): ")
        ),
        JSON.stringify(found)
      )
    }))

  it.effect("a child run with two turn_end events, or none: invariant 3 for that child", () =>
    Effect.gen(function*() {
      const run = yield* treeRun
      const childEnd = run.events.find((e) =>
        e.type === "tool_progress" && (e.progress as { path: ReadonlyArray<unknown> }).path.length === 1 &&
        (e.progress as { event: LoopEvent }).event.type === "turn_end"
      )!
      const at = run.events.indexOf(childEnd)
      const twice = [...run.events.slice(0, at + 1), childEnd, ...run.events.slice(at + 1)]
      const none = run.events.filter((e) => e !== childEnd)
      for (const events of [twice, none]) {
        const found = check(run, { events })
        assert.isTrue(
          found.some((v) => v.invariant === 3 && v.message.startsWith("sub-agent middle (call c1): ")),
          JSON.stringify(found)
        )
      }
      // the parent's own turn_end is not confused with the child's
      assert.isFalse(check(run, { events: twice }).some((v) => v.invariant === 3 && !v.message.startsWith("sub-agent")))
    }))

  it.effect("a child run that emitted events but whose transcript was not kept: a consistency violation", () =>
    Effect.gen(function*() {
      const run = yield* treeRun
      const lost = {
        ...run.result,
        messages: run.result.messages.map((m) =>
          isResult(m) && m.toolCallId === "c1" ? { ...m, details: undefined } : m
        )
      } as AgentRunResult
      const found = check(run, { result: lost })
      assert.deepStrictEqual(
        found.filter((v) => v.invariant === "consistency").map((v) => v.message),
        [
          "the sub-agent run at [\"c1\"] emitted events but its transcript is in no result's details",
          "the sub-agent run at [\"c1\",\"m1\"] emitted events but its transcript is in no result's details"
        ]
      )
    }))

  it.effect("a child's kept ending that disagrees with its turn_end: invariant 3 for that child", () =>
    Effect.gen(function*() {
      const run = yield* treeRun
      const wrong = withChild(run, ["c1"], (child) => ({ ...child, reason: "error", error: "made up" }))
      const found = check(run, { result: wrong })
      assert.isTrue(
        found.some((v) => v.invariant === 3 && v.message.includes("the result says \"error\"")),
        JSON.stringify(found)
      )
    }))
})

describe("scripted final answers and sub-agents", () => {
  it.effect("turn.finalAnswer calls the final-answer tool alone (or a renamed one)", () =>
    Effect.gen(function*() {
      const Verdict = Schema.Struct({ ok: Schema.Boolean })
      const run = yield* runScripted([turn.finalAnswer("f1", { ok: true })], { output: Verdict })
      assert.deepStrictEqual(run.violations, [])
      assert.deepStrictEqual(run.result.output, { ok: true })
      const asked = run.result.messages[1]!
      assert.deepStrictEqual(asked.role === "assistant" ? asked.content : [], [
        { type: "toolCall", id: "f1", name: FINAL_ANSWER_TOOL, arguments: { ok: true } }
      ])
      const renamed = yield* runScripted([Script.turn.finalAnswer("f1", { ok: false }, { name: "verdict" })], {
        output: outputSchema(Verdict, { name: "verdict" })
      })
      assert.deepStrictEqual(renamed.violations, [])
      assert.deepStrictEqual(renamed.result.output, { ok: false })
    }))

  it.effect("scriptedSubAgent: the child answers from its own script, and its requests are recorded", () =>
    Effect.gen(function*() {
      const helper = yield* Script.subAgent({
        name: "helper",
        systemPrompt: "You help.",
        script: [turn.text("helped")]
      })
      const run = yield* runScripted([turn.toolCalls([delegate("c1", "helper")]), turn.text("ok")], {
        tools: [helper.tool]
      })
      assert.deepStrictEqual(run.violations, [])
      const requests = yield* helper.model.requests
      assert.strictEqual(requests.length, 1)
      assert.strictEqual(requests[0]!.systemPrompt, "You help.")
      assert.deepStrictEqual(requests[0]!.messages, [{ role: "user", content: "go" }])
      yield* helper.model.verify({ all: true })
      assert.strictEqual(helper.tool.definition.description, "The scripted agent \"helper\"")
    }))
})
