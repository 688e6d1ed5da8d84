import { EventSink, Executor, noopSinkLayer, prepareTranscript, runAgentLoop, toolExecutorLayer } from "@agentloop/core"
import type { AgentLoopOptions, Message, ModelEvent, UserMessage } from "@agentloop/core"
import {
  assistant,
  echoTool,
  makeScriptedModel,
  probeTool,
  runScripted,
  toolCall,
  turn,
  user
} from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Logger, Queue, Stream } from "effect"
import { assertSound, results, roles, textOf } from "./helpers.ts"

const callAB = assistant("toolUse", { calls: [toolCall("a", "e"), toolCall("b", "e")] })
const resultFor = (id: string, text = `${id} result`): Message => ({
  role: "toolResult",
  toolCallId: id,
  toolName: "e",
  content: [{ type: "text", text }],
  isError: false
})

describe("bad input ends the run at once (reason error, steps 0, one turn_end, model never called)", () => {
  const cases: ReadonlyArray<{ name: string; messages: ReadonlyArray<unknown>; error: RegExp }> = [
    {
      name: "a message with an unknown role",
      messages: [{ role: "robot", content: "x" }],
      error: /messages\[0\] is not a valid message/
    },
    {
      name: "a user message without content",
      messages: [user("ok"), { role: "user" }],
      error: /messages\[1\].*content/s
    },
    {
      name: "an assistant message with a bad stopReason",
      messages: [{ role: "assistant", content: [], stopReason: "done" }],
      error: /messages\[0\].*stopReason/s
    },
    {
      name: "a tool call without an id",
      messages: [{
        role: "assistant",
        content: [{ type: "toolCall", id: "", name: "e", arguments: {} }],
        stopReason: "toolUse"
      }],
      error: /messages\[0\].*id/s
    },
    { name: "a message that is not an object", messages: [42], error: /messages\[0\]/ },
    {
      name: "a tool result with no matching call",
      messages: [user("hi"), resultFor("zz")],
      error: /messages\[1\].*orphan/s
    },
    {
      name: "a tool result answering a call the message before did not make",
      messages: [user("hi"), callAB, resultFor("a"), resultFor("zz")],
      error: /messages\[3\].*"zz".*orphan/s
    },
    {
      name: "two results for one call",
      messages: [user("hi"), callAB, resultFor("a"), resultFor("a")],
      error: /messages\[3\] is a second tool result for call "a"/
    },
    {
      name: "a result separated from its call by another message",
      messages: [user("hi"), callAB, user("wait"), resultFor("a")],
      error: /messages\[3\].*orphan/s
    },
    {
      name: "a result naming another tool than its call",
      messages: [user("hi"), callAB, { ...resultFor("a"), toolName: "x" }],
      error: /as tool "x".*"e"/s
    },
    {
      name: "duplicate call ids in one input message",
      messages: [user("hi"), assistant("toolUse", { calls: [toolCall("a", "e"), toolCall("a", "e")] })],
      error: /repeats tool call id "a"/
    }
  ]
  for (const c of cases) {
    it.effect(c.name, () =>
      Effect.gen(function*() {
        const run = yield* runScripted([turn.text("never")], { messages: c.messages as ReadonlyArray<Message> })
        assertSound(run)
        assert.strictEqual(run.result.reason, "error")
        assert.strictEqual(run.result.steps, 0)
        assert.strictEqual(run.requests.length, 0)
        assert.match(run.result.error!, /^bad input: /)
        assert.match(run.result.error!, c.error)
        assert.deepStrictEqual(run.events, [{ type: "turn_end", reason: "error", steps: 0, error: run.result.error! }])
        assert.deepStrictEqual(run.result.messages, [], "nothing invalid is returned as a transcript")
      }))
  }

  it.effect("options that are not an object, or messages that are not an array", () =>
    Effect.gen(function*() {
      for (const options of [null, 42, "go"]) {
        const model = yield* makeScriptedModel([turn.text("never")])
        const result = yield* runAgentLoop(options as unknown as AgentLoopOptions).pipe(
          Effect.provide(Layer.mergeAll(model.layer, noopSinkLayer, toolExecutorLayer([])))
        )
        assert.deepStrictEqual(result, {
          messages: [],
          steps: 0,
          reason: "error",
          error: "bad input: options must be an object"
        })
        assert.strictEqual((yield* model.requests).length, 0)
      }
      const a = yield* runScripted([turn.text("never")], { messages: "hi" as never })
      assert.strictEqual(a.result.reason, "error")
      assert.strictEqual(a.result.error, "bad input: messages must be an array")
      assert.strictEqual(a.requests.length, 0)
      const b = yield* runScripted([turn.text("never")], { systemPrompt: 7 as never })
      assert.match(b.result.error!, /bad input: .*systemPrompt/s)
      const c = yield* runScripted([turn.text("never")], { signal: "stop" as never })
      assert.match(c.result.error!, /bad input: .*AbortSignal/s)
    }))
})

