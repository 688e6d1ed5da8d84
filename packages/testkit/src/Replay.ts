/**
 * Replaying a recorded session: any real session (a CLI session file, `.agentloop/sessions/<id>.jsonl`)
 * becomes a regression test of your tools and policies. The model is replaced by the answers it
 * gave in the recording, offline; your tools run for real; each request is checked against the
 * recording, and the invariants against every run.
 *
 * - `loadRecording(path)` / `recordingOf(text)`: the session's runs, read with core's transcript
 *   reader (`parseTranscript`, `sessionRunsOf`): each run's input, the model's answers, its end.
 * - `makeReplayModel(recording)` / `replayModelLayer(path)`: a `Model` that answers each request
 *   with the recorded answer for that step, once the request's new messages (the tool results and
 *   user messages since the model's last answer) are the recorded ones. When they are not, the
 *   request fails with a `ModelError` saying which run, which step and what differs, and the first
 *   divergence is kept (`divergence`) as a `ReplayError`.
 * - `replaySession(recording, options)`: runs every recorded run again on that model with the tools
 *   of the `Executor` you provide, each from the transcript the replay has so far plus its prompt,
 *   and checks each against the recording (its end, its steps) and the invariants
 *   (`checkInvariants`). It fails with a `ReplayError` naming the run, the step and the difference.
 *
 * What is compared is what the model would see: a message's role and content, and for a tool
 * result its call id, tool name and `isError`. `details` and timestamps are not (they may hold
 * times and paths that differ from one run to the next). Compaction requests are not replayed: a
 * replay sends whole transcripts.
 *
 * @since 0.1.0
 */
import { EventSink, Model, ModelError, parseTranscript, runAgentLoop, sessionRunsOf } from "@agentloop/core"
import type {
  AgentLoopOptions,
  AgentRunResult,
  AssistantMessage,
  Executor,
  LoopEvent,
  Message,
  ModelEvent,
  ModelRequest,
  RunReason
} from "@agentloop/core"
import { Effect, FileSystem, Layer, Schema, Stream } from "effect"
import { checkInvariants } from "./Invariants.ts"
import type { InvariantViolation } from "./Invariants.ts"

/**
 * A replay failed: the recording could not be read (`unreadable`), a replayed run asked something
 * the recording does not answer (`diverged`: a tool's result or the run's course differs), or a
 * replayed run broke an invariant (`invariant`). `run` and `step` (1-based; the step within the
 * run) say where, when known.
 *
 * @since 0.1.0
 * @category errors
 */
export class ReplayError extends Schema.TaggedError<ReplayError>()("ReplayError", {
  reason: Schema.Literals(["unreadable", "diverged", "invariant"]),
  run: Schema.optionalKey(Schema.Number),
  step: Schema.optionalKey(Schema.Number),
  message: Schema.String
}) {}

/**
 * One recorded run.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordedRun {
  /** 1-based, in file order. */
  readonly index: number
  /** The messages the run started from, as recorded: the transcript before it and its prompt. */
  readonly input: ReadonlyArray<Message>
  /** What the run added to the transcript, as recorded. */
  readonly messages: ReadonlyArray<Message>
  /** How it ended (`undefined`: the file has no end for it, e.g. a killed process). */
  readonly reason: RunReason | undefined
  readonly steps: number | undefined
  readonly error: string | undefined
}

/**
 * A recorded session, ready to replay.
 *
 * @since 0.1.0
 * @category models
 */
export interface Recording {
  /** The file it was read from (names it in errors). */
  readonly path: string
  /** The session's system prompt (its header's). */
  readonly systemPrompt: string | undefined
  readonly runs: ReadonlyArray<RecordedRun>
}

/**
 * A recording from the text of a session file (`path` names it in errors). A file with no run is
 * `unreadable`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const recordingOf = (text: string, path = "<session>"): Effect.Effect<Recording, ReplayError> =>
  Effect.gen(function*() {
    const loaded = yield* parseTranscript(text, path).pipe(
      Effect.mapError((e) => new ReplayError({ reason: "unreadable", message: e.message }))
    )
    const runs = sessionRunsOf(loaded)
    if (runs.length === 0) {
      return yield* new ReplayError({ reason: "unreadable", message: `${path} has no run to replay` })
    }
    let systemPrompt: string | undefined
    for (const record of loaded.records) {
      if (record.type === "session" && typeof record["systemPrompt"] === "string") {
        systemPrompt = record["systemPrompt"]
        break
      }
    }
    return {
      path,
      systemPrompt,
      runs: runs.map((run, i) => ({
        index: i + 1,
        input: loaded.messages.slice(0, run.from + 1),
        messages: loaded.messages.slice(run.from + 1, run.to),
        reason: run.end?.reason,
        steps: run.end?.steps,
        error: run.end?.error
      }))
    }
  })

/**
 * A recording from a session file.
 *
 * @since 0.1.0
 * @category constructors
 */
