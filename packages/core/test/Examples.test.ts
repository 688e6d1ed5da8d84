import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { MainLayer, program } from "../../../examples/minimal.ts"

describe("the README's minimal example", () => {
  it.effect("runs: the tool uses an application service and the model answers", () =>
    Effect.gen(function*() {
      const result = yield* program.pipe(Effect.provide(MainLayer))
      assert.strictEqual(result.reason, "stop")
      assert.strictEqual(result.steps, 2)
      const toolResult = result.messages[2]
      assert.strictEqual(toolResult?.role, "toolResult")
      assert.deepStrictEqual(toolResult?.role === "toolResult" && toolResult.content, [
        { type: "text", text: "Effect 4: services are Context.Service classes." }
      ])
    }))
})
