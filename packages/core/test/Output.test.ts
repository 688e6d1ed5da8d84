import {
  allowAll,
  deny,
  FINAL_ANSWER_TOOL,
  outputSchema,
  OutputSchemaError,
  outputSchemaFromJson,
  runAgentLoop,
  startAgentLoop,
  toolExecutorLayer
} from "@agentloop/core"
import type { Message, ToolResultMessage, UserMessage } from "@agentloop/core"
import { echoTool, makeScriptedModel, probeTool, runScripted, toolCall, turn, user } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Queue, Schema } from "effect"
import { MAX_SCHEMA_DEPTH } from "../src/internal/rules/jsonSchema.ts"
import { assertSound, results, roles, textOf } from "./helpers.ts"

const Person = Schema.Struct({ name: Schema.String, age: Schema.Number })

const lastResult = (messages: ReadonlyArray<Message>): ToolResultMessage => {
  const last = messages.at(-1)
  assert.strictEqual(last?.role, "toolResult")
  return last as ToolResultMessage
}

describe("structured output", () => {
  it.effect("a valid answer ends the run stop with the decoded, typed value; the call is answered", () =>
    Effect.gen(function*() {
      const model = yield* makeScriptedModel([turn.finalAnswer("f1", { name: "Ada", age: 36 })])
      const result = yield* runAgentLoop({ messages: [user("who?")], output: Person }).pipe(
        Effect.provide(Layer.mergeAll(model.layer, toolExecutorLayer([echoTool("echo")])))
      )
      // the type flows: `output` is `{ name: string; age: number } | undefined`
      const name: string | undefined = result.output?.name
      assert.strictEqual(name, "Ada")
      assert.strictEqual(result.reason, "stop")
      assert.strictEqual(result.steps, 1)
      assert.deepStrictEqual(result.output, { name: "Ada", age: 36 })
      const answered = lastResult(result.messages)
      assert.strictEqual(answered.toolCallId, "f1")
      assert.isFalse(answered.isError)
      assert.deepStrictEqual(answered.details, { finalAnswer: true })
      // the model saw its own tools and the final-answer tool, whose parameters are the schema's JSON Schema
      const [request] = yield* model.requests
      assert.deepStrictEqual(request!.tools.map((t) => t.name), ["echo", FINAL_ANSWER_TOOL])
      const parameters = request!.tools[1]!.parameters
      assert.strictEqual(parameters["type"], "object")
      assert.deepStrictEqual(parameters["required"], ["name", "age"])
      yield* model.verify({ all: true })
    }))

  it.effect("startAgentLoop gives the typed answer too", () =>
    Effect.gen(function*() {
      const model = yield* makeScriptedModel([turn.finalAnswer("f1", { name: "Ada", age: 36 })])
      const result = yield* Effect.scoped(
        Effect.flatMap(startAgentLoop({ messages: [user("who?")], output: Person }), (run) => run.result)
      ).pipe(Effect.provide(Layer.mergeAll(model.layer, toolExecutorLayer([]))))
      const age: number | undefined = result.output?.age
      assert.strictEqual(age, 36)
    }))

  it.effect("events announce the final-answer call like any call, and the invariants hold", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.finalAnswer("f1", { name: "Ada", age: 36 })], { output: Person })
      assertSound(run)
      const types = run.events.map((e) => e.type)
      assert.deepStrictEqual(types.slice(-3), ["tool_start", "tool_end", "turn_end"])
      assert.deepStrictEqual(run.result.output, { name: "Ada", age: 36 })
    }))

  it.effect("an invalid answer goes back as an error result naming the problem, and a repaired one is accepted", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([
        turn.finalAnswer("f1", { name: "Ada", age: "thirty-six" }),
        turn.finalAnswer("f2", { name: "Ada", age: 36 })
      ], { output: Person })
      assertSound(run)
      assert.strictEqual(run.result.reason, "stop")
      assert.strictEqual(run.result.steps, 2)
      assert.deepStrictEqual(run.result.output, { name: "Ada", age: 36 })
      const [rejected] = results(run.result.messages)
      assert.isTrue(rejected!.isError)
      assert.strictEqual(
        textOf(rejected!),
        "Invalid final answer: Expected a number at [\"age\"], got \"thirty-six\". Call \"final_answer\" again " +
          "with the answer fixed."
      )
      assert.notInclude(textOf(rejected!), "    at ") // no stack
      assert.deepStrictEqual(rejected!.details, { finalAnswer: true, rejected: "invalid", attempt: 1 })
      // the second request carried the rejection, paired with its call
      assert.deepStrictEqual(roles(run.requests[1]!.messages), ["user", "assistant", "toolResult"])
    }))

  it.effect("the schema's own decoding runs after the JSON Schema check (a check JSON Schema cannot express)", () =>
    Effect.gen(function*() {
      const Even = Schema.Struct({
        n: Schema.Number.check(Schema.makeFilter((n: number) => n % 2 === 0 || "an even number"))
      })
      const run = yield* runScripted([turn.finalAnswer("f1", { n: 3 }), turn.finalAnswer("f2", { n: 4 })], {
        output: Even
      })
      assertSound(run)
      assert.include(textOf(results(run.result.messages)[0]!), "an even number")
      assert.deepStrictEqual(run.result.output, { n: 4 })
    }))

  it.effect("invalid answers past outputRetries end the run error saying why, every call answered", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([
        turn.finalAnswer("f1", { name: 1, age: 36 }),
        turn.finalAnswer("f2", { name: "Ada" })
      ], { output: Person, outputRetries: 1 })
      assertSound(run)
      assert.strictEqual(run.result.reason, "error")
      assert.strictEqual(run.result.steps, 2) // no third request
      assert.strictEqual(
        run.result.error,
        "the model gave no valid final answer after 2 attempt(s): Missing required key at [\"age\"]"
      )
      assert.isUndefined(run.result.output)
      const [first, second] = results(run.result.messages)
      assert.deepStrictEqual(first!.details, { finalAnswer: true, rejected: "invalid", attempt: 1 })
      assert.deepStrictEqual(second!.details, { finalAnswer: true, rejected: "invalid", attempt: 2 })
      assert.strictEqual(run.result.messages.at(-1), second) // the last call is answered too
    }))

  it.effect("the default bound is two repairs: the third invalid answer ends the run", () =>
    Effect.gen(function*() {
      const bad = (id: string) => turn.finalAnswer(id, { name: "Ada" })
      const run = yield* runScripted([bad("f1"), bad("f2"), bad("f3")], { output: Person })
      assertSound(run)
      assert.strictEqual(run.result.reason, "error")
      assert.strictEqual(run.result.steps, 3)
      assert.match(run.result.error!, /after 3 attempt/)
    }))

  it.effect("a final answer alongside other calls is not accepted; the other calls run; alone it is", () =>
    Effect.gen(function*() {
      const probe = probeTool(echoTool("echo"))
      const run = yield* runScripted([
        turn.toolCalls([toolCall("e1", "echo", { x: 1 }), toolCall("f1", FINAL_ANSWER_TOOL, { name: "Ada", age: 36 })]),
        turn.finalAnswer("f2", { name: "Ada", age: 37 })
      ], { output: Person, tools: [probe.tool] })
      assertSound(run)
      assert.strictEqual(yield* probe.executions, 1)
      const [echoed, notAlone, accepted] = results(run.result.messages)
      assert.isFalse(echoed!.isError)
      assert.isTrue(notAlone!.isError)
      assert.deepStrictEqual(notAlone!.details, { finalAnswer: true, rejected: "not-alone", attempt: 1 })
      assert.include(textOf(notAlone!), "must be the only tool call of its message")
      assert.isFalse(accepted!.isError)
      // the answer given after seeing the results is the one kept
      assert.deepStrictEqual(run.result.output, { name: "Ada", age: 37 })
    }))

  it.effect("a turn that ends with text and no answer gets a repair message, within the bound", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([
        turn.text("Ada, 36."),
        turn.finalAnswer("f1", { name: "Ada", age: 36 })
      ], { output: Person })
      assertSound(run)
      assert.strictEqual(run.result.reason, "stop")
      assert.deepStrictEqual(roles(run.result.messages), ["user", "assistant", "user", "assistant", "toolResult"])
      const repair = run.events.find((e) => e.type === "user_message")
      assert.strictEqual(repair?.type === "user_message" ? repair.kind : undefined, "repair")
      assert.strictEqual(
        run.result.messages[2]!.role === "user" ? run.result.messages[2]!.content : "",
        "Your turn ended without a final answer. Give it by calling the \"final_answer\" tool."
      )
      assert.deepStrictEqual(run.result.output, { name: "Ada", age: 36 })
    }))

  it.effect("text-only turns past the bound end the run error; no repair message is left unanswered", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.text("Ada."), turn.text("Ada, really.")], {
        output: Person,
        outputRetries: 1
      })
      assertSound(run)
      assert.strictEqual(run.result.reason, "error")
      assert.strictEqual(run.result.steps, 2)
      assert.strictEqual(
        run.result.error,
        "the model gave no valid final answer after 2 attempt(s): the model ended its turn without calling " +
          "\"final_answer\""
      )
      assert.strictEqual(run.result.messages.at(-1)?.role, "assistant")
    }))

  it.effect("follow-ups restart a run after its accepted answer, which then needs a new one", () =>
    Effect.gen(function*() {
      const followUps = yield* Queue.unbounded<UserMessage>()
      yield* Queue.offer(followUps, { role: "user", content: "and her sister?" })
      const run = yield* runScripted([
        turn.finalAnswer("f1", { name: "Ada", age: 36 }),
        turn.finalAnswer("f2", { name: "Eve", age: 40 })
      ], { output: Person, followUps })
      assertSound(run)
      assert.strictEqual(run.result.reason, "stop")
      assert.deepStrictEqual(roles(run.result.messages), [
        "user",
        "assistant",
        "toolResult",
        "user",
        "assistant",
        "toolResult"
      ])
      assert.deepStrictEqual(run.result.output, { name: "Eve", age: 40 })
    }))

  it.effect("a schema that is not an object is asked for under `value` and unwrapped", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.finalAnswer("f1", { value: ["a", "b"] })], {
        output: Schema.Array(Schema.String)
      })
      assertSound(run)
      assert.deepStrictEqual(run.result.output, ["a", "b"])
      const tool = run.requests[0]!.tools.find((t) => t.name === FINAL_ANSWER_TOOL)!
      assert.deepStrictEqual(tool.parameters["required"], ["value"])
      assert.deepStrictEqual(tool.parameters["properties"], { value: { type: "array", items: { type: "string" } } })
    }))

  it.effect("the answer is decoded from its JSON form (a date given as a string is a Date)", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([
        turn.finalAnswer("f1", { due: "2026-12-01T00:00:00.000Z" }, { name: "deadline" })
      ], {
        output: outputSchema(Schema.Struct({ due: Schema.Date }), { name: "deadline" })
      })
      assertSound(run)
      const output = run.result.output as { readonly due: Date } | undefined
      assert.instanceOf(output?.due, Date)
      assert.strictEqual(output?.due.toISOString(), "2026-12-01T00:00:00.000Z")
      assert.isTrue(run.requests[0]!.tools.some((t) => t.name === "deadline"))
    }))

  it.effect("the policy is not consulted for the final answer (a deny-all policy still lets the run end)", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.finalAnswer("f1", { name: "Ada", age: 36 })], {
        output: Person,
        policy: () => deny("nothing runs")
      })
      assertSound(run)
      assert.strictEqual(run.result.reason, "stop")
      assert.deepStrictEqual(run.result.output, { name: "Ada", age: 36 })
    }))

  it.effect("a tool named like the final-answer tool is bad input, before any request", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([], { output: Person, tools: [echoTool(FINAL_ANSWER_TOOL)] })
      assertSound(run)
      assert.strictEqual(run.result.reason, "error")
      assert.strictEqual(run.result.steps, 0)
      assert.match(run.result.error!, /^bad input: the run has a tool named "final_answer"/)
    }))

  it.effect("an output schema that cannot be described to a model is bad input, saying why", () =>
    Effect.gen(function*() {
      interface Tree {
        readonly children: ReadonlyArray<Tree>
      }
      const Tree: Schema.Codec<Tree> = Schema.Struct({ children: Schema.Array(Schema.suspend(() => Tree)) })
      const run = yield* runScripted([], { output: Tree })
      assertSound(run)
      assert.strictEqual(run.result.steps, 0)
      assert.strictEqual(
        run.result.error,
        "bad input: output: agentloop: the output schema: a recursive schema cannot be described without $ref; " +
          "model providers need a self-contained JSON Schema"
      )
      const notASchema = yield* runScripted([], { output: "a string" as never })
      assert.strictEqual(
        notASchema.result.error,
        "bad input: Expected an effect Schema or an OutputSchema\n  at [\"output\"]"
      )
    }))

  it.effect("outputRetries that is not a non-negative integer is bad input", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([], { output: Person, outputRetries: -1 })
      assertSound(run)
      assert.strictEqual(run.result.reason, "error")
      assert.match(run.result.error!, /^bad input: .*outputRetries/s)
    }))

  it.effect("a run without output is untouched: no final-answer tool, a text stop ends stop without output", () =>
    Effect.gen(function*() {
      const run = yield* runScripted([turn.text("hi")], { tools: [echoTool("echo")], policy: allowAll })
      assertSound(run)
      assert.deepStrictEqual(run.requests[0]!.tools.map((t) => t.name), ["echo"])
      assert.strictEqual(run.result.reason, "stop")
      assert.isFalse("output" in run.result)
    }))
})

