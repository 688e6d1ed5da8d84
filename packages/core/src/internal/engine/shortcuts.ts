/**
 * The engine's speed shortcuts, in one place. Each replaces a plain path with a cheaper one that
 * keeps its guarantees, and each has its differential test against the plain path:
 *
 * - **The callback sink is called directly** (`guardSink`, `Emit.delivers`, `changeAndEmit`): a
 *   `callbackSinkLayer` sink's callback is called when an event's effect is built, so an event
 *   costs a function call instead of two effects, and a change and its event happen in one
 *   synchronous step. FastPaths.test.ts ("the callback sink"): every event once, in order, a
 *   throwing callback does not break the run. Scripted runs and the property test use the
 *   callback sink, the fault-injection runner a plain one: the invariants are checked on both.
 * - **The in-memory journal's turns run inline** (`runsInline`): in the loop's own generator
 *   instead of through `RunJournal.step`. FastPaths.test.ts ("the in-memory journal's inline
 *   turns"): 1,000 fault plans inline and through a copy of the journal give the same runs.
 * - **A request's messages are copied when first read** (`snapshotRequest`), for long
 *   transcripts. FastPaths.test.ts: the copy is the transcript as it was when the request was made.
 * - **One fiber per call in a concurrent stage** (`RunningCalls`, `abortRunningCalls`, used by
 *   batch.ts and toolCall.ts): a stage fires its running calls' signals before it interrupts them.
 *   FastPaths.test.ts ("a concurrent batch's calls"): each signal fires before the call's own
 *   interrupt finalizers, on an abort, the run's interruption and a time limit.
 *
 * The ground floor's one shortcut is the fast structural guards (`../rules/guards.ts`), held to the
 * schemas by Guards.test.ts and Transcript.soundPath.test.ts. Spans are skipped without a tracing
 * backend (loop.ts, `tracingBackend`; FastPaths.test.ts: no span, the caller's span stays current).
 */
import { Cause, Context, Effect, Exit, Fiber } from "effect"
import type { EventSink } from "../../EventSink.ts"
import type { LoopEvent } from "../../LoopEvent.ts"
import type { Message } from "../../Message.ts"
import type { ModelRequest, ToolDefinition } from "../../Model.ts"
import { memoryJournal } from "../../RunJournal.ts"
import type { RunJournalShape } from "../../RunJournal.ts"
import { sinkCallback } from "../rules/common.ts"
import type { SinkCallback } from "../rules/common.ts"

/**
 * An already guarded `EventSink.emit`: never fails, never dies.
 *
 * The sink fast path is this one mechanism: `guardSink` decides once per run whether the sink
 * delivers an event when its emit is called (a `callbackSinkLayer` sink, whose callback it calls
 * itself), and then marks the emit `delivers`. Such an emit returns `Effect.void` once the event is
 * delivered (or the effect that awaits what the callback started), so callers skip composing an
 * announcement that returned `Effect.void`, and `changeAndEmit` makes a change and announces it in
 * one synchronous step. FastPaths.test.ts holds the callback sink to the plain path.
 */
export interface Emit {
  (event: LoopEvent): Effect.Effect<void>
  /** This emit delivers the event when it is called (see above). */
  readonly delivers?: true
}

const onSinkFailure = (event: LoopEvent) => (cause: Cause.Cause<unknown>): Effect.Effect<void> =>
  Cause.hasInterruptsOnly(cause) ?
    Effect.failCause(cause) as Effect.Effect<never> :
    Effect.logError(`agentloop: EventSink.emit failed on a "${event.type}" event; the run goes on`, cause)

/**
 * An `EventSink.emit` that can never break the run (see EventSink.ts for the contract). It is on
 * the path of every event, so it calls `emit` when the effect is built (every call site builds it
 * right before running it) instead of suspending, and catches a synchronous throw itself.
 */