describe("an empty transcript", () => {
  it.effect("is sent as it is: the model is asked with no messages (nothing to resume, nothing wrong)", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.text("hello")], { messages: [] })
      assertSound(run)
      assert.strictEqual(run.result.reason, "stop")
      assert.deepStrictEqual(run.requests[0]!.messages, [])
      assert.deepStrictEqual(roles(run.result.messages), ["assistant"])
    }))
})

describe("dangling calls in the input are repaired, not rejected", () => {
  it.effect("a call with no result gets a skipped result (interrupted) right after its message", () =>
    Effect.gen(function*() {
      const input = [user("hi"), callAB, resultFor("b"), user("continue")]
      const run = yield* runScripted([turn.text("resumed")], { messages: input })
      assertSound(run)
      assert.strictEqual(run.result.reason, "stop")
      const first = run.requests[0]!.messages
      assert.deepStrictEqual(roles(first), ["user", "assistant", "toolResult", "toolResult", "user"])
      const [a, b] = results(first)
      assert.strictEqual(a!.toolCallId, "a")
      assert.deepStrictEqual(a!.details, { skipped: true, reason: "interrupted" })
      assert.strictEqual(b, input[2], "an existing result is kept as it was")
      assert.strictEqual(input.length, 4, "the caller's array is untouched")
    }))

  it.effect("results in any order within their block are put into call order", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.text("ok")], {
        messages: [user("hi"), callAB, resultFor("b"), resultFor("a")]
      })
      assertSound(run)
      assert.deepStrictEqual(results(run.requests[0]!.messages).map((r) => r.toolCallId), ["a", "b"])
    }))

  it.effect("a transcript saved by a crashed process (ends on the calls) resumes", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.text("ok")], { messages: [user("hi"), callAB] })
      assertSound(run)
      assert.deepStrictEqual(roles(run.result.messages), ["user", "assistant", "toolResult", "toolResult", "assistant"])
    }))

  it("prepareTranscript returns a fresh array and keeps provider fields", () => {
    const withSignature = {
      role: "assistant",
      content: [{ type: "thinking", thinking: "hmm", signature: "sig", vendorField: 1 }],
      stopReason: "stop"
    }
    const input = [user("hi"), withSignature]
    const prepared = prepareTranscript(input)
    assert.isTrue(prepared.ok)
    if (prepared.ok) {
      assert.notStrictEqual(prepared.value, input)
      assert.strictEqual(prepared.value[1], withSignature as unknown)
    }
  })
})

describe("the model's final message is checked before it is appended", () => {
  const malformed: ReadonlyArray<{ name: string; message: unknown; error: RegExp }> = [
    {
      name: "a tool call without an id",
      message: { role: "assistant", content: [{ type: "toolCall", name: "e", arguments: {} }], stopReason: "toolUse" },
      error: /malformed.*id/s
    },
    {
      name: "arguments that are not an object",
      message: {
        role: "assistant",
        content: [{ type: "toolCall", id: "a", name: "e", arguments: "{\"x\":1}" }],
        stopReason: "toolUse"
      },
      error: /malformed.*arguments/s
    },
    {
      name: "arguments that are an array",
      message: {
        role: "assistant",
        content: [{ type: "toolCall", id: "a", name: "e", arguments: [1] }],
        stopReason: "toolUse"
      },
      error: /malformed.*arguments/s
    },
    { name: "a missing stopReason", message: { role: "assistant", content: [] }, error: /malformed.*stopReason/s },
    { name: "a wrong role", message: { role: "user", content: "hi", stopReason: "stop" }, error: /malformed/ },
    { name: "null", message: null, error: /malformed/ }
  ]
  for (const m of malformed) {
    it.effect(`${m.name}: not appended, nothing runs, the run ends error naming the problem`, () =>
      Effect.gen(function*() {
        const probe = probeTool(echoTool("e"))
        const run = yield* runScripted([turn.message(m.message)], { tools: [probe.tool] })
        assertSound(run)
        assert.strictEqual(run.result.reason, "error")
        assert.match(run.result.error!, m.error)
        assert.deepStrictEqual(roles(run.result.messages), ["user"])
        assert.strictEqual(yield* probe.executions, 0)
        assert.isFalse(run.events.some((e) => e.type === "assistant_message"))
      }))
  }

  it.effect("duplicate tool-call ids: not appended, nothing runs (nothing twice), error names the id", () =>
    Effect.gen(function*() {
      const probe = probeTool(echoTool("e"))
      const run = yield* runScripted([
        turn.toolCalls([toolCall("dup", "e"), toolCall("other", "e"), toolCall("dup", "e")])
      ], { tools: [probe.tool] })
      assertSound(run)
      assert.strictEqual(run.result.reason, "error")
      assert.match(run.result.error!, /repeats tool call id "dup"/)
      assert.strictEqual(yield* probe.executions, 0)
      assert.deepStrictEqual(roles(run.result.messages), ["user"])
    }))
})

