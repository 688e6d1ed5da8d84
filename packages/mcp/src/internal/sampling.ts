/**
 * How a server's `sampling/createMessage` reaches the `Sampling` service: the request is checked
 * with the SDK's schema (each wrong field named), turned into a `SamplingRequest` of agentloop
 * messages (images fitted like every image a model gets), handed to the service, and its answer
 * (or failure) turned into the JSON-RPC answer.
 */
import type { AssistantMessage, ImageContent, TextContent, UserMessage } from "@agentloop/core"
import { CreateMessageRequestSchema, ErrorCode } from "@modelcontextprotocol/sdk/types.js"
import type { CreateMessageResult } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import type { McpSamplingError } from "../Errors.ts"
import type { PrepareImage } from "../Results.ts"
import type { SamplingRequest, SamplingShape } from "../Sampling.ts"

/** A JSON-RPC error for the server (the SDK sends `code` and `message` as they are). */
export class RpcFailure extends Error {
  readonly code: number
  constructor(code: number, message: string) {
    super(message)
    this.code = code
  }
}

/** The code a server gets for each reason (-1 for a refusal, as MCP's specification has it). */
const codeOf = (reason: McpSamplingError["reason"]): number =>
  reason === "denied" ? -1 : reason === "unsupported" ? ErrorCode.InvalidParams : ErrorCode.InternalError

const invalid = (message: string) => new RpcFailure(ErrorCode.InvalidParams, message)

/** Each problem the schema found, as `path: message`. */
const issuesOf = (error: unknown): string => {
  const issues = (error as { issues?: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> }).issues
  return (issues ?? []).map((i) => `${i.path.map(String).join(".") || "(the request)"}: ${i.message}`).join("; ")
}

/** A server's sampling request as a `SamplingRequest`, or the error for the server. */
export const samplingRequestOf = (
  server: string,
  request: unknown,
  prepareImage: PrepareImage
): Effect.Effect<SamplingRequest, RpcFailure> =>
  Effect.gen(function*() {
    const parsed = CreateMessageRequestSchema.safeParse(request)
    if (!parsed.success) {
      return yield* Effect.fail(invalid(`Invalid sampling/createMessage request: ${issuesOf(parsed.error)}`))
    }
    const params = parsed.data.params
    if (params.tools !== undefined || params.toolChoice !== undefined) {
      return yield* Effect.fail(invalid("Sampling with tools is not supported: the client declares no sampling.tools."))
    }
    const source = { server, tool: "sampling/createMessage" }
    const messages: Array<UserMessage | AssistantMessage> = []
    for (const [i, message] of params.messages.entries()) {
      const blocks = Array.isArray(message.content) ? message.content : [message.content]
      const parts: Array<TextContent | ImageContent> = []
      for (const block of blocks) {
        switch (block.type) {
          case "text":
            parts.push({ type: "text", text: block.text })
            break
          case "image":
            if (message.role === "assistant") {
              return yield* Effect.fail(invalid(
                `params.messages.${i}: an assistant message's image cannot be sampled (the model's messages are text).`
              ))
            }
            parts.push(...yield* prepareImage({ type: "image", data: block.data, mimeType: block.mimeType }, source))
            break
          case "audio":
            return yield* Effect.fail(
              invalid(`params.messages.${i}: audio cannot be sampled: the model takes text and images.`)
            )
          default:
            return yield* Effect.fail(invalid(
              `params.messages.${i}: ${block.type} content needs sampling.tools, which this client does not declare.`
            ))
        }
      }
      messages.push(
        message.role === "user" ?
          { role: "user", content: parts } :
          { role: "assistant", content: parts.filter((p): p is TextContent => p.type === "text"), stopReason: "stop" }
      )
    }
    const preferences = params.modelPreferences
    return {
      server,
      messages,
      ...(params.systemPrompt === undefined ? {} : { systemPrompt: params.systemPrompt }),
      maxTokens: params.maxTokens,
      ...(params.temperature === undefined ? {} : { temperature: params.temperature }),
      ...(params.stopSequences === undefined ? {} : { stopSequences: params.stopSequences }),
      ...(preferences === undefined ? {} : {
        modelPreferences: {
          hints: (preferences.hints ?? []).flatMap((h) => (h.name === undefined ? [] : [h.name])),
          ...(preferences.costPriority === undefined ? {} : { costPriority: preferences.costPriority }),
          ...(preferences.speedPriority === undefined ? {} : { speedPriority: preferences.speedPriority }),
          ...(preferences.intelligencePriority === undefined ?
            {} :
            { intelligencePriority: preferences.intelligencePriority })
        }
      }),
      includeContext: params.includeContext ?? "none"
    }
  })

/** The answer to a server's `sampling/createMessage` (a failure is the JSON-RPC error it gets). */
export const answerSampling = (
  service: SamplingShape,
  server: string,
  request: unknown,
  prepareImage: PrepareImage
): Effect.Effect<CreateMessageResult, RpcFailure> =>
  samplingRequestOf(server, request, prepareImage).pipe(
    Effect.flatMap((asked) =>
      Effect.suspend(() => service.createMessage(asked)).pipe(
        Effect.mapError((error) => new RpcFailure(codeOf(error.reason), error.message)),
        Effect.catchDefect(() =>
          Effect.fail(new RpcFailure(ErrorCode.InternalError, "The sampling service failed unexpectedly."))
        )
      )
    ),
    Effect.map((response): CreateMessageResult => ({
      role: "assistant",
      content: { type: "text", text: response.text },
      model: response.model,
      stopReason: response.stopReason
    }))
  )
