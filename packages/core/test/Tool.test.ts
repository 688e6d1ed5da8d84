import { defineTool, makeToolExecutor, parametersJsonSchema, ToolError } from "@agentloop/core"
import type { ToolContext } from "@agentloop/core"
import { toolCall } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Schema } from "effect"
import { textOf } from "./helpers.ts"

const context: ToolContext = {
  signal: new AbortController().signal,
  reportProgress: () => Effect.void,
  toolCallId: "c1",
  toolName: "read"
}

let runs = 0
const read = defineTool({
  name: "read",
  description: "Reads a file",
  parameters: Schema.Struct({
    path: Schema.String.annotate({ description: "file path" }),
    offset: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
    limit: Schema.optional(Schema.Number),
    mode: Schema.optionalKey(Schema.Literals(["text", "binary"]))
  }),
  execute: ({ path, offset }) =>
    Effect.sync(() => {
      runs++
      return `read ${path} from ${offset ?? 1}`
    })
})

describe("tool definitions (JSON Schema for providers)", () => {
  it("is a self-contained object schema with descriptions, numbers as number", () => {
    assert.deepStrictEqual(read.definition, {
      name: "read",
      description: "Reads a file",
      parameters: {
        type: "object",
        properties: {
          path: { type: "string", description: "file path" },
          offset: { type: "integer", minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
          limit: { anyOf: [{ type: "number" }, { type: "null" }] },
          mode: { type: "string", enum: ["text", "binary"] }
        },
        required: ["path"],
        additionalProperties: false
      }
    })
  })

  it("has no $ref and no NaN/Infinity union anywhere, even for shared and nested schemas", () => {
    const Point = Schema.Struct({ x: Schema.Number, y: Schema.Number }).annotate({ identifier: "Point" })
    const json = parametersJsonSchema("shape", Schema.Struct({ from: Point, to: Point, path: Schema.Array(Point) }))
    const text = JSON.stringify(json)
    assert.notInclude(text, "$ref")
    assert.notInclude(text, "NaN")
    assert.notInclude(text, "$defs")
    assert.deepStrictEqual((json["properties"] as Record<string, unknown>)["from"], {
      type: "object",
      properties: { x: { type: "number" }, y: { type: "number" } },
      required: ["x", "y"],
      additionalProperties: false
    })
  })

  it("rejects parameters that are not an object schema, or recursive ones, when the tool is defined", () => {
    assert.throws(
      () => defineTool({ name: "bad", description: "", parameters: Schema.String, execute: () => Effect.succeed("") }),
      /must be an object schema/
    )
    interface Tree {
      readonly children: ReadonlyArray<Tree>
    }
    const Tree: Schema.Codec<Tree> = Schema.Struct({
      children: Schema.Array(Schema.suspend((): Schema.Codec<Tree> => Tree))
    })
    assert.throws(
      () => defineTool({ name: "tree", description: "", parameters: Tree, execute: () => Effect.succeed("") }),
      /recursive/
    )
    assert.throws(
      () => defineTool({ name: "", description: "", parameters: Schema.Struct({}), execute: () => Effect.succeed("") }),
      /non-empty name/
    )
  })
})

describe("tool traits", () => {
  it("readOnly, exclusive and timeoutMs go into the definition the loop reads", () => {
    const tool = defineTool({
      name: "w",
      description: "",
      parameters: Schema.Struct({}),
      execute: () => Effect.succeed(""),
      exclusive: true,
      timeoutMs: 5000
    })
    assert.strictEqual(tool.definition.exclusive, true)
    assert.strictEqual(tool.definition.timeoutMs, 5000)
    assert.isFalse("readOnly" in tool.definition)
    assert.isFalse("exclusive" in read.definition)
  })

  it("a timeoutMs that is not a positive number is refused when the tool is defined", () => {
    for (const timeoutMs of [0, -1, Number.NaN]) {
      assert.throws(
        () =>
          defineTool({
            name: "t",
            description: "",
            parameters: Schema.Struct({}),
            execute: () => Effect.succeed(""),
            timeoutMs
          }),
        /timeoutMs of tool "t" must be a positive number/
      )
    }
  })
})

describe("the executor built from tools", () => {
  it.effect("decodes arguments and answers with a result carrying the call's id and name", () =>
    Effect.gen(function*() {
      const executor = yield* makeToolExecutor([read])
      assert.deepStrictEqual(executor.definitions, [read.definition])
      const result = yield* executor.execute(toolCall("c1", "read", { path: "a.txt", offset: 3 }), context)
      assert.deepStrictEqual(result, {
        role: "toolResult",
        toolCallId: "c1",
        toolName: "read",
        content: [{ type: "text", text: "read a.txt from 3" }],
        isError: false
      })
    }))

  it.effect("JSON null for an optional field decodes (models send null)", () =>
    Effect.gen(function*() {
      const executor = yield* makeToolExecutor([read])
      const result = yield* executor.execute(toolCall("c1", "read", { path: "a", limit: null }), context)
      assert.isFalse(result.isError)
    }))

  const bad: ReadonlyArray<{ name: string; args: Record<string, unknown>; text: RegExp }> = [
    {
      name: "a missing field",
      args: {},
      text: /^Invalid arguments for tool "read": Missing required key at \["path"\]$/
    },
    { name: "a field of the wrong type", args: { path: 5 }, text: /: Expected a string at \["path"\], got 5$/ },
    {
      name: "a failed check",
      args: { path: "a", offset: 0 },
      text: /: Expected a number ≥ 1 at \["offset"\], got 0$/
    },
    {
      name: "a literal out of range",
      args: { path: "a", mode: "fast" },
      text: /: Expected one of "text", "binary" at \["mode"\], got "fast"$/
    }
  ]
  for (const b of bad) {
    it.effect(`${b.name}: an error result saying which field and what was expected; the tool does not run`, () =>
      Effect.gen(function*() {
        const executor = yield* makeToolExecutor([read])
        const before = runs
        const result = yield* executor.execute(toolCall("c1", "read", b.args), context)
        assert.isTrue(result.isError)
        assert.strictEqual(result.toolCallId, "c1")
        assert.match(textOf(result), b.text)
        assert.deepStrictEqual(result.details, { invalidArguments: true })
        assert.strictEqual(runs, before)
      }))
  }

  it.effect("an unknown tool: an error result naming the available tools", () =>
    Effect.gen(function*() {
      const write = defineTool({
        name: "write",
        description: "",
        parameters: Schema.Struct({}),
        execute: () => Effect.succeed("")
      })
      const executor = yield* makeToolExecutor([read, write])
      const result = yield* executor.execute(toolCall("c9", "delete"), context)
      assert.strictEqual(textOf(result), "Unknown tool \"delete\". Available tools: read, write.")
      assert.deepStrictEqual(result.details, { unknownTool: true })
      assert.isTrue(result.isError)
    }))

  it.effect("a ToolError from the tool goes to the loop as a typed failure", () =>
    Effect.gen(function*() {
      const failing = defineTool({
        name: "f",
        description: "",
        parameters: Schema.Struct({}),
        execute: () => Effect.fail(new ToolError({ message: "no" }))
      })
      const executor = yield* makeToolExecutor([failing])
      const error = yield* Effect.flip(executor.execute(toolCall("c1", "f"), context))
      assert.strictEqual(error._tag, "ToolError")
      assert.strictEqual(error.message, "no")
    }))

  it.effect("tools can need services, captured when the executor is built; the context names the call", () =>
    Effect.gen(function*() {
      class Prefix extends Context.Service<Prefix, { readonly value: string }>()("test/Prefix") {}
      const tool = defineTool({
        name: "ctx",
        description: "",
        parameters: Schema.Struct({}),
        execute: (_, ctx) => Effect.map(Prefix, (prefix) => `${prefix.value}${ctx.toolName}:${ctx.toolCallId}`)
      })
      const executor = yield* makeToolExecutor([tool]).pipe(Effect.provideService(Prefix, { value: "> " }))
      const result = yield* executor.execute(toolCall("c7", "ctx"), { ...context, toolCallId: "c7", toolName: "ctx" })
      assert.strictEqual(textOf(result), "> ctx:c7")
    }))

  it("two tools with one name are refused", () => {
    assert.throws(() => Effect.runSync(makeToolExecutor([read, read])), /two tools are named "read"/)
  })
})
