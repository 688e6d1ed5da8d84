/**
 * The loop's engine: one model turn, one tool batch, and the run that ends with exactly one
 * `turn_end` whatever happens. Not part of the public API; `AgentLoop.ts` and `AgentRun.ts` are.
 *
 * The pure decision of what a turn means is `decideTurn` (Decision.ts); this module only carries
 * it out.
 */
import { Cause, Channel, Effect, Exit, Inspectable, Schema } from "effect"
import { decideTurn } from "../Decision.ts"
import type { EventSink } from "../EventSink.ts"
import type { ModelError } from "../Errors.ts"
import { Executor } from "../Executor.ts"
import type { ExecutorShape, ToolContext } from "../Executor.ts"
import type { LoopEvent, RunReason } from "../LoopEvent.ts"
import { toolCallsOf } from "../Message.ts"
import type { AssistantMessage, Message, ToolCall, ToolResultMessage } from "../Message.ts"
import { Model, ToolDefinition } from "../Model.ts"
import type { ModelEvent, ModelRequest } from "../Model.ts"
import { DEFAULT_MAX_STEPS, RunSettings } from "../Run.ts"
import type { AgentLoopOptions, AgentRunResult } from "../Run.ts"
import { isRunSettingsFast, isToolDefinitionsFast } from "./guards.ts"
import { checkAssistantMessage, checkToolResult, errorResult, prepareTranscript, skippedResult } from "../Transcript.ts"

/** How the run ended, before it is turned into the result and the `turn_end` event. */
interface Outcome {
  readonly reason: RunReason
  readonly error?: string | undefined
}

/**
 * The run's mutable state. The transcript array never leaves the run: callers get copies.
 * `unanswered` holds the calls of the last appended assistant message until their results are
 * appended; whatever ends the run, `closeTranscript` answers them before `turn_end`.
 */
interface RunState {
  transcript: Array<Message>
  steps: number
  unanswered: ReadonlyArray<ToolCall>
}

/** Appends results (in the order given) and marks the open turn answered. Synchronous: never split. */
const appendResults = (state: RunState, results: ReadonlyArray<ToolResultMessage>) => {
  for (const result of results) state.transcript.push(result)
  state.unanswered = []
}

/**
 * Pairs the calls of the open turn, if any, with skipped results (reason `aborted`). Runs
 * uninterruptibly as the run ends, so an interruption that lands between appending an assistant
 * message and starting its batch still leaves every call answered.
 */
const closeTranscript = (state: RunState, emit: Emit): Effect.Effect<void> =>
  Effect.suspend(() => {
    const results = state.unanswered.map((call) => skippedResult(call, "aborted"))
    appendResults(state, results)
    return Effect.forEach(results, (result) => emit({ type: "tool_end", result }), { discard: true })
  })

export type Emit = (event: LoopEvent) => Effect.Effect<void>

/** Readable text for a failure value: the message of an error, never its stack. */
const describeFailure = (u: unknown): string => {
  if (u instanceof Error) return u.message.length > 0 ? u.message : u.name
  if (typeof u === "object" && u !== null && typeof (u as { message?: unknown }).message === "string") {
    return (u as { message: string }).message
  }
  return Inspectable.toStringUnknown(u, 0)
}

const describeCause = (cause: Cause.Cause<unknown>): string => {
  const texts: Array<string> = []
  for (const reason of cause.reasons) {
    if (reason._tag === "Fail") texts.push(describeFailure(reason.error))
    else if (reason._tag === "Die") texts.push(describeFailure(reason.defect))
  }
  return texts.length > 0 ? texts.join("; ") : "interrupted"
}

/** Ends a channel's `runForEach` normally, from inside its callback. */
const halt = Cause.done()

/** Resumes when `signal` aborts (at once if it already has). */
const awaitAbort = (signal: AbortSignal): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    if (signal.aborted) return resume(Effect.void)
    const onAbort = () => resume(Effect.void)
    signal.addEventListener("abort", onAbort, { once: true })
    return Effect.sync(() => signal.removeEventListener("abort", onAbort))
  })

