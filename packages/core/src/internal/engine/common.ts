/**
 * A small piece the engine's modules share: the abort as an effect.
 */
import { Effect } from "effect"

/** Resumes when `signal` aborts (at once if it already has). */
export const awaitAbort = (signal: AbortSignal): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    if (signal.aborted) return resume(Effect.void)
    const onAbort = () => resume(Effect.void)
    signal.addEventListener("abort", onAbort, { once: true })
    return Effect.sync(() => signal.removeEventListener("abort", onAbort))
  })
