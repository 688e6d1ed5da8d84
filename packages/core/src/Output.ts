/**
 * Structured final output: a run given an `output` schema ends with a typed, schema-checked answer.
 *
 * The model gives its answer by calling a built-in tool, `final_answer` by default, whose
 * parameters are the answer's JSON Schema. A tool call is the one way of returning structured data
 * that every provider supports (Chat Completions, Anthropic Messages, effect's `LanguageModel`)
 * and that streams, pairs and resumes like every other call; a provider's native JSON mode would
 * need a second code path per provider and would not let the model use its tools in the same run.
 * Tool parameters are objects, so a schema whose top is not an object (a string, an array, a union)
 * is wrapped as `{ value: <schema> }` and unwrapped before decoding.
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"
import { makeArgumentsCheck, unsupportedSchema } from "./internal/rules/jsonSchema.ts"
import { deriveJsonSchema } from "./internal/rules/schemaJson.ts"
import type { JsonSchemaObject, ToolDefinition } from "./Model.ts"

/**
 * The name of the built-in final-answer tool when none is given.
 *
 * @since 0.1.0
 * @category constants
 */
export const FINAL_ANSWER_TOOL = "final_answer"

/**
 * How many rejected answers a run sends back for repair when `outputRetries` is not given: the
 * third rejected answer in a row of attempts ends the run `error`.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_OUTPUT_RETRIES = 2

/**
 * An answer that does not decode with the output schema. Its message names the problem in words a
 * model can act on (which field, what was expected); never a stack.
 *
 * @since 0.1.0
 * @category errors
 */
export class OutputDecodeError extends Schema.TaggedError<OutputDecodeError>()("OutputDecodeError", {
  message: Schema.String
}) {}

/**
 * A JSON Schema that `outputSchemaFromJson` cannot check exactly as written (a `$ref`, a
 * conditional, a malformed keyword...). `path` is a JSON Pointer to the place (`#/properties/a/$ref`).
 *
 * @since 0.1.0
 * @category errors
 */
export class OutputSchemaError extends Schema.TaggedError<OutputSchemaError>()("OutputSchemaError", {
  message: Schema.String,
  path: Schema.String
}) {}

const TypeId = "~@agentloop/core/OutputSchema" as const

/**
 * What a run needs to ask for, and check, a final answer of type `A`: the final-answer tool as the
 * model sees it and the decoder of its arguments. Made by `outputSchema` (from an effect `Schema`)
 * or `outputSchemaFromJson` (from a JSON Schema); a run's `output` option also takes a bare effect
 * `Schema`, made into one with the defaults.
 *
 * @since 0.1.0
 * @category models
 */
export interface OutputSchema<A> {
  readonly [TypeId]: typeof TypeId
  /** The final-answer tool's name (`final_answer` unless given). */
  readonly name: string
  /** The answer's own JSON Schema (before any wrapping). */
  readonly jsonSchema: JsonSchemaObject
  /** True when the answer is not an object and the model gives it as `{ value: answer }`. */
  readonly wrapped: boolean
  /** The final-answer tool as the model sees it. */
  readonly definition: ToolDefinition
  /** Decodes the final-answer call's arguments (wrapped or not) into the answer. */
  readonly decode: (args: unknown) => Effect.Effect<A, OutputDecodeError>
  /** The answer as the model gave it (JSON, unwrapped) from the call's arguments. */
  readonly answerOf: (args: unknown) => unknown
}

/**
 * What a run's `output` option takes: an effect `Schema` for the answer, or an `OutputSchema`.
 *
 * @since 0.1.0
 * @category models
 */
export type OutputInput<A> = Schema.Decoder<A> | OutputSchema<A>

/**
 * Options of the final-answer tool.
 *
 * @since 0.1.0
 * @category models
 */
export interface OutputOptions {
  /** The tool's name (default `final_answer`). It must not be the name of one of the run's tools. */
  readonly name?: string | undefined
  /** What the model is told about the tool (default: how and when to give the final answer). */
  readonly description?: string | undefined
}

/**
 * True for an `OutputSchema` (made by `outputSchema` or `outputSchemaFromJson`).
 *
 * @since 0.1.0
 * @category guards
 */
export const isOutputSchema = (u: unknown): u is OutputSchema<unknown> =>
  typeof u === "object" && u !== null && TypeId in u

const describeTool = (wrapped: boolean): string =>
  "Give your final answer by calling this tool: once, alone (not together with other tool calls), when you " +
  `are done. Its arguments are the answer${wrapped ? ", under `value`" : ""}; if it is rejected, call it again ` +
  "with the problem fixed."

const isObjectSchema = (json: unknown): boolean =>
  typeof json === "object" && json !== null && (json as Record<string, unknown>)["type"] === "object"

/** The tool's parameters for an answer schema: the schema itself when it is an object, else `{ value }`. */
const parametersOf = (json: JsonSchemaObject | boolean): { parameters: JsonSchemaObject; wrapped: boolean } =>
  typeof json !== "boolean" && isObjectSchema(json) ?
    { parameters: json, wrapped: false } :
    {
      parameters: { type: "object", properties: { value: json }, required: ["value"], additionalProperties: false },
      wrapped: true
    }