describe("model streams that misbehave end the run error", () => {
  const cases = [
    {
      name: "a typed ModelError",
      script: turn.failing("HTTP 500: upstream", ["partial"]),
      error: /^model error: HTTP 500: upstream$/
    },
    { name: "a defect", script: turn.dying(new Error("socket hang up")), error: /^model stream died: socket hang up$/ },
    {
      name: "Model.stream throwing",
      script: turn.throwing(new Error("bad config")),
      error: /^model stream died: bad config$/
    },
    {
      name: "a stream with no final message",
      script: turn.events([{ type: "text_delta", delta: "a" }]),
      error: /^model stream ended without a final message$/
    },
    { name: "an empty stream", script: turn.events([]), error: /^model stream ended without a final message$/ }
  ]
  for (const c of cases) {
    it.effect(`${c.name}: nothing partial appended`, () =>
      Effect.gen(function*() {
        const run = yield* runScripted([c.script])
        assertSound(run)
        assert.strictEqual(run.result.reason, "error")
        assert.strictEqual(run.result.steps, 1)
        assert.match(run.result.error!, c.error)
        assert.deepStrictEqual(roles(run.result.messages), ["user"])
      }))
  }

  it.effect("a stream that interrupts itself: the run ends error saying so, nothing partial appended", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([
        turn.custom(() =>
          Stream.concat(
            Stream.make<Array<ModelEvent>>({ type: "text_delta", delta: "par" }),
            Stream.fromEffect(Effect.interrupt)
          )
        )
      ])
      assertSound(run)
      assert.strictEqual(run.result.reason, "error")
      assert.strictEqual(run.result.error, "model stream was interrupted")
      assert.deepStrictEqual(roles(run.result.messages), ["user"])
    }))

  it.effect("a second final message is ignored: only the first counts", () =>
    Effect.gen(function*() {
      const first = assistant("stop", { text: "first" })
      const run = yield* runScripted([
        turn.events([{ type: "done", message: first }, {
          type: "done",
          message: assistant("stop", { text: "second" })
        }])
      ])
      assertSound(run)
      assert.strictEqual(run.result.messages[1], first)
      assert.strictEqual(run.result.messages.length, 2)
    }))

  it.effect("an unscripted request is loud: the run ends error naming it and runScripted dies", () =>
    Effect.gen(function*() {
      const model = yield* makeScriptedModel([turn.toolCalls([toolCall("a", "e")])])
      const result = yield* runAgentLoop({ messages: [user("go")] }).pipe(
        Effect.provide(Layer.mergeAll(model.layer, noopSinkLayer, toolExecutorLayer([echoTool("e")])))
      )
      assert.strictEqual(result.reason, "error")
      assert.match(result.error!, /request #2 was not scripted/)
      const exit = yield* Effect.exit(runScripted([turn.toolCalls([toolCall("a", "e")])], { tools: [echoTool("e")] }))
      assert.isTrue(Exit.hasDies(exit))
    }))
})