describe("resuming a transcript with final answers", () => {
  const answered = (answer: Record<string, unknown>): ReadonlyArray<Message> => [
    user("who?"),
    {
      role: "assistant",
      content: [{ type: "toolCall", id: "f1", name: FINAL_ANSWER_TOOL, arguments: answer }],
      stopReason: "toolUse"
    }
  ]

  it.effect("a transcript that ends with an accepted answer is bad input, as one ending with the model's answer", () =>
    Effect.gen(function*() {
      const first = yield* runScripted([turn.finalAnswer("f1", { name: "Ada", age: 36 })], { output: Person })
      const resumed = yield* runScripted([], { output: Person, messages: first.result.messages })
      assertSound(resumed)
      assert.strictEqual(resumed.result.reason, "error")
      assert.strictEqual(resumed.result.steps, 0)
      assert.strictEqual(
        resumed.result.error,
        "bad input: the messages end with an accepted final answer (messages[2], tool \"final_answer\"): there is " +
          "nothing to answer; append a user message to go on"
      )
    }))

  it.effect("with a user message after it, the run goes on and needs a new answer", () =>
    Effect.gen(function*() {
      const first = yield* runScripted([turn.finalAnswer("f1", { name: "Ada", age: 36 })], { output: Person })
      const messages = [...first.result.messages, user("and her sister?")]
      const resumed = yield* runScripted([turn.finalAnswer("f2", { name: "Eve", age: 40 })], {
        output: Person,
        messages
      })
      assertSound(resumed)
      assert.strictEqual(resumed.result.reason, "stop")
      assert.deepStrictEqual(resumed.result.output, { name: "Eve", age: 40 })
      // the earlier answer and its result were sent as they are, paired
      assert.deepStrictEqual(roles(resumed.requests[0]!.messages), ["user", "assistant", "toolResult", "user"])
    }))

  it.effect("a transcript that ends with a rejected answer resumes like any other: the model is asked again", () =>
    Effect.gen(function*() {
      const first = yield* runScripted([turn.finalAnswer("f1", { name: "Ada" })], { output: Person, outputRetries: 0 })
      assert.strictEqual(first.result.reason, "error")
      const resumed = yield* runScripted([turn.finalAnswer("f2", { name: "Ada", age: 36 })], {
        output: Person,
        messages: first.result.messages
      })
      assertSound(resumed)
      assert.strictEqual(resumed.result.reason, "stop")
      assert.deepStrictEqual(resumed.result.output, { name: "Ada", age: 36 })
    }))

  it.effect("a crashed run's final-answer call without a result is repaired like any call, then answered anew", () =>
    Effect.gen(function*() {
      const resumed = yield* runScripted([turn.finalAnswer("f2", { name: "Ada", age: 36 })], {
        output: Person,
        messages: answered({ name: "Ada", age: 36 })
      })
      assertSound(resumed)
      const [repaired] = results(resumed.result.messages)
      assert.deepStrictEqual(repaired!.details, { skipped: true, reason: "interrupted" })
      assert.strictEqual(resumed.result.reason, "stop")
    }))
})

