import {
  allow,
  ask,
  callbackSinkLayer,
  defineTool,
  deny,
  Executor,
  makeToolExecutor,
  noopSinkLayer,
  readOnlyPolicy,
  runAgentLoop,
  ToolConcurrency,
  toolExecutorLayer,
  ToolTimeout
} from "@agentloop/core"
import type { AgentLoopOptions, AnyTool, ApprovalAnswer, LoopEvent, Message, UserMessage } from "@agentloop/core"
import {
  assistant,
  echoTool,
  failingTool,
  makeGatedTool,
  makeScriptedModel,
  probeTool,
  sleepingTool,
  startScripted,
  toolCall,
  turn,
  user
} from "@agentloop/testkit"
import type { ScriptedTurn } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Queue, Schema, Tracer } from "effect"
import { TestClock } from "effect/testing"
import { results, roles, settle, textOf } from "./helpers.ts"

/** Starts a scripted run in the background; `onEvent` may answer approvals or push messages. */
const start = (
  script: ReadonlyArray<ScriptedTurn>,
  tools: ReadonlyArray<AnyTool>,
  options: Partial<AgentLoopOptions> = {},
  onEvent: (event: LoopEvent) => void = () => {}
) => startScripted(script, { ...options, tools, onEvent })

const exclusiveTool = (name: string, inner: AnyTool): AnyTool => ({
  ...inner,
  name,
  definition: { ...inner.definition, name, exclusive: true }
})

const readOnly = (tool: AnyTool): AnyTool => ({ ...tool, definition: { ...tool.definition, readOnly: true } })

const answerWith = (answer: ApprovalAnswer) => (event: LoopEvent) => {
  if (event.type === "approval_request") Deferred.doneUnsafe(event.answer, Exit.succeed(answer))
}

