/**
 * An `EventSink` that records every event, for assertions and `checkInvariants`.
 *
 * @since 0.1.0
 */
import { EventSink } from "@agentloop/core"
import type { LoopEvent } from "@agentloop/core"
import { Effect, Layer } from "effect"

/**
 * @since 0.1.0
 * @category models
 */
export interface RecordingSink {
  readonly layer: Layer.Layer<EventSink>
  /** Every event so far, in emission order. */
  readonly events: Effect.Effect<ReadonlyArray<LoopEvent>>
}

/**
 * Makes a recording sink.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeRecordingSink = (): Effect.Effect<RecordingSink> =>
  Effect.sync(() => {
    const events: Array<LoopEvent> = []
    return {
      layer: Layer.succeed(EventSink, EventSink.of({ emit: (event) => Effect.sync(() => void events.push(event)) })),
      events: Effect.sync(() => events.slice())
    }
  })
