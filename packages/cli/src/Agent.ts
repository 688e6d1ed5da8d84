/**
 * `agentloop run` and `agentloop chat`: a coding agent in the current folder, with sessions,
 * approvals, stopping, compaction and usage (see the package README).
 *
 * @since 0.1.0
 */
import {
  addUsage,
  allow,
  ask as askDecision,
  callbackSinkLayer,
  Executor,
  Model,
  parseTranscript,
  startAgentLoop
} from "@agentloop/core"
import type {
  AgentRunResult,
  LoopEvent,
  Message,
  OutputSchema,
  SessionRecord,
  ToolCall,
  ToolPolicy,
  ToolResultMessage,
  Usage
} from "@agentloop/core"
import {
  abortRun,
  approve,
  awaitRun,
  DurableEventSink,
  durableRunnerLayer,
  embeddedEngineLayer,
  eventKey,
  startRun
} from "@agentloop/durable"
import type { DurableEvent, DurableStore } from "@agentloop/durable"
import { Clock, Context, Deferred, Effect, Exit, Fiber, Layer, Option, Scope, Semaphore, Stream } from "effect"
import type { WorkflowEngine } from "effect/workflow"
import { readFileSync } from "node:fs"
import * as nodePath from "node:path"
import { approvalTimeoutReason, makeApprovalPolicy, parseAnswer, previewCall } from "./Approvals.ts"
import type { ApprovalRecord } from "./Approvals.ts"
import { CliError } from "./CliError.ts"
import { knownContextWindow, makeCompactor, toolDefinitionsChars } from "./Compaction.ts"
import type { CompactionState } from "./Compaction.ts"
import { resolveSettings } from "./Config.ts"
import type { FlagSettings } from "./Config.ts"
import {
  abortDurableRun,
  approveRun,
  denialReason,
  listWorkspaceRuns,
  prepareDatabase,
  reconcileSession,
  runIdOf,
  runnerBusy,
  splitAtRun,
  unfinishedRun
} from "./Durable.ts"
import type { RecordedRun } from "./Durable.ts"
import { readOutputSchema } from "./internal/OutputSchemaFile.ts"
import { modelOf, toolsLayer, workspaceOf } from "./internal/Setup.ts"
import { makeRenderer } from "./Renderer.ts"
import { stripControl } from "./Sanitize.ts"
import { CODING_SYSTEM_PROMPT } from "./Session.ts"
import {
  appendOrReport,
  createSession,
  listSessions,
  openSession,
  readSession,
  SESSIONS_FOLDER,
  summarize
} from "./Sessions.ts"
import type { SessionLog } from "./Sessions.ts"
import { makeStyle, wantsColor } from "./Style.ts"
import type { Style } from "./Style.ts"
import { exitSoon, installController, makeLineInput } from "./Terminal.ts"
import type { Controller, LineInput } from "./Terminal.ts"

/**
 * The exit code of `agentloop run` for each way a run ends (`stop` is 0).
 *
 * @since 0.1.0
 * @category constants
 */
export const RUN_EXIT_CODES: Readonly<Record<AgentRunResult["reason"], number>> = {
  stop: 0,
  error: 1,
  length: 3,
  maxSteps: 4,
  aborted: 130
}

/**
 * The options `run` and `chat` share.
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentFlags extends FlagSettings {
  readonly workspace: Option.Option<string>
  readonly yes: boolean
  readonly continue: boolean
  readonly resume: Option.Option<string>
  /** MCP servers to start (`--mcp "command args"`), repeatable. */
  readonly mcp: ReadonlyArray<string>
  /** MCP servers to connect to over HTTP (`--mcp-url URL`), repeatable. */
  readonly mcpUrl: ReadonlyArray<string>
  /** Each run is a durable run on the embedded engine (`--durable`). */
  readonly durable: boolean
}

const formatTokens = (n: number) => (n >= 10_000 ? `${(n / 1000).toFixed(1)}k` : String(n))

/**
 * One line describing a usage: tokens in (cache reads), out, and money when known.
 *
 * @since 0.1.0
 * @category usage
 */
export const describeUsage = (usage: Usage | undefined): string => {
  if (usage === undefined) return "no usage reported"
  const cache = usage.cacheRead !== undefined && usage.cacheRead > 0 ? ` (${formatTokens(usage.cacheRead)} cached)` : ""
  const cost = usage.cost !== undefined ? ` · $${usage.cost.toFixed(4)}` : " · cost unknown for this model"
  return `${formatTokens(usage.input)} tokens in${cache}, ${formatTokens(usage.output)} out${cost}`
}

interface Agent {
  readonly root: string
  readonly style: Style
  readonly out: (text: string) => void
  readonly err: (text: string) => void
  readonly controller: Controller
  readonly input: LineInput
  /**
   * Runs a prompt; undefined when the program is leaving while a durable run goes on (the run is
   * kept in its database and resumes when the command runs again).
   */
  readonly runPrompt: (prompt: string) => Effect.Effect<AgentRunResult | undefined, CliError>
  /** Resumes the session's interrupted durable run, when it has one (undefined otherwise, or when leaving). */
  readonly resumePending: Effect.Effect<AgentRunResult | undefined, CliError>
  /** The session's interrupted durable run, when it has one. */
  readonly pendingRun: () => RecordedRun | undefined
  readonly compactNow: Effect.Effect<void>
  readonly clear: Effect.Effect<void>
  readonly setModel: (name: string) => Effect.Effect<void, CliError>
  readonly describe: () => string
  readonly cost: () => string
  readonly sessionFile: () => string
}

