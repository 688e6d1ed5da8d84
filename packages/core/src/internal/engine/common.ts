/**
 * Small pieces the engine's modules share: the guarded emit, the abort as an effect, the running
 * calls of a stage, a change announced with its event.
 */
import { Context, Effect } from "effect"
import type { Fiber } from "effect"
import type { LoopEvent } from "../../LoopEvent.ts"

/** An already guarded `EventSink.emit`: never fails, never dies. */
export type Emit = (event: LoopEvent) => Effect.Effect<void>

/** Resumes when `signal` aborts (at once if it already has). */
export const awaitAbort = (signal: AbortSignal): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    if (signal.aborted) return resume(Effect.void)
    const onAbort = () => resume(Effect.void)
    signal.addEventListener("abort", onAbort, { once: true })
    return Effect.sync(() => signal.removeEventListener("abort", onAbort))
  })

/**
 * The `AbortController`s of the calls running now in a concurrent stage of the in-memory loop's
 * batch, set for the fiber that runs the stage. A call that finds it (and has no time limit) runs
 * in the fiber the stage gave it and registers its controller here, and the stage fires every
 * registered signal, then interrupts the call's fiber, before it interrupts its own (on an abort, or
 * an interruption of the run): so a tool's signal fires before its own interrupt finalizers without
 * a second fiber per call.
 * Without it (a batch of one call, other engines), a call runs in a fiber of its own, whose
 * interruption fires the signal first.
 */
export const RunningCalls = Context.Reference<Map<AbortController, Fiber.Fiber<unknown, unknown>> | undefined>(
  "@agentloop/core/internal/RunningCalls",
  { defaultValue: () => undefined }
)

/**
 * Stops every call registered as running: fires every call's signal, then interrupts the fibers
 * running them (their interrupt finalizers run then; interrupting one may interrupt its siblings at
 * once, so every signal fires first). Forgets them.
 */
export const abortRunningCalls = (running: Map<AbortController, Fiber.Fiber<unknown, unknown>>): void => {
  const calls = [...running]
  running.clear()
  for (const [controller] of calls) controller.abort()
  for (const [, fiber] of calls) fiber.interruptUnsafe()
}

/**
 * The guarded emits that deliver an event when they are called (a callback sink's): they return
 * `Effect.void`, or, while an effect the callback returned is still running, the effect that
 * awaits it. The loop records a change and announces it in the same synchronous step with them,
 * with no effect in between; with any other emit, it does both in one uninterruptible effect.
 */
export const synchronousEmits = new WeakSet<Emit>()

/**
 * Makes a change (to the transcript, to a batch's results) and announces it with `event`,
 * together: nothing can come between the two, and an interruption cannot stop one without the
 * other. With a synchronous emit both happen now, so call this only where the returned effect
 * runs next (a generator's `yield*`, the effect a continuation returns); with any other, both
 * happen in one uninterruptible effect when it runs.
 */
export const changeAndEmit = (emit: Emit, change: () => void, event: LoopEvent): Effect.Effect<void> => {
  if (synchronousEmits.has(emit)) {
    change()
    const announced = emit(event)
    return announced === Effect.void ? announced : Effect.uninterruptible(announced)
  }
  return Effect.uninterruptible(Effect.suspend(() => {
    change()
    return emit(event)
  }))
}
