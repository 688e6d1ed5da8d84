/**
 * A scripted `Model` for tests: each request is answered by the next turn of a script, built with
 * the `turn` helpers. Every request is recorded; a request past the end of the script is a loud
 * failure (the stream dies with `UnscriptedRequestError`, and `verify` fails the test).
 *
 * The arrays of each recorded request are frozen, so a loop that mutates an array it has already
 * handed to the model throws at once instead of passing silently.
 *
 * @since 0.1.0
 */
import { FINAL_ANSWER_TOOL, Model, ModelError } from "@agentloop/core"
import type { AssistantMessage, ModelEvent, ModelRequest, ToolCall, Usage } from "@agentloop/core"
import { Data, Effect, Layer, Stream } from "effect"

/**
 * One scripted answer: a function from the request to the stream of events.
 *
 * @since 0.1.0
 * @category models
 */
export type ScriptedTurn = (request: ModelRequest) => Stream.Stream<ModelEvent, ModelError>

/**
 * A request the script had no turn for.
 *
 * @since 0.1.0
 * @category errors
 */
export class UnscriptedRequestError extends Data.TaggedError("UnscriptedRequestError")<{
  readonly index: number
  readonly scripted: number
}> {
  override get message() {
    return `ScriptedModel: request #${this.index + 1} was not scripted (the script has ${this.scripted} turn(s))`
  }
}

/**
 * A tool call, for building scripted turns.
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolCall = (id: string, name: string, args: Record<string, unknown> = {}): ToolCall => ({
  type: "toolCall",
  id,
  name,
  arguments: args
})

/**
 * An assistant message from text and calls.
 *
 * @since 0.1.0
 * @category constructors
 */
export const assistant = (
  stopReason: AssistantMessage["stopReason"],
  options: {
    readonly text?: string | undefined
    readonly thinking?: string | undefined
    readonly calls?: ReadonlyArray<ToolCall> | undefined
    readonly usage?: Usage | undefined
    readonly errorMessage?: string | undefined
  } = {}
): AssistantMessage => ({
  role: "assistant",
  content: [
    ...(options.thinking === undefined ? [] : [{ type: "thinking" as const, thinking: options.thinking }]),
    ...(options.text === undefined ? [] : [{ type: "text" as const, text: options.text }]),
    ...(options.calls ?? [])
  ],
  stopReason,
  ...(options.usage === undefined ? {} : { usage: options.usage }),
  ...(options.errorMessage === undefined ? {} : { errorMessage: options.errorMessage })
})

/** The deltas a real provider would stream for `message`, then `done`. */
const streamOf = (message: AssistantMessage): ReadonlyArray<ModelEvent> => {
  const events: Array<ModelEvent> = []
  for (const part of message.content) {
    if (part.type === "text") events.push({ type: "text_delta", delta: part.text })
    else if (part.type === "thinking") events.push({ type: "thinking_delta", delta: part.thinking })
    else events.push({ type: "toolcall_delta", id: part.id, name: part.name, delta: JSON.stringify(part.arguments) })
  }
  events.push({ type: "done", message })
  return events
}

const fixed = (events: ReadonlyArray<ModelEvent>): ScriptedTurn => () => Stream.fromIterable(events)

/**
 * Helpers that build scripted turns.
 *
 * @since 0.1.0
 * @category constructors
 */
