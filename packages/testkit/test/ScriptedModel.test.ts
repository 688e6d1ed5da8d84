import type { ModelRequest } from "@agentloop/core"
import { makeScriptedModel, runScripted, toolCall, turn, UnscriptedRequestError } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Stream } from "effect"

const request: ModelRequest = { messages: [{ role: "user", content: "hi" }], tools: [] }

describe("scripted model", () => {
  it.effect("answers requests in script order and records them", () =>
    Effect.gen(function*() {
      const model = yield* makeScriptedModel([turn.text("one"), turn.toolCalls([toolCall("a", "t")], "two")])
      const first = yield* Stream.runCollect(model.service.stream(request))
      assert.deepStrictEqual(first.map((e) => e.type), ["text_delta", "done"])
      const second = yield* Stream.runCollect(model.service.stream(request))
      assert.deepStrictEqual(second.map((e) => e.type), ["text_delta", "toolcall_delta", "done"])
      assert.strictEqual((yield* model.requests).length, 2)
      assert.strictEqual(yield* model.remaining, 0)
      yield* model.verify({ all: true })
    }))

  it.effect("an unscripted request dies loudly and verify fails", () =>
    Effect.gen(function*() {
      const model = yield* makeScriptedModel([])
      const exit = yield* Effect.exit(Stream.runCollect(model.service.stream(request)))
      assert.isTrue(Exit.hasDies(exit))
      const verified = yield* Effect.exit(model.verify())
      assert.isTrue(Exit.hasDies(verified))
      assert.match(new UnscriptedRequestError({ index: 0, scripted: 0 }).message, /request #1 was not scripted/)
    }))

  it.effect("verify({ all: true }) fails when turns were left unused", () =>
    Effect.gen(function*() {
      const model = yield* makeScriptedModel([turn.text("never asked")])
      assert.isTrue(Exit.hasDies(yield* Effect.exit(model.verify({ all: true }))))
      yield* model.verify()
    }))

  it.effect("requests are frozen, so a loop that mutates an array it handed out fails", () =>
    Effect.gen(function*() {
      const model = yield* makeScriptedModel([turn.text("x")])
      const messages = [{ role: "user" as const, content: "hi" }]
      yield* Stream.runDrain(model.service.stream({ messages, tools: [] }))
      assert.throws(() => messages.push({ role: "user", content: "later" }))
    }))

  it.effect("runScripted reports invariant violations (empty for a sound loop)", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.streamed(["a", "b"])])
      assert.deepStrictEqual(run.violations, [])
      assert.strictEqual(run.result.reason, "stop")
    }))
})
