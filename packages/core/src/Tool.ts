/**
 * Tools: a name, a description, an effect `Schema` for the parameters and an `execute` effect;
 * and the `Executor` built from a list of them.
 *
 * The executor decodes arguments with the tool's schema before the tool runs: an unknown tool or
 * arguments that do not decode answer the call with an error result (which field, what was
 * expected) and nothing runs. The JSON Schema sent to the model is derived from the same schema,
 * self-contained (no `$ref`) and with numbers as plain `number`.
 *
 * @since 0.1.0
 */
import { Context, Effect, Exit, Layer, Schema } from "effect"
import { ToolError } from "./Errors.ts"
import { Executor } from "./Executor.ts"
import type { ExecutorShape, ToolContext } from "./Executor.ts"
import { describeFailure } from "./internal/rules/common.ts"
import { makeArgumentsCheck } from "./internal/rules/jsonSchema.ts"
import { deriveJsonSchema } from "./internal/rules/schemaJson.ts"
import type { ImageContent, TextContent, ToolCall, ToolResultMessage } from "./Message.ts"
import type { JsonSchemaObject, ToolDefinition } from "./Model.ts"
import { errorResult } from "./Transcript.ts"

/**
 * What a tool returns: plain text, or content parts with optional `details` (kept in the
 * transcript for UIs and replay, not meant for the model) and `isError`.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolOutput = string | {
  readonly content: ReadonlyArray<TextContent | ImageContent>
  readonly details?: unknown
  readonly isError?: boolean
}

/**
 * A tool whose parameters decode to `A` and whose execution needs services `R`. `execute` may fail
 * with any typed error: the call is then answered with an error result carrying the error's
 * message (a `ToolError`'s message as it is; for other errors their `message`, or their tag and
 * fields).
 *
 * @since 0.1.0
 * @category models
 */
export interface Tool<A, R = never> {
  readonly name: string
  readonly description: string
  readonly parameters: Schema.Decoder<A>
  /** What the model is told about this tool. */
  readonly definition: ToolDefinition
  readonly execute: (args: A, context: ToolContext) => Effect.Effect<ToolOutput, unknown, R>
}

/**
 * Any tool, for lists of tools with different parameter types.
 *
 * @since 0.1.0
 * @category models
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyTool = Tool<any, any>

/**
 * The services the tools of a list need.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolServices<T extends AnyTool> = T extends Tool<infer _A, infer R> ? R : never

/**
 * The JSON Schema for a tool's parameter schema: self-contained (every definition inlined),
 * numbers as `number`, annotations such as `description` kept. Throws for a schema that cannot
 * be described without `$ref` (recursive) or whose top is not an object: both are programming
 * errors caught when the tool is defined.
 *
 * @since 0.1.0
 * @category converting
 */
export const parametersJsonSchema = (name: string, schema: Schema.Top): JsonSchemaObject => {
  const json = deriveJsonSchema(`the parameters of tool "${name}"`, schema)
  if (json["type"] !== "object") {
    throw new Error(`agentloop: the parameters of tool "${name}" must be an object schema (Schema.Struct)`)
  }
  return json
}

