/**
 * MCP tools beside local tools: one executor (`mcpExecutorLayer`) that follows list changes, or a
 * snapshot of `Tool`s for core's `toolExecutorLayer`; names that clash with local tools; annotations.
 */
import { defineTool, Executor } from "@agentloop/core"
import { mcpExecutorLayer, McpTools, mcpToolsLayer } from "@agentloop/mcp"
import { runScripted, toolCall, turn } from "@agentloop/testkit"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Schema } from "effect"
import { fakeServer, resultsOf, serversLayer, textOf } from "./helpers.ts"

const add = defineTool({
  name: "add",
  description: "Adds two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  execute: ({ a, b }) => Effect.succeed(String(a + b))
})

describe("MCP tools with local tools", { timeout: 30_000 }, () => {
  it.effect("mcpExecutorLayer serves both, and follows a list change at the next turn", () =>
    Effect.gen(function*() {
      const executor = Layer.build(mcpExecutorLayer([add]))
      const context = yield* executor
      const run = yield* runScripted([
        turn.toolCalls([toolCall("a", "add", { a: 2, b: 3 }), toolCall("e", "fake__echo", { text: "x" })]),
        turn.toolCalls([toolCall("t", "fake__add_tool")]),
        turn.toolCalls([toolCall("l", "fake__late")]),
        turn.text("done")
      ], { executor: Layer.succeedContext(context) })
      assert.deepStrictEqual(run.violations, [])
      assert.deepStrictEqual(resultsOf(run.result.messages).map((r) => [r.toolCallId, r.isError, textOf(r)]), [
        ["a", false, "5"],
        ["e", false, "echo: x"],
        ["t", false, "added"],
        ["l", false, "late tool ran"]
      ])
      const names = run.requests.map((r) => r.tools.map((t) => t.name))
      assert.strictEqual(names[0]![0], "add")
      assert.isTrue(names[0]!.includes("fake__echo"))
      assert.deepStrictEqual(names.map((n) => n.includes("fake__late")), [false, false, true, true])
    }).pipe(Effect.scoped, Effect.provide(serversLayer([fakeServer()]))))

  it.effect("McpTools.tools are core Tools: listed with local tools in toolExecutorLayer, arguments checked", () =>
    Effect.gen(function*() {
      const tools = yield* (yield* McpTools).tools
      const run = yield* runScripted([
        turn.toolCalls([
          toolCall("a", "add", { a: 1, b: 1 }),
          toolCall("e", "fake__echo", { text: "snapshot" }),
          toolCall("b", "fake__echo", { text: 7 })
        ]),
        turn.text("done")
      ], { tools: [add, ...tools] })
      assert.deepStrictEqual(run.violations, [])
      const results = resultsOf(run.result.messages)
      assert.deepStrictEqual(results.slice(0, 2).map((r) => [r.isError, textOf(r)]), [
        [false, "2"],
        [false, "echo: snapshot"]
      ])
      // refused before the server is called (by core's own check of the definition's schema, when it
      // has one, or by the tool's ajv check): either way the message names the field
      assert.isTrue(results[2]!.isError)
      assert.match(textOf(results[2]!), /^Invalid arguments for tool "fake__echo": .*text/)
      // the definitions the model saw are the server's
      const echo = run.requests[0]!.tools.find((t) => t.name === "fake__echo")
      const served = (yield* (yield* McpTools).definitions).find((d) => d.name === "fake__echo")
      assert.deepStrictEqual(echo?.parameters, served?.parameters)
    }).pipe(Effect.provide(serversLayer([fakeServer()]))))

  it.effect("a server tool with the name of a local tool fails the layer", () =>
    Effect.gen(function*() {
      const clash = defineTool({
        name: "fake__echo",
        description: "local",
        parameters: Schema.Struct({}),
        execute: () => Effect.succeed("local")
      })
      const exit = yield* Effect.exit(Layer.build(mcpExecutorLayer([clash])))
      const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail")?.error : undefined
      assert.strictEqual(error?._tag, "McpConfigError")
      assert.strictEqual(error?.message, "the MCP tool \"fake__echo\" has the name of a local tool; rename the server")
    }).pipe(Effect.scoped, Effect.provide(serversLayer([fakeServer()]))))

  it.effect("readOnlyHint marks a tool readOnly only when annotations are trusted", () =>
    Effect.gen(function*() {
      const readOnly = (trust: boolean) =>
        Effect.gen(function*() {
          const executor = yield* Executor
          return executor.definitions.filter((d) => d.readOnly === true).map((d) => d.name)
        }).pipe(
          Effect.provide(
            mcpToolsLayer([fakeServer()], { trustAnnotations: trust }).pipe(Layer.provide(NodeServices.layer))
          )
        )
      assert.deepStrictEqual(yield* readOnly(true), ["fake__echo"])
      assert.deepStrictEqual(yield* readOnly(false), [])
    }))
})