export const loadRecording = (path: string): Effect.Effect<Recording, ReplayError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(path).pipe(
      Effect.mapError((e) => new ReplayError({ reason: "unreadable", message: `cannot read ${path}: ${e.message}` }))
    )
    return yield* recordingOf(text, path)
  })

/** One answer of the recording: the model's message for a step, or how that step ended without one. */
type Answer =
  | {
    readonly _tag: "Message"
    readonly run: number
    readonly step: number
    /** The messages the request adds after the model's previous answer. */
    readonly before: ReadonlyArray<Message>
    readonly message: AssistantMessage
  }
  | {
    readonly _tag: "Failed"
    readonly run: number
    readonly step: number
    readonly before: ReadonlyArray<Message>
    readonly error: string
  }
  | {
    /** The recording ends here: the run was aborted, or has no end (a killed process). */
    readonly _tag: "Stop"
    readonly run: number
    readonly step: number
    readonly before: ReadonlyArray<Message>
  }

/** The answers of every run, in order. */
const answersOf = (recording: Recording): Array<Answer> => {
  const answers: Array<Answer> = []
  for (const run of recording.runs) {
    const all = [...run.input, ...run.messages]
    let previous = lastAssistant(run.input)
    let step = 0
    for (let i = run.input.length; i < all.length; i++) {
      const message = all[i]!
      if (message.role !== "assistant") continue
      step++
      answers.push({ _tag: "Message", run: run.index, step, before: all.slice(previous + 1, i), message })
      previous = i
    }
    if (run.reason === undefined || run.reason === "aborted") {
      answers.push({ _tag: "Stop", run: run.index, step: step + 1, before: all.slice(previous + 1) })
    } else if (run.steps !== undefined && run.steps > step) {
      // a step the model answered with no message (its stream failed): the run ended there
      answers.push({
        _tag: "Failed",
        run: run.index,
        step: step + 1,
        before: all.slice(previous + 1),
        error: run.error ?? "the model failed (recorded)"
      })
    }
  }
  return answers
}

const lastAssistant = (messages: ReadonlyArray<Message>): number => {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.role === "assistant") return i
  return -1
}

const contentText = (m: Message): string =>
  typeof m.content === "string" ?
    m.content :
    m.content.map((c) =>
      c.type === "text" ?
        c.text :
        c.type === "image" ?
        `[image ${c.mimeType}, ${c.data.length} characters]` :
        c.type === "thinking" ?
        "" :
        `[call ${c.name} ${JSON.stringify(c.arguments)}]`
    ).join("")

/** The texts around where `a` and `b` first differ, at most 80 characters of each. */
const excerpts = (a: string, b: string): string => {
  let i = 0
  while (i < a.length && i < b.length && a[i] === b[i]) i++
  const start = Math.max(0, i - 20)
  const cut = (s: string) => `${start > 0 ? "…" : ""}${s.slice(start, start + 80)}${s.length > start + 80 ? "…" : ""}`
  return `recorded ${JSON.stringify(cut(a))}, replayed ${JSON.stringify(cut(b))}`
}

const whatOf = (m: Message): string =>
  m.role === "toolResult" ? `the result of call "${m.toolCallId}" (${m.toolName})` : `the ${m.role} message`

/** How `replayed` differs from `recorded` as the model sees them, or `undefined`. */
const differenceOf = (recorded: Message, replayed: Message): string | undefined => {
  if (recorded.role !== replayed.role) return `a ${replayed.role} message where the recording has ${whatOf(recorded)}`
  if (recorded.role === "toolResult" && replayed.role === "toolResult") {
    if (recorded.toolCallId !== replayed.toolCallId || recorded.toolName !== replayed.toolName) {
      return `the result of call "${replayed.toolCallId}" (${replayed.toolName}) where the recording has ${
        whatOf(recorded)
      }`
    }
    if (recorded.isError !== replayed.isError) {
      return `${whatOf(recorded)} is ${replayed.isError ? "an error" : "not an error"}, in the recording it ${
        recorded.isError ? "is" : "is not"
      }: ${excerpts(contentText(recorded), contentText(replayed))}`
    }
  }
  const a = contentText(recorded)
  const b = contentText(replayed)
  if (a !== b || JSON.stringify(recorded.content) !== JSON.stringify(replayed.content)) {
    return `${whatOf(recorded)} differs from the recorded one: ${excerpts(a, b)}`
  }
  return undefined
}

