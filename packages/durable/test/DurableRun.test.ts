import {
  allow,
  ask,
  compaction,
  defineTool,
  deny,
  isCompactionSummary,
  ModelError,
  ToolConcurrency
} from "@agentloop/core"
import type { AgentRunResult, Message, ToolResultMessage } from "@agentloop/core"
import { echoTool, fakeTool, makeGatedTool, probeTool, sleepingTool, toolCall, turn, user } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import {
  abortRun,
  approvalIdOf,
  approve,
  DurableStore,
  followUp,
  idempotencyKeyOf,
  listRuns,
  pendingApprovals,
  runDurable,
  startRun,
  steer
} from "../src/index.ts"
import type { DurableEvent } from "../src/index.ts"
import { makeHarness, violationsOf } from "./harness.ts"

const results = (r: AgentRunResult) => r.messages.filter((m): m is ToolResultMessage => m.role === "toolResult")
const texts = (r: AgentRunResult) =>
  results(r).map((m) => `${m.toolCallId}:${m.content.map((c) => c.type === "text" ? c.text : "").join("")}`)
const shape = (r: AgentRunResult) =>
  r.messages.map((m) => m.role === "toolResult" ? `R(${m.toolCallId})` : m.role === "assistant" ? "A" : "U").join(" ")

/** Gives whatever could start every chance to (100 scheduler turns). */
const settle = Effect.forEach(Array.from({ length: 100 }), () => Effect.yieldNow, { discard: true })
const startedCall = (events: ReadonlyArray<DurableEvent>, id: string) =>
  events.some((e) => e.event.type === "tool_start" && e.event.call.id === id)

