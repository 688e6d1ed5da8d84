/**
 * The session of `run` and `chat`, with one owner: its file, its transcript, its runs and its
 * usage, and what a run leaves in the file (its `run_start`, its events' records and messages, its
 * `run_end`), the same whatever engine the run ran on.
 */
import { addUsage } from "@agentloop/core"
import type { AgentRunResult, Message, PersistenceError, SessionRecord, Usage, UserMessage } from "@agentloop/core"
import { Clock, Effect, Scope } from "effect"
import { CliError } from "../CliError.ts"
import type { RunEvent } from "../RunEngine.ts"
import { appendOrReport, openSession, summarize } from "../Sessions.ts"
import type { SessionLog } from "../Sessions.ts"

/** What a session starts from. */
export interface AgentSessionOptions {
  readonly root: string
  /** The scope its files are open in. */
  readonly scope: Scope.Scope
  readonly log: SessionLog
  /** The system prompt of a new session (a resumed one keeps its own). */
  readonly configuredPrompt: () => string
  /** A new session file (`/clear`). */
  readonly create: Effect.Effect<SessionLog, PersistenceError, Scope.Scope>
  /** Shows a write that failed (the run goes on). */
  readonly report: (message: string) => void
}

/** The session of `run` and `chat` (see the module's description). */
export interface AgentSession {
  readonly log: () => SessionLog
  /** The system prompt of its runs. */
  readonly systemPrompt: () => string
  /** The transcript the next run continues. */
  readonly history: () => ReadonlyArray<Message>
  readonly usage: () => { readonly last: Usage | undefined; readonly session: Usage | undefined }
  readonly append: (entry: Message | SessionRecord) => Effect.Effect<void>
  /** Usage spent outside runs (a compaction's summary). */
  readonly addUsage: (usage: Usage | undefined) => void
  /**
   * Starts a run of `prompt`: its `run_start` and the user message are written; returns the run's input
   * and its id (`runIdOf` its number in the session).
   */
  readonly startRun: (
    prompt: string,
    /** The user message's content: the prompt with its attachments (`Attachments.ts`). */
    content: UserMessage["content"],
    runIdOf: (sessionId: string, n: number) => string | undefined
  ) => Effect.Effect<{ readonly input: ReadonlyArray<Message>; readonly runId: string | undefined }>
  /** A run found unfinished in the file is taken up again, with this input. */
  readonly resumeRun: (input: ReadonlyArray<Message>) => void
  /**
   * What a run's event leaves in the file: the records of turns and calls, and the messages unless
   * `messages` is false (a durable run resumed from an earlier process: its file is rebuilt from
   * the journal when it ends).
   */
  readonly record: (messages: boolean) => (event: RunEvent) => Effect.Effect<void>
  /** Ends a run: its `run_end`; its messages become the history. */
  readonly endRun: (result: AgentRunResult, runId: string | undefined) => Effect.Effect<void>
  /** Reads the file again (after it was rewritten). */
  readonly reopen: Effect.Effect<void, CliError>
  /** The number of the session's latest run (1 for its first; the one going on, during a run). */
  readonly runNumber: () => number
  /** Reads the file again and continues from its history (after an `undo` record was appended). */
  readonly reload: Effect.Effect<void, CliError>
  /** A new session (`/clear`): a new file, no history, the configured system prompt. */
  readonly clear: Effect.Effect<void>
}

/** Makes the session (see the module's description). */
export const makeAgentSession = (options: AgentSessionOptions): AgentSession => {
  const { log } = options
  const state = {
    log,
    runs: log.records.filter((r) => r.type === "run_start").length,
    // a resumed session keeps the system prompt it started with
    systemPrompt: log.header.systemPrompt !== undefined && log.header.systemPrompt.length > 0
      ? log.header.systemPrompt
      : options.configuredPrompt(),
    history: log.messages,
    sessionUsage: summarize(log.id, log.records).usage,
    lastUsage: undefined as Usage | undefined
  }
  const append = (entry: Message | SessionRecord) => appendOrReport(state.log, entry, options.report)
  const record = (messages: boolean) => (event: RunEvent): Effect.Effect<void> =>
    Effect.flatMap(Clock.currentTimeMillis, (at) => {
      switch (event.type) {
        case "turn_start":
          return append({ type: "turn_start", at, step: event.step })
        case "tool_start":
          return append({ type: "tool_start", at, toolCallId: event.call.id, name: event.call.name })
        case "tool_end": {
          const end = append({
            type: "tool_end",
            at,
            toolCallId: event.result.toolCallId,
            isError: event.result.isError
          })
          return messages ? Effect.andThen(end, append(event.result)) : end
        }
        case "assistant_message":
        case "user_message":
          return messages ? append(event.message) : Effect.void
        default:
          return Effect.void
      }
    })
  const reopen = Effect.gen(function*() {
    state.log = yield* openSession(options.root, state.log.id).pipe(
      Scope.provide(options.scope),
      Effect.mapError((e) => new CliError(e.message))
    )
  })
  return {
    log: () => state.log,
    systemPrompt: () => state.systemPrompt,
    history: () => state.history,
    usage: () => ({ last: state.lastUsage, session: state.sessionUsage }),
    append,
    addUsage: (usage) => {
      state.sessionUsage = addUsage(state.sessionUsage, usage)
    },
    startRun: (prompt, content, runIdOf) =>
      Effect.gen(function*() {
        const at = yield* Clock.currentTimeMillis
        state.runs++
        const runId = runIdOf(state.log.id, state.runs)
        yield* append({ type: "run_start", at, prompt, ...(runId === undefined ? {} : { runId }) })
        const userMessage: Message = { role: "user", content, timestamp: at }
        yield* append(userMessage)
        state.history = [...state.history, userMessage]
        return { input: state.history, runId }
      }),
    resumeRun: (input) => {
      state.history = input
    },
    record,
    endRun: (result, runId) =>
      Effect.gen(function*() {
        state.history = result.messages
        state.lastUsage = result.usage
        state.sessionUsage = addUsage(state.sessionUsage, result.usage)
        yield* append({
          type: "run_end",
          at: yield* Clock.currentTimeMillis,
          ...(runId === undefined ? {} : { runId }),
          reason: result.reason,
          steps: result.steps,
          ...(result.error === undefined ? {} : { error: result.error }),
          ...(result.usage === undefined ? {} : { usage: result.usage }),
          ...(result.output === undefined ? {} : { output: result.output })
        })
      }),
    reopen,
    runNumber: () => state.runs,
    reload: Effect.tap(reopen, () =>
      Effect.sync(() => {
        state.history = state.log.messages
      })),
    clear: Effect.gen(function*() {
      state.log = yield* options.create.pipe(
        Scope.provide(options.scope),
        Effect.catch((e) => Effect.as(Effect.sync(() => options.report(e.message)), state.log))
      )
      state.history = []
      state.runs = 0
      state.systemPrompt = options.configuredPrompt()
      state.sessionUsage = undefined
      state.lastUsage = undefined
    })
  }
}
