/**
 * Tool arguments are accepted exactly when they satisfy the JSON Schema the model was given, and
 * rejected in words a model can act on. Any typed failure of a tool becomes an error result
 * carrying its message. A schema from a second copy of `effect` is refused when the tool is defined.
 */
import { defineTool, makeToolExecutor, ToolError } from "@agentloop/core"
import type { AnyTool, ToolContext, ToolResultMessage } from "@agentloop/core"
import { toolCall } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Ajv2020 } from "ajv/dist/2020.js"
import { Data, Effect, Schema } from "effect"
import * as fc from "fast-check"
import { textOf } from "./helpers.ts"

const context: ToolContext = {
  signal: new AbortController().signal,
  toolCallId: "c",
  toolName: "t",
  reportProgress: () => Effect.void
}

/** A tool that records the arguments it ran with. */
const recorder = <A>(parameters: Schema.Decoder<A>) => {
  const ran: Array<A> = []
  const tool = defineTool({
    name: "t",
    description: "",
    parameters,
    execute: (args) => Effect.sync(() => (ran.push(args), "ok"))
  })
  return { tool, ran }
}

const execute = (tool: AnyTool, args: Record<string, unknown>) =>
  Effect.flatMap(makeToolExecutor([tool]), (executor) => executor.execute(toolCall("c", "t", args), context))

describe("arguments and the JSON Schema the model sees", () => {
  it.effect(
    "numbers: \"NaN\" and \"Infinity\" are rejected (the tool does not run), 1.5 runs, \"3\" names what " +
      "was expected",
    () =>
      Effect.gen(function*() {
        const { ran, tool } = recorder(Schema.Struct({ a: Schema.Number }))
        assert.deepStrictEqual(tool.definition.parameters.properties, { a: { type: "number" } })
        for (const bad of ["NaN", "Infinity", "-Infinity"]) {
          const result = yield* execute(tool, { a: bad })
          assert.isTrue(result.isError)
          assert.strictEqual(textOf(result), `Invalid arguments for tool "t": Expected a number at ["a"], got "${bad}"`)
        }
        const three = yield* execute(tool, { a: "3" })
        assert.strictEqual(textOf(three), `Invalid arguments for tool "t": Expected a number at ["a"], got "3"`)
        assert.deepStrictEqual(ran, [])
        const ok = yield* execute(tool, { a: 1.5 })
        assert.isFalse(ok.isError)
        assert.deepStrictEqual(ran, [{ a: 1.5 }])
      })
  )

  it.effect("a key the tool does not know is rejected, and the schema says so (additionalProperties: false)", () =>
    Effect.gen(function*() {
      const { ran, tool } = recorder(Schema.Struct({ path: Schema.String }))
      assert.strictEqual(tool.definition.parameters.additionalProperties, false)
      const result = yield* execute(tool, { path: "a", recursive: true })
      assert.strictEqual(
        textOf(result),
        `Invalid arguments for tool "t": Unexpected key at ["recursive"] (the tool has no such parameter)`
      )
      assert.deepStrictEqual(ran, [])
    }))

  it.effect("every problem is named, with its path into nested values", () =>
    Effect.gen(function*() {
      const { tool } = recorder(Schema.Struct({
        edits: Schema.Array(Schema.Struct({ line: Schema.Int, text: Schema.String })),
        mode: Schema.Literals(["a", "b"])
      }))
      const result: ToolResultMessage = yield* execute(tool, {
        edits: [{ line: 1.5, text: "x" }, { line: 2 }],
        mode: "c"
      })
      assert.strictEqual(
        textOf(result),
        `Invalid arguments for tool "t": Expected an integer at ["edits",0,"line"], got 1.5; ` +
          `Missing required key at ["edits",1,"text"]; Expected one of "a", "b" at ["mode"], got "c"`
      )
    }))

  it.effect("null for an optional field is accepted, as the schema allows it", () =>
    Effect.gen(function*() {
      const { ran, tool } = recorder(Schema.Struct({ limit: Schema.optional(Schema.Number) }))
      const result = yield* execute(tool, { limit: null })
      assert.isFalse(result.isError)
      assert.strictEqual(ran.length, 1)
      const wrong = yield* execute(tool, { limit: "7" })
      assert.strictEqual(
        textOf(wrong),
        `Invalid arguments for tool "t": Expected a number or null at ["limit"], got "7"`
      )
    }))

  // A differential test: our compiled check agrees with ajv (a reference validator) on what the
  // JSON Schema accepts, for schemas like the ones tools use and values near and far from valid.
  const schemas: ReadonlyArray<Schema.Decoder<unknown>> = [
    Schema.Struct({ a: Schema.Number, b: Schema.optional(Schema.String), n: Schema.Int }),
    Schema.Struct({
      path: Schema.String.check(Schema.isMinLength(1)),
      offset: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)))
    }),
    Schema.Struct({
      mode: Schema.Literals(["text", "binary"]),
      flags: Schema.Array(Schema.Boolean).check(Schema.isMaxLength(3))
    }),
    Schema.Struct({
      pair: Schema.Tuple([Schema.String, Schema.Number]),
      tags: Schema.Record(Schema.String, Schema.String)
    }),
    Schema.Struct({
      v: Schema.Union([Schema.String, Schema.Number, Schema.Null]),
      nested: Schema.Struct({ x: Schema.Number })
    })
  ]
  const ajv = new Ajv2020({ strict: false })
  const validValue = (i: number) =>
    [
      { a: 1.5, n: 2 },
      { path: "x", offset: 3 },
      { mode: "text", flags: [true] },
      { pair: ["a", 1], tags: { k: "v" } },
      { v: null, nested: { x: 1 } }
    ][i]!
  const perturb = (value: Record<string, unknown>, key: string, replacement: unknown) =>
    replacement === undefined
      ? Object.fromEntries(Object.entries(value).filter(([k]) => k !== key))
      : { ...value, [key]: replacement }
  schemas.forEach((schema, i) => {
    it(`agrees with a reference validator on schema ${i + 1}`, () => {
      const { tool } = recorder(schema)
      const json = tool.definition.parameters
      const reference = ajv.compile(json)
      const check = (value: unknown) =>
        Effect.runSync(
          Effect.flatMap(makeToolExecutor([tool]), (executor) =>
            executor.execute(toolCall("c", "t", value as Record<string, unknown>), context))
        )
      const keys = Object.keys(json.properties as object)
      fc.assert(
        fc.property(
          fc.oneof(
            fc.jsonValue(),
            fc.record({
              key: fc.constantFrom(...keys, "extra"),
              replacement: fc.oneof(fc.jsonValue(), fc.constant(undefined))
            })
              .map(({ key, replacement }) => perturb(validValue(i), key, replacement))
          ).filter((v) => typeof v === "object" && v !== null && !Array.isArray(v)),
          (value) => {
            const result = check(value)
            const invalidArguments =
              (result.details as { invalidArguments?: boolean } | undefined)?.invalidArguments === true
            assert.strictEqual(!invalidArguments, reference(value), `${JSON.stringify(value)}: ${textOf(result)}`)
          }
        ),
        { numRuns: 400 }
      )
    })
  })
})