export const guardSink = (sink: typeof EventSink.Service): Emit => {
  const direct = (sink as { readonly [sinkCallback]?: SinkCallback })[sinkCallback]
  if (direct !== undefined) {
    // `callbackSinkLayer`'s sink: call the callback now. An effect it returns (or the log of its
    // failure) starts at once too, in a fiber of its own with the run's and the layer's services,
    // so the event and its effect are under way when this returns; only an effect still running
    // then is returned, as the wait for it (the loop waits for it, as for any sink's effect).
    const { onEvent, context } = direct
    const start = (effect: Effect.Effect<void>): Effect.Effect<void> => {
      // the run's services with the layer's over them, as `Effect.provideContext` in the run's
      // fiber would give (the emit is called from inside that fiber)
      const caller = Fiber.getCurrent()
      const fiber = Effect.runForkWith(caller === undefined ? context : Context.merge(caller.context, context))(effect)
      const exit = fiber.pollUnsafe()
      // (an effect that ended interrupted passes its interruption on, as it would in the run's fiber)
      if (exit !== undefined) return Exit.isSuccess(exit) ? Effect.void : Effect.asVoid(exit)
      return Effect.onInterrupt(Effect.asVoid(Fiber.join(fiber)), () => Fiber.interrupt(fiber))
    }
    const emit = (event: LoopEvent): Effect.Effect<void> => {
      let out: unknown
      try {
        out = onEvent(event)
      } catch (defect) {
        return start(onSinkFailure(event)(Cause.die(defect)))
      }
      return Effect.isEffect(out)
        ? start(Effect.catchCause(out as Effect.Effect<void>, onSinkFailure(event)))
        : Effect.void
    }
    return Object.assign(emit, { delivers: true as const })
  }
  return (event) => {
    let effect: Effect.Effect<void>
    try {
      effect = sink.emit(event)
    } catch (defect) {
      return onSinkFailure(event)(Cause.die(defect))
    }
    return Effect.catchCause(effect, onSinkFailure(event))
  }
}

/**
 * Whether the loop runs a run's model turns inline, in its own generator, instead of through
 * `journal.step`: for the in-memory journal itself (a copy of it takes the plain path).
 */
export const runsInline = (journal: RunJournalShape): boolean => journal === memoryJournal

/** Below this many messages, copying the transcript for a request costs less than deferring the copy. */
const EAGER_COPY = 256

/**
 * The request for the transcript as it is now. Its `messages` are a snapshot: an array the run
 * never mutates. The transcript is only ever appended to, so its first `length` messages never
 * change, and the copy of a long transcript is made when `messages` is first read (by the model,
 * a spread, `JSON.stringify`...), not per request whether or not anyone reads it: for a run that
 * grows to thousands of messages, that copy is the largest cost of a step. `messages` is an own
 * enumerable property (a getter that turns into a plain value when first read or assigned), so
 * spreads and serialisers see it as before.
 */
export const snapshotRequest = (
  transcript: ReadonlyArray<Message>,
  tools: ReadonlyArray<ToolDefinition>,
  systemPrompt: string | undefined
): ModelRequest => {
  const length = transcript.length
  if (length < EAGER_COPY) {
    const messages = transcript.slice()
    return systemPrompt === undefined ? { messages, tools } : { systemPrompt, messages, tools }
  }
  const request: { systemPrompt?: string; messages?: ReadonlyArray<Message>; tools?: ReadonlyArray<ToolDefinition> } =
    systemPrompt === undefined ? {} : { systemPrompt }
  // the copy is made once; `Reflect.defineProperty` fails quietly on a request someone froze (the
  // getter then keeps answering with the same copy)
  let copy: ReadonlyArray<Message> | undefined
  const settle = (target: object, value: ReadonlyArray<Message>) =>
    Reflect.defineProperty(target, "messages", { value, enumerable: true, writable: true, configurable: true })
  Object.defineProperty(request, "messages", {
    enumerable: true,
    configurable: true,
    get(this: object) {
      copy ??= transcript.slice(0, length)
      settle(this, copy)
      return copy
    },
    set(this: object, value: ReadonlyArray<Message>) {
      copy = value
      settle(this, value)
    }
  })
  request.tools = tools
  return request as ModelRequest
}

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
 * Makes a change (to the transcript, to a batch's results) and announces it with `event`,
 * together: nothing can come between the two, and an interruption cannot stop one without the
 * other. With an emit that `delivers`, both happen now, so call this only where the returned effect
 * runs next (a generator's `yield*`, the effect a continuation returns); with any other, both
 * happen in one uninterruptible effect when it runs.
 */
export const changeAndEmit = (emit: Emit, change: () => void, event: LoopEvent): Effect.Effect<void> => {
  if (emit.delivers === true) {
    change()
    const announced = emit(event)
    return announced === Effect.void ? announced : Effect.uninterruptible(announced)
  }
  return Effect.uninterruptible(Effect.suspend(() => {
    change()
    return emit(event)
  }))
}
