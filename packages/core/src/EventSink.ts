/**
 * Where a run's `LoopEvent`s go, and the sinks most programs need.
 *
 * Contract: `emit` may be called concurrently (tool events come from parallel calls) and may
 * apply backpressure by suspending. A sink that fails or dies does **not** end the run: the loop
 * logs the defect (at `Error` level) and goes on, so an observer can never break the pairing of
 * tool calls or the single `turn_end`. A sink that never returns blocks the run; that is the
 * caller's choice.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, PubSub, Queue } from "effect"
import { sinkCallback } from "./internal/rules/common.ts"
import type { SinkCallback } from "./internal/rules/common.ts"
import type { LoopEvent } from "./LoopEvent.ts"

/**
 * @since 0.1.0
 * @category services
 */
export class EventSink extends Context.Service<EventSink, {
  emit(event: LoopEvent): Effect.Effect<void>
}>()("@agentloop/core/EventSink") {}

/**
 * A sink that drops every event.
 *
 * @since 0.1.0
 * @category layers
 */
export const noopSinkLayer: Layer.Layer<EventSink> = Layer.succeed(
  EventSink,
  Object.assign(EventSink.of({ emit: () => Effect.void }), {
    [sinkCallback]: { onEvent: () => undefined, context: Context.empty() } satisfies SinkCallback
  })
)

/**
 * A sink that forwards each event to a callback. The callback may return an `Effect` (which is run
 * with the services the layer was built with, so it may use your application's services: they
 * become requirements of the layer) or anything else (ignored).
 *
 * @example
 * ```ts
 * import { Context, Effect } from "effect"
 * import { callbackSinkLayer } from "@agentloop/core"
 *
 * class Audit extends Context.Service<Audit, { record: (line: string) => Effect.Effect<void> }>()("app/Audit") {}
 *
 * // Layer<EventSink, never, Audit>
 * export const sink = callbackSinkLayer((event) =>
 *   Effect.flatMap(Audit, (audit) => audit.record(event.type))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const callbackSinkLayer = <R = never>(
  onEvent: (event: LoopEvent) => Effect.Effect<void, never, R> | void
): Layer.Layer<EventSink, never, R> =>
  Layer.effect(
    EventSink,
    Effect.map(Effect.context<R>(), (context) => {
      const service = EventSink.of({
        emit: (event) =>
          Effect.suspend(() => {
            const out = onEvent(event)
            return Effect.isEffect(out) ? Effect.provideContext(out, context) : Effect.void
          })
      })
      const direct: SinkCallback = { onEvent, context: context as Context.Context<never> }
      return Object.assign(service, { [sinkCallback]: direct })
    })
  )

/**
 * A sink that offers each event to a queue (a bounded queue applies backpressure to the run).
 *
 * @since 0.1.0
 * @category layers
 */
export const queueSinkLayer = (queue: Queue.Enqueue<LoopEvent>): Layer.Layer<EventSink> =>
  Layer.succeed(EventSink, EventSink.of({ emit: (event) => Effect.asVoid(Queue.offer(queue, event)) }))

/**
 * A sink that publishes each event to a `PubSub`, for several subscribers (UI, logs, recorder).
 *
 * @since 0.1.0
 * @category layers
 */
export const pubSubSinkLayer = (pubsub: PubSub.PubSub<LoopEvent>): Layer.Layer<EventSink> =>
  Layer.succeed(EventSink, EventSink.of({ emit: (event) => Effect.asVoid(PubSub.publish(pubsub, event)) }))
