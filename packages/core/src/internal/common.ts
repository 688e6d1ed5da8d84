/**
 * Small pieces the loop's engine modules share.
 */
import { Cause, Effect, Inspectable } from "effect"
import type { LoopEvent } from "../LoopEvent.ts"

/** An already guarded `EventSink.emit`: never fails, never dies. */
export type Emit = (event: LoopEvent) => Effect.Effect<void>

/** Readable text for a failure value: the message of an error, never its stack. */
export const describeFailure = (u: unknown): string => {
  if (u instanceof Error) return u.message.length > 0 ? u.message : u.name
  if (typeof u === "object" && u !== null && typeof (u as { message?: unknown }).message === "string") {
    return (u as { message: string }).message
  }
  return Inspectable.toStringUnknown(u, 0)
}

/** The failures and defects of a cause, as readable text. */
export const describeCause = (cause: Cause.Cause<unknown>): string => {
  const texts: Array<string> = []
  for (const reason of cause.reasons) {
    if (reason._tag === "Fail") texts.push(describeFailure(reason.error))
    else if (reason._tag === "Die") texts.push(describeFailure(reason.defect))
  }
  return texts.length > 0 ? texts.join("; ") : "interrupted"
}

/** Resumes when `signal` aborts (at once if it already has). */
export const awaitAbort = (signal: AbortSignal): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    if (signal.aborted) return resume(Effect.void)
    const onAbort = () => resume(Effect.void)
    signal.addEventListener("abort", onAbort, { once: true })
    return Effect.sync(() => signal.removeEventListener("abort", onAbort))
  })