describe("durable run on the memory engine", () => {
  it.effect("runs a tool batch and ends like runAgentLoop: results in call order, one turn_end, events tagged", () =>
    Effect.gen(function*() {
      const input: Array<Message> = [user("go")]
      const h = yield* makeHarness([
        turn.toolCalls([toolCall("a", "echo", { n: 1 }), toolCall("b", "echo", { n: 2 })]),
        turn.text("done")
      ], [echoTool("echo")])
      const result = yield* runDurable({ runId: "r1", messages: input }).pipe(h.provide)
      assert.strictEqual(result.reason, "stop")
      assert.strictEqual(result.steps, 2)
      assert.strictEqual(shape(result), "U A R(a) R(b) A")
      assert.deepStrictEqual(violationsOf(input, result, h.events, yield* h.model.requests), [])
      const toolEnds = h.events.filter((e) => e.event.type === "tool_end")
      assert.deepStrictEqual(
        new Set(toolEnds.map((e) => `${e.runId}/${e.step}/${e.callIndex}`)),
        new Set(["r1/1/0", "r1/1/1"])
      )
      assert.strictEqual(h.events.filter((e) => e.event.type === "turn_end").length, 1)
    }))

  it.effect("follows the decision table: truncated, error and unexpected-stop turns skip their calls", () =>
    Effect.gen(function*() {
      const cases = [
        { script: turn.truncated([toolCall("a", "echo")]), reason: "length" },
        { script: turn.error("boom", [toolCall("a", "echo")]), reason: "error" },
        {
          script: turn.message({ role: "assistant", content: [toolCall("a", "echo")], stopReason: "stop" }),
          reason: "error"
        },
        {
          script: turn.message({ role: "assistant", content: [{ type: "text", text: "x" }], stopReason: "toolUse" }),
          reason: "error"
        }
      ] as const
      for (const [i, c] of cases.entries()) {
        const probe = probeTool(echoTool("echo"))
        const input = [user("go")]
        const h = yield* makeHarness([c.script], [probe.tool])
        const result = yield* runDurable({ runId: `dt${i}`, messages: input }).pipe(h.provide)
        assert.strictEqual(result.reason, c.reason)
        assert.strictEqual(yield* probe.executions, 0)
        assert.deepStrictEqual(violationsOf(input, result, h.events, yield* h.model.requests), [])
      }
    }))

  it.effect("an exclusive tool runs alone: calls before it finish first, calls after it start after it", () =>
    Effect.gen(function*() {
      const gate = makeGatedTool("g")
      const exclusive = makeGatedTool("x")
      const x = { ...exclusive.tool, definition: { ...exclusive.tool.definition, exclusive: true } }
      const input = [user("go")]
      const h = yield* makeHarness([
        turn.toolCalls([toolCall("a", "g"), toolCall("b", "g"), toolCall("x1", "x"), toolCall("c", "g")]),
        turn.text("done")
      ], [gate.tool, x])
      const fiber = yield* runDurable({ runId: "ex", messages: input }).pipe(h.provide, Effect.forkChild)
      yield* gate.started("a")
      yield* gate.started("b") // a and b run together
      yield* gate.release("a")
      yield* settle
      assert.isFalse(startedCall(h.events, "x1")) // b still runs
      yield* gate.release("b")
      yield* exclusive.started("x1")
      yield* settle
      assert.isFalse(startedCall(h.events, "c"))
      yield* exclusive.release("x1")
      yield* gate.started("c")
      yield* gate.release("c")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(shape(result), "U A R(a) R(b) R(x1) R(c) A")
      assert.deepStrictEqual(violationsOf(input, result, h.events, yield* h.model.requests), [])
    }))

  it.effect("the concurrency cap holds: a call starts only when a slot is free", () =>
    Effect.gen(function*() {
      const gate = makeGatedTool("g")
      const input = [user("go")]
      const h = yield* makeHarness(
        [
          turn.toolCalls([toolCall("a", "g"), toolCall("b", "g"), toolCall("c", "g")]),
          turn.text("done")
        ],
        [gate.tool],
        {},
        Layer.succeed(ToolConcurrency, 2)
      )
      const fiber = yield* runDurable({ runId: "cap", messages: input }).pipe(h.provide, Effect.forkChild)
      yield* gate.started("a")
      yield* gate.started("b")
      yield* settle
      assert.isFalse(startedCall(h.events, "c"))
      yield* gate.release("b")
      yield* gate.started("c")
      yield* gate.release("a")
      yield* gate.release("c")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(shape(result), "U A R(a) R(b) R(c) A")
      assert.deepStrictEqual(violationsOf(input, result, h.events, yield* h.model.requests), [])
    }))

  it.effect("a call over its time limit is stopped and answered with a timeout error", () =>
    Effect.gen(function*() {
      const slow = sleepingTool("slow", "10 seconds")
      const limited = { ...slow, definition: { ...slow.definition, timeoutMs: 1000 } }
      const input = [user("go")]
      const h = yield* makeHarness([turn.toolCalls([toolCall("s", "slow")]), turn.text("done")], [limited])
      const fiber = yield* runDurable({ runId: "to", messages: input }).pipe(h.provide, Effect.forkChild)
      yield* h.awaitEvent((e) => e.event.type === "tool_start")
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(fiber)
      const r = results(result)[0]!
      assert.isTrue(r.isError)
      assert.deepStrictEqual(r.details, { timedOut: true, timeoutMs: 1000 })
      assert.deepStrictEqual(violationsOf(input, result, h.events, yield* h.model.requests), [])
    }))
})

