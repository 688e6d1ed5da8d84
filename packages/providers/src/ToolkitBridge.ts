/**
 * Effect's AI toolkits as agentloop tools: `toolkitTools(toolkit)` turns a `Toolkit` from
 * `effect/ai`, with the handlers its `toLayer` provides, into agentloop tools that any run uses
 * (`makeToolExecutor`, `toolExecutorLayer`), and `toolkitPolicy` turns the tools' `needsApproval`
 * into the run's policy.
 *
 * - Parameters: the model is told the tool's own JSON Schema (`Tool.getJsonSchema`); the toolkit
 *   decodes the arguments itself, so a call the schema refuses is answered with the toolkit's
 *   parameter failure, as an error result.
 * - Results: a success is the tool's `toModelOutput` parts when it has them (text and images),
 *   else its encoded result (a string as it is, anything else as JSON). A failure is an error
 *   result, paired with its call, for both failure modes: `"return"` (the encoded failure) and
 *   `"error"` (the handler's typed error, or an `AiError`, by its message — never a stack).
 * - Streaming handlers: each preliminary result is reported as the call's progress
 *   (`tool_progress`); the final one is the result.
 * - The handlers' services come from the layer the program provides (`Toolkit.toLayer`'s own
 *   requirements included); the tools' services are those of the handlers.
 *
 * @since 0.1.0
 */
import { allow, ask, ToolError } from "@agentloop/core"
import type { AnyTool, ImageContent, TextContent, ToolDefinition, ToolOutput, ToolPolicy } from "@agentloop/core"
import { Cause, Effect, Exit, Schema, Stream } from "effect"
import { Tool } from "effect/ai"
import type { Toolkit } from "effect/ai"