const lastCompaction = (log: SessionLog): CompactionState | undefined => {
  for (let i = log.records.length - 1; i >= 0; i--) {
    const r = log.records[i]!
    if (r.type === "compaction" && r.summary !== undefined && r.summarized !== undefined) {
      return { summary: r.summary, covered: r.summarized }
    }
  }
  return undefined
}

/** Sets up everything `run` and `chat` share. */
const makeAgent = (
  flags: AgentFlags,
  options: {
    /** The final answer's schema (`run --output-schema`): stdout is kept for the answer, the rest goes to stderr. */
    readonly output?: OutputSchema<unknown> | undefined
  } = {}
): Effect.Effect<Agent, CliError, Scope.Scope> =>
  Effect.gen(function*() {
    const root = yield* workspaceOf(flags.workspace)
    const scope = yield* Effect.scope
    // what the run shows goes to stdout, or to stderr when stdout is kept for a typed answer
    const display = options.output === undefined ? process.stdout : process.stderr
    const style = makeStyle(wantsColor(display.isTTY, process.env))
    const errStyle = makeStyle(wantsColor(process.stderr.isTTY, process.env))
    // the controller decides when the output is gone; nothing is written after that
    let controllerRef: Controller | undefined
    const safeWrite = (stream: NodeJS.WriteStream) => (text: string) => {
      if (controllerRef?.outputClosed() === true || stream.destroyed) return
      stream.write(text)
    }
    const out = safeWrite(display)
    const err = safeWrite(process.stderr)
    const controller = yield* installController((text) => out(`${style.yellow(text)}\n`))
    controllerRef = controller
    const settings = yield* resolveSettings(flags, root, process.env).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    if (flags.continue && Option.isSome(flags.resume)) {
      return yield* Effect.fail(new CliError("--continue and --resume cannot be used together"))
    }
    let modelName = settings.model
    if (settings.provider !== undefined && settings.provider !== "scripted" && modelName === undefined) {
      return yield* Effect.fail(
        new CliError(`a model name is needed with provider ${settings.provider} (--model NAME)`)
      )
    }
    let modelContext: Context.Context<Model> = yield* modelOf(settings, modelName ?? "")
    const tools = yield* toolsLayer(root, settings, flags).pipe(Effect.mapError((e) => new CliError(e.message)))
    const executor = yield* Layer.build(tools).pipe(
      Effect.mapError((e) =>
        new CliError(e._tag === "PlatformError" ? `cannot open the workspace ${root}: ${e.message}` : e.message)
      )
    )
    const renderer = yield* makeRenderer({ write: out, style, live: display.isTTY === true, columns: display.columns })
    const input = yield* makeLineInput(controller)
    const report = (message: string) => err(`${errStyle.red(`agentloop: ${stripControl(message.split("\n")[0]!)}`)}\n`)

    // the session: new, the latest (--continue) or a given one (--resume ID)
    const configuredPrompt = settings.systemPrompt ?? CODING_SYSTEM_PROMPT
    const newSession = createSession(root, {
      cwd: root,
      provider: settings.provider ?? "",
      model: modelName ?? "",
      systemPrompt: configuredPrompt
    })
    let resumeId: string | undefined = Option.getOrUndefined(flags.resume)
    if (flags.continue) {
      const sessions = yield* listSessions(root)
      const latest = sessions.filter((s) => !s.ended.startsWith("unreadable")).pop()
      if (latest === undefined) {
        return yield* Effect.fail(new CliError(`--continue: there is no session in ${root}/.agentloop/sessions yet`))
      }
      resumeId = latest.id
    }
    if (resumeId !== undefined && !/^[A-Za-z0-9._-]+$/.test(resumeId)) {
      return yield* Effect.fail(new CliError(`--resume: "${resumeId}" is not a session id (see agentloop sessions)`))
    }
    // a durable session that another process is running now is left alone (its file is being written)
    if (flags.durable && resumeId !== undefined && runnerBusy(root, resumeId)) {
      return yield* Effect.fail(
        new CliError(
          `session ${resumeId} is being run by another agentloop process right now (its durable runs' runner); ` +
            "answer its approvals with agentloop approve, or wait for it (agentloop runs)"
        )
      )
    }
    let log: SessionLog = yield* (resumeId === undefined ? newSession : openSession(root, resumeId)).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    if (log.repairedTornLine) report(`the session's last line was torn (a crash); it was cut off`)
    const interrupted = unfinishedRun(log.records)
    if (interrupted !== undefined && !flags.durable) {
      return yield* Effect.fail(
        new CliError(
          `the session's last run ${interrupted.runId} is a durable run that has not ended: add --durable to resume it`
        )
      )
    }
    let runCount = log.records.filter((r) => r.type === "run_start").length
    // a resumed session keeps the system prompt it started with
    let systemPrompt = log.header.systemPrompt !== undefined && log.header.systemPrompt.length > 0
      ? log.header.systemPrompt
      : configuredPrompt
    let history: ReadonlyArray<Message> = log.messages
    let sessionUsage: Usage | undefined = summarize(log.id, log.records).usage
    let lastUsage: Usage | undefined
    const append = (entry: Message | SessionRecord) => appendOrReport(log, entry, report)

    const contextWindow = settings.contextWindow ??
      (modelName === undefined ? undefined : knownContextWindow(modelName))
    // the model in use now (`/model` switches it)
    const currentModel = Model.of({
      stream: (request) => Stream.suspend(() => Context.get(modelContext, Model).stream(request))
    })
    // every request carries the tool definitions (and the final-answer tool with --output-schema)
    const toolChars = () =>
      toolDefinitionsChars([
        ...Context.get(executor, Executor).definitions,
        ...(options.output === undefined ? [] : [options.output.definition])
      ])
    const compactor = makeCompactor({
      contextWindow,
      systemPrompt,
      toolChars,
      model: currentModel,
      initial: lastCompaction(log),
      onCompact: (state, info) =>
        Effect.gen(function*() {
          sessionUsage = addUsage(sessionUsage, info.usage)
          yield* append({
            type: "compaction",
            at: yield* Clock.currentTimeMillis,
            summarized: state.covered,
            kept: info.kept,
            summary: state.summary,
            ...(info.usage === undefined ? {} : { usage: info.usage })
          })
          yield* renderer.line(
            style.dim(`⇢ compacted: ${state.covered} earlier message(s) summarised, ${info.kept} kept verbatim`)
          )
        }),
      onError: (message) => renderer.line(style.yellow(`⚠ ${message}`))
    })
    const always = new Set<string>()
    const ask = input.interactive ?
      (question: string) => renderer.hold(input.read(question, { history: false })) :
      undefined
    const policy = yield* makeApprovalPolicy({
      yes: flags.yes,
      ask,
      print: (text) => renderer.line(text),
      record: (r: ApprovalRecord) =>
        Effect.flatMap(Clock.currentTimeMillis, (at) => append({ type: "approval", at, ...r })),
      style,
      always,
      timeout: settings.approvalTimeout
    })

    const persist = (event: LoopEvent): Effect.Effect<void> =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => {
        switch (event.type) {
          case "tool_start":
            return append({ type: "tool_start", at, toolCallId: event.call.id, name: event.call.name })
          case "tool_end":
            return Effect.andThen(
              append({ type: "tool_end", at, toolCallId: event.result.toolCallId, isError: event.result.isError }),
              append(event.result)
            )
          case "assistant_message":
            return append(event.message)
          case "user_message":
            return append(event.message)
          default:
            return Effect.void
        }
      })

    /** What every run ends with: its `run_end` record and the usage line. */
    const endRun = (result: AgentRunResult, runId: string | undefined) =>
      Effect.gen(function*() {
        history = result.messages
        lastUsage = result.usage
        sessionUsage = addUsage(sessionUsage, result.usage)
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
        out(`${style.dim(`  usage: ${describeUsage(result.usage)} · session: ${describeUsage(sessionUsage)}`)}\n`)
        return result
      })

    /** The records of an event, without its messages (a run resumed from an earlier process). */
    const persistRecord = (event: LoopEvent): Effect.Effect<void> =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => {
        switch (event.type) {
          case "tool_start":
            return append({ type: "tool_start", at, toolCallId: event.call.id, name: event.call.name })
          case "tool_end":
            return append({ type: "tool_end", at, toolCallId: event.result.toolCallId, isError: event.result.isError })
          default:
            return Effect.void
        }
      })

    const runInMemory = (prompt: string): Effect.Effect<AgentRunResult> =>
      Effect.scoped(Effect.gen(function*() {
        const at = yield* Clock.currentTimeMillis
        runCount++
        yield* append({ type: "run_start", at, prompt })
        const userMessage: Message = { role: "user", content: prompt, timestamp: at }
        yield* append(userMessage)
        const input = [...history, userMessage]
        history = input
        let step = 0
        const model = Layer.succeed(
          Model,
          Model.of({
            stream: (request) =>
              Stream.unwrap(Effect.gen(function*() {
                step++
                yield* append({ type: "turn_start", at: yield* Clock.currentTimeMillis, step })
                return currentModel.stream(request)
              }))
          })
        )
        const sink = callbackSinkLayer((event) => Effect.andThen(persist(event), renderer.render(event)))
        const run = yield* startAgentLoop({
          systemPrompt,
          messages: input,
          maxSteps: settings.maxSteps,
          policy,
          transformContext: compactor.transform,
          ...(options.output === undefined ? {} : { output: options.output })
        }).pipe(Effect.provide(Layer.mergeAll(model, sink)), Effect.provideContext(executor))
        controller.setRun(run.abort)
        if (controller.exitRequested()) yield* Effect.forkChild(run.abort)
        const result = yield* run.result
        controller.setRun(undefined)
        return yield* endRun(result, undefined)
      }))

    // ---------------------------------------------------------------------------------------------
    // Durable runs (--durable): the runs of this session run on the embedded engine, in the
    // session's own database; this process is its runner while it lives. Events come from the
    // engine's activities, at least once: repeats are dropped by their key. The session file gets
    // the same records and messages as an in-memory run; a run resumed after its process died is
    // brought in line with its journal when it ends (see Durable.ts).
    // ---------------------------------------------------------------------------------------------

    /** The run this process follows: its events are rendered and written to the session. */
    let followed: {
      readonly runId: string
      readonly inputLength: number
      /** Whether its messages are written as they come (not for a run resumed from an earlier process). */
      readonly live: boolean
      readonly seen: Set<string>
    } | undefined

    // the model of the durable runner: a `turn_start` record per request of the followed run, then
    // compaction (as `transformContext` does in memory), then the model in use now
    const durableModel = Model.of({
      stream: (request) =>
        Stream.unwrap(Effect.gen(function*() {
          const run = followed
          if (run !== undefined) {
            const step = request.messages.slice(run.inputLength).filter((m) => m.role === "assistant").length + 1
            yield* append({ type: "turn_start", at: yield* Clock.currentTimeMillis, step })
          }
          const messages = yield* compactor.transform(request.messages)
          return currentModel.stream({ ...request, messages })
        }))
    })

    const record = (r: ApprovalRecord) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => append({ type: "approval", at, ...r }))

    // calls that change things wait for an answer: from this terminal (when there is one) or from
    // `agentloop approve` in another; the journal keeps the first
    const durablePolicy: ToolPolicy = (call, definition) => {
      if (definition === undefined || definition.readOnly === true) return allow
      const base = { toolCallId: call.id, name: call.name }
      if (flags.yes) return Effect.as(record({ ...base, decision: "approved", by: "policy" }), allow)
      if (always.has(call.name)) {
        return Effect.as(record({ ...base, decision: "approved", by: "policy", reason: "always" }), allow)
      }
      return askDecision
    }

    interface Waiting {
      readonly call: ToolCall
      readonly askedAt: number
      answeredHere: boolean
      question: Fiber.Fiber<void> | undefined
    }
    const waiting = new Map<string, Waiting>()
    const questionLock = yield* Semaphore.make(1)

    const answerHere = (runId: string, w: Waiting, answer: { approved: boolean; always?: boolean; reason?: string }) =>
      Effect.gen(function*() {
        w.answeredHere = true
        const r = yield* ensureRunner
        yield* Effect.provideContext(approve(runId, w.call.id, answer), r.context)
      })

    /** One question on the terminal for a waiting call (one at a time). */
    const question = (runId: string, w: Waiting) =>
      questionLock.withPermits(1)(Effect.gen(function*() {
        const { call } = w
        const base = { toolCallId: call.id, name: call.name, askedAt: w.askedAt }
        if (always.has(call.name)) {
          yield* record({ ...base, decision: "approved", by: "policy", reason: "always" })
          return yield* answerHere(runId, w, { approved: true })
        }
        yield* renderer.line(`${style.yellow("?")} ${style.bold(call.name)} wants to run:`)
        for (const line of previewCall(call, style)) yield* renderer.line(`    ${line}`)
        yield* renderer.line(
          style.dim(`  (or from another terminal: agentloop approve ${runId} ${stripControl(call.id)} y|n [reason])`)
        )
        while (true) {
          const line = yield* renderer.hold(
            input.read(`  allow? ${style.dim(`[y]es / [n]o (reason) / [a]lways for ${call.name}`)} `, {
              history: false
            })
          )
          // no answer possible here: the call waits for one from another terminal
          if (line === undefined) return
          const answer = parseAnswer(line)
          if (answer === undefined) continue
          if (answer.kind === "yes") {
            yield* record({ ...base, decision: "approved", by: "user" })
            return yield* answerHere(runId, w, { approved: true })
          }
          if (answer.kind === "always") {
            always.add(call.name)
            yield* record({ ...base, decision: "always", by: "user" })
            // the run remembers it too (journaled), for its later calls of this tool after a restart
            return yield* answerHere(runId, w, { approved: true, always: true })
          }
          yield* record({
            ...base,
            decision: "denied",
            by: "user",
            ...(answer.reason === undefined ? {} : { reason: answer.reason })
          })
          return yield* answerHere(runId, w, { approved: false, reason: denialReason(answer.reason) })
        }
      })).pipe(Effect.catch((e: CliError) => Effect.sync(() => report(e.message))))

    /** A call of the followed run waits for approval (a new request, or one found in the session on resuming). */
    const awaitApproval = (runId: string, call: ToolCall, askedAt: number) =>
      Effect.gen(function*() {
        const w: Waiting = { call, askedAt, answeredHere: false, question: undefined }
        waiting.set(call.id, w)
        if (input.interactive) {
          w.question = yield* Effect.forkIn(question(runId, w), scope)
          return
        }
        yield* renderer.line(`${style.yellow("?")} ${style.bold(call.name)} wants to run:`)
        for (const line of previewCall(call, style)) yield* renderer.line(`    ${line}`)
        yield* renderer.line(
          `  waiting for an answer: agentloop approve ${runId} ${stripControl(call.id)} y|n [reason]`
        )
      })

    const timedOut = (denial: unknown) =>
      settings.approvalTimeout !== undefined && denial === approvalTimeoutReason(settings.approvalTimeout)

    /** A waiting call started or got its result: stop asking; record an answer given elsewhere. */
    const settle = (callId: string, result: ToolResultMessage | undefined) =>
      Effect.gen(function*() {
        const w = waiting.get(callId)
        if (w === undefined) return
        waiting.delete(callId)
        if (w.answeredHere) return
        if (w.question !== undefined) yield* Fiber.interrupt(w.question)
        const base = { toolCallId: callId, name: w.call.name, askedAt: w.askedAt }
        const details = result?.details as { reason?: unknown; denial?: unknown } | undefined
        if (result === undefined) {
          yield* record({ ...base, decision: "approved", by: "remote" })
          yield* renderer.line(style.dim(`  ${w.call.name} ${stripControl(callId)}: approved from another terminal`))
        } else if (details?.reason === "denied" && timedOut(details.denial)) {
          // --approval-timeout: the run answered it denied when the time was up
          yield* record({ ...base, decision: "denied", by: "timeout", reason: String(details.denial) })
          yield* renderer.line(style.yellow(`⊘ ${w.call.name} denied: ${String(details.denial)}`))
        } else if (details?.reason === "denied") {
          yield* record({
            ...base,
            decision: "denied",
            by: "remote",
            ...(typeof details.denial === "string" ?
              { reason: details.denial.replace(/^the user denied this call(: )?/, "") || details.denial } :
              {})
          })
          yield* renderer.line(style.dim(`  ${w.call.name} ${stripControl(callId)}: denied from another terminal`))
        }
      })

    const onDurableEvent = (de: DurableEvent): Effect.Effect<void> =>
      Effect.suspend(() => {
        const run = followed
        if (run === undefined || de.runId !== run.runId) return Effect.void
        const key = eventKey(de)
        if (key !== undefined) {
          if (run.seen.has(key)) return Effect.void
          run.seen.add(key)
        }
        const event = de.event
        return Effect.gen(function*() {
          if (event.type === "approval_request") {
            yield* append({
              type: "approval_request",
              at: yield* Clock.currentTimeMillis,
              runId: run.runId,
              toolCallId: event.call.id,
              name: event.call.name
            })
            return yield* awaitApproval(run.runId, event.call, yield* Clock.currentTimeMillis)
          }
          if (event.type === "tool_start") yield* settle(event.call.id, undefined)
          if (event.type === "tool_end") yield* settle(event.result.toolCallId, event.result)
          if (run.live || event.type === "tool_start" || event.type === "tool_end") {
            yield* run.live ? persist(event) : persistRecord(event)
          }
          yield* renderer.render(event)
        })
      })

    /** The durable runner of the current session (one database per session). */
    let runner: {
      readonly sessionId: string
      readonly scope: Scope.Closeable
      readonly context: Context.Context<WorkflowEngine.WorkflowEngine | DurableStore>
    } | undefined
    // (built once, whoever needs it first: a run, or an answer typed while a resumed run starts)
    const runnerLock = yield* Semaphore.make(1)
    const ensureRunner: Effect.Effect<NonNullable<typeof runner>, CliError> = runnerLock.withPermits(1)(
      Effect.gen(function*() {
        if (runner !== undefined && runner.sessionId === log.id) return runner
        if (runner !== undefined) {
          yield* Scope.close(runner.scope, Exit.void)
          runner = undefined
        }
        const file = yield* prepareDatabase(root, log.id).pipe(Effect.mapError((e) => new CliError(e.message)))
        const runnerScope = yield* Scope.fork(scope)
        const layer = durableRunnerLayer({ policy: durablePolicy, approvalTimeout: settings.approvalTimeout }).pipe(
          Layer.provideMerge(embeddedEngineLayer({ filename: file })),
          Layer.provide(Layer.mergeAll(
            Layer.succeed(Model, durableModel),
            Layer.succeedContext(executor),
            Layer.succeed(DurableEventSink, { emit: onDurableEvent })
          ))
        )
        const context = yield* Layer.buildWithScope(layer, runnerScope).pipe(
          Effect.mapError((e) => new CliError(`durable runs: ${e.message}`))
        )
        runner = { sessionId: log.id, scope: runnerScope, context }
        return runner
      })
    )

    /** Starts (or joins) a durable run and follows it to its end, or until the program leaves. */
    const followRun = (runId: string, runInput: ReadonlyArray<Message>, live: boolean) =>
      Effect.gen(function*() {
        followed = { runId, inputLength: runInput.length, live, seen: new Set() }
        const r = yield* ensureRunner
        // Ctrl-C aborts the run at its next safe boundary; leaving (a second Ctrl-C, SIGTERM,
        // SIGHUP) keeps it for the next time
        controller.setRun(
          Effect.suspend(() =>
            controller.exitRequested() ? Effect.void : Effect.provideContext(abortRun(runId), r.context)
          )
        )
        // the answer's schema travels with the run as JSON Schema (a resumed run has it already)
        const output = options.output === undefined ?
          {} :
          { output: { jsonSchema: options.output.jsonSchema, name: options.output.name } }
        const outcome = yield* startRun({
          runId,
          messages: runInput,
          systemPrompt,
          maxSteps: settings.maxSteps,
          ...output
        }).pipe(
          Effect.andThen(awaitRun(runId, { interval: "50 millis" })),
          Effect.provideContext(r.context),
          Effect.mapError((e) => new CliError(`durable run ${runId}: ${e.message}`)),
          Effect.map(Option.some),
          Effect.raceFirst(Effect.as(Deferred.await(controller.exit), Option.none<AgentRunResult>()))
        )
        controller.setRun(undefined)
        followed = undefined
        if (Option.isNone(outcome)) {
          report(`the durable run ${runId} is kept: run the same command again to resume it (agentloop runs shows it)`)
          return undefined
        }
        const result = outcome.value
        // a run taken over from an earlier process may have records written twice: always rebuilt
        const rewritten = yield* reconcileSession(root, log.file, runId, result.messages.slice(runInput.length), !live)
          .pipe(
            Effect.mapError((e) => new CliError(e.message))
          )
        if (rewritten) {
          log = yield* openSession(root, log.id).pipe(
            Scope.provide(scope),
            Effect.mapError((e) => new CliError(e.message))
          )
        }
        return yield* endRun(result, runId)
      })

    const runDurable = (prompt: string) =>
      Effect.gen(function*() {
        const at = yield* Clock.currentTimeMillis
        runCount++
        const runId = runIdOf(log.id, runCount)
        yield* append({ type: "run_start", at, prompt, runId })
        const userMessage: Message = { role: "user", content: prompt, timestamp: at }
        yield* append(userMessage)
        const runInput = [...history, userMessage]
        history = runInput
        yield* renderer.line(style.dim(`durable run ${runId}`))
        return yield* followRun(runId, runInput, true)
      })

    const resumePending = Effect.gen(function*() {
      const run = unfinishedRun(log.records)
      if (run === undefined) return undefined
      // the run's input: the session up to its prompt; the calls still waiting for an answer
      const text = yield* Effect.try({
        try: () => readFileSync(nodePath.join(root, log.file), "utf8"),
        catch: (e) => new CliError(`cannot read ${log.file}: ${(e as { code?: string }).code ?? e}`)
      })
      const split = splitAtRun(text, run.runId)
      if (split === undefined) return yield* Effect.fail(new CliError(`${log.file} has no run ${run.runId}`))
      const loaded = yield* parseTranscript(`${split.before.join("\n")}\n`, log.file).pipe(
        Effect.mapError((e) => new CliError(e.message))
      )
      const runInput = loaded.messages
      const calls = new Map<string, ToolCall>()
      for (const line of split.after) {
        const m = (() => {
          try {
            return JSON.parse(line) as Partial<Message>
          } catch {
            return undefined
          }
        })()
        if (m?.role === "assistant" && Array.isArray(m.content)) {
          for (const part of m.content) if (part.type === "toolCall") calls.set(part.id, part)
        }
      }
      history = runInput
      yield* renderer.line(
        style.dim(`↻ resuming the durable run ${run.runId}: ${stripControl(run.prompt).slice(0, 80)}`)
      )
      followed = { runId: run.runId, inputLength: runInput.length, live: false, seen: new Set() }
      for (const p of run.pending) {
        const call = calls.get(p.callId)
        if (call !== undefined) yield* awaitApproval(run.runId, call, p.askedAt)
      }
      return yield* followRun(run.runId, runInput, false)
    })

    const runPrompt = (prompt: string): Effect.Effect<AgentRunResult | undefined, CliError> =>
      flags.durable ? runDurable(prompt) : runInMemory(prompt)

    return {
      root,
      style,
      out,
      err: report,
      controller,
      input,
      runPrompt,
      resumePending,
      pendingRun: () => unfinishedRun(log.records),
      compactNow: Effect.gen(function*() {
        const done = yield* compactor.compactNow(history)
        if (!done) out(`${style.dim("nothing to compact yet")}\n`)
      }),
      clear: Effect.gen(function*() {
        log = yield* newSession.pipe(Effect.catch((e) => Effect.as(Effect.sync(() => report(e.message)), log)))
        history = []
        runCount = 0
        systemPrompt = configuredPrompt
        compactor.reset()
        always.clear()
        sessionUsage = undefined
        lastUsage = undefined
        out(`${style.dim(`new session ${log.id}`)}\n`)
      }).pipe(Scope.provide(scope)),
      setModel: (name) =>
        Effect.gen(function*() {
          modelContext = yield* modelOf(settings, name)
          modelName = name
          yield* append({ type: "model", at: yield* Clock.currentTimeMillis, model: name })
          out(`${style.dim(`model: ${name}`)}\n`)
        }).pipe(Scope.provide(scope)),
      describe: () =>
        `${settings.provider ?? "?"} ${modelName ?? ""}${
          settings.baseUrl === undefined ? "" : ` at ${settings.baseUrl}`
        }`,
      cost: () =>
        `last run: ${describeUsage(lastUsage)}\nsession:  ${describeUsage(sessionUsage)}${
          contextWindow === undefined
            ? ""
            : `\ncontext window: ${formatTokens(contextWindow)} tokens (compaction at 75%)`
        }`,
      sessionFile: () => log.file
    } satisfies Agent
  })

