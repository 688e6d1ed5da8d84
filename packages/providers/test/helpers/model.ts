/**
 * Calling a provider's `Model` directly (without the loop), to look at the typed `ModelError`, and
 * recording what a provider logs and puts on its spans.
 */
import { Model } from "@agentloop/core"
import type { ModelError, ModelEvent, ModelRequest } from "@agentloop/core"
import { Cause, Effect, Exit, Layer, Logger, Option, Stream, Tracer } from "effect"

/** Streams one request to the model of `layer`; the exit of the whole stream. */
export const streamOnce = <E>(
  layer: Layer.Layer<Model, E>,
  request: Partial<ModelRequest> = {}
): Effect.Effect<Exit.Exit<ReadonlyArray<ModelEvent>, ModelError>, E> =>
  Effect.gen(function*() {
    const model = yield* Model
    return yield* Effect.exit(
      Stream.runCollect(model.stream({ messages: [{ role: "user", content: "hello" }], tools: [], ...request }))
    )
  }).pipe(Effect.provide(layer))

/** The `ModelError` an exit failed with (a test failure when it did not). */
export const modelErrorOf = (exit: Exit.Exit<unknown, ModelError>): ModelError => {
  if (Exit.isSuccess(exit)) throw new Error("expected a ModelError, the stream succeeded")
  const error = Cause.findErrorOption(exit.cause)
  if (Option.isNone(error)) throw new Error(`expected a ModelError, got ${Cause.pretty(exit.cause)}`)
  return error.value
}

export interface Recorder {
  /** Provides the recording logger and tracer to `effect`. */
  readonly record: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Every log line so far (its message, as text). */
  readonly logs: () => ReadonlyArray<string>
  /** Every span started so far. */
  readonly spans: () => ReadonlyArray<Tracer.NativeSpan>
}

/** Records log lines and spans. */
export const makeRecorder = (): Recorder => {
  const lines: Array<string> = []
  const started: Array<Tracer.NativeSpan> = []
  const logger = Logger.make<unknown, void>(({ message }) => {
    lines.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
  })
  const tracer = Tracer.make({
    span: (options) => {
      const span = new Tracer.NativeSpan(options)
      started.push(span)
      return span
    }
  })
  return {
    record: (effect) =>
      effect.pipe(Effect.provide(Layer.mergeAll(Logger.layer([logger]), Layer.succeed(Tracer.Tracer, tracer)))),
    logs: () => lines.slice(),
    spans: () => started.slice()
  }
}