describe("policies and approvals", () => {
  it.effect("deny in a mixed batch: the denied call is paired with a skipped result, the rest runs", () =>
    Effect.gen(function*() {
      const read = probeTool(echoTool("read"))
      const write = probeTool(echoTool("write"))
      const run = yield* start(
        [turn.toolCalls([toolCall("a", "read"), toolCall("b", "write"), toolCall("c", "read")]), turn.text("ok")],
        [read.tool, write.tool],
        { policy: (call) => call.name === "write" ? deny("writes are not allowed here") : allow }
      )
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "stop")
      const [a, b, c] = results(result.messages)
      assert.deepStrictEqual([a!.isError, b!.isError, c!.isError], [false, true, false])
      assert.deepStrictEqual(b!.details, { skipped: true, reason: "denied", denial: "writes are not allowed here" })
      assert.strictEqual(textOf(b!), "Tool call was not executed because it was denied: writes are not allowed here")
      assert.strictEqual(yield* write.executions, 0)
      assert.strictEqual(yield* read.executions, 2)
    }))

  it.effect("ask: an approval_request carries a Deferred; approving runs the call", () =>
    Effect.gen(function*() {
      const write = probeTool(echoTool("write", "written"))
      const run = yield* start(
        [turn.toolCalls([toolCall("w", "write")]), turn.text("ok")],
        [write.tool],
        { policy: () => ask },
        answerWith({ approved: true })
      )
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(textOf(results(result.messages)[0]!), "written")
      const types = run.events.map((e) => e.type).filter((t) => t.startsWith("tool") || t.startsWith("approval"))
      assert.deepStrictEqual(types, ["approval_request", "tool_start", "tool_end"])
    }))

  it.effect("in a batch, the calls that need no answer start before an approval is asked; results in call order", () =>
    Effect.gen(function*() {
      const read = probeTool(echoTool("read", "read it"))
      const write = probeTool(echoTool("write", "written"))
      const run = yield* start(
        [turn.toolCalls([toolCall("w", "write"), toolCall("r", "read")]), turn.text("ok")],
        [read.tool, write.tool],
        { policy: (call) => call.name === "write" ? ask : allow },
        answerWith({ approved: true })
      )
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      const steps = run.events.flatMap((e) =>
        e.type === "approval_request" ?
          [`ask ${e.call.id}`] :
          e.type === "tool_start" ?
          [`start ${e.call.id}`] :
          []
      )
      assert.deepStrictEqual(steps, ["start r", "ask w", "start w"])
      assert.deepStrictEqual(results(result.messages).map(textOf), ["written", "read it"])
    }))

  it.effect("ask: a denial with a reason reaches the model; the tool does not run", () =>
    Effect.gen(function*() {
      const write = probeTool(echoTool("write"))
      const run = yield* start(
        [turn.toolCalls([toolCall("w", "write")]), turn.text("ok")],
        [write.tool],
        { policy: () => ask },
        answerWith({ approved: false, reason: "not now" })
      )
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(
        textOf(results(result.messages)[0]!),
        "Tool call was not executed because it was denied: not now"
      )
      assert.strictEqual(yield* write.executions, 0)
    }))

  it.effect("an answer with always is remembered for that tool for the rest of the run", () =>
    Effect.gen(function*() {
      const write = probeTool(echoTool("write"))
      const run = yield* start(
        [turn.toolCalls([toolCall("w1", "write")]), turn.toolCalls([toolCall("w2", "write")]), turn.text("ok")],
        [write.tool],
        { policy: () => ask },
        answerWith({ approved: true, always: true })
      )
      const { violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(run.events.filter((e) => e.type === "approval_request").length, 1)
      assert.strictEqual(yield* write.executions, 2)
    }))

  it.effect("an answer without always holds for that call only: the next call of the tool is asked again", () =>
    Effect.gen(function*() {
      const write = probeTool(echoTool("write"))
      const run = yield* start(
        [turn.toolCalls([toolCall("w1", "write")]), turn.toolCalls([toolCall("w2", "write")]), turn.text("ok")],
        [write.tool],
        { policy: () => ask },
        answerWith({ approved: true })
      )
      const { violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      const asked = run.events.flatMap((e) => e.type === "approval_request" ? [e.call.id] : [])
      assert.deepStrictEqual(asked, ["w1", "w2"])
      assert.strictEqual(yield* write.executions, 2)
    }))

  it.effect("an approval that comes with an abort does not start the call", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      const write = probeTool(echoTool("write"))
      const run = yield* start(
        [turn.toolCalls([toolCall("w", "write")])],
        [write.tool],
        { policy: () => ask, signal: controller.signal },
        (event) => {
          if (event.type === "approval_request") {
            controller.abort()
            Deferred.doneUnsafe(event.answer, Exit.succeed({ approved: true }))
          }
        }
      )
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "aborted")
      assert.strictEqual(yield* write.executions, 0)
      assert.deepStrictEqual(results(result.messages)[0]!.details, { skipped: true, reason: "aborted" })
      assert.isFalse(run.events.some((e) => e.type === "tool_start"))
    }))

  it.effect("after an abort, no further call is put to the person for approval", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      const first = probeTool(echoTool("first"))
      const second = probeTool(echoTool("second"))
      const run = yield* start(
        [turn.toolCalls([toolCall("a", "first"), toolCall("b", "second")])],
        [exclusiveTool("first", first.tool), second.tool],
        { policy: () => ask, signal: controller.signal },
        (event) => {
          if (event.type === "approval_request") Deferred.doneUnsafe(event.answer, Exit.succeed({ approved: true }))
          if (event.type === "tool_end" && event.result.toolCallId === "a") controller.abort()
        }
      )
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "aborted")
      const asked = run.events.flatMap((e) => e.type === "approval_request" ? [e.call.id] : [])
      assert.deepStrictEqual(asked, ["a"])
      assert.strictEqual(yield* second.executions, 0)
      assert.deepStrictEqual(results(result.messages).map((r) => r.details), [undefined, {
        skipped: true,
        reason: "aborted"
      }])
    }))

  it.effect("abort while waiting for approval pairs the call like any aborted call; nothing runs", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      const write = probeTool(echoTool("write"))
      const read = probeTool(echoTool("read"))
      const run = yield* start(
        [turn.toolCalls([toolCall("r", "read"), toolCall("w", "write")])],
        [read.tool, write.tool],
        { policy: readOnlyPolicy(["read"]), signal: controller.signal },
        (event) => {
          if (event.type === "approval_request") controller.abort()
        }
      )
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "aborted")
      const w = results(result.messages).find((r) => r.toolCallId === "w")!
      assert.deepStrictEqual(w.details, { skipped: true, reason: "aborted" })
      assert.strictEqual(yield* write.executions, 0)
      assert.strictEqual(result.steps, 1)
    }))

  it.effect("readOnlyPolicy: read-only tools run without asking, the others ask", () =>
    Effect.gen(function*() {
      const run = yield* start(
        [turn.toolCalls([toolCall("r", "read"), toolCall("w", "write")]), turn.text("ok")],
        [readOnly(echoTool("read")), echoTool("write")],
        { policy: readOnlyPolicy() },
        answerWith({ approved: true })
      )
      const { violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      const asked = run.events.flatMap((e) => e.type === "approval_request" ? [e.call.id] : [])
      assert.deepStrictEqual(asked, ["w"])
    }))
})