const reportCliError = (e: CliError) =>
  Effect.sync(() => {
    // ids and answers from the command line, call ids from a model: no control sequences to the terminal
    process.stderr.write(`agentloop: ${stripControl(e.message)}\n`)
    process.exitCode = 2
  })

/**
 * `agentloop run "task"`: one run, printed live (plain text in a pipe); exits 0 when the model
 * stops, otherwise with `RUN_EXIT_CODES[reason]` and a line on stderr naming the reason.
 *
 * @since 0.1.0
 * @category commands
 */
export const runCommand = (
  flags: AgentFlags & { readonly task: string; readonly outputSchema: Option.Option<string> }
): Effect.Effect<void> =>
  Effect.scoped(Effect.gen(function*() {
    if (flags.task.trim().length === 0) return yield* Effect.fail(new CliError("the task is empty"))
    const output = Option.isSome(flags.outputSchema) ? yield* readOutputSchema(flags.outputSchema.value) : undefined
    // --durable: the same command again resumes the run it started, when that was interrupted
    let sameTask = false
    if (flags.durable && !flags.continue && Option.isNone(flags.resume)) {
      const root = yield* workspaceOf(flags.workspace)
      const found = yield* interruptedTask(root, flags.task)
      if (found !== undefined) {
        flags = { ...flags, resume: Option.some(found) }
        sameTask = true
      }
    }
    const agent = yield* makeAgent(flags, { output })
    const { style } = agent
    agent.out(
      `${style.bold("agentloop")} ${
        style.dim(`${agent.describe()} · ${agent.root} · session ${agent.sessionFile()}`)
      }\n`
    )
    let result = yield* agent.resumePending
    if (!sameTask && !agent.controller.exitRequested()) result = yield* agent.runPrompt(flags.task)
    const exit = Option.getOrUndefined(yield* Deferred.poll(agent.controller.exit))
    if (result === undefined) {
      process.exitCode = exit === undefined ? 1 : yield* exit
      return
    }
    let code = exit !== undefined ? yield* exit : RUN_EXIT_CODES[result.reason]
    if (result.reason !== "stop" && !agent.controller.outputClosed()) {
      agent.err(`run ended: ${result.reason}${result.error === undefined ? "" : ` (${stripControl(result.error)})`}`)
    }
    if (output !== undefined && code === 0) {
      // the typed answer, alone on stdout
      if (result.output === undefined) {
        agent.err("the run ended without a final answer")
        code = 1
      } else if (!agent.controller.outputClosed()) {
        process.stdout.write(`${JSON.stringify(result.output, null, 2)}\n`)
      }
    }
    process.exitCode = code
  })).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError), Effect.ensuring(exitSoon))

