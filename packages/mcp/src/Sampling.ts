/**
 * Sampling: a server asks the client's model for a completion (MCP `sampling/createMessage`), so a
 * server can use a model without holding a key for one. With a `Sampling` service in the context
 * of `mcpToolsLayer` the client declares the capability and hands each request to it, as a
 * `SamplingRequest` of agentloop messages; its answer (or its `McpSamplingError`) goes back to the
 * server. Without one nothing is declared, and a server must not ask.
 *
 * `modelSamplingLayer` answers with the `Model` of its context (the run's own), under a policy: each
 * request is put to `ask` first (approve, edit, or deny), and with no one to ask it is denied. The
 * usage of each answer goes to `onUsage`, to be counted in the session's usage.
 *
 * ```ts
 * import { Effect } from "effect"
 * import { modelSamplingLayer } from "@agentloop/mcp"
 *
 * export const SamplingLive = modelSamplingLayer({
 *   // a terminal UI would show the request and ask; this one approves requests of one server
 *   ask: (request) => Effect.succeed(request.server === "everything" ? { action: "approve" } : { action: "deny" }),
 *   onUsage: (usage) => Effect.log(`sampling used ${usage.input + usage.output} tokens`)
 * })
 * ```
 *
 * What of a request reaches the model: the messages (text and images; images fitted as `read`
 * sends them) and the system prompt. `maxTokens`, `temperature` and `modelPreferences` are shown
 * to `ask` but not applied: core's `Model` takes no per-request settings (MCP lets a client sample
 * fewer tokens and ignore preferences, but a model configured for more tokens than `maxTokens` may
 * give more). `stopSequences` are applied to the answer (it is cut at the first one).
 * `includeContext` is not honoured (the client does not declare `sampling.context`, so MCP has
 * servers not ask for it). Tools in a request, audio, and images in assistant messages are refused
 * (`unsupported`): the client declares no `sampling.tools`, and the model takes text and images.
 *
 * @since 0.1.0
 */
import { AssistantMessage, Model } from "@agentloop/core"
import type { ModelError, Usage, UserMessage } from "@agentloop/core"
import { Context, Effect, Layer, Schema, Stream } from "effect"
import { McpSamplingError } from "./Errors.ts"

/**
 * The model a server would like (names to match, and how much cost, speed and intelligence
 * matter, each 0 to 1). A hint only: the client's model answers.
 *
 * @since 0.1.0
 * @category models
 */
export interface SamplingModelPreferences {
  readonly hints: ReadonlyArray<string>
  readonly costPriority?: number | undefined
  readonly speedPriority?: number | undefined
  readonly intelligencePriority?: number | undefined
}

/**
 * A server's request for a completion, with its messages as agentloop messages.
 *
 * @since 0.1.0
 * @category models
 */
export interface SamplingRequest {
  /** The name of the server that asks (as configured). */
  readonly server: string
  readonly messages: ReadonlyArray<UserMessage | AssistantMessage>
  readonly systemPrompt?: string | undefined
  /** The most tokens the server wants (see the module's notes: not applied by `modelSamplingLayer`). */
  readonly maxTokens: number
  readonly temperature?: number | undefined
  readonly stopSequences?: ReadonlyArray<string> | undefined
  readonly modelPreferences?: SamplingModelPreferences | undefined
  /** Context the server would like added (`none` unless it says; not honoured, see above). */
  readonly includeContext: "none" | "thisServer" | "allServers"
}

/**
 * The answer to a sampling request: the model's text, the model's name, and why it stopped.
 * `usage` is for the client (it is not sent to the server).
 *
 * @since 0.1.0
 * @category models
 */
export interface SamplingResponse {
  readonly text: string
  readonly model: string
  readonly stopReason: "endTurn" | "maxTokens" | "stopSequence"
  readonly usage?: Usage | undefined
}

/**
 * @since 0.1.0
 * @category services
 */
export interface SamplingShape {
  /**
   * Answers a request. Interrupted when the server cancels it, or the layer closes. A defect is
   * answered as an internal error, saying no more.
   */
  readonly createMessage: (request: SamplingRequest) => Effect.Effect<SamplingResponse, McpSamplingError>
}

/**
 * Who answers the servers' sampling requests. Provide it to `mcpToolsLayer` (for instance with
 * `modelSamplingLayer`); without it the client does not offer sampling.
 *
 * @since 0.1.0
 * @category services
 */
export class Sampling extends Context.Service<Sampling, SamplingShape>()("@agentloop/mcp/Sampling") {}

/**
 * A `Sampling` that answers with `createMessage`.
 *
 * @since 0.1.0
 * @category layers
 */
export const samplingLayer = (createMessage: SamplingShape["createMessage"]): Layer.Layer<Sampling> =>
  Layer.succeed(Sampling, Sampling.of({ createMessage }))

/**
 * What the user says to a request before the model sees it: send it as it is, send it changed
 * (the user edited the messages or the system prompt), or refuse it (with a reason the server is
 * told).
 *
 * @since 0.1.0
 * @category models
 */
export type SamplingDecision =
  | { readonly action: "approve" }
  | { readonly action: "edit"; readonly request: SamplingRequest }
  | { readonly action: "deny"; readonly reason?: string | undefined }

/**
 * What the user says to the model's answer before the server gets it: send it, send it changed,
 * or withhold it.
 *
 * @since 0.1.0
 * @category models
 */
export type SamplingReview =
  | { readonly action: "send" }
  | { readonly action: "edit"; readonly response: SamplingResponse }
  | { readonly action: "deny"; readonly reason?: string | undefined }