const make = <A>(
  json: JsonSchemaObject | boolean,
  options: OutputOptions | undefined,
  decodeValue: (value: unknown) => Effect.Effect<A, OutputDecodeError>
): OutputSchema<A> => {
  const name = options?.name ?? FINAL_ANSWER_TOOL
  if (name.length === 0) throw new Error("agentloop: the final-answer tool needs a non-empty name")
  const { parameters, wrapped } = parametersOf(json)
  const check = makeArgumentsCheck(parameters)
  const answerOf = (args: unknown): unknown =>
    wrapped && typeof args === "object" && args !== null ? (args as Record<string, unknown>)["value"] : args
  return {
    [TypeId]: TypeId,
    name,
    jsonSchema: typeof json === "boolean" ? (json ? {} : { not: {} }) : json,
    wrapped,
    definition: {
      name,
      description: options?.description ?? describeTool(wrapped),
      parameters,
      readOnly: true
    },
    answerOf,
    decode: (args) =>
      Effect.suspend(() => {
        // the answer is accepted exactly when it satisfies the JSON Schema the model was given;
        // the schema's own decoding then applies its transformations (and any check JSON Schema cannot express)
        const problems = check(args)
        if (problems !== undefined) return Effect.fail(new OutputDecodeError({ message: problems.join("; ") }))
        return decodeValue(answerOf(args))
      })
  }
}

/**
 * The decoder of each answer schema, compiled once (schemas are immutable).
 */
const outputs = new WeakMap<object, OutputSchema<unknown>>()

/**
 * An `OutputSchema` for an effect `Schema`: the model sees the schema's JSON Schema (wrapped as
 * `{ value }` when it is not an object), and the answer is decoded with the schema (from its JSON
 * form, so a `Schema.Date` is given as a string and decoded to a `Date`). Throws, as `defineTool`
 * does, for a schema that cannot be described to a model (recursive).
 *
 * @example
 * ```ts
 * const Verdict = outputSchema(Schema.Struct({ ok: Schema.Boolean, reason: Schema.String }), { name: "verdict" })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const outputSchema = <A>(schema: Schema.Decoder<A>, options?: OutputOptions): OutputSchema<A> => {
  const json = deriveJsonSchema("the output schema", schema)
  const decode = Schema.decodeUnknownEffect(Schema.toCodecJson(schema)) as (
    input: unknown
  ) => Effect.Effect<A, Schema.SchemaError>
  return make(
    json,
    options,
    (value) => Effect.mapError(decode(value), (error) => new OutputDecodeError({ message: error.message }))
  )
}

/**
 * The `OutputSchema` of a run's `output` option (a bare `Schema` gets the defaults, once per schema).
 *
 * @since 0.1.0
 * @category constructors
 */
export const toOutputSchema = <A>(input: OutputInput<A>): OutputSchema<A> => {
  if (isOutputSchema(input)) return input as OutputSchema<A>
  let made = outputs.get(input)
  if (made === undefined) {
    made = outputSchema(input) as OutputSchema<unknown>
    outputs.set(input, made)
  }
  return made as OutputSchema<A>
}

/**
 * An `OutputSchema` from a JSON Schema (a file given on a command line, a schema from another
 * system). The answer is the JSON value the model gave, accepted exactly when it satisfies the
 * schema (checked by the same checker as tool arguments), typed `unknown`.
 *
 * Fails with `OutputSchemaError` for a schema it cannot check exactly as written: not an object or
 * boolean, references (`$ref`), conditionals (`if`/`then`/`else`), `dependentSchemas`,
 * `dependentRequired`, `contains`, `minProperties`/`maxProperties`, `unevaluated…`, draft-07 tuple
 * `items: [...]` and `additionalItems`, an unknown `type`, a malformed keyword value or a `pattern`
 * that is not a regular expression. Annotations (`title`, `description`, `format`, `default`,
 * `examples`, `$schema`...) are accepted; `format` is not checked.
 *
 * @since 0.1.0
 * @category constructors
 */
export const outputSchemaFromJson = (
  jsonSchema: unknown,
  options?: OutputOptions
): Effect.Effect<OutputSchema<unknown>, OutputSchemaError> =>
  Effect.suspend(() => {
    const problem = unsupportedSchema(jsonSchema)
    if (problem !== undefined) {
      return Effect.fail(
        new OutputSchemaError({
          message: `unsupported JSON Schema at ${problem.path}: ${problem.message}`,
          path: problem.path
        })
      )
    }
    if (options?.name !== undefined && options.name.length === 0) {
      return Effect.fail(new OutputSchemaError({ message: "the final-answer tool needs a non-empty name", path: "#" }))
    }
    // a private copy: the caller's object may change after this, the check compiled from it may not
    const json = structuredClone(jsonSchema) as JsonSchemaObject | boolean
    return Effect.succeed(make<unknown>(json, options, (value) => Effect.succeed(value)))
  })

/**
 * Whether a tool result's `details` are those of an accepted final answer.
 *
 * @since 0.1.0
 * @category guards
 */
export const isAcceptedAnswer = (details: unknown): boolean =>
  typeof details === "object" && details !== null && (details as Record<string, unknown>)["finalAnswer"] === true &&
  !("rejected" in details)

/**
 * True for what a run's `output` option takes: an `OutputSchema` or an effect `Schema`.
 *
 * @since 0.1.0
 * @category guards
 */
export const isOutputInput = (u: unknown): u is OutputInput<unknown> => isOutputSchema(u) || Schema.isSchema(u)
