import {
  ask,
  deny,
  isSubAgentEvent,
  Model,
  pairingViolations,
  SubAgentMaxDepth,
  subAgentRunOf,
  subAgentTool,
  ToolConcurrency
} from "@agentloop/core"
import type { LoopEvent, SubAgentEvent, SubAgentRun, ToolResultMessage } from "@agentloop/core"
import {
  assistant,
  dyingTool,
  echoTool,
  makeGatedTool,
  runScripted,
  scriptedSubAgent,
  sleepingTool,
  startScripted,
  toolCall,
  turn
} from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Schema } from "effect"
import { TestClock } from "effect/testing"
import { assertSound, results, roles, textOf } from "./helpers.ts"

const delegate = (id: string, agent: string, task: string) => toolCall(id, agent, { task })

const runIn = (result: ToolResultMessage | undefined): SubAgentRun => {
  const run = subAgentRunOf(result?.details)
  assert.isDefined(run, "the call's result keeps the sub-agent's run in its details")
  return run!
}

const subAgentEvents = (events: ReadonlyArray<LoopEvent>): Array<SubAgentEvent> =>
  events.flatMap((e) => e.type === "tool_progress" && isSubAgentEvent(e.progress) ? [e.progress] : [])

const turnEnds = (events: ReadonlyArray<SubAgentEvent>, path: ReadonlyArray<string>) =>
  events.filter((e) =>
    e.event.type === "turn_end" && e.path.length === path.length && e.path.every((s, i) => s.toolCallId === path[i])
  ).length