/** How the request's new messages differ from the recorded ones, or `undefined`. */
const divergenceOf = (answer: Answer, request: ModelRequest): string | undefined => {
  const sent = request.messages.slice(lastAssistant(request.messages) + 1)
  for (let i = 0; i < Math.min(sent.length, answer.before.length); i++) {
    const difference = differenceOf(answer.before[i]!, sent[i]!)
    if (difference !== undefined) return difference
  }
  if (sent.length !== answer.before.length) {
    return `the request has ${sent.length} message(s) after the model's last answer, ` +
      `the recording ${answer.before.length}`
  }
  return undefined
}

const eventsOf = (message: AssistantMessage): ReadonlyArray<ModelEvent> => [
  ...message.content.flatMap((part): ReadonlyArray<ModelEvent> =>
    part.type === "text" ? [{ type: "text_delta", delta: part.text }] : []
  ),
  { type: "done", message }
]

/**
 * A replay model and what it found.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReplayModel {
  readonly service: Model["Service"]
  readonly layer: Layer.Layer<Model>
  /** The first request that did not match the recording, if any. */
  readonly divergence: Effect.Effect<ReplayError | undefined>
  /** How many recorded answers were given so far (of `total`). */
  readonly answered: Effect.Effect<number>
  /** How many answers the recording holds, in every run. */
  readonly total: number
  /** The requests it got, in order. */
  readonly requests: Effect.Effect<ReadonlyArray<ModelRequest>>
  /**
   * What to do when a request reaches the end of a run that was aborted or has no end: `f` is
   * called (abort the run) and the request waits, as the recorded one did. Without it, the request
   * fails saying the recording ends there.
   */
  readonly onRecordingEnd: (f: (() => void) | undefined) => void
}

/**
 * A model that answers each request with the recording's answer for that step (see the module's
 * description), run after run.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeReplayModel = (recording: Recording): Effect.Effect<ReplayModel> =>
  Effect.sync(() => {
    const answers = answersOf(recording)
    const requests: Array<ModelRequest> = []
    let next = 0
    let divergence: ReplayError | undefined
    let stop: (() => void) | undefined
    const diverged = (error: ReplayError) => {
      divergence ??= error
      return Stream.fail(new ModelError({ message: `replay: ${error.message}`, reason: "invalid_request" }))
    }
    const service = Model.of({
      stream: (request) =>
        Stream.suspend(() => {
          requests.push(request)
          const answer = answers[next]
          if (answer === undefined) {
            const last = answers[answers.length - 1]
            return diverged(
              new ReplayError({
                reason: "diverged",
                ...(last === undefined ? {} : { run: last.run, step: last.step + 1 }),
                message: `${recording.path}: the replay asked the model ${
                  answers.length + 1
                } times; the recording answers ${answers.length}${
                  last === undefined ? "" : ` (its last answer is run ${last.run}, step ${last.step})`
                }`
              })
            )
          }
          const where = `run ${answer.run}, step ${answer.step}`
          if (answer._tag === "Stop") {
            // (what an aborted batch left is not compared: the replay's calls were not aborted)
            next++
            if (stop !== undefined) {
              stop()
              return Stream.never
            }
            return Stream.fail(
              new ModelError({ message: `replay: the recording of run ${answer.run} ends before step ${answer.step}` })
            )
          }
          const difference = divergenceOf(answer, request)
          if (difference !== undefined) {
            return diverged(
              new ReplayError({
                reason: "diverged",
                run: answer.run,
                step: answer.step,
                message: `${where}: ${difference}`
              })
            )
          }
          next++
          return answer._tag === "Message" ?
            Stream.fromIterable(eventsOf(answer.message)) :
            Stream.fail(new ModelError({ message: answer.error }))
        })
    })
    return {
      service,
      layer: Layer.succeed(Model, service),
      divergence: Effect.sync(() => divergence),
      answered: Effect.sync(() => next),
      total: answers.length,
      requests: Effect.sync(() => requests.slice()),
      onRecordingEnd: (f) => {
        stop = f
      }
    }
  })

/**
 * The `Model` layer of a session file's recorded answers (see `makeReplayModel`).
 *
 * @since 0.1.0
 * @category layers
 */
export const replayModelLayer = (path: string): Layer.Layer<Model, ReplayError, FileSystem.FileSystem> =>
  Layer.effect(Model, Effect.map(Effect.flatMap(loadRecording(path), makeReplayModel), (model) => model.service))

