/**
 * A `Model` backed by effect's own `LanguageModel` (`effect/ai`), so any provider written for
 * effect plugs into the loop.
 *
 * Each request is sent with `streamText`, tool call resolution disabled
 * (`disableToolCallResolution`: the loop runs the tools, not effect) and deferred tool-call
 * validation (the loop's executor answers unknown tools and bad arguments with error results).
 * The tools are offered as `Tool.dynamic` tools with the executor's JSON Schemas.
 *
 * Mapping: text, reasoning and tool-parameter deltas become `text_delta`, `thinking_delta` and
 * `toolcall_delta`; tool-call parts give the calls their final arguments; the `finish` part
 * gives the stop reason (`stop` → stop, `tool-calls` → toolUse, `length` → length,
 * `content-filter`, `error` and `pause` → error) and the usage; `error` parts end the message
 * `error`. A failure of the language model (`AiError`) is a `ModelError` with its message and the
 * matching reason (`RateLimitError` → `rate_limit`, `AuthenticationError` → `auth`, ...).
 * Thinking is replayed as reasoning parts without signatures (they are provider-specific).
 *
 * @since 0.1.0
 */
import { Model, ModelError } from "@agentloop/core"
import type { Message, ModelErrorReason, ModelEvent, ModelRequest, StopReason, Usage } from "@agentloop/core"
import { Clock, Effect, Layer, Predicate, Random, Stream } from "effect"
import type { JsonSchema } from "effect"
import { LanguageModel, Prompt, Tool } from "effect/ai"
import type { AiError, Response, Toolkit } from "effect/ai"
import { MessageAssembly } from "./internal/assembly.ts"

const filePart = (image: { readonly data: string; readonly mimeType: string }) =>
  Prompt.filePart({ mediaType: image.mimeType, data: image.data })

/**
 * The transcript as an effect `Prompt`.
 *
 * @since 0.1.0
 * @category converting
 */
export const toPrompt = (systemPrompt: string | undefined, messages: ReadonlyArray<Message>): Prompt.Prompt => {
  const out: Array<Prompt.Message> = []
  if (systemPrompt !== undefined && systemPrompt.length > 0) out.push(Prompt.systemMessage({ content: systemPrompt }))
  for (const message of messages) {
    switch (message.role) {
      case "user":
        out.push(Prompt.userMessage({
          content: typeof message.content === "string" ?
            [Prompt.textPart({ text: message.content })] :
            message.content.map((part) => part.type === "text" ? Prompt.textPart({ text: part.text }) : filePart(part))
        }))
        break
      case "assistant": {
        const content = message.content.flatMap((part): Array<Prompt.AssistantMessagePart> => {
          switch (part.type) {
            case "text":
              return part.text.length > 0 ? [Prompt.textPart({ text: part.text })] : []
            case "thinking":
              return part.thinking.length > 0 ? [Prompt.reasoningPart({ text: part.thinking })] : []
            case "toolCall":
              return [
                Prompt.toolCallPart({ id: part.id, name: part.name, params: part.arguments, providerExecuted: false })
              ]
          }
        })
        if (content.length > 0) out.push(Prompt.assistantMessage({ content }))
        break
      }
      case "toolResult": {
        const text = message.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("\n")
        const hasImages = message.content.some((part) => part.type === "image")
        out.push(Prompt.toolMessage({
          content: [Prompt.toolResultPart({
            id: message.toolCallId,
            name: message.toolName,
            isFailure: message.isError,
            result: text,
            providerExecuted: false,
            ...(hasImages ?
              {
                modelOutput: message.content.map((part) =>
                  part.type === "text" ? Prompt.textPart({ text: part.text }) : filePart(part)
                )
              } :
              {})
          })]
        }))
        break
      }
    }
  }
  return Prompt.fromMessages(out)
}

const usageOf = (usage: Response.Usage): Usage => {
  const { cacheRead, cacheWrite, total, uncached } = usage.inputTokens
  return {
    input: uncached ?? Math.max(0, (total ?? 0) - (cacheRead ?? 0) - (cacheWrite ?? 0)),
    output: usage.outputTokens.total ?? 0,
    ...(cacheRead === undefined ? {} : { cacheRead }),
    ...(cacheWrite === undefined ? {} : { cacheWrite })
  }
}

const stopReasonOf = (reason: Response.FinishReason, hasToolCalls: boolean): StopReason => {
  switch (reason) {
    case "stop":
      return "stop"
    case "tool-calls":
      return "toolUse"
    case "length":
      return "length"
    case "content-filter":
    case "error":
    case "pause":
      return "error"
    case "other":
    case "unknown":
      return hasToolCalls ? "toolUse" : "stop"
  }
}

const describe = (u: unknown): string =>
  Predicate.hasProperty(u, "message") && typeof u.message === "string" ?
    u.message :
    typeof u === "string" ?
    u :
    "unknown error"