describe("execution modes and limits", () => {
  it.effect("an exclusive write between parallel reads runs alone, in call order", () =>
    Effect.gen(function*() {
      const gate = makeGatedTool("read")
      const writeGate = makeGatedTool("write_gated")
      const startedOrder: Array<string> = []
      const run = yield* start(
        [turn.toolCalls([toolCall("r1", "read"), toolCall("w", "write"), toolCall("r2", "read")]), turn.text("ok")],
        [gate.tool, exclusiveTool("write", writeGate.tool)],
        {},
        (event) => {
          if (event.type === "tool_start") startedOrder.push(event.call.id)
        }
      )
      yield* gate.started("r1")
      yield* settle()
      assert.deepStrictEqual(startedOrder, ["r1"], "the write waits for the read before it")
      yield* gate.release("r1")
      yield* writeGate.started("w")
      yield* settle()
      assert.deepStrictEqual(startedOrder, ["r1", "w"], "the read after the write waits for it")
      yield* writeGate.release("w")
      yield* gate.started("r2")
      yield* gate.release("r2")
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.deepStrictEqual(results(result.messages).map((r) => r.toolCallId), ["r1", "w", "r2"])
    }))

  it.effect("an exclusive call waits for every call before it, and the calls after it run in parallel again", () =>
    Effect.gen(function*() {
      const gate = makeGatedTool("read")
      const writeGate = makeGatedTool("write_gated")
      const startedOrder: Array<string> = []
      const run = yield* start(
        [
          turn.toolCalls([
            toolCall("a", "read"),
            toolCall("b", "read"),
            toolCall("w", "write"),
            toolCall("c", "read"),
            toolCall("d", "read")
          ]),
          turn.text("ok")
        ],
        [gate.tool, exclusiveTool("write", writeGate.tool)],
        {},
        (event) => {
          if (event.type === "tool_start") startedOrder.push(event.call.id)
        }
      )
      // a and b run at the same time: both start before either is released
      yield* gate.started("a")
      yield* gate.started("b")
      yield* settle()
      assert.deepStrictEqual(startedOrder, ["a", "b"], "the write waits while a and b run")
      yield* gate.release("b")
      yield* settle()
      assert.deepStrictEqual(startedOrder, ["a", "b"], "the write waits for a too, not only for the last call")
      yield* gate.release("a")
      yield* writeGate.started("w")
      yield* settle()
      assert.deepStrictEqual(startedOrder, ["a", "b", "w"], "the calls after the write wait for it")
      yield* writeGate.release("w")
      // c and d run at the same time again
      yield* gate.started("c")
      yield* gate.started("d")
      yield* gate.release("d")
      yield* gate.release("c")
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.deepStrictEqual(results(result.messages).map((r) => r.toolCallId), ["a", "b", "w", "c", "d"])
    }))

  it.effect(
    "under ToolConcurrency, a call whose start interrupts the run (a sink's callback) starts once, and " +
      "is answered once",
    () =>
      Effect.gen(function*() {
        // "waits" ends at once when its signal fires; "quick" ends after one yield, so the third call
        // starts as "quick" ends, and its tool_start makes the test interrupt the run there and then:
        // the stage fires the running calls' signals, "waits" ends inside that, and the stage must not
        // start the third call again (effect 4.1's bounded forEach re-entered its loop from there)
        const waits = defineTool({
          name: "waits",
          description: "ends when told to stop",
          parameters: Schema.Struct({}),
          execute: (_, context) =>
            Effect.callback<string>((resume) => {
              context.signal.addEventListener("abort", () => resume(Effect.succeed("stopped")))
            })
        })
        const quick = defineTool({
          name: "quick",
          description: "ends after a yield",
          parameters: Schema.Struct({}),
          execute: () => Effect.as(Effect.yieldNow, "ok")
        })
        const model = yield* makeScriptedModel([
          turn.toolCalls([toolCall("w", "waits"), toolCall("q", "quick"), toolCall("third", "quick")]),
          turn.text("unreachable")
        ])
        const third = yield* Deferred.make<void>()
        const events: Array<LoopEvent> = []
        const fiber = yield* runAgentLoop({ messages: [user("go")] }).pipe(
          Effect.provide(Layer.mergeAll(
            model.layer,
            toolExecutorLayer([waits, quick]),
            callbackSinkLayer((event) => {
              events.push(event)
              if (event.type === "tool_start" && event.call.id === "third") Deferred.doneUnsafe(third, Exit.void)
            })
          )),
          Effect.provideService(ToolConcurrency, 2),
          Effect.forkChild
        )
        yield* Deferred.await(third)
        yield* Fiber.interrupt(fiber)
        const starts = events.flatMap((e) => e.type === "tool_start" ? [e.call.id] : [])
        const ends = events.flatMap((e) => e.type === "tool_end" ? [e.result.toolCallId] : [])
        assert.deepStrictEqual(starts, ["w", "q", "third"], "each call started once")
        assert.sameMembers(ends, ["w", "q", "third"])
        assert.strictEqual(ends.length, 3, "each call answered once")
        assert.deepStrictEqual(
          events.filter((e) => e.type === "turn_end").map((e) => e.type === "turn_end" && e.reason),
          ["aborted"]
        )
      })
  )

  it.effect("ToolConcurrency caps how many calls run at once; results stay in call order", () =>
    Effect.gen(function*() {
      const gate = makeGatedTool("g")
      const startedIds: Array<string> = []
      const run = yield* start(
        [
          turn.toolCalls([toolCall("a", "g"), toolCall("b", "g"), toolCall("c", "g"), toolCall("d", "g")]),
          turn.text("ok")
        ],
        [gate.tool],
        {},
        (event) => {
          if (event.type === "tool_start") startedIds.push(event.call.id)
        }
      ).pipe(Effect.provideService(ToolConcurrency, 2))
      yield* gate.started("a")
      yield* gate.started("b")
      yield* settle()
      assert.deepStrictEqual(startedIds, ["a", "b"], "two run; c and d wait")
      // a freed slot is taken at once by the next call, while a still runs
      yield* gate.release("b")
      yield* gate.started("c")
      yield* settle()
      assert.deepStrictEqual(startedIds, ["a", "b", "c"], "a and c run; d waits")
      yield* gate.release("a")
      yield* gate.started("d")
      yield* gate.release("d")
      yield* gate.release("c")
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.deepStrictEqual(results(result.messages).map((r) => r.toolCallId), ["a", "b", "c", "d"])
    }))

  it.effect("a per-tool timeout (TestClock) interrupts one of several parallel calls and says so", () =>
    Effect.gen(function*() {
      const slow = probeTool(sleepingTool("slow", "10 seconds"))
      const slowWithLimit: AnyTool = { ...slow.tool, definition: { ...slow.tool.definition, timeoutMs: 1500 } }
      const run = yield* start(
        [turn.toolCalls([toolCall("s", "slow"), toolCall("q", "quick")]), turn.text("ok")],
        [slowWithLimit, echoTool("quick")]
      )
      yield* TestClock.adjust("1500 millis")
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      const [s, q] = results(result.messages)
      assert.strictEqual(textOf(s!), "Tool \"slow\" timed out after 1s 500ms and was stopped.")
      assert.deepStrictEqual(s!.details, { timedOut: true, timeoutMs: 1500 })
      assert.isFalse(q!.isError)
      assert.deepStrictEqual(yield* slow.abortedSignalIds, ["s"], "the timed-out call's AbortSignal fired")
    }))

  it.effect("definitions that change between turns are used for the next batch (a new time limit applies)", () =>
    Effect.gen(function*() {
      const tools = yield* makeToolExecutor([echoTool("quick"), sleepingTool("slow", "10 seconds")])
      const limited = tools.definitions.map((d) => d.name === "slow" ? { ...d, timeoutMs: 1000 } : d)
      let reads = 0
      const executor: typeof Executor.Service = {
        // the run reads them once before its first request, then once per turn
        get definitions() {
          return reads++ === 0 ? tools.definitions : limited
        },
        execute: tools.execute
      }
      const model = yield* makeScriptedModel([
        turn.toolCalls([toolCall("q", "quick")]),
        turn.toolCalls([toolCall("s", "slow")]),
        turn.text("ok")
      ])
      const fiber = yield* runAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provide(Layer.mergeAll(model.layer, noopSinkLayer, Layer.succeed(Executor, executor))),
        Effect.forkChild
      )
      // past the new limit and the tool's own 10 seconds: without the limit the call would answer "slept"
      yield* TestClock.adjust("10 seconds")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.reason, "stop")
      const [, s] = results(result.messages)
      assert.deepStrictEqual(s!.details, { timedOut: true, timeoutMs: 1000 })
    }))

  it.effect("ToolTimeout sets the default limit; a call within it is not cut", () =>
    Effect.gen(function*() {
      const run = yield* start(
        [turn.toolCalls([toolCall("a", "nap"), toolCall("b", "long")]), turn.text("ok")],
        [sleepingTool("nap", "1 second"), sleepingTool("long", "1 minute")]
      ).pipe(Effect.provideService(ToolTimeout, "2 seconds"))
      yield* TestClock.adjust("2 seconds")
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      const [a, b] = results(result.messages)
      assert.isFalse(a!.isError)
      assert.match(textOf(b!), /timed out after 2s/)
    }))
})