describe("sub-agents", () => {
  it.effect("a call runs a nested loop: its own prompt, tools and transcript; its text is the result", () =>
    Effect.gen(function*() {
      const researcher = yield* scriptedSubAgent({
        name: "researcher",
        systemPrompt: "You research.",
        tools: [echoTool("lookup")],
        script: [turn.toolCalls([toolCall("r1", "lookup", { q: "x" })]), turn.text("x is 42")]
      })
      const run = yield* runScripted([
        turn.toolCalls([delegate("c1", "researcher", "What is x?")]),
        turn.text("x is 42, says the researcher")
      ], { tools: [researcher.tool], systemPrompt: "You lead." })
      assertSound(run) // the tree: parent and child
      assert.strictEqual(run.result.reason, "stop")
      const [answer] = results(run.result.messages)
      assert.isFalse(answer!.isError)
      assert.strictEqual(textOf(answer!), "x is 42")
      const child = runIn(answer)
      assert.strictEqual(child.agent, "researcher")
      assert.strictEqual(child.reason, "stop")
      assert.deepStrictEqual(roles(child.messages), ["user", "assistant", "toolResult", "assistant"])
      assert.deepStrictEqual(child.messages[0], { role: "user", content: "What is x?" })
      // the child's requests: its own prompt and tools; the parent's: its own, the child's transcript not in them
      const [childRequest] = yield* researcher.model.requests
      assert.strictEqual(childRequest!.systemPrompt, "You research.")
      assert.deepStrictEqual(childRequest!.tools.map((t) => t.name), ["lookup"])
      assert.deepStrictEqual(roles(run.requests[1]!.messages), ["user", "assistant", "toolResult"])
      assert.deepStrictEqual(run.requests[0]!.tools[0]!.parameters["required"], ["task"])
    }))

  it.effect("the child's events reach the parent as progress of the call, with a path, one turn_end", () =>
    Effect.gen(function*() {
      const researcher = yield* scriptedSubAgent({
        name: "researcher",
        tools: [echoTool("lookup")],
        script: [turn.toolCalls([toolCall("r1", "lookup")]), turn.text("done")]
      })
      const run = yield* runScripted([turn.toolCalls([delegate("c1", "researcher", "go")]), turn.text("ok")], {
        tools: [researcher.tool]
      })
      assertSound(run)
      const progress = run.events.filter((e) => e.type === "tool_progress")
      assert.isTrue(progress.every((e) => e.type === "tool_progress" && e.toolCallId === "c1"))
      const nested = subAgentEvents(run.events)
      assert.deepStrictEqual(nested.map((e) => e.event.type), [
        "model_event",
        "assistant_message",
        "tool_start",
        "tool_end",
        "model_event",
        "assistant_message",
        "turn_end"
      ])
      assert.isTrue(nested.every((e) => e.path.length === 1 && e.path[0]!.agent === "researcher"))
      // all of it before the parent's tool_end for the call
      const end = run.events.findIndex((e) => e.type === "tool_end")
      const lastProgress = run.events.findLastIndex((e) => e.type === "tool_progress")
      assert.isBelow(lastProgress, end)
    }))

  it.effect("a typed sub-agent answers with its output: JSON in the result, the value in details", () =>
    Effect.gen(function*() {
      const counter = yield* scriptedSubAgent({
        name: "counter",
        output: Schema.Struct({ count: Schema.Number }),
        script: [turn.text("three"), turn.finalAnswer("f1", { count: 3 })]
      })
      const run = yield* runScripted([turn.toolCalls([delegate("c1", "counter", "count")]), turn.text("3")], {
        tools: [counter.tool]
      })
      assertSound(run)
      const [answer] = results(run.result.messages)
      assert.strictEqual(textOf(answer!), "{\"count\":3}")
      assert.deepStrictEqual(runIn(answer).output, { count: 3 })
      assert.strictEqual(runIn(answer).steps, 2) // it was asked to repair once
    }))

  it.effect(
    "a sub-agent that fails: an error result saying how it ended, its transcript kept; the parent goes " +
      "on",
    () =>
      Effect.gen(function*() {
        const flaky = yield* scriptedSubAgent({ name: "flaky", script: [turn.failing("provider down")] })
        const run = yield* runScripted([turn.toolCalls([delegate("c1", "flaky", "go")]), turn.text("it failed")], {
          tools: [flaky.tool]
        })
        assertSound(run)
        assert.strictEqual(run.result.reason, "stop")
        const [answer] = results(run.result.messages)
        assert.isTrue(answer!.isError)
        assert.strictEqual(
          textOf(answer!),
          "Sub-agent \"flaky\" ended error after 1 step(s): model error: provider down."
        )
        const child = runIn(answer)
        assert.strictEqual(child.reason, "error")
        assert.deepStrictEqual(roles(child.messages), ["user"])
      })
  )

  it.effect("a sub-agent whose model or tool dies: paired error results all the way up, no stack", () =>
    Effect.gen(function*() {
      const dies = yield* scriptedSubAgent({ name: "dies", script: [turn.dying(new Error("segfault"))] })
      const toolDies = yield* scriptedSubAgent({
        name: "toolDies",
        tools: [dyingTool("crash", new Error("boom"))],
        script: [turn.toolCalls([toolCall("d1", "crash")]), turn.text("my tool crashed")]
      })
      const run = yield* runScripted([
        turn.toolCalls([delegate("c1", "dies", "go"), delegate("c2", "toolDies", "go")]),
        turn.text("ok")
      ], { tools: [dies.tool, toolDies.tool] })
      assertSound(run)
      const [first, second] = results(run.result.messages)
      assert.isTrue(first!.isError)
      assert.match(textOf(first!), /^Sub-agent "dies" ended error after 1 step\(s\): .*segfault/)
      assert.notInclude(textOf(first!), "    at ")
      assert.isFalse(second!.isError) // its child handled its tool's crash and answered
      const grandResult = results(runIn(second).messages)[0]!
      assert.strictEqual(textOf(grandResult), "Tool \"crash\" crashed: boom")
    }))

  it.effect("the model layer of a sub-agent that dies while being built: the call is an error result", () =>
    Effect.gen(function*() {
      const broken = subAgentTool({
        name: "broken",
        description: "never starts",
        model: Layer.effect(Model, Effect.die(new Error("no credentials")))
      })
      const run = yield* runScripted([turn.toolCalls([delegate("c1", "broken", "go")]), turn.text("ok")], {
        tools: [broken]
      })
      assertSound(run)
      const [answer] = results(run.result.messages)
      assert.isTrue(answer!.isError)
      assert.strictEqual(textOf(answer!), "Tool \"broken\" crashed: no credentials")
    }))

  it.effect("a denied sub-agent never starts: a denied result, no request by the child", () =>
    Effect.gen(function*() {
      const researcher = yield* scriptedSubAgent({ name: "researcher", script: [turn.text("never")] })
      const run = yield* runScripted([turn.toolCalls([delegate("c1", "researcher", "go")]), turn.text("ok")], {
        tools: [researcher.tool],
        policy: (call) => call.name === "researcher" ? deny("no delegation") : deny("nothing")
      })
      assertSound(run)
      const [answer] = results(run.result.messages)
      assert.deepStrictEqual(answer!.details, { skipped: true, reason: "denied", denial: "no delegation" })
      assert.deepStrictEqual(yield* researcher.model.requests, [])
      assert.deepStrictEqual(subAgentEvents(run.events), [])
    }))

  it.effect("a sub-agent over its time limit is stopped: timed-out result with the child's paired transcript", () =>
    Effect.gen(function*() {
      const slow = yield* scriptedSubAgent({
        name: "slow",
        timeoutMs: 5000,
        tools: [sleepingTool("sleep", "1 minute")],
        script: [turn.toolCalls([toolCall("s1", "sleep")])]
      })
      const live = yield* startScripted([turn.toolCalls([delegate("c1", "slow", "go")]), turn.text("too slow")], {
        tools: [slow.tool]
      })
      yield* live.awaitEvent((e) =>
        e.type === "tool_progress" && isSubAgentEvent(e.progress) && e.progress.event.type === "tool_start"
      )
      yield* TestClock.adjust("5 seconds")
      const run = yield* live.finish
      assertSound(run)
      const [answer] = results(run.result.messages)
      assert.strictEqual(textOf(answer!), "Tool \"slow\" timed out after 5s and was stopped.")
      assert.include(answer!.details as object, { timedOut: true, timeoutMs: 5000 })
      const child = runIn(answer)
      assert.strictEqual(child.reason, "aborted")
      assert.deepStrictEqual(roles(child.messages), ["user", "assistant", "toolResult"])
      assert.deepStrictEqual(pairingViolations(child.messages), [])
      assert.deepStrictEqual(results(child.messages)[0]!.details, { interrupted: true })
      assert.strictEqual(turnEnds(subAgentEvents(run.events), ["c1"]), 1)
    }))

  for (const how of ["signal", "fiber interruption"] as const) {
    it.effect(
      `the parent aborted (${how}) while two sub-agents run in parallel: every run paired, one turn_end ` +
        `each`,
      () =>
        Effect.gen(function*() {
          const gateA = makeGatedTool("work")
          const gateB = makeGatedTool("work")
          const a = yield* scriptedSubAgent({
            name: "a",
            tools: [gateA.tool],
            script: [turn.toolCalls([toolCall("a1", "work")])]
          })
          const b = yield* scriptedSubAgent({
            name: "b",
            tools: [gateB.tool],
            script: [turn.toolCalls([toolCall("b1", "work")])]
          })
          const controller = new AbortController()
          const live = yield* startScripted([turn.toolCalls([delegate("c1", "a", "go"), delegate("c2", "b", "go")])], {
            tools: [a.tool, b.tool],
            signal: controller.signal
          })
          yield* gateA.started("a1")
          yield* gateB.started("b1") // both children are inside their tools at once
          if (how === "signal") controller.abort()
          else yield* Fiber.interrupt(live.fiber)
          const result = yield* Fiber.await(live.fiber)
          const violations = yield* live.check(result._tag === "Success" ? result.value : undefined)
          assert.deepStrictEqual(violations, [])
          const events = live.events
          // one turn_end for the parent, one for each child
          assert.deepStrictEqual(
            events.filter((e) => e.type === "turn_end").map((e) => e.type === "turn_end" && e.reason),
            [
              "aborted"
            ]
          )
          const nested = subAgentEvents(events)
          assert.strictEqual(turnEnds(nested, ["c1"]), 1)
          assert.strictEqual(turnEnds(nested, ["c2"]), 1)
          // the children's transcripts, kept in the parent's interrupted results, are paired
          const parentResults = events.flatMap((e) => e.type === "tool_end" ? [e.result] : [])
          assert.deepStrictEqual(
            parentResults.map((r) => r.toolCallId),
            ["c1", "c2"].filter((id) => parentResults.some((r) => r.toolCallId === id))
          )
          assert.strictEqual(parentResults.length, 2)
          for (const r of parentResults) {
            assert.include(r.details as object, { interrupted: true })
            const child = runIn(r)
            assert.strictEqual(child.reason, "aborted")
            assert.deepStrictEqual(roles(child.messages), ["user", "assistant", "toolResult"])
            assert.deepStrictEqual(pairingViolations(child.messages), [])
          }
          if (result._tag === "Success") {
            assert.strictEqual(result.value.reason, "aborted")
            assert.strictEqual(result.value.steps, 1)
          }
        })
    )
  }

  it.effect("three levels deep: events carry the whole path, every transcript is kept and paired", () =>
    Effect.gen(function*() {
      const leaf = yield* scriptedSubAgent({ name: "leaf", script: [turn.text("leaf done")] })
      const middle = yield* scriptedSubAgent({
        name: "middle",
        tools: [leaf.tool],
        script: [turn.toolCalls([delegate("m1", "leaf", "deepest")]), turn.text("middle done")]
      })
      const top = yield* scriptedSubAgent({
        name: "top",
        tools: [middle.tool],
        script: [turn.toolCalls([delegate("t1", "middle", "deeper")]), turn.text("top done")]
      })
      const run = yield* runScripted([turn.toolCalls([delegate("c1", "top", "deep")]), turn.text("all done")], {
        tools: [top.tool]
      })
      assertSound(run) // all four runs
      const nested = subAgentEvents(run.events)
      const leafEvents = nested.filter((e) => e.path.length === 3)
      assert.deepStrictEqual(leafEvents[0]!.path, [
        { agent: "top", toolCallId: "c1" },
        { agent: "middle", toolCallId: "t1" },
        { agent: "leaf", toolCallId: "m1" }
      ])
      assert.strictEqual(turnEnds(nested, ["c1"]), 1)
      assert.strictEqual(turnEnds(nested, ["c1", "t1"]), 1)
      assert.strictEqual(turnEnds(nested, ["c1", "t1", "m1"]), 1)
      const topRun = runIn(results(run.result.messages)[0])
      const middleRun = runIn(results(topRun.messages)[0])
      const leafRun = runIn(results(middleRun.messages)[0])
      assert.strictEqual(leafRun.agent, "leaf")
      assert.strictEqual(textOf(results(middleRun.messages)[0]!), "leaf done")
    }))

  it.effect("the depth limit: a call past it is an error result naming the limit, and the child never starts", () =>
    Effect.gen(function*() {
      const leaf = yield* scriptedSubAgent({ name: "leaf", script: [turn.text("never")] })
      const middle = yield* scriptedSubAgent({
        name: "middle",
        tools: [leaf.tool],
        script: [turn.toolCalls([delegate("m1", "leaf", "too deep")]), turn.text("could not")]
      })
      const run = yield* runScripted([turn.toolCalls([delegate("c1", "middle", "go")]), turn.text("ok")], {
        tools: [middle.tool]
      }).pipe(Effect.provideService(SubAgentMaxDepth, 1))
      assertSound(run)
      const refused = results(runIn(results(run.result.messages)[0]).messages)[0]!
      assert.strictEqual(
        textOf(refused),
        "Tool \"leaf\" failed: sub-agent \"leaf\" not started: the sub-agent depth limit (1) is reached"
      )
      assert.deepStrictEqual(yield* leaf.model.requests, [])
    }))

  it.effect("the default depth limit is 3: a fourth level is refused", () =>
    Effect.gen(function*() {
      const names = ["l1", "l2", "l3", "l4"]
      const deepest = yield* scriptedSubAgent({ name: "l4", script: [turn.text("never")] })
      let below = deepest
      for (const name of names.slice(0, 3).reverse()) {
        below = yield* scriptedSubAgent({
          name,
          tools: [below.tool],
          script: [
            turn.toolCalls([delegate(`${name}-call`, names[names.indexOf(name) + 1]!, "deeper")]),
            turn.text(`${name} done`)
          ]
        })
      }
      const run = yield* runScripted([turn.toolCalls([delegate("c1", "l1", "go")]), turn.text("ok")], {
        tools: [below.tool]
      })
      assertSound(run)
      const l1 = runIn(results(run.result.messages)[0])
      const l2 = runIn(results(l1.messages)[0])
      const l3 = runIn(results(l2.messages)[0])
      assert.match(textOf(results(l3.messages)[0]!), /depth limit \(3\) is reached/)
      assert.deepStrictEqual(yield* deepest.model.requests, [])
    }))

  it.effect("usage and cost roll up: the parent's usage includes its sub-agents' (and theirs)", () =>
    Effect.gen(function*() {
      const usage = (input: number, output: number, cost: number) => ({ input, output, cost })
      const leaf = yield* scriptedSubAgent({
        name: "leaf",
        script: [turn.message(assistant("stop", { text: "leaf", usage: usage(1, 2, 0.01) }))]
      })
      const child = yield* scriptedSubAgent({
        name: "child",
        tools: [leaf.tool],
        script: [
          turn.message(assistant("toolUse", { calls: [delegate("m1", "leaf", "x")], usage: usage(10, 20, 0.1) })),
          turn.message(assistant("stop", { text: "child", usage: usage(10, 20, 0.1) }))
        ]
      })
      const run = yield* runScripted([
        turn.message(assistant("toolUse", { calls: [delegate("c1", "child", "x")], usage: usage(100, 200, 1) })),
        turn.message(assistant("stop", { text: "done", usage: usage(100, 200, 1) }))
      ], { tools: [child.tool] })
      assertSound(run)
      const childRun = runIn(results(run.result.messages)[0])
      assert.strictEqual(childRun.usage?.input, 21)
      assert.strictEqual(childRun.usage?.output, 42)
      assert.closeTo(childRun.usage!.cost!, 0.21, 1e-9)
      const total = run.result.usage!
      assert.strictEqual(total.input, 221)
      assert.strictEqual(total.output, 442)
      assert.closeTo(total.cost!, 2.21, 1e-9)
    }))

  it.effect("batch rules apply: an exclusive sub-agent runs alone, and the concurrency cap counts its calls", () =>
    Effect.gen(function*() {
      const gate = makeGatedTool("work")
      const solo = yield* scriptedSubAgent({
        name: "solo",
        exclusive: true,
        tools: [gate.tool],
        script: [
          turn.toolCalls([toolCall("w1", "work")]),
          turn.text("1"),
          turn.toolCalls([toolCall("w2", "work")]),
          turn.text("2")
        ]
      })
      const live = yield* startScripted([
        turn.toolCalls([delegate("c1", "solo", "one"), delegate("c2", "solo", "two")]),
        turn.text("ok")
      ], { tools: [solo.tool] })
      yield* gate.started("w1")
      // the second call has not started: give it every chance first
      yield* Effect.repeat(Effect.yieldNow, { times: 100 })
      assert.isFalse(live.events.some((e) => e.type === "tool_start" && e.call.id === "c2"))
      yield* gate.release("w1")
      yield* gate.started("w2")
      yield* gate.release("w2")
      const run = yield* live.finish
      assertSound(run)
      assert.deepStrictEqual(results(run.result.messages).map(textOf), ["1", "2"])
    }).pipe(Effect.provideService(ToolConcurrency, 4)))

  it.effect("the concurrency cap counts sub-agent calls: with ToolConcurrency 1 the second waits for the first", () =>
    Effect.gen(function*() {
      const gateA = makeGatedTool("work")
      const gateB = makeGatedTool("work")
      const a = yield* scriptedSubAgent({
        name: "a",
        tools: [gateA.tool],
        script: [turn.toolCalls([toolCall("a1", "work")]), turn.text("a")]
      })
      const b = yield* scriptedSubAgent({
        name: "b",
        tools: [gateB.tool],
        script: [turn.toolCalls([toolCall("b1", "work")]), turn.text("b")]
      })
      const live = yield* startScripted([
        turn.toolCalls([delegate("c1", "a", "one"), delegate("c2", "b", "two")]),
        turn.text("ok")
      ], { tools: [a.tool, b.tool] })
      yield* gateA.started("a1")
      yield* Effect.repeat(Effect.yieldNow, { times: 100 }) // every chance for the second to start
      assert.isFalse(live.events.some((e) => e.type === "tool_start" && e.call.id === "c2"))
      assert.deepStrictEqual(yield* b.model.requests, [])
      yield* gateA.release("a1")
      yield* gateB.started("b1")
      yield* gateB.release("b1")
      const run = yield* live.finish
      assertSound(run)
      assert.deepStrictEqual(results(run.result.messages).map(textOf), ["a", "b"])
    }).pipe(Effect.provideService(ToolConcurrency, 1)))

  it.effect("a child's approval request reaches the parent's sink inside its event, and answering it goes on", () =>
    Effect.gen(function*() {
      const careful = yield* scriptedSubAgent({
        name: "careful",
        tools: [echoTool("write")],
        policy: () => ask,
        script: [turn.toolCalls([toolCall("w1", "write")]), turn.text("written")]
      })
      const asked: Array<ReadonlyArray<string>> = []
      const run =
        yield* (yield* startScripted([turn.toolCalls([delegate("c1", "careful", "write it")]), turn.text("ok")], {
          tools: [careful.tool],
          onEvent: (event) => {
            if (event.type !== "tool_progress" || !isSubAgentEvent(event.progress)) return
            const inner = event.progress.event
            if (inner.type === "approval_request") {
              asked.push(event.progress.path.map((step) => step.agent))
              Deferred.doneUnsafe(inner.answer, Exit.succeed({ approved: true }))
            }
          }
        })).finish
      assertSound(run)
      assert.deepStrictEqual(asked, [["careful"]])
      assert.strictEqual(textOf(results(run.result.messages)[0]!), "written")
      assert.isFalse(results(runIn(results(run.result.messages)[0]).messages)[0]!.isError)
    }))
})