describe("approvals", () => {
  it.effect("a call waits for approve() and completed calls and turns never run again after the wake", () =>
    Effect.gen(function*() {
      const probe = probeTool(echoTool("read"))
      const write = probeTool(echoTool("write"))
      const input = [user("go")]
      const h = yield* makeHarness(
        [
          turn.toolCalls([toolCall("r1", "read")]),
          turn.toolCalls([toolCall("w1", "write"), toolCall("r2", "read")]),
          turn.text("done")
        ],
        [probe.tool, write.tool],
        { policy: (call) => call.name === "write" ? ask : allow }
      )
      const fiber = yield* runDurable({ runId: "ap", messages: input }).pipe(h.provide, Effect.forkChild)
      yield* h.awaitEvent((e) => e.event.type === "approval_request")
      const request = h.events.find((e) => e.event.type === "approval_request")!
      // the serializable id, and what approve() needs: the run and the call
      assert.strictEqual(request.event.type === "approval_request" ? request.event.id : undefined, "ap/w1")
      assert.strictEqual(approvalIdOf(request.runId, "w1"), "ap/w1")
      // the other call of the batch goes on while w1 waits
      yield* h.awaitEvent((e) => e.event.type === "tool_end" && e.event.result.toolCallId === "r2")
      assert.strictEqual(yield* write.executions, 0)
      yield* approve("ap", "w1", { approved: true }).pipe(h.provide)
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(shape(result), "U A R(r1) A R(w1) R(r2) A")
      assert.strictEqual(yield* write.executions, 1)
      assert.deepStrictEqual(yield* probe.executedIds, ["r1", "r2"]) // r1 and r2 ran once each across replays
      assert.strictEqual((yield* h.model.requests).length, 3) // no turn ran twice
      assert.deepStrictEqual(violationsOf(input, result, h.events, yield* h.model.requests), [])
    }))

  it.effect("a compaction's usage is counted once when the run wakes and its turns are replayed", () =>
    Effect.gen(function*() {
      const write = probeTool(echoTool("write"))
      const input = [user(`task: ${"q".repeat(2000)}`), {
        role: "assistant" as const,
        content: [{ type: "text" as const, text: "noted" }],
        stopReason: "stop" as const
      }, user("now write it")]
      const h = yield* makeHarness(
        [
          turn.text("SUMMARY", { input: 40, output: 4 }),
          turn.toolCalls([toolCall("w1", "write")]),
          turn.text("done", { input: 2, output: 1 })
        ],
        [write.tool],
        { policy: () => ask, transformContext: compaction({ contextWindow: 400 }) }
      )
      const fiber = yield* runDurable({ runId: "cu", messages: input }).pipe(h.provide, Effect.forkChild)
      yield* h.awaitEvent((e) => e.event.type === "approval_request")
      yield* approve("cu", "w1", { approved: true }).pipe(h.provide)
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.reason, "stop")
      const requests = yield* h.model.requests
      // one summarising request, then the run's two: none ran again on the wake
      assert.strictEqual(requests.length, 3)
      assert.isTrue(isCompactionSummary(requests[1]!.messages[0]!))
      assert.deepStrictEqual(result.usage, { input: 42, output: 5, cacheRead: 0, cacheWrite: 0 })
    }))

  it.effect("listRuns shows each run started and where it is: waiting for an approval, then ended", () =>
    Effect.gen(function*() {
      const h = yield* makeHarness(
        [turn.toolCalls([toolCall("w1", "write")]), turn.text("done")],
        [echoTool("write")],
        {
          policy: () => ask
        }
      )
      const fiber = yield* runDurable({ runId: "ls", messages: [user("go")] }).pipe(h.provide, Effect.forkChild)
      yield* h.awaitEvent((e) => e.event.type === "approval_request")
      yield* settle
      const waiting = yield* listRuns().pipe(h.provide)
      assert.deepStrictEqual(waiting.map((r) => [r.runId, r.state]), [["ls", "waiting"]])
      assert.deepStrictEqual(waiting[0]!.approvals.map((a) => [a.runId, a.call.id, a.call.name]), [[
        "ls",
        "w1",
        "write"
      ]])
      assert.deepStrictEqual((yield* pendingApprovals("ls").pipe(h.provide)).map((a) => a.call.id), ["w1"])
      assert.deepStrictEqual(yield* pendingApprovals("other").pipe(h.provide), [])
      yield* approve("ls", "w1", { approved: true }).pipe(h.provide)
      yield* Fiber.join(fiber)
      const ended = yield* listRuns().pipe(h.provide)
      assert.deepStrictEqual(ended.map((r) => [r.runId, r.state, r.reason, r.steps]), [["ls", "ended", "stop", 2]])
      assert.deepStrictEqual(yield* pendingApprovals().pipe(h.provide), [])
    }))

  it.effect("a denial and a deny policy answer the call denied; the tool never runs", () =>
    Effect.gen(function*() {
      const write = probeTool(echoTool("write"))
      const input = [user("go")]
      const h = yield* makeHarness(
        [
          turn.toolCalls([toolCall("w1", "write"), toolCall("w2", "rm")]),
          turn.text("done")
        ],
        [write.tool, echoTool("rm")],
        { policy: (call) => call.name === "rm" ? deny("never") : ask }
      )
      const fiber = yield* runDurable({ runId: "dn", messages: input }).pipe(h.provide, Effect.forkChild)
      yield* h.awaitEvent((e) => e.event.type === "approval_request")
      yield* approve("dn", "w1", { approved: false, reason: "not today" }).pipe(h.provide)
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(yield* write.executions, 0)
      const [w1, w2] = results(result)
      assert.deepStrictEqual(w1!.details, { skipped: true, reason: "denied", denial: "not today" })
      assert.deepStrictEqual(w2!.details, { skipped: true, reason: "denied", denial: "never" })
      assert.deepStrictEqual(violationsOf(input, result, h.events, yield* h.model.requests), [])
    }))

  it.effect("an approval not answered within the approval timeout is answered denied", () =>
    Effect.gen(function*() {
      const write = probeTool(echoTool("write"))
      const input = [user("go")]
      const h = yield* makeHarness([turn.toolCalls([toolCall("w1", "write")]), turn.text("done")], [write.tool], {
        policy: () => ask,
        approvalTimeout: "3 days"
      })
      const fiber = yield* runDurable({ runId: "at", messages: input }).pipe(h.provide, Effect.forkChild)
      yield* h.awaitEvent((e) => e.event.type === "approval_request")
      yield* TestClock.adjust("2 days")
      yield* Effect.yieldNow
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 day")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(yield* write.executions, 0)
      const r = results(result)[0]!
      assert.strictEqual((r.details as { reason: string }).reason, "denied")
      assert.match(texts(result)[0]!, /no answer to the approval request within 3d/)
      assert.deepStrictEqual(violationsOf(input, result, h.events, yield* h.model.requests), [])
    }))
})

