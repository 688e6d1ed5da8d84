import { callbackSinkLayer, runAgentLoop, toolExecutorLayer } from "@agentloop/core"
import type { LoopEvent } from "@agentloop/core"
import { checkInvariants, makeScriptedModel, toolCall, turn, user } from "@agentloop/testkit"
import { codingTools, workspaceLayer } from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Layer } from "effect"
import { node } from "./helpers.ts"

describe("the coding tools through the loop", () => {
  it("read, grep, find and ls are read-only; write, edit and bash run alone (exclusive)", () => {
    assert.deepStrictEqual(
      codingTools.map((t) => [t.name, t.definition.readOnly === true, t.definition.exclusive === true]),
      [
        ["read", true, false],
        ["write", false, true],
        ["edit", false, true],
        ["bash", false, true],
        ["grep", true, false],
        ["find", true, false],
        ["ls", true, false]
      ]
    )
  })

  it.effect("read, edit, bash and a refused path in one session keep every invariant", () =>
    Effect.scoped(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* Effect.flatMap(fs.makeTempDirectoryScoped(), fs.realPath)
      yield* fs.writeFileString(`${root}/app.js`, "module.exports = (a, b) => a - b\n")
      const model = yield* makeScriptedModel([
        turn.toolCalls([toolCall("r", "read", { path: "app.js" }), toolCall("x", "read", { path: "/etc/passwd" })]),
        turn.toolCalls([toolCall("e", "edit", { path: "app.js", oldText: "a - b", newText: "a + b" })]),
        turn.toolCalls([toolCall("b", "bash", { command: "node -e 'console.log(require(\"./app.js\")(2, 3))'" })]),
        turn.text("fixed")
      ])
      const events: Array<LoopEvent> = []
      const input = [user("fix app.js")]
      const tools = toolExecutorLayer(codingTools).pipe(Layer.provide(workspaceLayer(root)), Layer.provide(node))
      const result = yield* runAgentLoop({ messages: input }).pipe(
        Effect.provide(Layer.mergeAll(model.layer, tools, callbackSinkLayer((e) => void events.push(e))))
      )
      assert.deepStrictEqual(checkInvariants({ input, result, events, requests: yield* model.requests }), [])
      assert.strictEqual(result.reason, "stop")
      const results = result.messages.flatMap((m) => m.role === "toolResult" ? [m] : [])
      assert.deepStrictEqual(results.map((r) => [r.toolCallId, r.isError]), [["r", false], ["x", true], ["e", false], [
        "b",
        false
      ]])
      assert.match(JSON.stringify(results[1]!.content), /outside the workspace/)
      assert.deepStrictEqual(results[3]!.content, [{ type: "text", text: "5\n" }])
      assert.strictEqual(yield* fs.readFileString(`${root}/app.js`), "module.exports = (a, b) => a + b\n")
    })).pipe(Effect.provide(node)))
})