describe("steering and follow-ups", () => {
  it.effect("steering arriving mid-batch joins after the batch's results, before the next request", () =>
    Effect.gen(function*() {
      const steering = yield* Queue.unbounded<UserMessage>()
      const gate = makeGatedTool("g")
      const run = yield* start(
        [turn.toolCalls([toolCall("a", "g"), toolCall("b", "g")]), turn.text("ok")],
        [gate.tool],
        { steering }
      )
      yield* gate.started("a")
      yield* gate.release("a")
      yield* Queue.offer(steering, { role: "user", content: "use tabs, not spaces" })
      yield* gate.release("b")
      const { result, requests, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.deepStrictEqual(roles(result.messages), [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "user",
        "assistant"
      ])
      assert.deepStrictEqual(roles(requests[1]!.messages), ["user", "assistant", "toolResult", "toolResult", "user"])
      const announced = run.events.filter((e) => e.type === "user_message")
      assert.deepStrictEqual(announced, [{
        type: "user_message",
        message: { role: "user", content: "use tabs, not spaces" },
        kind: "steering"
      }])
    }))

  it.effect("a follow-up restarts the loop when it would otherwise stop", () =>
    Effect.gen(function*() {
      const followUps = yield* Queue.unbounded<UserMessage>()
      yield* Queue.offer(followUps, { role: "user", content: "and now in French" })
      const run = yield* start([turn.text("hello"), turn.text("bonjour")], [], { followUps })
      const { result, requests, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "stop")
      assert.strictEqual(result.steps, 2)
      assert.deepStrictEqual(roles(result.messages), ["user", "assistant", "user", "assistant"])
      assert.strictEqual(requests.length, 2)
      assert.deepStrictEqual(
        run.events.filter((e) => e.type === "user_message").map((e) => e.type === "user_message" && e.kind),
        ["followUp"]
      )
    }))

  it.effect("a malformed steering message ends the run error naming it; nothing invalid joins the transcript", () =>
    Effect.gen(function*() {
      const steering = yield* Queue.unbounded<UserMessage>()
      yield* Queue.offer(steering, { role: "user" } as unknown as UserMessage)
      const run = yield* start([turn.text("never")], [], { steering })
      const { result, requests, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "error")
      assert.match(result.error!, /bad input: a steering message is not a valid user message: .*content/s)
      assert.strictEqual(requests.length, 0)
      assert.deepStrictEqual(roles(result.messages), ["user"])
    }))

  it.effect("a follow-up does not restart a run that ended otherwise than stop; it stays queued", () =>
    Effect.gen(function*() {
      const followUps = yield* Queue.unbounded<UserMessage>()
      yield* Queue.offer(followUps, { role: "user", content: "and now in French" })
      const run = yield* start([turn.truncated([], "cut sh")], [], { followUps })
      const { result, requests, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.reason, "length")
      assert.strictEqual(requests.length, 1)
      assert.deepStrictEqual(roles(result.messages), ["user", "assistant"])
      assert.strictEqual(yield* Queue.size(followUps), 1)
    }))

  it.effect("with no follow-up queued the run stops as usual", () =>
    Effect.gen(function*() {
      const followUps = yield* Queue.unbounded<UserMessage>()
      const run = yield* start([turn.text("hello")], [], { followUps })
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.strictEqual(result.steps, 1)
    }))
})

describe("context hooks", () => {
  it.effect("transformContext shapes each request; the transcript keeps everything", () =>
    Effect.gen(function*() {
      const run = yield* start(
        [turn.toolCalls([toolCall("a", "e")]), turn.text("ok")],
        [echoTool("e")],
        {
          messages: [user("old question"), {
            role: "assistant",
            content: [{ type: "text", text: "old answer" }],
            stopReason: "stop"
          }, user("new question")],
          transformContext: (messages) => Effect.succeed(messages.slice(2))
        }
      )
      const { result, requests, violations } = yield* run.finish
      assert.deepStrictEqual(violations.filter((v) => v.invariant !== "consistency"), [])
      assert.deepStrictEqual(roles(requests[0]!.messages), ["user"])
      assert.deepStrictEqual(roles(requests[1]!.messages), ["user", "assistant", "toolResult"])
      assert.strictEqual(result.messages.length, 6)
    }))

  it.effect("a transform that drops a result ends the run error instead of sending an invalid request", () =>
    Effect.gen(function*() {
      const run = yield* start(
        [turn.toolCalls([toolCall("a", "e")]), turn.text("never")],
        [echoTool("e")],
        { transformContext: (messages) => Effect.succeed(messages.filter((m) => m.role !== "toolResult")) }
      )
      const { result, requests, violations } = yield* run.finish
      assert.deepStrictEqual(violations.filter((v) => v.invariant !== "consistency"), [])
      assert.strictEqual(result.reason, "error")
      assert.match(result.error!, /transformContext.*tool call "a" has no result/s)
      assert.strictEqual(requests.length, 1, "the invalid request was never sent")
      assert.strictEqual(result.steps, 1)
    }))

  it.effect("a transform that splits several calls from their results names each, one after the other", () =>
    Effect.gen(function*() {
      const run = yield* start(
        [turn.toolCalls([toolCall("a", "e"), toolCall("b", "e")]), turn.text("never")],
        [echoTool("e")],
        { transformContext: (messages) => Effect.succeed(messages.filter((m) => m.role !== "toolResult")) }
      )
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations.filter((v) => v.invariant !== "consistency"), [])
      assert.strictEqual(
        result.error,
        "transformContext returned messages that split tool calls from their results: " +
          "messages[1]: tool call \"a\" has no result; messages[1]: tool call \"b\" has no result"
      )
    }))

  it.effect("a transform that fails or returns malformed messages ends the run error", () =>
    Effect.gen(function*() {
      const failing = yield* start([turn.text("never")], [], {
        transformContext: () => Effect.die(new Error("compactor broke"))
      })
      const a = yield* failing.finish
      assert.match(a.result.error!, /transformContext failed: compactor broke/)
      assert.strictEqual(a.requests.length, 0)
      const malformed = yield* start([turn.text("never")], [], {
        transformContext: () => Effect.succeed([{ role: "robot" } as unknown as Message])
      })
      const b = yield* malformed.finish
      assert.match(b.result.error!, /transformContext returned an invalid transcript/)
    }))
})

