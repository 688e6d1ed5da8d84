/**
 * Live events of durable runs. The workflow body replays, so it emits nothing: every event comes
 * from an activity and is tagged with the run, the step and (for tool events) the call index.
 * An activity that was running when its process died runs again on another process and emits
 * its events again; `latestEvents` keeps the last of each repeated event, which is the one whose
 * outcome the journal holds.
 *
 * @since 0.1.0
 */
import type { LoopEvent } from "@agentloop/core"
import { Context, Effect } from "effect"

/**
 * One event of a durable run.
 *
 * - `step`: the model request it belongs to (0 before the first request).
 * - `callIndex`: the call's index in its assistant message, for tool events.
 *
 * An `approval_request` event carries the serializable `id` `<runId>/<callId>` (`approvalIdOf`);
 * its `answer` Deferred is not connected: answer with `approve(runId, event.call.id, answer)`,
 * from any process.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableEvent {
  readonly runId: string
  readonly step: number
  readonly callIndex?: number | undefined
  readonly event: LoopEvent
}

/**
 * Where the activities of durable runs send their events. Defaults to dropping them. Events are
 * delivered at least once: see `latestEvents`.
 *
 * @since 0.1.0
 * @category services
 */
export const DurableEventSink = Context.Reference<{ readonly emit: (event: DurableEvent) => Effect.Effect<void> }>(
  "@agentloop/durable/DurableEventSink",
  { defaultValue: () => ({ emit: () => Effect.void }) }
)

/**
 * The key that identifies one logical event of a run, or undefined for events that may repeat
 * legitimately (streamed `model_event` fragments and `tool_progress`).
 *
 * @since 0.1.0
 * @category events
 */
export const eventKey = (event: DurableEvent): string | undefined => {
  const e = event.event
  switch (e.type) {
    case "model_event":
    case "tool_progress":
      return undefined
    case "user_message":
      return `${event.runId}|${event.step}|user|${e.kind}|${event.callIndex ?? 0}`
    default:
      return `${event.runId}|${event.step}|${event.callIndex ?? "-"}|${e.type}`
  }
}

/**
 * The events of runs with repeats removed: for each key, only the last occurrence is kept, in the
 * place where it occurred (a turn or call that ran again after a crash supersedes what its first
 * attempt emitted). Streamed fragments are dropped. The result is what `checkInvariants` expects.
 *
 * @since 0.1.0
 * @category events
 */
export const latestEvents = (events: ReadonlyArray<DurableEvent>): Array<LoopEvent> => {
  const last = new Map<string, number>()
  events.forEach((event, index) => {
    const key = eventKey(event)
    if (key !== undefined) last.set(key, index)
  })
  const out: Array<LoopEvent> = []
  events.forEach((event, index) => {
    const key = eventKey(event)
    if (key !== undefined && last.get(key) === index) out.push(event.event)
  })
  return out
}
