/**
 * The model side of the loop: what a request carries, the events a model streams back, and the
 * `Model` service that turns one into the other.
 *
 * @since 0.1.0
 */
import { Context, Schema } from "effect"
import type { Stream } from "effect"
import type { ModelError } from "./Errors.ts"
import { AssistantMessage, Message } from "./Message.ts"

/**
 * A JSON Schema object describing a tool's parameters, in the form model providers accept:
 * self-contained (no `$ref`), `type: "object"` at the top.
 *
 * @since 0.1.0
 * @category schemas
 */
export const JsonSchemaObject = Schema.Record(Schema.String, Schema.Unknown)
/**
 * @since 0.1.0
 * @category models
 */
export type JsonSchemaObject = typeof JsonSchemaObject.Type

/**
 * What the model is told about one tool (`name`, `description`, `parameters`), plus how the loop
 * runs it; providers send only the first three:
 *
 * - `readOnly`: the tool changes nothing (the ready-made `readOnlyPolicy` lets it run without
 *   asking);
 * - `exclusive`: the call runs alone, in call order: calls before it in the same message finish
 *   first, calls after it start after it (for tools that write: no write races a read);
 * - `timeoutMs`: a call still running after this long is interrupted and answered with an error
 *   saying so (overrides the run's default `ToolTimeout`);
 * - `atMostOnce`: for engines that run a call again after a crash (durable runs): a call that was
 *   running when its process died is answered with the interrupted result instead of running
 *   again. The in-memory loop runs every call at most once anyway.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolDefinition = Schema.Struct({
  name: Schema.NonEmptyString,
  description: Schema.String,
  parameters: JsonSchemaObject,
  readOnly: Schema.optionalKey(Schema.Boolean),
  exclusive: Schema.optionalKey(Schema.Boolean),
  timeoutMs: Schema.optionalKey(Schema.Finite.check(Schema.isGreaterThan(0))),
  atMostOnce: Schema.optionalKey(Schema.Boolean)
})
/**
 * @since 0.1.0
 * @category models
 */
export type ToolDefinition = typeof ToolDefinition.Type

/**
 * One model request: the system prompt, the transcript so far and every tool the executor has.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ModelRequest = Schema.Struct({
  systemPrompt: Schema.optionalKey(Schema.String),
  messages: Schema.Array(Message),
  tools: Schema.Array(ToolDefinition)
})
/**
 * @since 0.1.0
 * @category models
 */
export type ModelRequest = typeof ModelRequest.Type

/**
 * @since 0.1.0
 * @category schemas
 */
export const TextDelta = Schema.Struct({ type: Schema.Literal("text_delta"), delta: Schema.String })
/**
 * @since 0.1.0
 * @category schemas
 */
export const ThinkingDelta = Schema.Struct({ type: Schema.Literal("thinking_delta"), delta: Schema.String })
/**
 * A fragment of a tool call's JSON arguments. Fragments of parallel calls may interleave; `id`
 * tells them apart.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolCallDelta = Schema.Struct({
  type: Schema.Literal("toolcall_delta"),
  id: Schema.String,
  name: Schema.optionalKey(Schema.String),
  delta: Schema.String
})
/**
 * The turn's final message. Only the first `done` of a stream counts.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Done = Schema.Struct({ type: Schema.Literal("done"), message: AssistantMessage })

/**
 * What a model streams during one turn.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ModelEvent = Schema.Union([TextDelta, ThinkingDelta, ToolCallDelta, Done])
/**
 * @since 0.1.0
 * @category models
 */
export type ModelEvent = typeof ModelEvent.Type

/**
 * Which model answers a `Model`'s requests, as traces name it (see Tracing.ts): `provider` is the
 * provider's name in OpenTelemetry's GenAI conventions (`gen_ai.provider.name`: `openai`,
 * `anthropic`, ...), `model` the model requested (`gen_ai.request.model`).
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelDescription {
  readonly provider: string
  readonly model: string
}

/**
 * The service that answers a `ModelRequest` with a stream of `ModelEvent`s ending in `done`.
 *
 * Contract: the stream should end with exactly one `done` event; the loop tolerates any
 * deviation (no `done`, several, a malformed final message, a failure or a defect) and turns it
 * into a well-formed end of the run.
 *
 * `describe`, optional, says which model answers the next request (the providers' models have
 * it; a model that switches says the one in use). It is read only when a run is traced, as each
 * run and each turn starts: the turn's `chat` span is named after the model and carries it.
 *
 * @since 0.1.0
 * @category services
 */
export class Model extends Context.Service<Model, {
  stream(request: ModelRequest): Stream.Stream<ModelEvent, ModelError>
  readonly describe?: (() => ModelDescription | undefined) | undefined
}>()("@agentloop/core/Model") {}
