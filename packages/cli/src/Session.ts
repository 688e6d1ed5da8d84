/**
 * One coding session: the loop with the coding tools in a workspace, rendered live, continued
 * when the model is cut off by its token limit, then summed up and checked against the invariants.
 * The transcript is appended to `.agentloop/transcript.jsonl` message by message as the run goes
 * (core's JSONL format), so a session killed at any point leaves a transcript that resumes paired.
 *
 * @since 0.1.0
 */
import { makeTranscriptWriter, Model, PersistenceError, transcriptSink } from "@agentloop/core"
import type { AgentRunResult, Executor, LoopEvent, Message, ModelRequest } from "@agentloop/core"
import { checkInvariants } from "@agentloop/testkit"
import type { InvariantViolation } from "@agentloop/testkit"
import { Context, Effect, Layer } from "effect"
import { CliError } from "./CliError.ts"
import type { Renderer } from "./Renderer.ts"
import { inMemoryEngine, RunEngine } from "./RunEngine.ts"
import * as WorkspaceIO from "./WorkspaceIO.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface SessionOptions {
  readonly workspace: string
  readonly prompt: string
  readonly systemPrompt: string
  readonly maxSteps: number
  /** How many times to ask the model to continue after a response cut by its token limit. */
  readonly continuations: number
  readonly renderer: Renderer
  /** The engine its runs run on, on the session's model and tools (default: in memory, every call allowed). */
  readonly engine?: Layer.Layer<RunEngine, never, Model | Executor> | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface SessionReport {
  readonly runs: ReadonlyArray<AgentRunResult>
  readonly final: AgentRunResult
  readonly steps: number
  readonly toolsRun: number
  readonly toolErrors: number
  readonly skipped: number
  readonly violations: ReadonlyArray<InvariantViolation>
  readonly transcriptFile: string
}

/**
 * The message sent when a response was cut off by the token limit.
 *
 * @since 0.1.0
 * @category constants
 */
export const CONTINUE_PROMPT = "Your last response was cut off by the output token limit, and its tool calls were " +
  "not run. Continue from where you stopped."

/**
 * The default system prompt of a coding session.
 *
 * @since 0.1.0
 * @category constants
 */
export const CODING_SYSTEM_PROMPT = "You are a careful coding agent working in a project folder. Use the tools to " +
  "read files before changing them, make small exact edits, and run the tests to check your work. Paths are " +
  "relative to the project folder. When you are done, say briefly what you changed."

/**
 * Runs a session with the `Model` and `Executor` in context, each run on `options.engine`.
 *
 * @since 0.1.0
 * @category sessions
 */
export const runSession = (options: SessionOptions) =>
  Effect.scoped(Effect.gen(function*() {
    const model = yield* Model
    // the transcript file: emptied, then appended line by line, only inside the workspace
    const transcriptFile = ".agentloop/transcript.jsonl"
    const toPersistence = (e: WorkspaceIO.WorkspaceWriteError) =>
      new PersistenceError({ path: e.path, message: e.message })
    yield* WorkspaceIO.writeFile(options.workspace, transcriptFile, "").pipe(Effect.mapError(toPersistence))
    const file = yield* WorkspaceIO.openAppend(options.workspace, transcriptFile).pipe(Effect.mapError(toPersistence))
    const writer = yield* makeTranscriptWriter((line) => Effect.mapError(file.append(line), toPersistence))
    const persist = transcriptSink(writer, (e) => options.renderer.line(`agentloop: ${e.message}`))
    const requests: Array<ModelRequest> = []
    const recordingModel = Layer.succeed(
      Model,
      Model.of({
        stream: (request) => {
          requests.push(request)
          return model.stream(request)
        },
        describe: () => model.describe?.()
      })
    )
    const engine = Context.get(
      yield* Layer.build((options.engine ?? inMemoryEngine()).pipe(Layer.provide(recordingModel))),
      RunEngine
    )
    const { renderer } = options
    const runs: Array<AgentRunResult> = []
    const violations: Array<InvariantViolation> = []
    let messages: ReadonlyArray<Message> = [{ role: "user", content: options.prompt }]
    yield* writer.append(messages[0]!)
    let toolsRun = 0
    while (true) {
      const events: Array<LoopEvent> = []
      const firstRequest = requests.length
      const result = yield* engine.run(
        { systemPrompt: options.systemPrompt, messages, maxSteps: options.maxSteps },
        (event) => {
          if (event.type === "turn_start") return Effect.void
          events.push(event)
          if (event.type === "tool_start") toolsRun++
          return Effect.andThen(persist.emit(event), renderer.render(event))
        }
      )
      if (result === undefined) return yield* Effect.fail(new CliError("the session stopped while its run went on"))
      runs.push(result)
      violations.push(...checkInvariants({ input: messages, result, events, requests: requests.slice(firstRequest) }))
      if (result.reason !== "length" || runs.length > options.continuations) break
      yield* renderer.line("↻ the response was cut off; asking the model to continue")
      const next: Message = { role: "user", content: CONTINUE_PROMPT }
      yield* writer.append(next)
      messages = [...result.messages, next]
    }
    const final = runs[runs.length - 1]!
    const results = final.messages.flatMap((m) => (m.role === "toolResult" ? [m] : []))
    const skipped = results.filter((r) => (r.details as { skipped?: boolean } | undefined)?.skipped === true).length
    return {
      runs,
      final,
      steps: runs.reduce((n, r) => n + r.steps, 0),
      toolsRun,
      toolErrors: results.filter((r) => r.isError).length - skipped,
      skipped,
      violations,
      transcriptFile: `${options.workspace}/${transcriptFile}`
    } satisfies SessionReport
  }))

/**
 * The session's `Model` and `Executor`, for `Effect.provide`.
 *
 * @since 0.1.0
 * @category sessions
 */
export type SessionServices = Model | Executor