const onSinkFailure = (event: LoopEvent) => (cause: Cause.Cause<unknown>): Effect.Effect<void> =>
  Cause.hasInterruptsOnly(cause) ?
    Effect.failCause(cause) as Effect.Effect<never> :
    Effect.logError(`agentloop: EventSink.emit failed on a "${event.type}" event; the run goes on`, cause)

/**
 * An `EventSink.emit` that can never break the run (see EventSink.ts for the contract). It is on
 * the path of every event, so it calls `emit` when the effect is built (every call site builds it
 * right before running it) instead of suspending, and catches a synchronous throw itself.
 */
export const guardSink = (sink: typeof EventSink.Service): Emit => (event) => {
  let effect: Effect.Effect<void>
  try {
    effect = sink.emit(event)
  } catch (defect) {
    return onSinkFailure(event)(Cause.die(defect))
  }
  return Effect.catchCause(effect, onSinkFailure(event))
}

// -----------------------------------------------------------------------------
// One model turn
// -----------------------------------------------------------------------------

type TurnOutcome =
  | { readonly _tag: "Message"; readonly message: AssistantMessage }
  | { readonly _tag: "Ended"; readonly outcome: Outcome }

const streamTurn = (
  model: typeof Model.Service,
  request: ModelRequest,
  emit: Emit,
  signal: AbortSignal | undefined
): Effect.Effect<TurnOutcome> => {
  let final: { readonly message: unknown } | undefined
  // Every chunk's events are emitted in order until the first `done`, which ends the stream (the
  // upstream is not pulled again: `halt` is the channel's own end-of-stream signal). Consumed at
  // the channel level, without a `Stream.takeUntil` stage and a per-element `Stream.runForEach`
  // (about a microsecond per turn and a tenth per event), and without a loop for the one-event
  // chunks of a source that delivers events one at a time.
  const body = (event: ModelEvent): Effect.Effect<void, Cause.Done> => {
    if (event.type === "done") {
      final = { message: event.message }
      return halt
    }
    return emit({ type: "model_event", event })
  }
  const consume = Effect.suspend(() =>
    Channel.runForEach(model.stream(request).channel, (chunk): Effect.Effect<void, Cause.Done> => {
      if (chunk.length === 1) return body(chunk[0]!)
      let i = 0
      return Effect.flatMap(
        Effect.whileLoop({
          while: () => final === undefined && i < chunk.length,
          body: () => body(chunk[i++]!),
          step: () => {}
        }),
        () => final === undefined ? Effect.void : halt
      )
    })
  ) as Effect.Effect<void, ModelError>
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
    return { _tag: "Ended", outcome: { reason: "error", error } }
  })
}

// -----------------------------------------------------------------------------
// One tool batch
// -----------------------------------------------------------------------------

const interruptedResult = (call: ToolCall): ToolResultMessage =>
  errorResult(call, "Tool call was interrupted before it finished.", { interrupted: true })

/** Turns everything `execute` can do (succeed, fail, die, throw, be interrupted) into a result for `call`. */
const resultOf = (call: ToolCall, exit: Exit.Exit<unknown, unknown>): ToolResultMessage => {
  if (Exit.isSuccess(exit)) return checkToolResult(call, exit.value)
  const cause = exit.cause
  if (Cause.hasFails(cause)) {
    return errorResult(call, `Tool "${call.name}" failed: ${describeCause(cause)}`, { failed: true })
  }
  if (Cause.hasDies(cause)) {
    return errorResult(call, `Tool "${call.name}" crashed: ${describeCause(cause)}`, { defect: true })
  }
  return interruptedResult(call)
}

