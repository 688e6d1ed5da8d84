/**
 * Transcripts on disk as JSONL: one JSON object per line, written and flushed line by line as
 * messages join the transcript, so a process killed at any moment leaves a file that loads and
 * resumes with every tool call paired.
 *
 * The format:
 * - a line whose object has a `role` field is a `Message`, exactly as the `Message` schema
 *   describes it (nothing wrapped around it);
 * - a line whose object has a `type` field is an application record (a session header, timings,
 *   approvals...): `loadTranscript` returns it in `records` and leaves it out of the messages;
 * - a last line without its newline that is not valid JSON was torn by a crash: it is ignored and
 *   reported (`LoadedTranscript.tornLine`); anything else that is not valid is an error naming the
 *   line.
 *
 * Loading checks the messages as a run's input is checked (`prepareTranscript`): each must decode,
 * results must follow the assistant message making their call, and calls left without a result (a
 * process killed in the middle of a batch) are paired with skipped results (reason
 * `interrupted`). Tool results may be in completion order in the file (parallel calls end in any
 * order): loading puts each block into call order.
 *
 * @since 0.1.0
 */
import { Effect, FileSystem, Layer, Random, Schema, Semaphore } from "effect"
import type { Scope } from "effect"
import { EventSink } from "./EventSink.ts"
import type { LoopEvent } from "./LoopEvent.ts"
import type { Message } from "./Message.ts"
import { prepareTranscript } from "./Transcript.ts"

/**
 * Reading or writing a transcript file failed, or its content is not a valid transcript. The
 * message names the file (and the line, for bad content) and never carries a stack trace.
 *
 * @since 0.1.0
 * @category errors
 */
export class PersistenceError extends Schema.TaggedError<PersistenceError>()("PersistenceError", {
  path: Schema.String,
  message: Schema.String
}) {}

/**
 * An application record stored in a transcript file: any JSON object with a string `type` (and
 * no `role`). `loadTranscript` skips them when it builds the messages and returns them as they are.
 *
 * @since 0.1.0
 * @category models
 */
export interface TranscriptRecord {
  readonly type: string
  readonly [key: string]: unknown
}

/**
 * A line of a transcript file: a message or an application record.
 *
 * @since 0.1.0
 * @category models
 */
export type TranscriptEntry = Message | TranscriptRecord

/**
 * What `loadTranscript` found in a file.
 *
 * @since 0.1.0
 * @category models
 */
export interface LoadedTranscript {
  /** The transcript, checked and paired (`prepareTranscript`): ready to resume. */
  readonly messages: Array<Message>
  /** The application records (lines with a `type` field), in file order. */
  readonly records: Array<TranscriptRecord>
  /**
   * Where each record sits among the messages: `recordsAt[i]` is how many of `messages` come before
   * `records[i]` in the file. A record among a batch's results (whose order loading may change)
   * counts as after the whole batch.
   */
  readonly recordsAt: Array<number>
  /** The 1-based number of a torn last line that was ignored, when there was one. */
  readonly tornLine: number | undefined
  /** How many calls had no result in the file and were paired with a skipped result. */
  readonly repaired: number
}

/**
 * One transcript line: the entry as JSON followed by a newline.
 *
 * @since 0.1.0
 * @category encoding
 */
export const encodeTranscriptLine = (entry: TranscriptEntry): string => `${JSON.stringify(entry)}\n`

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const countResults = (messages: ReadonlyArray<Message>) => {
  let n = 0
  for (const m of messages) if (m.role === "toolResult") n++
  return n
}

/**
 * The position in `messages` (the checked transcript) of a record that followed `before` of the
 * `raw` message lines: after the last of them (checking keeps each line's object, and may put a
 * batch's results in another order or add skipped ones), past the rest of its batch.
 */
const positionsOf = (
  raw: ReadonlyArray<unknown>,
  messages: ReadonlyArray<Message>,
  rawBefore: ReadonlyArray<number>
): Array<number> => {
  if (rawBefore.length === 0) return []
  const indexOf = new Map<unknown, number>()
  messages.forEach((m, i) => indexOf.set(m, i))
  return rawBefore.map((before) => {
    if (before === 0) return 0
    let at = (indexOf.get(raw[before - 1]) ?? before - 1) + 1
    while (at < messages.length && messages[at]!.role === "toolResult") at++
    return at
  })
}

