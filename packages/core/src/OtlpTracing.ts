/**
 * Sending a traced run's spans (see Tracing.ts) to an OpenTelemetry collector or vendor over
 * OTLP/HTTP, with effect's own exporter: no OpenTelemetry SDK, no dependency beyond `effect`.
 *
 * A module of its own, apart from Tracing.ts (which the loop reads): a program that never exports
 * spans never loads the exporter.
 *
 * @since 0.1.0
 */
import { Config, Effect, Layer, Option } from "effect"
import type { Duration } from "effect"
import { FetchHttpClient, Headers } from "effect/http"
import { OtlpSerialization, OtlpTracer } from "effect/observability"
import type { OtlpExporter } from "effect/observability"

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
