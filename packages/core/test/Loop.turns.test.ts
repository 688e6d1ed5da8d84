import { defineTool, toolExecutorLayer } from "@agentloop/core"
import type { AssistantMessage } from "@agentloop/core"
import { assistant, echoTool, probeTool, runScripted, toolCall, turn, user } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { assertSound, eventTypes, results, roles, textOf } from "./helpers.ts"

describe("plain text stop", () => {
  it.effect("appends the final message once and ends with stop after one request", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.streamed(["Hel", "lo"])])
      assertSound(run)
      assert.strictEqual(run.result.reason, "stop")
      assert.strictEqual(run.result.steps, 1)
      assert.deepStrictEqual(roles(run.result.messages), ["user", "assistant"])
      const final = run.result.messages[1] as AssistantMessage
      assert.deepStrictEqual(final.content, [{ type: "text", text: "Hello" }])
      assert.strictEqual(run.result.error, undefined)
    }))

  it.effect("streamed deltas are events, never transcript entries; done is not forwarded as a model_event", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.streamed(["a", "b", "c"])])
      assertSound(run)
      assert.deepStrictEqual(eventTypes(run.events), [
        "model_event",
        "model_event",
        "model_event",
        "assistant_message",
        "turn_end"
      ])
      const deltas = run.events.flatMap((e) =>
        e.type === "model_event" && e.event.type === "text_delta" ? [e.event.delta] : []
      )
      assert.deepStrictEqual(deltas, ["a", "b", "c"])
      assert.isFalse(run.events.some((e) => e.type === "model_event" && e.event.type === "done"))
      assert.strictEqual(run.result.messages.length, 2)
    }))

  it.effect("never mutates the caller's array and returns a fresh one", () =>
    Effect.gen(function*() {
      const input = Object.freeze([user("hi")])
      const run = yield* runScripted([turn.text("hello")], { messages: input })
      assertSound(run)
      assert.strictEqual(input.length, 1)
      assert.notStrictEqual(run.result.messages, input)
      assert.strictEqual(run.result.messages[0], input[0])
    }))

  it.effect("every request carries the system prompt, the transcript and all tool definitions", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.text("no tools needed")], {
        systemPrompt: "be brief",
        tools: [echoTool("a"), echoTool("b")]
      })
      assertSound(run)
      const [request] = run.requests
      assert.strictEqual(request!.systemPrompt, "be brief")
      assert.deepStrictEqual(request!.tools.map((t) => t.name), ["a", "b"])
      assert.deepStrictEqual(roles(request!.messages), ["user"])
    }))

  it.effect("a request has no systemPrompt key when none was given", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.text("x")])
      assert.isFalse("systemPrompt" in run.requests[0]!)
    }))
})

describe("single tool roundtrip", () => {
  it.effect("executes the call, appends its result after the assistant message, asks again", () =>
    Effect.gen(function*() {
      const add = defineTool({
        name: "add",
        description: "adds",
        parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
        execute: ({ a, b }) => Effect.succeed(String(a + b))
      })
      const run = yield* runScripted([turn.toolCalls([toolCall("c1", "add", { a: 2, b: 3 })]), turn.text("5")], {
        tools: [add]
      })
      assertSound(run)
      assert.strictEqual(run.result.reason, "stop")
      assert.strictEqual(run.result.steps, 2)
      assert.deepStrictEqual(roles(run.result.messages), ["user", "assistant", "toolResult", "assistant"])
      const [result] = results(run.result.messages)
      assert.deepStrictEqual(result, {
        role: "toolResult",
        toolCallId: "c1",
        toolName: "add",
        content: [{ type: "text", text: "5" }],
        isError: false
      })
      // the second request saw the result
      assert.deepStrictEqual(roles(run.requests[1]!.messages), ["user", "assistant", "toolResult"])
      assert.deepStrictEqual(eventTypes(run.events), [
        "model_event",
        "assistant_message",
        "tool_start",
        "tool_end",
        "model_event",
        "assistant_message",
        "turn_end"
      ])
    }))

  it.effect("tool output with content parts and details becomes the result", () =>
    Effect.gen(function*() {
      const tool = echoTool("img", {
        content: [{ type: "image", data: "AAAA", mimeType: "image/png" }],
        details: { size: 3 }
      })
      const run = yield* runScripted([turn.toolCalls([toolCall("c1", "img")]), turn.text("seen")], { tools: [tool] })
      assertSound(run)
      const [result] = results(run.result.messages)
      assert.deepStrictEqual(result!.content, [{ type: "image", data: "AAAA", mimeType: "image/png" }])
      assert.deepStrictEqual(result!.details, { size: 3 })
      assert.isFalse(result!.isError)
    }))
})