describe("usage", () => {
  it.effect("usage is summed across turns in the result", () =>
    Effect.gen(function*() {
      const run = yield* start(
        [
          turn.message(
            assistant("toolUse", { calls: [toolCall("a", "e")], usage: { input: 100, output: 20, cacheRead: 50 } })
          ),
          turn.message(
            assistant("toolUse", {
              calls: [toolCall("b", "e")],
              usage: { input: 1, output: 2, cacheRead: 3, cacheWrite: 4 }
            })
          ),
          turn.text("done", { input: 130, output: 5, cacheWrite: 6 })
        ],
        [echoTool("e")]
      )
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.deepStrictEqual(result.usage, { input: 231, output: 27, cacheRead: 53, cacheWrite: 10 })
    }))

  it.effect("cost is summed over the turns that report one, and absent when none does", () =>
    Effect.gen(function*() {
      const run = yield* start(
        [
          turn.message(
            assistant("toolUse", { calls: [toolCall("a", "e")], usage: { input: 10, output: 2, cost: 0.25 } })
          ),
          turn.message(assistant("toolUse", { calls: [toolCall("b", "e")], usage: { input: 10, output: 2 } })),
          turn.text("done", { input: 10, output: 2, cost: 0.5 })
        ],
        [echoTool("e")]
      )
      const { result, violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      assert.deepStrictEqual(result.usage, { input: 30, output: 6, cacheRead: 0, cacheWrite: 0, cost: 0.75 })
    }))

  it.effect("a run whose turns report no usage has none", () =>
    Effect.gen(function*() {
      const run = yield* start([turn.text("x")], [])
      const { result } = yield* run.finish
      assert.isFalse("usage" in result)
    }))
})

/** A tracer that keeps every span it makes, to read their names and attributes. */
const recordingTracer = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span: (options) => {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    }
  })
  return { spans, tracer }
}