const aiReasons: Readonly<Record<string, ModelErrorReason>> = {
  RateLimitError: "rate_limit",
  QuotaExhaustedError: "rate_limit",
  AuthenticationError: "auth",
  ContentPolicyError: "content_filter",
  InvalidRequestError: "invalid_request",
  InvalidUserInputError: "invalid_request",
  InternalProviderError: "server",
  NetworkError: "network",
  InvalidResponseError: "protocol",
  InvalidOutputError: "protocol"
}

/** The `ModelError` reason of an `AiError`, from the tag of its own reason. */
const reasonOfAiError = (error: AiError.AiError): ModelErrorReason => {
  const tag = error.reason._tag
  return Object.hasOwn(aiReasons, tag) ? aiReasons[tag]! : "unknown"
}

const dynamicTool = (definition: ModelRequest["tools"][number]) =>
  Tool.dynamic(definition.name, {
    description: definition.description,
    parameters: definition.parameters as JsonSchema.JsonSchema
  })

type DynamicTools = Record<string, ReturnType<typeof dynamicTool>>

const toolkitOf = (request: ModelRequest): Toolkit.WithHandler<DynamicTools> => ({
  tools: Object.fromEntries(request.tools.map((definition) => [definition.name, dynamicTool(definition)])),
  // never called: tool call resolution is disabled
  handle: (name) => Effect.die(new Error(`agentloop: tool "${String(name)}" must be run by the loop`))
})

const bridgeStream = (
  languageModel: LanguageModel.LanguageModel,
  request: ModelRequest
): Stream.Stream<ModelEvent, ModelError> =>
  Stream.unwrap(Effect.gen(function*() {
    const assembly = new MessageAssembly(`call_${(yield* Random.nextIntBetween(0, 2 ** 31)).toString(36)}`)
    const timestamp = yield* Clock.currentTimeMillis
    let stopReason: Response.FinishReason | undefined
    let usage: Usage | undefined
    let model: string | undefined
    let error: string | undefined
    const onPart = (part: Response.StreamPart<DynamicTools, "deferred">): ReadonlyArray<ModelEvent> => {
      switch (part.type) {
        case "text-delta":
          return assembly.text(`text:${part.id}`, part.delta)
        case "reasoning-delta":
          return assembly.thinking(`reasoning:${part.id}`, part.delta)
        case "tool-params-start":
          return part.providerExecuted ? [] : assembly.toolCall(`tool:${part.id}`, { id: part.id, name: part.name })
        case "tool-params-delta":
          return assembly.toolCall(`tool:${part.id}`, { id: part.id, fragment: part.delta })
        case "tool-call": {
          if (part.providerExecuted) return []
          const key = `tool:${part.id}`
          // a call that was not streamed: its arguments are announced whole
          const events = assembly.toolCallIdOf(key) === undefined ?
            assembly.toolCall(key, { id: part.id, name: part.name, fragment: JSON.stringify(part.params) ?? "" }) :
            []
          assembly.toolCallArguments(key, part.params)
          return events
        }
        case "finish":
          stopReason = part.reason
          usage = usageOf(part.usage)
          return []
        case "error":
          error ??= describe(part.error)
          return []
        case "response-metadata":
          model ??= part.modelId
          return []
        default:
          return []
      }
    }
    const finish = Effect.suspend(() => {
      if (stopReason === undefined && error === undefined) {
        return Effect.fail(new ModelError({ message: "the language model stream ended without a finish part" }))
      }
      const hasCalls = assembly.hasToolCalls()
      const reason: StopReason = error !== undefined ? "error" : stopReasonOf(stopReason ?? "unknown", hasCalls)
      const errorMessage = error !== undefined ?
        `the language model reported an error: ${error}` :
        reason === "error" ?
        `the language model finished with "${stopReason}"` :
        undefined
      return Effect.succeed<ModelEvent>({
        type: "done",
        message: assembly.finish({ stopReason: reason, errorMessage, usage, model, timestamp })
      })
    })
    const parts = languageModel.streamText({
      prompt: toPrompt(request.systemPrompt, request.messages),
      toolkit: toolkitOf(request),
      disableToolCallResolution: true,
      toolCallValidation: "deferred"
    })
    return parts.pipe(
      Stream.mapError((e) =>
        new ModelError({ message: `the language model failed: ${describe(e)}`, reason: reasonOfAiError(e) })
      ),
      Stream.map(onPart),
      Stream.flattenIterable,
      Stream.concat(Stream.fromEffect(finish))
    )
  }))

/**
 * A `Model` that answers every request with the `LanguageModel` in context.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeLanguageModelBridge: Effect.Effect<typeof Model.Service, never, LanguageModel.LanguageModel> = Effect
  .gen(function*() {
    const languageModel = yield* LanguageModel.LanguageModel
    return Model.of({ stream: (request) => bridgeStream(languageModel, request) })
  })

/**
 * The `Model` layer backed by the `LanguageModel` in context.
 *
 * @since 0.1.0
 * @category layers
 */
export const languageModelBridgeLayer: Layer.Layer<Model, never, LanguageModel.LanguageModel> = Layer.effect(
  Model,
  makeLanguageModelBridge
)