/** The text of a value: a string as it is, anything else as JSON. */
const textOf = (value: unknown): string => {
  if (typeof value === "string") return value
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/** The message of a handler's failure: its `message`, else its tag and fields (JSON). */
const messageOf = (error: unknown): string => {
  if (typeof error === "object" && error !== null) {
    const record = error as Record<string, unknown>
    if (typeof record["message"] === "string" && record["message"].length > 0) {
      return typeof record["_tag"] === "string" ? `${record["_tag"]}: ${record["message"]}` : record["message"]
    }
    const { stack: _stack, ...fields } = record
    return textOf(fields)
  }
  return textOf(error)
}

/** A model-output part as agentloop content (text and images; files are described). */
const contentOf = (parts: ReadonlyArray<unknown>): Array<TextContent | ImageContent> =>
  parts.map((part) => {
    const p = part as Record<string, unknown>
    if (p["type"] === "text" && typeof p["text"] === "string") return { type: "text", text: p["text"] }
    if (p["type"] === "file" && typeof p["mediaType"] === "string" && p["mediaType"].startsWith("image/")) {
      const data = p["data"]
      if (typeof data === "string") return { type: "image", data, mimeType: p["mediaType"] }
      if (data instanceof Uint8Array) {
        return { type: "image", data: Buffer.from(data).toString("base64"), mimeType: p["mediaType"] }
      }
    }
    return { type: "text", text: textOf(part) }
  })

/**
 * The tools of a toolkit (see the module's description). Needs the toolkit's handlers
 * (`Toolkit.toLayer`) and their services.
 *
 * @example
 * ```ts
 * import { toolExecutorLayer } from "@agentloop/core"
 * import { toolkitTools } from "@agentloop/providers"
 * import { Effect, Layer, Schema } from "effect"
 * import { Tool, Toolkit } from "effect/ai"
 *
 * const GetWeather = Tool.make("GetWeather", {
 *   description: "The weather in a city",
 *   parameters: Schema.Struct({ city: Schema.String }),
 *   success: Schema.Struct({ celsius: Schema.Number })
 * })
 * const Weather = Toolkit.make(GetWeather)
 * const handlers = Weather.toLayer({ GetWeather: ({ city }) => Effect.succeed({ celsius: city.length }) })
 *
 * // an Executor for any agentloop run
 * const executor = Layer.unwrap(Effect.map(toolkitTools(Weather), toolExecutorLayer)).pipe(Layer.provide(handlers))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolkitTools = <Tools extends Record<string, Tool.Any>>(
  toolkit: Toolkit.Toolkit<Tools>
): Effect.Effect<ReadonlyArray<AnyTool>, never, Tool.HandlersFor<Tools>> =>
  Effect.map(
    toolkit,
    (withHandler: Toolkit.WithHandler<Tools>) =>
      Object.values(withHandler.tools).map((tool): AnyTool => {
        const definition: ToolDefinition = {
          name: tool.name,
          description: tool.description ?? "",
          parameters: Tool.getJsonSchema(tool) as ToolDefinition["parameters"]
        }
        return {
          name: tool.name,
          description: definition.description,
          // the toolkit decodes the arguments itself (its parameter failures become results)
          parameters: Schema.Unknown,
          definition,
          execute: (args, context) =>
            Effect.gen(function*() {
              const stream = yield* withHandler.handle(tool.name as keyof Tools, args as never, context.toolCallId)
              let final: Tool.HandlerResult<Tools[keyof Tools]> | undefined
              const exit = yield* Effect.exit(Stream.runForEach(stream, (result) => {
                if (result.preliminary) return context.reportProgress(result.encodedResult)
                final = result
                return Effect.void
              }))
              if (Exit.isFailure(exit)) {
                const failure = Cause.findErrorOption(exit.cause)
                if (failure._tag === "None") return yield* Effect.failCause(exit.cause)
                return { content: [{ type: "text", text: messageOf(failure.value) }], isError: true } as ToolOutput
              }
              if (final === undefined) {
                return yield* new ToolError({ message: `the handler of ${tool.name} ended without a result` })
              }
              if (final.isFailure) {
                return { content: [{ type: "text", text: textOf(final.encodedResult) }], isError: true } as ToolOutput
              }
              const parts = final.modelOutput
              return {
                content: parts !== undefined && parts.length > 0 ?
                  contentOf(parts) :
                  [{ type: "text", text: textOf(final.encodedResult) }],
                details: final.encodedResult
              } as ToolOutput
            }).pipe(
              // a failure before the handler ran (an AiError from the toolkit): an error result too
              Effect.catch((error: unknown) =>
                error instanceof ToolError ?
                  Effect.fail(error) :
                  Effect.succeed({ content: [{ type: "text", text: messageOf(error) }], isError: true } as ToolOutput)
              )
            )
        }
      })
  )

/**
 * The run's policy for a toolkit's tools: a call of a tool whose `needsApproval` is true (or whose
 * function says so for the call's arguments) asks; other calls go to `otherwise` (default: allow).
 * A `needsApproval` function gets the decoded arguments and the call's id (no messages: agentloop's
 * policy sees the call, not the conversation); arguments that do not decode ask.
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolkitPolicy = <Tools extends Record<string, Tool.Any>>(
  toolkit: Toolkit.Toolkit<Tools>,
  otherwise: ToolPolicy = () => allow
): ToolPolicy => {
  const tools = toolkit.tools as Record<string, Tool.Any>
  return (call, definition) => {
    const tool = Object.values(tools).find((t) => t.name === call.name)
    const needs = tool?.needsApproval
    if (tool === undefined || needs === undefined || needs === false) return otherwise(call, definition)
    if (needs === true) return ask
    return Effect.gen(function*() {
      const decoded = yield* Effect.exit(
        Schema.decodeUnknownEffect(tool.parametersSchema as Schema.Decoder<unknown>)(call.arguments)
      )
      if (Exit.isFailure(decoded)) return ask
      const verdict = needs(decoded.value as never, { toolCallId: call.id, messages: [] })
      const required = typeof verdict === "boolean" ? verdict : yield* verdict
      return required ? ask : yield* Effect.suspend(() => {
        const next = otherwise(call, definition)
        return Effect.isEffect(next) ? next : Effect.succeed(next)
      })
    })
  }
}
