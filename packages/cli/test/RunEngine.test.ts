import { defineTool, toolExecutorLayer } from "@agentloop/core"
import type { Message } from "@agentloop/core"
import { scriptedModelLayer, toolCall, turn } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { inMemoryEngine, RunEngine } from "../src/RunEngine.ts"
import type { ContextTransform, RunEvent } from "../src/RunEngine.ts"

const echo = defineTool({
  name: "echo",
  description: "Echoes its text",
  parameters: Schema.Struct({ text: Schema.String }),
  execute: ({ text }) => Effect.succeed(text)
})

describe("RunEngine: the in-memory engine", () => {
  it.effect(
    "a turn_start before each request, after what the context transform wrote, with the run's own step (a " +
      "transform that drops messages, earlier runs' turns: neither counts)",
    () => {
      const seen: Array<string> = []
      // compaction's shape: the messages before the last assistant message become one summary
      const transform: ContextTransform = (messages) =>
        Effect.sync(() => {
          seen.push(`transform ${messages.length}`)
          const cut = messages.findLastIndex((m) => m.role === "assistant")
          return cut <= 0 ? messages : [{ role: "user", content: "[summary]" }, ...messages.slice(cut)]
        })
      return Effect.gen(function*() {
        const engine = yield* RunEngine
        // an earlier run of the session left an assistant message
        const input: ReadonlyArray<Message> = [
          { role: "user", content: "earlier" },
          { role: "assistant", content: [{ type: "text", text: "earlier answer" }], stopReason: "stop" },
          { role: "user", content: "now" }
        ]
        const events: Array<RunEvent> = []
        const result = yield* engine.run(
          { systemPrompt: "s", messages: input, maxSteps: 10 },
          (event) =>
            Effect.sync(() => {
              events.push(event)
              if (event.type === "turn_start") seen.push(`turn_start ${event.step}`)
            })
        )
        assert.strictEqual(result?.reason, "stop")
        assert.strictEqual(result?.steps, 3)
        assert.deepStrictEqual(seen, [
          "transform 3",
          "turn_start 1",
          "transform 5",
          "turn_start 2",
          "transform 7",
          "turn_start 3"
        ])
        // each turn_start comes before its turn's events
        const kinds = events.map((e) => e.type).filter((t) => t !== "model_event")
        assert.deepStrictEqual(kinds, [
          "turn_start",
          "assistant_message",
          "tool_start",
          "tool_end",
          "turn_start",
          "assistant_message",
          "tool_start",
          "tool_end",
          "turn_start",
          "assistant_message",
          "turn_end"
        ])
      }).pipe(Effect.provide(
        inMemoryEngine({ transformContext: transform }).pipe(
          Layer.provide(Layer.mergeAll(
            scriptedModelLayer([
              turn.toolCalls([toolCall("a", "echo", { text: "one" })]),
              turn.toolCalls([toolCall("b", "echo", { text: "two" })]),
              turn.text("done")
            ]),
            toolExecutorLayer([echo])
          ))
        )
      ))
    }
  )
})