const runCall = (
  executor: ExecutorShape,
  call: ToolCall,
  emit: Emit
): Effect.Effect<ToolResultMessage> =>
  Effect.suspend(() => {
    // (an AbortController made lazily, behind a getter, would cost more than it saves: V8 builds
    // an object literal with an accessor several times slower than one with plain properties)
    const controller = new AbortController()
    let ended = false
    const context: ToolContext = {
      signal: controller.signal,
      toolCallId: call.id,
      toolName: call.name,
      reportProgress: (progress) =>
        Effect.suspend(() => ended ? Effect.void : emit({ type: "tool_progress", toolCallId: call.id, progress }))
    }
    const execution = Effect.suspend(() => {
      const effect: unknown = executor.execute(call, context)
      return Effect.isEffect(effect) ?
        effect as Effect.Effect<unknown, unknown> :
        Effect.die(new TypeError(`Executor.execute returned ${typeof effect}, not an Effect`))
    })
    return Effect.map(
      Effect.exit(Effect.onInterrupt(execution, () => Effect.sync(() => controller.abort()))),
      (exit) => {
        ended = true
        return resultOf(call, exit)
      }
    )
  })

/**
 * Runs every call of one assistant message concurrently and appends one result per call, in call
 * order, to the transcript, whatever happens: an abort (the `signal`) or an interruption of the
 * run stops the calls still running, and the finalizer answers them (and calls that never
 * started) before anything else can look at the transcript.
 */
const runBatch = (
  executor: ExecutorShape,
  calls: ReadonlyArray<ToolCall>,
  state: RunState,
  emit: Emit,
  signal: AbortSignal | undefined
): Effect.Effect<void> => {
  const results: Array<ToolResultMessage | undefined> = new Array(calls.length)
  const started: Array<boolean> = new Array(calls.length).fill(false)
  const finish = (index: number, result: ToolResultMessage) => {
    results[index] = result
    return emit({ type: "tool_end", result })
  }
  const one = (call: ToolCall, index: number): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (signal?.aborted) return Effect.void
      started[index] = true
      return Effect.flatMap(
        Effect.andThen(emit({ type: "tool_start", call }), runCall(executor, call, emit)),
        (result) => Effect.uninterruptible(finish(index, result))
      )
    })
  // a batch of one call runs in this fiber (forking one child to join it at once buys nothing)
  const batch = calls.length === 1 ?
    one(calls[0]!, 0) :
    Effect.forEach(calls, one, { concurrency: "unbounded", discard: true })
  const raced = signal === undefined ? batch : Effect.raceFirst(batch, awaitAbort(signal))
  return Effect.ensuring(
    raced,
    Effect.suspend(() => {
      const append = Effect.sync(() => appendResults(state, results as Array<ToolResultMessage>))
      const pending: Array<number> = []
      for (let index = 0; index < calls.length; index++) if (results[index] === undefined) pending.push(index)
      if (pending.length === 0) return append
      return Effect.andThen(
        Effect.forEach(pending, (index) => {
          const call = calls[index]!
          return finish(index, started[index] ? interruptedResult(call) : skippedResult(call, "aborted"))
        }, { discard: true }),
        append
      )
    })
  )
}

// -----------------------------------------------------------------------------
// The run
// -----------------------------------------------------------------------------

const decodeDefinitions = Schema.decodeUnknownExit(Schema.Array(ToolDefinition))
const decodeSettings = Schema.decodeUnknownExit(RunSettings)

const checkDefinitions = (definitions: ReadonlyArray<ToolDefinition>): string | undefined => {
  if (!isToolDefinitionsFast(definitions)) {
    const exit = decodeDefinitions(definitions)
    if (Exit.isFailure(exit)) return `the executor's tool definitions are invalid: ${describeCause(exit.cause)}`
  }
  const names = new Set<string>()
  for (const definition of definitions) {
    if (names.has(definition.name)) return `the executor defines tool "${definition.name}" twice`
    names.add(definition.name)
  }
  return undefined
}

