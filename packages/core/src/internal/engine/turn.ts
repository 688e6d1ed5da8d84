/**
 * One model turn, as the loop runs it: stream the model's events, take its final message, check
 * it. Not part of the public API: every engine runs turns through the one loop (a durable one
 * journals each turn's step, see RunJournal.ts).
 */
import { Cause, Channel, Effect, Exit, Pull, Scope } from "effect"
import { ModelError } from "../../Errors.ts"
import type { ModelErrorReason } from "../../Errors.ts"
import type { LoopEvent, RunReason } from "../../LoopEvent.ts"
import type { AssistantMessage } from "../../Message.ts"
import type { Model, ModelEvent, ModelRequest } from "../../Model.ts"
import { checkAssistantMessage } from "../../Transcript.ts"
import { describeCause } from "../rules/common.ts"
import { awaitAbort } from "./common.ts"

/**
 * How a model turn ended without a message to act on: aborted, or an error (a failed, dead or
 * interrupted stream, a stream without a final message, a malformed final message), with the
 * `reason` of the typed `ModelError` when it carried one.
 *
 * @since 0.1.0
 * @category models
 */
export interface TurnEnding {
  readonly reason: RunReason
  readonly error?: string | undefined
  readonly errorReason?: ModelErrorReason | undefined
}

/**
 * The outcome of one model turn: the validated final message, or how the turn ended without one.
 *
 * @since 0.1.0
 * @category models
 */
export type TurnOutcome =
  | { readonly _tag: "Message"; readonly message: AssistantMessage }
  | { readonly _tag: "Ended"; readonly outcome: TurnEnding }

/** The reason of the first `ModelError` failure in `cause` that has one. */
const modelErrorReason = (cause: Cause.Cause<unknown>): ModelErrorReason | undefined => {
  for (const reason of cause.reasons) {
    if (reason._tag === "Fail" && reason.error instanceof ModelError && reason.error.reason !== undefined) {
      return reason.error.reason
    }
  }
  return undefined
}

/**
 * Streams one model turn: every event before the final `done` is emitted as a `model_event`, the
 * final message is validated (a malformed one is not acted on), and an abort (`signal`), a failure
 * or a defect of the stream ends the turn with a `TurnEnding`. Never fails.
 *
 * @since 0.1.0
 * @category loop
 */
export const streamTurn = (
  model: typeof Model.Service,
  request: ModelRequest,
  emit: (event: LoopEvent) => Effect.Effect<void>,
  signal: AbortSignal | undefined
): Effect.Effect<TurnOutcome> => {
  let final: { readonly message: unknown } | undefined
  // Every chunk's events are emitted in order until the first `done`, which ends the stream (the
  // upstream is not pulled again). The channel is pulled directly, in the scope its resources
  // live in (closed with the turn's exit, as `Channel.runForEach` does), and a chunk's events go to
  // the sink in one synchronous pass while it takes them at once: no `Stream.takeUntil` stage, no
  // effect per event.
  const consume = Effect.suspend(() => {
    const scope = Scope.makeUnsafe()
    const pulling = Effect.flatMap(
      Channel.toTransform(model.stream(request).channel)(Cause.done(), scope),
      (pull) => {
        const take = (chunk: ReadonlyArray<ModelEvent>, from: number): Effect.Effect<void, unknown> => {
          for (let i = from; i < chunk.length; i++) {
            const event = chunk[i]!
            if (event.type === "done") {
              final = { message: event.message }
              return Effect.void
            }
            const emitted = emit({ type: "model_event", event })
            if (emitted !== Effect.void) return Effect.flatMap(emitted, () => take(chunk, i + 1))
          }
          return next
        }
        const next: Effect.Effect<void, unknown> = Effect.matchCauseEffect(pull, {
          onSuccess: (chunk) => take(chunk, 0),
          onFailure: (cause) => Pull.isDoneCause(cause) ? Effect.void : Effect.failCause(cause)
        })
        return next
      }
    )
    return Effect.onExit(pulling, (exit) => Scope.close(scope, exit))
  })
  const raced: Effect.Effect<"aborted" | void, unknown> = signal === undefined ?
    consume :
    Effect.raceFirst(consume, Effect.as(awaitAbort(signal), "aborted" as const))
  return Effect.map(Effect.exit(raced), (exit): TurnOutcome => {
    if (Exit.isSuccess(exit)) {
      if (exit.value === "aborted") return { _tag: "Ended", outcome: { reason: "aborted" } }
      if (final === undefined) {
        return { _tag: "Ended", outcome: { reason: "error", error: "model stream ended without a final message" } }
      }
      const checked = checkAssistantMessage(final.message)
      return checked.ok ?
        { _tag: "Message", message: checked.value } :
        { _tag: "Ended", outcome: { reason: "error", error: checked.error } }
    }
    const cause = exit.cause
    const error = Cause.hasFails(cause) ?
      `model error: ${describeCause(cause)}` :
      Cause.hasDies(cause) ?
      `model stream died: ${describeCause(cause)}` :
      "model stream was interrupted"
    const errorReason = modelErrorReason(cause)
    return {
      _tag: "Ended",
      outcome: errorReason === undefined ? { reason: "error", error } : { reason: "error", error, errorReason }
    }
  })
}