describe("abort, steering and follow-ups from outside", () => {
  it.effect(
    "abort while a call waits for approval: the call is skipped aborted, the run ends aborted with its " +
      "transcript",
    () =>
      Effect.gen(function*() {
        const write = probeTool(echoTool("write"))
        const input = [user("go")]
        const h = yield* makeHarness([
          turn.toolCalls([toolCall("w1", "write"), toolCall("r1", "read")]),
          turn.text("never")
        ], [
          write.tool,
          echoTool("read")
        ], { policy: (call) => call.name === "write" ? ask : allow })
        const fiber = yield* runDurable({ runId: "ab", messages: input }).pipe(h.provide, Effect.forkChild)
        yield* h.awaitEvent((e) => e.event.type === "approval_request")
        yield* h.awaitEvent((e) => e.event.type === "tool_end" && e.event.result.toolCallId === "r1")
        assert.strictEqual((yield* pendingApprovals().pipe(h.provide)).length, 1)
        yield* abortRun("ab").pipe(h.provide)
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result.reason, "aborted")
        assert.deepStrictEqual(yield* pendingApprovals().pipe(h.provide), []) // settled by the abort
        assert.strictEqual(shape(result), "U A R(w1) R(r1)")
        assert.deepStrictEqual(results(result)[0]!.details, { skipped: true, reason: "aborted" })
        assert.strictEqual(yield* write.executions, 0)
        assert.strictEqual((yield* h.model.requests).length, 1)
        assert.deepStrictEqual(violationsOf(input, result, h.events, yield* h.model.requests), [])
      })
  )

  it.effect(
    "abort during a batch reaches it as in memory: the running call is interrupted, calls not started " +
      "are skipped, no new request",
    () =>
      Effect.gen(function*() {
        const gate = makeGatedTool("g")
        const probe = probeTool(echoTool("later"))
        const x = probeTool({ ...probe.tool, definition: { ...probe.tool.definition, exclusive: true } })
        const input = [user("go")]
        const h = yield* makeHarness(
          [turn.toolCalls([toolCall("a", "g"), toolCall("b", "later")]), turn.text("never")],
          [
            gate.tool,
            x.tool
          ]
        )
        const fiber = yield* runDurable({ runId: "ab2", messages: input }).pipe(h.provide, Effect.forkChild)
        yield* gate.started("a")
        yield* abortRun("ab2").pipe(h.provide)
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result.reason, "aborted")
        assert.deepStrictEqual(texts(result), [
          "a:Tool call was interrupted before it finished.",
          "b:Tool call was not executed because the run was aborted."
        ])
        assert.deepStrictEqual(results(result)[0]!.details, { interrupted: true })
        assert.strictEqual(yield* x.executions, 0)
        assert.deepStrictEqual(violationsOf(input, result, h.events, yield* h.model.requests), [])
      })
  )

  it.effect("steering joins at the next boundary; a follow-up restarts a run that would stop", () =>
    Effect.gen(function*() {
      const gate = makeGatedTool("g")
      const input = [user("go")]
      const h = yield* makeHarness([turn.toolCalls([toolCall("a", "g")]), turn.text("first"), turn.text("second")], [
        gate.tool
      ])
      const fiber = yield* runDurable({ runId: "st", messages: input }).pipe(h.provide, Effect.forkChild)
      yield* gate.started("a")
      yield* steer("st", { role: "user", content: "steer" }).pipe(h.provide)
      yield* followUp("st", { role: "user", content: "more" }).pipe(h.provide)
      yield* gate.release("a")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(shape(result), "U A R(a) U A U A")
      const users = result.messages.filter((m) => m.role === "user").map((m) => m.content)
      assert.deepStrictEqual(users, ["go", "steer", "more"])
      assert.strictEqual(result.steps, 3)
      // the model saw each message in the request right after it joined
      const requests = yield* h.model.requests
      assert.deepStrictEqual(requests.map((r) => r.messages.at(-1)), [
        { role: "user", content: "go" },
        { role: "user", content: "steer" },
        { role: "user", content: "more" }
      ])
      assert.deepStrictEqual(violationsOf(input, result, h.events, yield* h.model.requests), [])
    }))
})