describe("tool arguments are decoded before the tool runs (through the loop)", () => {
  it.effect("unknown tool and bad arguments give readable error results and run nothing", () =>
    Effect.gen(function*() {
      const probe = probeTool(echoTool("e"))
      const run = yield* runScripted([
        turn.toolCalls([toolCall("u", "nope", {}), toolCall("ok", "e", { x: 1 })]),
        turn.text("fine")
      ], { tools: [probe.tool] })
      assertSound(run)
      const [u, ok] = results(run.result.messages)
      assert.strictEqual(textOf(u!), "Unknown tool \"nope\". Available tools: e.")
      assert.isFalse(ok!.isError)
      assert.deepStrictEqual(yield* probe.executedIds, ["ok"])
    }))

  it.effect("executor definitions that are not tool definitions end the run error naming the problem", () =>
    Effect.gen(function*() {
      const executor = Layer.succeed(
        Executor,
        Executor.of({
          definitions: [{ name: "a", description: "" }] as never,
          execute: () => Effect.die("unused")
        })
      )
      const run = yield* runScripted([turn.text("never")], { executor })
      assertSound(run)
      assert.strictEqual(run.result.reason, "error")
      assert.match(run.result.error!, /^the executor's tool definitions are invalid: .*parameters/s)
      assert.strictEqual(run.requests.length, 0)
    }))

  it.effect(
    "a defect inside the loop (definitions that throw when read) still ends the run error, with one " +
      "turn_end",
    () =>
      Effect.gen(function*() {
        const broken = {
          get definitions(): never {
            throw new Error("tool registry is down")
          },
          execute: () => Effect.die("unused")
        }
        const executor = Layer.succeed(Executor, broken as unknown as typeof Executor.Service)
        const run = yield* runScripted([turn.text("never")], { executor })
        assertSound(run)
        assert.strictEqual(run.result.reason, "error")
        assert.match(run.result.error!, /^agentloop internal error: .*tool registry is down/s)
        assert.notMatch(run.result.error!, /\n\s+at /, "no stack trace")
        assert.strictEqual(run.requests.length, 0)
        assert.deepStrictEqual(run.events, [{ type: "turn_end", reason: "error", steps: 0, error: run.result.error! }])
      })
  )

  it.effect("invalid executor definitions end the run error before any request", () =>
    Effect.gen(function*() {
      const executor = Layer.succeed(
        Executor,
        Executor.of({
          definitions: [{ name: "a", description: "", parameters: {} }, { name: "a", description: "", parameters: {} }],
          execute: () => Effect.die("unused")
        })
      )
      const run = yield* runScripted([turn.text("never")], { executor })
      assert.strictEqual(run.result.reason, "error")
      assert.match(run.result.error!, /defines tool "a" twice/)
      assert.strictEqual(run.requests.length, 0)
    }))
})

describe("what the loop is given while it runs is checked too", () => {
  it.effect("a malformed follow-up message ends the run error naming it; nothing invalid joins the transcript", () =>
    Effect.gen(function*() {
      const followUps = yield* Queue.unbounded<UserMessage>()
      yield* Queue.offer(followUps, { role: "user", content: 7 } as unknown as UserMessage)
      const run = yield* runScripted([turn.text("hello")], { followUps })
      assertSound(run)
      assert.strictEqual(run.result.reason, "error")
      assert.match(run.result.error!, /^bad input: a follow-up message is not a valid user message: /)
      assert.deepStrictEqual(roles(run.result.messages), ["user", "assistant"])
    }))

  it.effect("a transformContext that returns something else than an array ends the run error", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.text("never")], {
        transformContext: () => Effect.succeed("not messages" as unknown as ReadonlyArray<Message>)
      })
      assertSound(run)
      assert.strictEqual(run.result.reason, "error")
      assert.strictEqual(run.result.error, "transformContext returned an invalid transcript: not an array")
      assert.strictEqual(run.requests.length, 0)
    }))
})

describe("an EventSink that breaks never breaks the run", () => {
  it.effect(
    "emit throwing before it returns an effect: the run goes on, and the failure is logged naming the " +
      "event",
    () =>
      Effect.gen(function*() {
        const logged: Array<{ readonly message: unknown; readonly cause: Cause.Cause<unknown> }> = []
        const logger = Logger.make((options) => void logged.push({ message: options.message, cause: options.cause }))
        const throwing = Layer.succeed(
          EventSink,
          EventSink.of({
            emit: (event) => {
              if (event.type === "tool_start") throw new Error("ui crashed")
              return Effect.void
            }
          })
        )
        const probe = probeTool(echoTool("e"))
        const model = yield* makeScriptedModel([turn.toolCalls([toolCall("a", "e")]), turn.text("ok")])
        const result = yield* runAgentLoop({ messages: [user("go")] }).pipe(
          Effect.provide(Layer.mergeAll(model.layer, throwing, toolExecutorLayer([probe.tool]), Logger.layer([logger])))
        )
        assert.strictEqual(result.reason, "stop")
        assert.strictEqual(yield* probe.executions, 1)
        assert.deepStrictEqual(results(result.messages).map((r) => r.isError), [false])
        assert.strictEqual(logged.length, 1)
        assert.deepStrictEqual(logged[0]!.message, [
          "agentloop: EventSink.emit failed on a \"tool_start\" event; the run goes on"
        ])
        assert.match(Cause.pretty(logged[0]!.cause), /ui crashed/)
      })
  )
})