/** The latest session whose durable run of `task` did not end (a process killed or stopped while it ran). */
const interruptedTask = (root: string, task: string) =>
  Effect.gen(function*() {
    const sessions = yield* listSessions(root)
    for (const s of [...sessions].reverse()) {
      if (s.ended !== "interrupted") continue
      const loaded = yield* Effect.result(readSession(root, `${SESSIONS_FOLDER}/${s.id}.jsonl`))
      if (loaded._tag === "Failure") continue
      const run = unfinishedRun(loaded.success.records)
      if (run !== undefined && run.prompt === task) return s.id
    }
    return undefined
  })

const HELP = [
  "/help            this list",
  "/cost            tokens and money of the last run and of the session",
  "/compact         summarise older turns now (the session file keeps everything)",
  "/model NAME      switch the model (same provider)",
  "/clear           start a new session",
  "/exit            leave (or Ctrl-D); Ctrl-C aborts a run, twice within 2 s exits",
  "A line ending with \\ continues on the next line."
].join("\n")

/**
 * `agentloop chat`: an interactive session (line editing, history, multi-line input with a
 * trailing `\`, slash commands).
 *
 * @since 0.1.0
 * @category commands
 */
export const chatCommand = (flags: AgentFlags): Effect.Effect<void> =>
  Effect.scoped(Effect.gen(function*() {
    const agent = yield* makeAgent(flags)
    const { style, out } = agent
    out(`${style.bold("agentloop chat")} ${style.dim(`${agent.describe()} · ${agent.root}`)}\n`)
    out(`${style.dim(`session ${agent.sessionFile()} · /help for commands`)}\n`)
    yield* agent.resumePending.pipe(Effect.catch((e) => Effect.sync(() => agent.err(e.message))))
    while (!agent.controller.exitRequested()) {
      const first = yield* agent.input.read(style.cyan("> "))
      if (first === undefined) break
      let text = first
      while (text.endsWith("\\")) {
        const more = yield* agent.input.read(style.cyan("… "))
        if (more === undefined) break
        text = `${text.slice(0, -1)}\n${more}`
      }
      const trimmed = text.trim()
      if (trimmed.length === 0) continue
      if (trimmed.startsWith("/")) {
        const [command, ...rest] = trimmed.split(/\s+/)
        const arg = rest.join(" ")
        if (command === "/exit" || command === "/quit") break
        if (command === "/help") out(`${HELP}\n`)
        else if (command === "/cost") out(`${agent.cost()}\n`)
        else if (command === "/compact") yield* agent.compactNow
        else if (command === "/clear") yield* agent.clear
        else if (command === "/model") {
          if (arg.length === 0) out(`${agent.describe()}\n`)
          else yield* agent.setModel(arg).pipe(Effect.catch((e) => Effect.sync(() => agent.err(e.message))))
        } else out(`unknown command ${command} (/help)\n`)
        continue
      }
      yield* agent.runPrompt(text).pipe(Effect.catch((e) => Effect.sync(() => agent.err(e.message))))
    }
    const exit = Option.getOrUndefined(yield* Deferred.poll(agent.controller.exit))
    if (exit !== undefined) process.exitCode = yield* exit
  })).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError), Effect.ensuring(exitSoon))