export const turn = {
  /** Text, then `stopReason: "stop"`. */
  text: (text: string, usage?: Usage): ScriptedTurn => fixed(streamOf(assistant("stop", { text, usage }))),
  /** Tool calls (`stopReason: "toolUse"`), with optional text before them. */
  toolCalls: (calls: ReadonlyArray<ToolCall>, text?: string): ScriptedTurn =>
    fixed(streamOf(assistant("toolUse", { text, calls }))),
  /** A response cut by the token limit (`stopReason: "length"`), with the calls it got to. */
  truncated: (calls: ReadonlyArray<ToolCall> = [], text?: string): ScriptedTurn =>
    fixed(streamOf(assistant("length", { text, calls }))),
  /** A final message with `stopReason: "error"`. */
  error: (errorMessage: string, calls: ReadonlyArray<ToolCall> = []): ScriptedTurn =>
    fixed(streamOf(assistant("error", { errorMessage, calls }))),
  /** A final message with `stopReason: "aborted"`. */
  aborted: (calls: ReadonlyArray<ToolCall> = []): ScriptedTurn => fixed(streamOf(assistant("aborted", { calls }))),
  /** Any final message, sent as the only event (it may be malformed on purpose: it is not checked). */
  message: (message: unknown): ScriptedTurn => fixed([{ type: "done", message } as ModelEvent]),
  /** Text streamed in the given pieces, then `stop`. */
  streamed: (pieces: ReadonlyArray<string>): ScriptedTurn =>
    fixed([
      ...pieces.map((delta): ModelEvent => ({ type: "text_delta", delta })),
      { type: "done", message: assistant("stop", { text: pieces.join("") }) }
    ]),
  /** Exactly these events (no `done` is added). */
  events: (events: ReadonlyArray<unknown>): ScriptedTurn => fixed(events as ReadonlyArray<ModelEvent>),
  /** Some text deltas, then a typed `ModelError` (a message, or a whole error with its `reason`). */
  failing: (error: string | ModelError, pieces: ReadonlyArray<string> = []): ScriptedTurn => () =>
    Stream.concat(
      Stream.fromIterable(pieces.map((delta): ModelEvent => ({ type: "text_delta", delta }))),
      Stream.fail(typeof error === "string" ? new ModelError({ message: error }) : error)
    ),
  /** Some text deltas, then a defect. */
  dying: (defect: unknown, pieces: ReadonlyArray<string> = []): ScriptedTurn => () =>
    Stream.concat(
      Stream.fromIterable(pieces.map((delta): ModelEvent => ({ type: "text_delta", delta }))),
      Stream.die(defect)
    ),
  /** `Model.stream` itself throws instead of returning a stream. */
  throwing: (error: unknown): ScriptedTurn => () => {
    throw error
  },
  /** Some text deltas, then nothing, ever (until interrupted). */
  never: (pieces: ReadonlyArray<string> = []): ScriptedTurn => () =>
    Stream.concat(
      Stream.fromIterable(pieces.map((delta): ModelEvent => ({ type: "text_delta", delta }))),
      Stream.never
    ),
  /**
   * A final answer: one call of the final-answer tool (`final_answer` unless `name` says) with
   * `answer` as its arguments, alone in its message. For an output schema that is not an object,
   * give `{ value: answer }`.
   */
  finalAnswer: (
    id: string,
    answer: Record<string, unknown>,
    options: { readonly name?: string | undefined; readonly usage?: Usage | undefined } = {}
  ): ScriptedTurn =>
    fixed(streamOf(assistant("toolUse", {
      calls: [toolCall(id, options.name ?? FINAL_ANSWER_TOOL, answer)],
      usage: options.usage
    }))),
  /** Any stream, built from the request. */
  custom: (f: ScriptedTurn): ScriptedTurn => f
} as const

/**
 * A scripted model and what it saw.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedModel {
  readonly layer: Layer.Layer<Model>
  readonly service: typeof Model.Service
  /** Every request made so far, in order. */
  readonly requests: Effect.Effect<ReadonlyArray<ModelRequest>>
  /** Turns not used yet. */
  readonly remaining: Effect.Effect<number>
  /** Fails (as a defect, so the test fails) when a request was not scripted or, with `all`, a turn was left unused. */
  readonly verify: (options?: { readonly all?: boolean }) => Effect.Effect<void>
}

const freezeRequest = (request: ModelRequest): ModelRequest => {
  Object.freeze(request.messages)
  Object.freeze(request.tools)
  return Object.freeze(request)
}

/**
 * Makes a scripted model.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeScriptedModel = (turns: ReadonlyArray<ScriptedTurn>): Effect.Effect<ScriptedModel> =>
  Effect.sync(() => {
    const requests: Array<ModelRequest> = []
    let unscripted = 0
    const service = Model.of({
      stream: (request) => {
        const index = requests.length
        requests.push(freezeRequest(request))
        const next = turns[index]
        if (next === undefined) {
          unscripted++
          return Stream.die(new UnscriptedRequestError({ index, scripted: turns.length }))
        }
        return next(request)
      }
    })
    return {
      service,
      layer: Layer.succeed(Model, service),
      requests: Effect.sync(() => requests.slice()),
      remaining: Effect.sync(() => Math.max(0, turns.length - requests.length)),
      verify: (options) =>
        Effect.suspend(() => {
          if (unscripted > 0) {
            return Effect.die(new UnscriptedRequestError({ index: turns.length, scripted: turns.length }))
          }
          const left = turns.length - requests.length
          return options?.all === true && left > 0 ?
            Effect.die(new Error(`ScriptedModel: ${left} scripted turn(s) were never requested`)) :
            Effect.void
        })
    }
  })

/**
 * The `Model` layer of a script, when the test does not need the recorded requests.
 *
 * @since 0.1.0
 * @category layers
 */
export const scriptedModelLayer = (turns: ReadonlyArray<ScriptedTurn>): Layer.Layer<Model> =>
  Layer.unwrap(Effect.map(makeScriptedModel(turns), (model) => model.layer))