describe("tracing", () => {
  it.effect("a span per run, per model turn and per tool call, with attributes", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recordingTracer()
      const run = yield* start(
        [
          turn.message(
            assistant("toolUse", { calls: [toolCall("a", "e"), toolCall("b", "e")], usage: { input: 7, output: 3 } })
          ),
          turn.text("ok")
        ],
        [echoTool("e")]
      ).pipe(Effect.withTracer(tracer))
      const { violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      // spans are named as OpenTelemetry's GenAI conventions name them; `agentloop.span` keeps agentloop's names
      const named = (name: string) => spans.filter((s) => s.attributes.get("agentloop.span") === name)
      const [runSpan] = named("agentloop.run")
      assert.isDefined(runSpan)
      assert.strictEqual(runSpan!.name, "invoke_agent")
      assert.strictEqual(runSpan!.attributes.get("agentloop.reason"), "stop")
      assert.strictEqual(runSpan!.attributes.get("agentloop.steps"), 2)
      assert.strictEqual(runSpan!.attributes.get("agentloop.usage.input"), 7)
      assert.strictEqual(runSpan!.attributes.get("agentloop.usage.output"), 3)
      assert.deepStrictEqual(named("agentloop.turn").map((s) => s.attributes.get("agentloop.step")), [1, 2])
      assert.deepStrictEqual(
        named("agentloop.turn").map((s) => s.name),
        ["chat", "chat"],
        "a model that does not describe itself"
      )
      const tools = named("agentloop.tool")
      assert.isTrue(tools.every((s) => s.name === "execute_tool e"))
      assert.deepStrictEqual(tools.map((s) => s.attributes.get("agentloop.tool.call_id")).sort(), ["a", "b"])
      assert.isTrue(tools.every((s) => s.attributes.get("agentloop.tool.name") === "e"))
      assert.isTrue(tools.every((s) => s.attributes.get("agentloop.tool.outcome") === "ok"))
      assert.isTrue(tools.every((s) => s.status._tag === "Ended"))
    }))

  it.effect("a call that ends in an error result has a span with outcome error", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recordingTracer()
      const run = yield* start(
        [turn.toolCalls([toolCall("ok", "e"), toolCall("bad", "f")]), turn.text("ok")],
        [echoTool("e"), failingTool("f", "disk full")]
      ).pipe(Effect.withTracer(tracer))
      const { violations } = yield* run.finish
      assert.deepStrictEqual(violations, [])
      const outcomes = spans
        .filter((s) => s.attributes.get("agentloop.span") === "agentloop.tool")
        .map((s) => [s.attributes.get("agentloop.tool.call_id"), s.attributes.get("agentloop.tool.outcome")])
      assert.sameDeepMembers(outcomes, [["ok", "ok"], ["bad", "error"]])
    }))
})