/**
 * One replayed run.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReplayedRun {
  readonly recorded: RecordedRun
  readonly result: AgentRunResult
  readonly events: ReadonlyArray<LoopEvent>
  readonly violations: ReadonlyArray<InvariantViolation>
}

/**
 * Options of `replaySession`: the run options a recording does not hold (your `policy`, say), and
 * where the events go. The system prompt is the recording's; `signal` and `transformContext` are
 * the replay's own (it aborts a run where its recording ends, and sends whole transcripts).
 *
 * @since 0.1.0
 * @category models
 */
export interface ReplayOptions
  extends Omit<Partial<AgentLoopOptions>, "messages" | "systemPrompt" | "signal" | "transformContext">
{
  /** Each replayed event, with its run's index (to show the replay as it goes). */
  readonly onEvent?: ((run: number, event: LoopEvent) => Effect.Effect<void>) | undefined
}

/**
 * Replays every run of `recording` with the `Executor`'s tools (see the module's description). It
 * succeeds with each run replayed when all match the recording and keep the invariants, and fails
 * with a `ReplayError` naming the run, the step and the difference otherwise.
 *
 * A run that was aborted, or has no end in the file (its process was killed), is replayed up to
 * where its recording ends, and then aborted; its end is not compared.
 *
 * @since 0.1.0
 * @category runs
 */
export const replaySession = (
  recording: Recording,
  options: ReplayOptions = {}
): Effect.Effect<ReadonlyArray<ReplayedRun>, ReplayError, Executor> =>
  Effect.gen(function*() {
    const { onEvent, ...runOptions } = options
    const model = yield* makeReplayModel(recording)
    const replayed: Array<ReplayedRun> = []
    let transcript: ReadonlyArray<Message> = []
    for (const run of recording.runs) {
      // the transcript so far (as replayed), then the run's prompt
      const input = [...transcript, ...run.input.slice(transcript.length)]
      const events: Array<LoopEvent> = []
      const sink = Layer.succeed(
        EventSink,
        EventSink.of({
          emit: (event) =>
            Effect.andThen(
              Effect.sync(() => events.push(event)),
              onEvent === undefined ? Effect.void : onEvent(run.index, event)
            )
        })
      )
      const controller = new AbortController()
      model.onRecordingEnd(() => controller.abort())
      const before = (yield* model.requests).length
      const result = yield* runAgentLoop({
        ...runOptions,
        ...(recording.systemPrompt === undefined ? {} : { systemPrompt: recording.systemPrompt }),
        messages: input,
        signal: controller.signal
      }).pipe(Effect.provide(Layer.merge(model.layer, sink)))
      model.onRecordingEnd(undefined)
      const divergence = yield* model.divergence
      if (divergence !== undefined) return yield* divergence
      const requests = (yield* model.requests).slice(before)
      const violations = checkInvariants({ input, result, events, requests })
      if (violations.length > 0) {
        return yield* new ReplayError({
          reason: "invariant",
          run: run.index,
          message: `run ${run.index}: ${violations.map((v) => `invariant ${v.invariant}: ${v.message}`).join("; ")}`
        })
      }
      const ended = run.reason !== undefined && run.reason !== "aborted"
      if (ended && (result.reason !== run.reason || (run.steps !== undefined && result.steps !== run.steps))) {
        return yield* new ReplayError({
          reason: "diverged",
          run: run.index,
          step: result.steps,
          message: `run ${run.index}: the replay ended ${result.reason} after ${result.steps} step(s)${
            result.error === undefined ? "" : ` (${result.error})`
          }, the recording ${run.reason} after ${run.steps ?? "?"}`
        })
      }
      if (!ended && result.reason !== "aborted") {
        return yield* new ReplayError({
          reason: "diverged",
          run: run.index,
          step: result.steps,
          message: `run ${run.index}: the replay ended ${result.reason} after ${result.steps} step(s)${
            result.error === undefined ? "" : ` (${result.error})`
          } before the recording's end`
        })
      }
      if (ended) {
        // what the run added after the model's last answer (the last batch's results) is checked too
        const recorded = run.messages
        const added = result.messages.slice(input.length)
        for (let i = 0; i < Math.max(recorded.length, added.length); i++) {
          const difference = recorded[i] === undefined || added[i] === undefined ?
            `the replay added ${added.length} message(s), the recording ${recorded.length}` :
            differenceOf(recorded[i]!, added[i]!)
          if (difference !== undefined) {
            return yield* new ReplayError({
              reason: "diverged",
              run: run.index,
              step: result.steps,
              message: `run ${run.index}, after step ${result.steps}: ${difference}`
            })
          }
        }
      }
      replayed.push({ recorded: run, result, events, violations })
      transcript = result.messages
    }
    return replayed
  })