/**
 * Parses the text of a transcript file (see the module's description of the format). `path` only
 * names the file in errors.
 *
 * @since 0.1.0
 * @category decoding
 */
export const parseTranscript = (
  text: string,
  path = "<transcript>"
): Effect.Effect<LoadedTranscript, PersistenceError> =>
  Effect.suspend(() => {
    const fail = (message: string) => Effect.fail(new PersistenceError({ path, message }))
    const lines = text.split("\n")
    // `split` leaves "" after a final newline; a last piece that is not "" had no newline
    const last = lines.pop()!
    const unterminated = last.length > 0
    const raw: Array<unknown> = []
    const records: Array<TranscriptRecord> = []
    // how many message lines come before each record
    const rawBefore: Array<number> = []
    let tornLine: number | undefined
    const count = lines.length + (unterminated ? 1 : 0)
    for (let i = 0; i < count; i++) {
      const line = i < lines.length ? lines[i]! : last
      if (line.trim().length === 0) continue
      let value: unknown
      try {
        value = JSON.parse(line)
      } catch {
        if (i === count - 1 && unterminated) {
          tornLine = i + 1
          break
        }
        return fail(`line ${i + 1} is not valid JSON`)
      }
      if (!isObject(value)) return fail(`line ${i + 1} is not a JSON object`)
      if ("role" in value) raw.push(value)
      else if (typeof value.type === "string") {
        records.push(value as TranscriptRecord)
        rawBefore.push(raw.length)
      } else return fail(`line ${i + 1} is neither a message (no "role") nor a record (no "type")`)
    }
    const checked = prepareTranscript(raw)
    if (!checked.ok) return fail(`not a valid transcript: ${checked.error}`)
    const messages = checked.value
    return Effect.succeed({
      messages,
      records,
      recordsAt: positionsOf(raw, messages, rawBefore),
      tornLine,
      repaired: countResults(messages) - countResults(raw as ReadonlyArray<Message>)
    })
  })

const failWith = (path: string, what: string) => (error: { readonly message: string }) =>
  new PersistenceError({ path, message: `cannot ${what} ${path}: ${error.message}` })

/**
 * Reads and checks a transcript file (see the module's description of the format).
 *
 * @since 0.1.0
 * @category decoding
 */
export const loadTranscript = (
  path: string
): Effect.Effect<LoadedTranscript, PersistenceError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(path).pipe(Effect.mapError(failWith(path, "read")))
    return yield* parseTranscript(text, path)
  })

/**
 * Writes a whole transcript, replacing the file at `path` in one step (a temporary file with an
 * unpredictable name, created exclusively next to it, then renamed). The messages are checked
 * first (`prepareTranscript`); what is saved is the checked transcript, so calls without a result
 * are saved paired with skipped results.
 *
 * @since 0.1.0
 * @category encoding
 */
export const saveTranscript = (
  path: string,
  messages: ReadonlyArray<Message>
): Effect.Effect<void, PersistenceError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const checked = prepareTranscript(messages)
    if (!checked.ok) {
      return yield* Effect.fail(new PersistenceError({ path, message: `not a valid transcript: ${checked.error}` }))
    }
    const fs = yield* FileSystem.FileSystem
    const suffix = (yield* Random.nextIntBetween(0, 2 ** 48)).toString(36)
    const temporary = `${path}.${suffix}.tmp`
    const text = checked.value.map(encodeTranscriptLine).join("")
    yield* fs.writeFileString(temporary, text, { flag: "wx" }).pipe(
      Effect.andThen(fs.rename(temporary, path)),
      Effect.mapError(failWith(path, "write")),
      Effect.onError(() => Effect.ignore(fs.remove(temporary)))
    )
  })

/**
 * Appends entries to a transcript file, one line per entry, each written in one call as soon as it
 * is appended (nothing is buffered in the process). Appends from concurrent fibers are serialized
 * and never interleave.
 *
 * @since 0.1.0
 * @category models
 */
