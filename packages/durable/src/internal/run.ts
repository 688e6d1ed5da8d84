/**
 * One model turn and one tool call, as the durable activities run them. Small local versions of
 * core internals (internal/loop.ts `streamTurn`, internal/batch.ts `runCall`, internal/common.ts
 * `describeCause`) until core exports them (requested in REQUESTS.md); the decisions and results
 * themselves come from core's public pure pieces.
 */
import { Cause, Duration, Effect, Exit, Option, Stream } from "effect"
import { checkAssistantMessage, resultOfExit, timedOutResult } from "@agentloop/core"
import type {
  AssistantMessage,
  ExecutorShape,
  LoopEvent,
  ModelEvent,
  ModelRequest,
  RunReason,
  ToolCall,
  ToolContext,
  ToolResultMessage
} from "@agentloop/core"
import type { Model } from "@agentloop/core"

/** Readable text for a cause: the messages of its failures and defects, never a stack. */
export const describeCause = (cause: Cause.Cause<unknown>): string => {
  const texts: Array<string> = []
  for (const reason of cause.reasons) {
    const u = reason._tag === "Fail" ? reason.error : reason._tag === "Die" ? reason.defect : undefined
    if (u === undefined) continue
    if (u instanceof Error) texts.push(u.message.length > 0 ? u.message : u.name)
    else if (typeof u === "object" && u !== null && typeof (u as { message?: unknown }).message === "string") {
      texts.push((u as { message: string }).message)
    } else texts.push(String(u))
  }
  return texts.length > 0 ? texts.join("; ") : "interrupted"
}

/** What a model turn came to, as journaled data. */
export type TurnOutcome =
  | { readonly _tag: "Message"; readonly message: AssistantMessage }
  | { readonly _tag: "Ended"; readonly reason: RunReason; readonly error?: string }

/** Streams one turn, forwarding every event before the first `done`, and checks the final message. */
export const streamTurn = (
  model: typeof Model.Service,
  request: ModelRequest,
  emit: (event: LoopEvent) => Effect.Effect<void>
): Effect.Effect<TurnOutcome> =>
  Effect.suspend(() => {
    let final: { readonly message: unknown } | undefined
    const consume = Stream.unwrap(Effect.sync(() => model.stream(request))).pipe(
      Stream.takeUntil((event: ModelEvent) => event.type === "done"),
      Stream.runForEach((event) => {
        if (event.type === "done") {
          final = { message: event.message }
          return Effect.void
        }
        return emit({ type: "model_event", event })
      })
    )
    return Effect.map(Effect.exit(consume), (exit): TurnOutcome => {
      if (Exit.isSuccess(exit)) {
        if (final === undefined) return { _tag: "Ended", reason: "error", error: "model stream ended without a final message" }
        const checked = checkAssistantMessage(final.message)
        return checked.ok ?
          { _tag: "Message", message: checked.value } :
          { _tag: "Ended", reason: "error", error: checked.error }
      }
      const cause = exit.cause
      const error = Cause.hasFails(cause) ?
        `model error: ${describeCause(cause)}` :
        Cause.hasDies(cause) ?
        `model stream died: ${describeCause(cause)}` :
        "model stream was interrupted"
      return { _tag: "Ended", reason: "error", error }
    })
  })

/** Runs one call through the executor with its own `AbortSignal`, progress reporting and time limit. */
export const runCall = (
  executor: ExecutorShape,
  call: ToolCall,
  context: Omit<ToolContext, "signal" | "reportProgress"> & Record<string, unknown>,
  progress: (progress: unknown) => Effect.Effect<void>,
  timeout: Duration.Duration | undefined
): Effect.Effect<ToolResultMessage> =>
  Effect.suspend(() => {
    const controller = new AbortController()
    let ended = false
    const full: ToolContext = {
      ...context,
      signal: controller.signal,
      reportProgress: (p) => Effect.suspend(() => ended ? Effect.void : progress(p))
    }
    const execution = Effect.onInterrupt(
      Effect.suspend(() => {
        const effect: unknown = executor.execute(call, full)
        return Effect.isEffect(effect) ?
          effect as Effect.Effect<unknown, unknown> :
          Effect.die(new TypeError(`Executor.execute returned ${typeof effect}, not an Effect`))
      }),
      () => Effect.sync(() => controller.abort())
    )
    const limited = timeout === undefined ?
      Effect.map(Effect.exit(execution), (exit) => resultOfExit(call, exit)) :
      Effect.map(Effect.exit(Effect.timeoutOption(execution, timeout)), (exit) =>
        Exit.isSuccess(exit) && Option.isNone(exit.value) ?
          timedOutResult(call, timeout) :
          resultOfExit(call, Exit.map(exit, (o) => Option.getOrUndefined(o as Option.Option<unknown>))))
    return Effect.map(limited, (result) => {
      ended = true
      return result
    })
  })