describe("typed failures of a tool", () => {
  class QuotaExceeded extends Data.TaggedError("QuotaExceeded")<{ readonly limit: number }> {}
  class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

  it.effect("any typed failure becomes an error result carrying its message (or its tag and fields)", () =>
    Effect.gen(function*() {
      const tools = [
        defineTool({
          name: "a",
          description: "",
          parameters: Schema.Struct({}),
          execute: () => Effect.fail(new NotFound({ message: "no such note" }))
        }),
        defineTool({
          name: "b",
          description: "",
          parameters: Schema.Struct({}),
          execute: () => Effect.fail(new QuotaExceeded({ limit: 3 }))
        }),
        defineTool({
          name: "c",
          description: "",
          parameters: Schema.Struct({}),
          execute: () => Effect.fail(new ToolError({ message: "plain" }))
        }),
        defineTool({
          name: "d",
          description: "",
          parameters: Schema.Struct({}),
          execute: () => Effect.fail("just a string")
        })
      ]
      const executor = yield* makeToolExecutor(tools)
      const texts: Array<string> = []
      for (const name of ["a", "b", "c", "d"]) {
        const error = yield* Effect.flip(executor.execute(toolCall(name, name, {}), context))
        assert.instanceOf(error, ToolError)
        texts.push(error.message)
      }
      assert.deepStrictEqual(texts, ["no such note", "QuotaExceeded {\"limit\":3}", "plain", "just a string"])
    }))
})

describe("a second copy of effect", () => {
  it("a schema whose AST comes from another copy is refused when the tool is defined, with what to do", () => {
    const foreign = Schema.Struct({ n: Schema.Number })
    // what a schema of another copy looks like to this one: the same shape, other classes
    const copy = Object.assign(Object.create(null), foreign, { ast: { ...foreign.ast } }) as typeof foreign
    assert.throws(
      () => defineTool({ name: "half", description: "", parameters: copy, execute: () => Effect.succeed("") }),
      /another copy of "effect".*two copies of "effect" are installed.*npm ls effect/
    )
  })
})