/**
 * `agentloop sessions`: the sessions of the workspace, oldest first.
 *
 * @since 0.1.0
 * @category commands
 */
export const sessionsCommand = (workspace: Option.Option<string>): Effect.Effect<void> =>
  Effect.gen(function*() {
    const root = yield* workspaceOf(workspace)
    const sessions = yield* listSessions(root)
    if (sessions.length === 0) {
      process.stdout.write(`no sessions in ${root}/.agentloop/sessions\n`)
      return
    }
    for (const s of sessions) {
      const date = s.at === 0 ? "?" : new Date(s.at).toISOString().slice(0, 16).replace("T", " ")
      const prompt = stripControl(s.firstPrompt).replace(/\s+/g, " ")
      // file names and records are text anyone could have written (a cloned repository): no control sequences out
      process.stdout.write(
        `${stripControl(s.id)}  ${date}  ${String(s.steps).padStart(3)} step(s)  ${stripControl(s.ended).padEnd(11)}  ${
          prompt.length > 60 ? `${prompt.slice(0, 59)}…` : prompt
        }\n`
      )
    }
  }).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError))

/**
 * `agentloop runs`: the durable runs of the workspace, oldest first, with their state.
 *
 * @since 0.1.0
 * @category commands
 */
export const runsCommand = (workspace: Option.Option<string>): Effect.Effect<void> =>
  Effect.gen(function*() {
    const root = yield* workspaceOf(workspace)
    const runs = yield* listWorkspaceRuns(root)
    if (runs.length === 0) {
      process.stdout.write(`no durable runs in ${root} (agentloop run --durable starts one)\n`)
      return
    }
    for (const r of runs) {
      const date = r.startedAt === 0 ? "?" : new Date(r.startedAt).toISOString().slice(0, 16).replace("T", " ")
      const prompt = stripControl(r.prompt).replace(/\s+/g, " ")
      process.stdout.write(
        `${r.runId}  ${date}  ${r.state}  ${prompt.length > 50 ? `${prompt.slice(0, 49)}…` : prompt}\n`
      )
    }
  }).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError), Effect.ensuring(exitSoon))

