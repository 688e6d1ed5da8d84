/**
 * What a traced run shows, and a layer that sends it to an OpenTelemetry collector over OTLP/HTTP.
 *
 * A run is traced when a tracer other than effect's built-in one is installed: `otlpTracingLayer`
 * below, or any other (`@effect/opentelemetry`'s `NodeSdk.layer` with the OpenTelemetry SDK, a test's
 * own). Without one no span is made at all. The spans follow OpenTelemetry's semantic conventions for
 * generative AI (names, kinds, `gen_ai.*` attributes), with agentloop's own attributes beside them:
 *
 * - `invoke_agent {agent}` (internal): the run. `gen_ai.operation.name` `invoke_agent`,
 *   `gen_ai.agent.name` and `gen_ai.conversation.id` (from `AgentTrace`), the model's
 *   `gen_ai.provider.name` and `gen_ai.request.model` (from `Model.describe`), the run's usage
 *   (`gen_ai.usage.*`), `agentloop.reason`, `agentloop.steps`, `error.type` when it ended `error`.
 * - `chat {model}` (client): one model turn (a request and its answer). `gen_ai.operation.name`
 *   `chat`, the provider and model requested, `gen_ai.response.model`, the turn's usage,
 *   `gen_ai.response.finish_reasons`, `agentloop.step`.
 * - `execute_tool {tool}` (internal): one tool call, from its policy's decision (the wait for an
 *   approval included) to its result. `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type`
 *   `function`, `agentloop.tool.outcome` (`ok` or `error`) and `error.type` for an error result. A
 *   sub-agent's run is an `invoke_agent` span inside its call's span.
 * - `agentloop.approval` (internal, inside the call's span): the wait for a person's answer, with
 *   `agentloop.approval.outcome` (`approved`, `denied` or `aborted`).
 *
 * Every span carries `agentloop.span`, its name in agentloop's own terms (`agentloop.run`,
 * `agentloop.turn`, `agentloop.tool`, `agentloop.approval`), whatever the conventions name it. No span
 * carries a message's content, a tool's arguments or its output.
 *
 * @since 0.1.0
 */
import { Config, Context, Effect, Layer, Option } from "effect"
import type { Duration } from "effect"
import { FetchHttpClient, Headers } from "effect/http"
import { OtlpSerialization, OtlpTracer } from "effect/observability"
import type { OtlpExporter } from "effect/observability"

/**
 * Who a run is, as traces name it: `name` is the agent's name (`gen_ai.agent.name`, and the
 * `invoke_agent` span's name), `conversationId` the conversation (session) the run belongs to
 * (`gen_ai.conversation.id`).
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentTraceInfo {
  readonly name?: string | undefined
  readonly conversationId?: string | undefined
}

/**
 * The agent a run is, for its spans (default: unnamed, no conversation). A sub-agent's run is named
 * after its tool, whatever its caller's is.
 *
 * @example
 * ```ts
 * import { AgentTrace, runAgentLoop } from "@agentloop/core"
 * import { Effect } from "effect"
 *
 * const run = runAgentLoop({ messages: [{ role: "user", content: "hi" }] }).pipe(
 *   Effect.provideService(AgentTrace, { name: "support-bot", conversationId: "ticket-4711" })
 * )
 * ```
 *
 * @since 0.1.0
 * @category references
 */
export const AgentTrace = Context.Reference<AgentTraceInfo>("@agentloop/core/AgentTrace", {
  defaultValue: () => ({})
})

/**
 * Where `otlpTracingLayer` sends spans, and how.
 *
 * @since 0.1.0
 * @category models
 */
export interface OtlpTracingOptions {
  /** The OTLP/HTTP traces endpoint, e.g. `http://127.0.0.1:4318/v1/traces` (a local collector's). */
  readonly url: string
  /**
   * Headers sent with every export, e.g. a vendor's API key. They are sent, never recorded: their
   * names join the redacted ones, so no span or log of the exporter shows their values.
   */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** The resource's `service.name` (default: `OTEL_SERVICE_NAME`, else `agentloop`). */
  readonly serviceName?: string | undefined
  readonly serviceVersion?: string | undefined
  /** How often finished spans are sent (default: 5 seconds). */
  readonly exportInterval?: Duration.Input | undefined
  /** How long closing the layer waits for the last export (default: 3 seconds). */
  readonly shutdownTimeout?: Duration.Input | undefined
}

/** `agentloop` unless the environment names the service (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`). */
const defaultServiceName = Effect.map(
  Effect.orDie(Config.all({
    name: Config.option(Config.String("OTEL_SERVICE_NAME")),
    attributes: Config.option(Config.String("OTEL_RESOURCE_ATTRIBUTES"))
  })),
  ({ attributes, name }) =>
    Option.isSome(name) || Option.exists(attributes, (a) => /(^|,)\s*service\.name\s*=/.test(a))
      ? undefined
      : "agentloop"
)

/**
 * A tracer that sends every finished span to an OTLP/HTTP endpoint (JSON, over `fetch`): effect's own
 * exporter (`effect/observability`), so no OpenTelemetry SDK is needed. Spans are sent in batches,
 * and whatever is left when the layer's scope closes is sent then (up to `shutdownTimeout`): provide
 * it around the whole program, so that a short run keeps its spans. The exporter's own requests are
 * not traced. The layer gives the exporter's `Flusher` too, to send what is buffered on demand.
 *
 * @example
 * ```ts
 * import { otlpTracingLayer, runAgentLoop } from "@agentloop/core"
 * import { Effect } from "effect"
 *
 * const traced = runAgentLoop({ messages: [{ role: "user", content: "hi" }] }).pipe(
 *   Effect.provide(otlpTracingLayer({ url: "http://127.0.0.1:4318/v1/traces" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const otlpTracingLayer = (options: OtlpTracingOptions): Layer.Layer<OtlpExporter.Flusher> =>
  Layer.unwrap(Effect.map(
    options.serviceName === undefined ? defaultServiceName : Effect.succeed(options.serviceName),
    (serviceName) =>
      OtlpTracer.layer({
        url: options.url,
        resource: { serviceName, serviceVersion: options.serviceVersion },
        headers: options.headers,
        exportInterval: options.exportInterval,
        shutdownTimeout: options.shutdownTimeout
      })
  )).pipe(
    Layer.provide(Layer.mergeAll(OtlpSerialization.layerJson, FetchHttpClient.layer)),
    Layer.provide(Layer.effect(
      Headers.CurrentRedactedNames,
      Effect.gen(function*() {
        return [...yield* Headers.CurrentRedactedNames, ...Object.keys(options.headers ?? {})]
      })
    ))
  )