describe("outputSchemaFromJson", () => {
  it.effect("checks answers against a JSON Schema and returns the JSON value", () =>
    Effect.gen(function*() {
      const output = yield* outputSchemaFromJson({
        type: "object",
        properties: { verdict: { enum: ["pass", "fail"] }, notes: { type: "array", items: { type: "string" } } },
        required: ["verdict"]
      })
      const run = yield* runScripted([
        turn.finalAnswer("f1", { verdict: "maybe" }),
        turn.finalAnswer("f2", { verdict: "pass", notes: ["ok"] })
      ], { output })
      assertSound(run)
      assert.include(textOf(results(run.result.messages)[0]!), "Expected one of \"pass\", \"fail\" at [\"verdict\"]")
      assert.deepStrictEqual(run.result.output, { verdict: "pass", notes: ["ok"] })
    }))

  it.effect("a non-object JSON Schema is wrapped under value", () =>
    Effect.gen(function*() {
      const output = yield* outputSchemaFromJson({ type: "integer", minimum: 1 })
      assert.isTrue(output.wrapped)
      const run = yield* runScripted([turn.finalAnswer("f1", { value: 0 }), turn.finalAnswer("f2", { value: 3 })], {
        output
      })
      assertSound(run)
      assert.include(textOf(results(run.result.messages)[0]!), "Expected a number ≥ 1 at [\"value\"], got 0")
      assert.strictEqual(run.result.output, 3)
    }))

  const refused = (schema: unknown, path: string, words: RegExp) =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(outputSchemaFromJson(schema))
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        const error = exit.cause.reasons[0]
        assert.strictEqual(error?._tag, "Fail")
        if (error?._tag === "Fail") {
          assert.instanceOf(error.error, OutputSchemaError)
          assert.strictEqual(error.error.path, path)
          assert.match(error.error.message, words)
        }
      }
    })

  it.effect("refuses what it cannot check, with a typed error naming the place", () =>
    Effect.gen(function*() {
      yield* refused({ type: "object", properties: { a: { $ref: "#/$defs/A" } } }, "#/properties/a/$ref", /\$ref/)
      yield* refused({ if: { type: "string" }, then: { minLength: 1 } }, "#/if", /conditionals/)
      yield* refused({ type: "object", minProperties: 1 }, "#/minProperties", /minProperties is not supported/)
      yield* refused({ type: "array", items: [{ type: "string" }] }, "#/items", /prefixItems/)
      yield* refused({ type: "strnig" }, "#/type", /unknown type "strnig"/)
      yield* refused({ type: "string", pattern: "(" }, "#/pattern", /not a valid regular expression/)
      yield* refused({ anyOf: [{ type: "string" }, { contains: {} }] }, "#/anyOf/1/contains", /contains/)
      yield* refused("object", "#", /must be an object or a boolean/)
      yield* refused({ type: "object", required: "a" }, "#/required", /array of strings/)
    }))

  it.effect("refuses a schema nested past the depth limit with a typed error, however deep (no stack overflow)", () =>
    Effect.gen(function*() {
      const nested = (levels: number): unknown => {
        let schema: unknown = { type: "string" }
        for (let i = 0; i < levels; i++) schema = { type: "array", items: schema }
        return schema
      }
      // at the limit it is accepted and checks answers
      const deepest = yield* outputSchemaFromJson(nested(MAX_SCHEMA_DEPTH))
      assert.isTrue(deepest.wrapped)
      // one level more, and 20,000 levels (which overflowed the stack before the limit)
      yield* refused(
        nested(MAX_SCHEMA_DEPTH + 1),
        `#${"/items".repeat(MAX_SCHEMA_DEPTH + 1)}`,
        /nested more than 64 levels/
      )
      yield* refused(nested(20_000), `#${"/items".repeat(MAX_SCHEMA_DEPTH + 1)}`, /nested more than 64 levels/)
    }))

  it.effect("accepts annotations it does not check (title, description, format, examples, $schema)", () =>
    Effect.gen(function*() {
      const output = yield* outputSchemaFromJson({
        $schema: "https://json-schema.org/draft/2020-12/schema",
        title: "Answer",
        type: "object",
        properties: { when: { type: "string", format: "date", description: "a day", examples: ["2026-12-01"] } }
      })
      assert.isFalse(output.wrapped)
      assert.strictEqual(output.definition.name, FINAL_ANSWER_TOOL)
    }))

  it.effect("keeps its own copy of the schema: changing the caller's object later changes nothing", () =>
    Effect.gen(function*() {
      const json = { type: "object", properties: { a: { type: "string" } }, required: ["a"] }
      const output = yield* outputSchemaFromJson(json)
      json.properties.a.type = "number"
      const decoded = yield* Effect.exit(output.decode({ a: "x" }))
      assert.isTrue(Exit.isSuccess(decoded))
    }))
})