/**
 * Defines a tool.
 *
 * @example
 * ```ts
 * const add = defineTool({
 *   name: "add",
 *   description: "Adds two numbers",
 *   parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
 *   execute: ({ a, b }) => Effect.succeed(String(a + b))
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const defineTool = <A, R = never>(config: {
  readonly name: string
  readonly description: string
  readonly parameters: Schema.Decoder<A>
  readonly execute: (args: A, context: ToolContext) => Effect.Effect<ToolOutput, unknown, R>
  /** The tool changes nothing (see `readOnlyPolicy`). */
  readonly readOnly?: boolean | undefined
  /** Calls run alone, in call order (see `ToolDefinition`). */
  readonly exclusive?: boolean | undefined
  /** A call still running after this many milliseconds is stopped with a timeout error. */
  readonly timeoutMs?: number | undefined
  /** Never run a call twice, even after a crash of a durable run (see `ToolDefinition`). */
  readonly atMostOnce?: boolean | undefined
}): Tool<A, R> => {
  const { atMostOnce, readOnly, exclusive, timeoutMs, ...tool } = config
  if (tool.name.length === 0) throw new Error("agentloop: a tool needs a non-empty name")
  if (timeoutMs !== undefined && !(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new Error(`agentloop: the timeoutMs of tool "${tool.name}" must be a positive number of milliseconds`)
  }
  return {
    ...tool,
    definition: {
      name: tool.name,
      description: tool.description,
      parameters: parametersJsonSchema(tool.name, tool.parameters),
      ...(readOnly === undefined ? {} : { readOnly }),
      ...(exclusive === undefined ? {} : { exclusive }),
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
      ...(atMostOnce === undefined ? {} : { atMostOnce })
    }
  }
}

const toResult = (call: ToolCall, output: ToolOutput): ToolResultMessage =>
  typeof output === "string" ?
    {
      role: "toolResult",
      toolCallId: call.id,
      toolName: call.name,
      content: [{ type: "text", text: output }],
      isError: false
    } :
    {
      role: "toolResult",
      toolCallId: call.id,
      toolName: call.name,
      content: output.content,
      ...(output.details === undefined ? {} : { details: output.details }),
      isError: output.isError ?? false
    }

const issueMessage = (error: unknown): string => Schema.isSchemaError(error) ? error.message : String(error)

/** The problems of arguments that do not satisfy the JSON Schema the model sees, in words. */
type ArgumentCheck = (input: unknown) => ReadonlyArray<string> | undefined
/** The tool's own decoding of its arguments. */
type ArgumentDecoder = (input: unknown) => Effect.Effect<unknown, Schema.SchemaError>

/**
 * The argument decoder of each parameter schema, compiled once: an executor is typically built per
 * run (its layer is provided to each run), and compiling a decoder costs more than a short run.
 * Schemas are immutable, so a decoder never goes stale.
 */
const decoders = new WeakMap<object, ArgumentDecoder>()
const decoderOf = (schema: Schema.Decoder<unknown>): ArgumentDecoder => {
  let decode = decoders.get(schema)
  if (decode === undefined) {
    decode = Schema.decodeUnknownEffect(Schema.toCodecJson(schema)) as ArgumentDecoder
    decoders.set(schema, decode)
  }
  return decode
}

/** Whether `context` holds every service of `services`, with the same value. */
const holdsAll = (context: Context.Context<unknown>, services: Context.Context<unknown>): boolean => {
  const have = context.mapUnsafe
  for (const [key, value] of services.mapUnsafe) {
    if (have.get(key) !== value || !have.has(key)) return false
  }
  return true
}

/** The check of arguments against the JSON Schema the model sees, compiled once per schema. */
const argumentChecks = new WeakMap<object, ArgumentCheck>()
const argumentCheckOf = (parameters: JsonSchemaObject): ArgumentCheck => {
  let check = argumentChecks.get(parameters)
  if (check === undefined) {
    check = makeArgumentsCheck(parameters)
    argumentChecks.set(parameters, check)
  }
  return check
}

/** A tool's typed failure as a `ToolError` (the `Executor` contract), keeping its message. */
const asToolError = (error: unknown): ToolError =>
  error instanceof ToolError ? error : new ToolError({ message: describeFailure(error) })

/**
 * Builds an `Executor` from a list of tools, capturing the services they need. Tool names must be
 * unique.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeToolExecutor = <const Tools extends ReadonlyArray<AnyTool>>(
  tools: Tools
): Effect.Effect<ExecutorShape, never, ToolServices<Tools[number]>> =>
  Effect.map(Effect.context<ToolServices<Tools[number]>>(), (context) => {
    const byName = new Map<string, AnyTool>()
    for (const tool of tools) {
      if (byName.has(tool.name)) throw new Error(`agentloop: two tools are named "${tool.name}"`)
      byName.set(tool.name, tool)
    }
    const available = tools.length === 0 ? "(none)" : tools.map((t) => t.name).join(", ")
    // The tools' services are merged into the calling fiber's context for each call. A merge copies
    // the whole context, so it is memoized on the calling context (contexts are immutable, and the
    // calls of a run share one): the same context as `Effect.provideContext`, without a copy per call.
    const captured = context as Context.Context<unknown>
    let lastCaller: Context.Context<unknown> | undefined
    let lastMerged: Context.Context<unknown> = captured
    const withTools = (caller: Context.Context<unknown>): Context.Context<unknown> => {
      if (caller !== lastCaller) {
        lastCaller = caller
        // when the caller already holds every captured service (the usual case: the executor's
        // layer was built from the run's own context), the merge would equal the caller's context,
        // and handing back the caller's own context lets the call skip switching contexts
        lastMerged = holdsAll(caller, captured) ? caller : Context.merge(caller, captured)
      }
      return lastMerged
    }
    return Executor.of({
      definitions: tools.map((t) => t.definition),
      execute: (call, toolContext) => {
        const tool = byName.get(call.name)
        if (tool === undefined) {
          return Effect.succeed(
            errorResult(call, `Unknown tool "${call.name}". Available tools: ${available}.`, { unknownTool: true })
          )
        }
        const run = (decoded: Exit.Exit<unknown, Schema.SchemaError>): Effect.Effect<ToolResultMessage, ToolError> =>
          Exit.isFailure(decoded) ?
            Effect.succeed(errorResult(
              call,
              `Invalid arguments for tool "${call.name}": ${
                decoded.cause.reasons.map((r) => r._tag === "Fail" ? issueMessage(r.error) : "invalid").join("; ")
              }`,
              { invalidArguments: true }
            )) :
            Effect.withFiber((fiber) => {
              // the tool's effect is made as the call runs (a throw is the call's defect)
              let out: Effect.Effect<ToolOutput, unknown, unknown>
              try {
                out = tool.execute(decoded.value, toolContext)
              } catch (defect) {
                return Effect.die(defect)
              }
              // a tool that answered at once (`Effect.succeed`) needs neither services nor a mapping step
              if (Exit.isExit(out) && Exit.isSuccess(out)) {
                return Effect.succeed(toResult(call, out.value as ToolOutput))
              }
              const mapped = Effect.mapBoth(out, {
                onFailure: asToolError,
                onSuccess: (output) => toResult(call, output)
              })
              const context = withTools(fiber.context as Context.Context<unknown>)
              return (context === fiber.context
                ? mapped
                : Effect.updateContext(mapped, () => context)) as Effect.Effect<
                  ToolResultMessage,
                  ToolError
                >
            })
        // arguments are accepted exactly when they satisfy the JSON Schema the model was given;
        // the schema's own decoding then applies its transformations (and any check the JSON
        // Schema cannot express)
        // (a tool's check and decoder are compiled at its first call, kept with its schema: a run builds
        // its executor before its first model request, and most runs call few of their tools)
        const problems = argumentCheckOf(tool.definition.parameters)(call.arguments)
        if (problems !== undefined) {
          return Effect.succeed(errorResult(
            call,
            `Invalid arguments for tool "${call.name}": ${problems.join("; ")}`,
            { invalidArguments: true }
          ))
        }
        // a synchronous schema decodes to an `Exit` at once: no need to run it as an effect
        const decoding = decoderOf(tool.parameters)(call.arguments)
        return Exit.isExit(decoding) ?
          run(decoding as Exit.Exit<unknown, Schema.SchemaError>) :
          Effect.flatMap(Effect.exit(decoding), run)
      }
    })
  })

/**
 * The `Executor` layer for a list of tools.
 *
 * @since 0.1.0
 * @category layers
 */
export const toolExecutorLayer = <const Tools extends ReadonlyArray<AnyTool>>(
  tools: Tools
): Layer.Layer<Executor, never, ToolServices<Tools[number]>> => Layer.effect(Executor, makeToolExecutor(tools))