describe("non-executing terminals", () => {
  const cases = [
    {
      name: "stop with calls",
      script: turn.message(assistant("stop", { calls: [toolCall("c1", "t", {})] })),
      reason: "error",
      skip: "unexpected-stop"
    },
    {
      name: "length (arguments that parse)",
      script: turn.truncated([toolCall("c1", "t", { path: "a.txt" })]),
      reason: "length",
      skip: "length"
    },
    {
      name: "error",
      script: turn.error("provider exploded", [toolCall("c1", "t", {})]),
      reason: "error",
      skip: "error"
    },
    { name: "aborted", script: turn.aborted([toolCall("c1", "t", {})]), reason: "aborted", skip: "aborted" }
  ] as const

  for (const c of cases) {
    it.effect(`${c.name}: appends the message, runs nothing, pairs the call with a skipped result`, () =>
      Effect.gen(function*() {
        const probe = probeTool(echoTool("t"))
        const run = yield* runScripted([c.script], { tools: [probe.tool] })
        assertSound(run)
        assert.strictEqual(yield* probe.executions, 0)
        assert.strictEqual(run.result.reason, c.reason)
        assert.strictEqual(run.result.steps, 1)
        assert.deepStrictEqual(roles(run.result.messages), ["user", "assistant", "toolResult"])
        const [result] = results(run.result.messages)
        assert.strictEqual(result!.toolCallId, "c1")
        assert.isTrue(result!.isError)
        assert.deepStrictEqual(result!.details, { skipped: true, reason: c.skip })
        // skipped calls emit tool_end but no tool_start
        assert.deepStrictEqual(eventTypes(run.events).filter((t) => t.startsWith("tool")), ["tool_end"])
      }))
  }

  it.effect("length: the skipped text says the response was truncated", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.truncated([toolCall("c1", "t"), toolCall("c2", "t")])], {
        tools: [echoTool("t")]
      })
      assertSound(run)
      assert.deepStrictEqual(results(run.result.messages).map(textOf), [
        "Tool call was not executed because the model response was truncated.",
        "Tool call was not executed because the model response was truncated."
      ])
    }))

  it.effect("error turn: the run's error is the model's errorMessage", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.error("rate limited")])
      assertSound(run)
      assert.strictEqual(run.result.error, "rate limited")
    }))

  it.effect("toolUse with no call: appended, nothing to pair, ends with error", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.message(assistant("toolUse", { text: "let me" }))])
      assertSound(run)
      assert.strictEqual(run.result.reason, "error")
      assert.deepStrictEqual(roles(run.result.messages), ["user", "assistant"])
      assert.match(run.result.error!, /no tool call/)
    }))

  it.effect("length with no call ends with length and pairs nothing", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.truncated([], "cut")])
      assertSound(run)
      assert.strictEqual(run.result.reason, "length")
      assert.deepStrictEqual(roles(run.result.messages), ["user", "assistant"])
    }))

  it.effect("the executor layer can be given instead of tools", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.toolCalls([toolCall("c1", "t")]), turn.text("ok")], {
        executor: toolExecutorLayer([echoTool("t", "fine")])
      })
      assertSound(run)
      assert.strictEqual(textOf(results(run.result.messages)[0]!), "fine")
    }))
})