describe("calls found already started (a crash mid-call)", () => {
  it.effect(
    "run again with the same idempotency key in their context; atMostOnce tools (by definition or " +
      "listed) answered interrupted",
    () =>
      Effect.gen(function*() {
        const keys: Array<string | undefined> = []
        const keyed = fakeTool("charge", (_, ctx) =>
          Effect.sync(() => {
            keys.push(ctx.idempotencyKey)
            return "charged"
          }))
        // marked in its definition; no runner list names it
        const deploy = probeTool(defineTool({
          name: "deploy",
          description: "deploys",
          parameters: Schema.Struct({}),
          atMostOnce: true,
          execute: () => Effect.succeed("deployed")
        }))
        // a tool whose definition we do not write: listed in the runner's configuration
        const listed = probeTool(echoTool("mcp_send"))
        const input = [user("go")]
        const h = yield* makeHarness(
          [
            turn.toolCalls([toolCall("c", "charge"), toolCall("d", "deploy"), toolCall("m", "mcp_send")]),
            turn.toolCalls([toolCall("c2", "charge"), toolCall("d2", "deploy"), toolCall("m2", "mcp_send")]),
            turn.text("done")
          ],
          [keyed, deploy.tool, listed.tool],
          { atMostOnce: ["mcp_send"] }
        )
        const result = yield* Effect.gen(function*() {
          const store = yield* DurableStore
          // what a process that died mid-call leaves behind: the first step's calls marked started
          yield* Effect.forEach([0, 1, 2], (i) => store.claimStart(idempotencyKeyOf("cr", 1, i)), { discard: true })
          return yield* runDurable({ runId: "cr", messages: input })
        }).pipe(h.provide)
        assert.deepStrictEqual(keys, [idempotencyKeyOf("cr", 1, 0), idempotencyKeyOf("cr", 2, 0)])
        assert.deepStrictEqual(results(result).map((r) => [r.toolCallId, r.details]), [
          ["c", undefined],
          ["d", { interrupted: true }],
          ["m", { interrupted: true }],
          ["c2", undefined],
          ["d2", undefined],
          ["m2", undefined]
        ])
        // calls not found started run as usual, once
        assert.deepStrictEqual(yield* deploy.executedIds, ["d2"])
        assert.deepStrictEqual(yield* listed.executedIds, ["m2"])
        assert.deepStrictEqual(violationsOf(input, result, h.events, yield* h.model.requests), [])
      })
  )
})