const drive = (
  options: AgentLoopOptions,
  state: RunState,
  model: typeof Model.Service,
  executor: ExecutorShape,
  emit: Emit
): Effect.Effect<Outcome> =>
  Effect.gen(function*() {
    if (typeof options !== "object" || options === null) {
      return { reason: "error", error: "bad input: options must be an object" }
    }
    if (!isRunSettingsFast(options)) {
      const settings = decodeSettings(options)
      if (Exit.isFailure(settings)) return { reason: "error", error: `bad input: ${describeCause(settings.cause)}` }
    }
    if (!Array.isArray(options.messages)) return { reason: "error", error: "bad input: messages must be an array" }
    const prepared = prepareTranscript(options.messages)
    if (!prepared.ok) return { reason: "error", error: `bad input: ${prepared.error}` }
    state.transcript = prepared.value
    const definitionError = checkDefinitions(executor.definitions)
    if (definitionError !== undefined) return { reason: "error", error: definitionError }

    const { signal, systemPrompt } = options
    const maxSteps = options.maxSteps ?? DEFAULT_MAX_STEPS
    while (true) {
      if (signal?.aborted) return { reason: "aborted" }
      if (state.steps >= maxSteps) return { reason: "maxSteps" }
      state.steps++
      const messages = state.transcript.slice()
      const request: ModelRequest = systemPrompt === undefined ?
        { messages, tools: executor.definitions } :
        { systemPrompt, messages, tools: executor.definitions }
      const turn = yield* streamTurn(model, request, emit, signal)
      if (turn._tag === "Ended") return turn.outcome
      const message = turn.message
      const calls = toolCallsOf(message)
      const decision = decideTurn(message.stopReason, calls.length, message.errorMessage)
      // appending the message and announcing it happen together, or not at all
      yield* Effect.uninterruptible(Effect.suspend(() => {
        state.transcript.push(message)
        state.unanswered = calls
        return emit({ type: "assistant_message", message })
      }))
      if (decision._tag === "Finish") {
        const skip = decision.skip
        if (skip !== undefined) {
          const skipped = calls.map((call) => skippedResult(call, skip))
          appendResults(state, skipped)
          yield* Effect.uninterruptible(
            Effect.forEach(skipped, (result) => emit({ type: "tool_end", result }), { discard: true })
          )
        }
        return { reason: decision.reason, error: decision.error }
      }
      yield* runBatch(executor, calls, state, emit, signal)
    }
  })

/**
 * Runs the loop with an already guarded `emit`, hands the result to `onResult` (also when the run
 * is interrupted from outside, before the interruption goes on) and returns it.
 */
export const runLoop = (
  options: AgentLoopOptions,
  emit: Emit,
  onResult: (result: AgentRunResult) => Effect.Effect<void>
): Effect.Effect<AgentRunResult, never, Model | Executor> =>
  Effect.gen(function*() {
    const model = yield* Model
    const executor = yield* Executor
    const state: RunState = { transcript: [], steps: 0, unanswered: [] }
    return yield* Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(restore(drive(options, state, model, executor, emit)))
        yield* closeTranscript(state, emit)
        const outcome: Outcome = Exit.isSuccess(exit) ?
          exit.value :
          Cause.hasInterruptsOnly(exit.cause) ?
          { reason: "aborted" } :
          { reason: "error", error: `agentloop internal error: ${describeCause(exit.cause)}` }
        const error = outcome.error === undefined ? {} : { error: outcome.error }
        const result: AgentRunResult = {
          // an exact-size copy: the transcript array has spare capacity from appending, which a
          // caller holding the result (a long session) would keep for as long as it keeps it
          messages: state.transcript.slice(),
          steps: state.steps,
          reason: outcome.reason,
          ...error
        }
        yield* emit({ type: "turn_end", reason: outcome.reason, steps: state.steps, ...error })
        yield* onResult(result)
        if (Exit.isFailure(exit) && Cause.hasInterrupts(exit.cause)) return yield* Effect.failCause(exit.cause)
        return result
      })
    )
  })