/**
 * `agentloop approve RUN CALL y|n [reason]`: answers a durable run's waiting approval from any
 * terminal; the run's process (if one is running it) goes on within a second.
 *
 * @since 0.1.0
 * @category commands
 */
export const approveCommand = (options: {
  readonly workspace: Option.Option<string>
  readonly run: string
  readonly call: string
  readonly answer: string
  readonly reason: ReadonlyArray<string>
}): Effect.Effect<void> =>
  Effect.gen(function*() {
    const root = yield* workspaceOf(options.workspace)
    const line = yield* approveRun(root, options.run, options.call, options.answer, options.reason).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    process.stdout.write(`${line}\n`)
  }).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError), Effect.ensuring(exitSoon))

/**
 * `agentloop abort RUN`: aborts a durable run from any terminal (see `abortDurableRun`).
 *
 * @since 0.1.0
 * @category commands
 */
export const abortCommand = (options: {
  readonly workspace: Option.Option<string>
  readonly run: string
}): Effect.Effect<void> =>
  Effect.gen(function*() {
    const root = yield* workspaceOf(options.workspace)
    const line = yield* abortDurableRun(root, options.run).pipe(Effect.mapError((e) => new CliError(e.message)))
    process.stdout.write(`${line}\n`)
  }).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError), Effect.ensuring(exitSoon))