describe("how a run ends", () => {
  it.effect("a turn failing with a typed ModelError ends the run error with its errorReason, like runAgentLoop", () =>
    Effect.gen(function*() {
      const input = [user("go")]
      const h = yield* makeHarness([
        turn.toolCalls([toolCall("a", "echo")]),
        () => Stream.fail(new ModelError({ message: "slow down", reason: "rate_limit" }))
      ], [echoTool("echo")])
      const result = yield* runDurable({ runId: "er", messages: input }).pipe(h.provide)
      assert.strictEqual(result.reason, "error")
      assert.strictEqual(result.errorReason, "rate_limit")
      assert.match(result.error ?? "", /slow down/)
      assert.strictEqual(shape(result), "U A R(a)")
      const ended = yield* listRuns().pipe(h.provide)
      assert.deepStrictEqual(ended.map((r) => [r.runId, r.reason]), [["er", "error"]])
      assert.deepStrictEqual(violationsOf(input, result, h.events, yield* h.model.requests), [])
    }))

  it.effect("a bad input is a typed error and nothing starts", () =>
    Effect.gen(function*() {
      const h = yield* makeHarness([], [])
      const error = yield* startRun({
        runId: "bad",
        messages: [{ role: "toolResult", toolCallId: "x", toolName: "y", content: [], isError: false }]
      }).pipe(h.provide, Effect.flip)
      assert.strictEqual(error._tag, "DurableRunInputError")
      assert.match(error.message, /bad input/)
      const zero = yield* startRun({ runId: "bad2", messages: [user("x")], maxSteps: 0 }).pipe(h.provide, Effect.flip)
      assert.match(zero.message, /maxSteps/)
    }))

  it.effect("what cannot travel with a run is refused with a typed error naming where it goes; nothing starts", () =>
    Effect.gen(function*() {
      const h = yield* makeHarness([turn.text("never")], [])
      const refused = (extra: Record<string, unknown>) =>
        startRun({ runId: "rf", messages: [user("x")], ...extra } as never).pipe(h.provide, Effect.flip)
      const signal = yield* refused({ signal: new AbortController().signal })
      assert.strictEqual(signal._tag, "DurableRunInputError")
      assert.match(signal.message, /cannot take "signal".*abortRun/)
      assert.match((yield* refused({ policy: () => allow })).message, /durableRunnerLayer\(\{ policy \}\)/)
      assert.match(
        (yield* refused({ transformContext: Effect.succeed })).message,
        /durableRunnerLayer\(\{ transformContext \}\)/
      )
      assert.match(
        (yield* refused({ output: Schema.Struct({ n: Schema.Number }) })).message,
        /durableRunnerLayer\(\{ output \}\)/
      )
      // the loop's own bad-input words, and the run's one turn_end
      const tail = yield* refused({ messages: [user("x"), { role: "assistant", content: [], stopReason: "stop" }] })
      assert.match(tail.message, /^bad input: the messages end with the model's answer/)
      assert.deepStrictEqual(h.events.filter((e) => e.event.type === "turn_end").length, 5)
      assert.strictEqual((yield* h.model.requests).length, 0)
    }))

  it.effect("an output schema travels as JSON Schema: the run ends with its decoded answer", () =>
    Effect.gen(function*() {
      const input = [user("go")]
      const h = yield* makeHarness([turn.finalAnswer("f1", { n: "x" }), turn.finalAnswer("f2", { n: 2 })], [])
      const result = yield* runDurable({
        runId: "out",
        messages: input,
        output: { jsonSchema: { type: "object", properties: { n: { type: "number" } }, required: ["n"] } }
      }).pipe(h.provide)
      assert.strictEqual(result.reason, "stop")
      assert.deepStrictEqual(result.output, { n: 2 })
      assert.deepStrictEqual(violationsOf(input, result, h.events, yield* h.model.requests), [])
      const bad = yield* startRun({ runId: "out2", messages: input, output: { jsonSchema: { type: "nonsense" } } })
        .pipe(
          h.provide,
          Effect.flip
        )
      assert.match(bad.message, /^bad input: output: unsupported JSON Schema/)
    }))

  it.effect("a malformed steering message ends the run error, as in memory", () =>
    Effect.gen(function*() {
      const gate = makeGatedTool("g")
      const h = yield* makeHarness([turn.toolCalls([toolCall("a", "g")]), turn.text("never")], [gate.tool])
      const fiber = yield* runDurable({ runId: "ms", messages: [user("go")] }).pipe(h.provide, Effect.forkChild)
      yield* gate.started("a")
      yield* steer("ms", { role: "user", content: 42 } as never).pipe(h.provide)
      yield* gate.release("a")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.reason, "error")
      assert.match(result.error!, /^bad input: a steering message is not a valid user message/)
      assert.strictEqual((yield* h.model.requests).length, 1)
    }))
})