/**
 * Options of `modelSamplingLayer`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelSamplingOptions {
  /**
   * Puts a request to the user before the model sees it. Without it every request is denied: no
   * one is there to approve it. `approveSampling` approves everything (for trusted servers, tests).
   * A defect denies the request.
   */
  readonly ask?: ((request: SamplingRequest) => Effect.Effect<SamplingDecision>) | undefined
  /** Shows the user the answer before the server gets it (default: sent as it is). A defect withholds it. */
  readonly review?:
    | ((request: SamplingRequest, response: SamplingResponse) => Effect.Effect<SamplingReview>)
    | undefined
  /**
   * Called with the usage of each answer the model gave (before `review`: the tokens are spent
   * whatever it says), to count it in the session's usage (`addUsage` of `@agentloop/core`).
   */
  readonly onUsage?: ((usage: Usage, request: SamplingRequest) => Effect.Effect<void>) | undefined
}

/**
 * The policy that approves every request.
 *
 * @since 0.1.0
 * @category constructors
 */
export const approveSampling = (_request: SamplingRequest): Effect.Effect<SamplingDecision> =>
  Effect.succeed({ action: "approve" })

const decodeAssistant = Schema.decodeUnknownEffect(AssistantMessage)

/** `text` cut before the first of `stops` it contains (and whether it was cut). */
const cutAtStop = (text: string, stops: ReadonlyArray<string>): { readonly text: string; readonly cut: boolean } => {
  const at = stops.filter((s) => s.length > 0).map((s) => text.indexOf(s)).filter((i) => i >= 0)
  return at.length === 0 ? { text, cut: false } : { text: text.slice(0, Math.min(...at)), cut: true }
}

/**
 * The sampling service of `modelSamplingLayer`, with `model`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeModelSampling = (model: Model["Service"], options: ModelSamplingOptions = {}): SamplingShape => {
  const failed = (request: SamplingRequest, reason: McpSamplingError["reason"], message: string) =>
    new McpSamplingError({ server: request.server, reason, message })

  const { ask, onUsage, review: reviewer } = options

  const decide = (request: SamplingRequest): Effect.Effect<SamplingDecision> =>
    ask === undefined ?
      Effect.succeed({ action: "deny", reason: "no one is there to approve it" }) :
      Effect.suspend(() => ask(request)).pipe(
        Effect.catchDefect(() => Effect.succeed<SamplingDecision>({ action: "deny", reason: "it could not be asked" }))
      )

  const sample = (request: SamplingRequest): Effect.Effect<SamplingResponse, McpSamplingError> =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(Stream.suspend(() =>
        model.stream({
          ...(request.systemPrompt === undefined ? {} : { systemPrompt: request.systemPrompt }),
          messages: request.messages,
          tools: []
        })
      )).pipe(
        Effect.mapError((error: ModelError) => failed(request, "model", `The model failed: ${error.message}`)),
        Effect.catchDefect(() => Effect.fail(failed(request, "model", "The model failed unexpectedly.")))
      )
      const done = events.find((e) => e.type === "done")
      if (done === undefined) return yield* failed(request, "model", "The model gave no answer.")
      const message = yield* decodeAssistant(done.message).pipe(
        Effect.mapError(() => failed(request, "model", "The model's answer was malformed."))
      )
      if (message.stopReason === "error" || message.stopReason === "aborted") {
        return yield* failed(
          request,
          "model",
          message.stopReason === "aborted" ?
            "The model's answer was aborted." :
            `The model failed: ${message.errorMessage ?? "no reason given"}`
        )
      }
      if (message.usage !== undefined && onUsage !== undefined) yield* onUsage(message.usage, request)
      const whole = message.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("")
      const stopped = cutAtStop(whole, request.stopSequences ?? [])
      return {
        text: stopped.text,
        model: message.model ?? "unknown",
        stopReason: stopped.cut ? "stopSequence" : message.stopReason === "length" ? "maxTokens" : "endTurn",
        ...(message.usage === undefined ? {} : { usage: message.usage })
      } satisfies SamplingResponse
    })

  const review = (request: SamplingRequest, response: SamplingResponse): Effect.Effect<SamplingReview> =>
    reviewer === undefined ?
      Effect.succeed({ action: "send" }) :
      Effect.suspend(() => reviewer(request, response)).pipe(
        Effect.catchDefect(() => Effect.succeed<SamplingReview>({ action: "deny", reason: "it could not be reviewed" }))
      )

  const rejected = (request: SamplingRequest, reason: string | undefined) =>
    failed(request, "denied", `User rejected sampling request${reason === undefined ? "" : `: ${reason}`}`)

  return Sampling.of({
    createMessage: (asked) =>
      Effect.gen(function*() {
        const decision = yield* decide(asked)
        if (decision.action === "deny") return yield* rejected(asked, decision.reason)
        const request = decision.action === "edit" ? decision.request : asked
        const response = yield* sample(request)
        const verdict = yield* review(request, response)
        if (verdict.action === "deny") return yield* rejected(request, verdict.reason)
        return verdict.action === "edit" ? verdict.response : response
      })
  })
}

/**
 * A `Sampling` that answers with the `Model` of its context, under `options`' policy (by default:
 * every request denied, since no one can be asked).
 *
 * @since 0.1.0
 * @category layers
 */
export const modelSamplingLayer = (options: ModelSamplingOptions = {}): Layer.Layer<Sampling, never, Model> =>
  Layer.effect(
    Sampling,
    Effect.gen(function*() {
      return makeModelSampling(yield* Model, options)
    })
  )