export interface TranscriptWriter {
  readonly append: (entry: TranscriptEntry) => Effect.Effect<void, PersistenceError>
  /** Whether opening the file dropped a torn last line (left by a crash) before appending. */
  readonly droppedTornLine: boolean
}

/**
 * A writer over any way of writing one line (for files opened by other means, e.g. through a
 * confined file layer): appends are serialized, each line is written by one `writeLine` call.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeTranscriptWriter = (
  writeLine: (line: string) => Effect.Effect<void, PersistenceError>,
  droppedTornLine = false
): Effect.Effect<TranscriptWriter> =>
  Effect.map(Semaphore.make(1), (lock) => ({
    append: (entry) => lock.withPermits(1)(Effect.suspend(() => writeLine(encodeTranscriptLine(entry)))),
    droppedTornLine
  }))

/**
 * Options of `openTranscriptWriter`.
 *
 * @since 0.1.0
 * @category models
 */
export interface TranscriptWriterOptions {
  /** Fail when the file already exists (a new transcript). Default: append to an existing file. */
  readonly exclusive?: boolean | undefined
  /** Also `fsync` after each line (survives a power cut, not only a killed process). Default: false. */
  readonly sync?: boolean | undefined
}

/**
 * Opens `path` for appending (creating it when missing) for as long as the scope lasts. A torn
 * last line left by a crash is cut off first, so new lines never join it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const openTranscriptWriter = (
  path: string,
  options: TranscriptWriterOptions = {}
): Effect.Effect<TranscriptWriter, PersistenceError, FileSystem.FileSystem | Scope.Scope> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    let dropped = false
    if (options.exclusive !== true && (yield* fs.exists(path).pipe(Effect.mapError(failWith(path, "open"))))) {
      const bytes = yield* fs.readFile(path).pipe(Effect.mapError(failWith(path, "read")))
      if (bytes.length > 0 && bytes[bytes.length - 1] !== 0x0a) {
        yield* fs.truncate(path, bytes.lastIndexOf(0x0a) + 1).pipe(Effect.mapError(failWith(path, "repair")))
        dropped = true
      }
    }
    const file = yield* fs.open(path, { flag: options.exclusive === true ? "ax" : "a" }).pipe(
      Effect.mapError(failWith(path, "open"))
    )
    const encoder = new TextEncoder()
    return yield* makeTranscriptWriter(
      (line) =>
        file.writeAll(encoder.encode(line)).pipe(
          Effect.andThen(options.sync === true ? file.sync : Effect.void),
          Effect.mapError(failWith(path, "append to"))
        ),
      dropped
    )
  })

/**
 * The message an event adds to the transcript, if any: the model's final message
 * (`assistant_message`), a tool result (`tool_end`, for every result that joins, skipped and
 * interrupted ones included) or a steering / follow-up message (`user_message`).
 *
 * @since 0.1.0
 * @category getters
 */
export const messageOfEvent = (event: LoopEvent): Message | undefined => {
  switch (event.type) {
    case "assistant_message":
      return event.message
    case "tool_end":
      return event.result
    case "user_message":
      return event.message
    default:
      return undefined
  }
}

/**
 * An `EventSink` that appends each message to the writer as it joins the transcript. The run's
 * input messages are not events: append them yourself before the run (on resume, only the new
 * ones). A failed write goes to `onError` (default: the sink dies, which the loop logs and goes on).
 *
 * @since 0.1.0
 * @category constructors
 */
export const transcriptSink = (
  writer: TranscriptWriter,
  onError: (error: PersistenceError) => Effect.Effect<void> = Effect.die
): EventSink["Service"] =>
  EventSink.of({
    emit: (event) => {
      const message = messageOfEvent(event)
      return message === undefined ? Effect.void : Effect.catch(writer.append(message), onError)
    }
  })

/**
 * A layer with an `EventSink` appending to the transcript file at `path` (see `transcriptSink`),
 * open for as long as the layer lives.
 *
 * @since 0.1.0
 * @category layers
 */
export const transcriptSinkLayer = (
  path: string,
  options: TranscriptWriterOptions = {}
): Layer.Layer<EventSink, PersistenceError, FileSystem.FileSystem> =>
  Layer.effect(EventSink, Effect.map(openTranscriptWriter(path, options), (writer) => transcriptSink(writer)))
