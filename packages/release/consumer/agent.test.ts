// (e) A user's own test of their agent, with vitest, @effect/vitest and the testkit.
import { defineTool } from "@agentloop/core"
import { makeGatedTool, runScripted, toolCall, turn } from "@agentloop/testkit"
import { assert, it } from "@effect/vitest"
import { Effect, Fiber, Schema } from "effect"

const half = defineTool({
  name: "half",
  description: "Halves a number",
  parameters: Schema.Struct({ n: Schema.Number }),
  execute: ({ n }) => Effect.succeed(String(n / 2))
})

it.effect("answers every call, in call order, with the calls run concurrently", () =>
  Effect.gen(function*() {
    const gate = makeGatedTool("slow")
    const fiber = yield* runScripted(
      [turn.toolCalls([toolCall("a", "slow"), toolCall("b", "half", { n: 1.5 })]), turn.text("done")],
      { tools: [gate.tool, half] }
    ).pipe(Effect.forkChild)
    yield* gate.started("a")
    yield* gate.release("a")
    const run = yield* Fiber.join(fiber)
    assert.deepStrictEqual(run.violations, [])
    assert.strictEqual(run.result.reason, "stop")
    const results = run.result.messages.filter((m) => m.role === "toolResult")
    assert.deepStrictEqual(results.map((m) => m.toolCallId), ["a", "b"])
    assert.deepStrictEqual(results[1]?.content, [{ type: "text", text: "0.75" }])
  }))
