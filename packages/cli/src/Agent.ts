/**
 * `agentloop run` and `agentloop chat`: a coding agent in the current folder, with sessions,
 * approvals, stopping, compaction and usage (see the package README). Every run goes through the
 * `RunEngine` the flags pick (RunEngine.ts): in memory, or durable with `--durable`.
 *
 * @since 0.1.0
 */
import { AgentTrace, Executor, Model, parseTranscript, sessionHistoryOf } from "@agentloop/core"
import type { AgentRunResult, Message, OutputSchema, ToolCall, Usage } from "@agentloop/core"
import { Clock, Context, Deferred, Effect, Layer, Option, Scope } from "effect"
import { readFileSync } from "node:fs"
import * as nodePath from "node:path"
import { makeApprovalPolicy, makePermissions, modeSection, nextMode } from "./Approvals.ts"
import type { Permissions } from "./Approvals.ts"
import type { ApprovalRecord } from "./Approvals.ts"
import {
  describeUndo,
  hadCalls,
  makeCheckpoints,
  promptLine,
  storedBytes,
  undoablePrompts,
  undoSession
} from "./Checkpoints.ts"
import { CliError, reportCliError } from "./CliError.ts"
import { knownContextWindow, makeCompactor } from "./Compaction.ts"
import { resolveSettings, saveAllowRule } from "./Config.ts"
import type { FlagSettings } from "./Config.ts"
import { abortDurableRun, approveRun, listWorkspaceRuns, runnerBusy, splitAtRun, unfinishedRun } from "./Durable.ts"
import type { RecordedRun } from "./Durable.ts"
import { historyFile, openHistory } from "./History.ts"
import { makeAgentSession } from "./internal/AgentSession.ts"
import { attach } from "./internal/Attachments.ts"
import type { Attached } from "./internal/Attachments.ts"
import { mentionCompleter } from "./internal/Completion.ts"
import { forkFlag } from "./internal/Fork.ts"
import { lastOutput } from "./internal/LastOutput.ts"
import { makeMcpUi, mcpPromptText } from "./internal/McpPrompts.ts"
import { readOutputSchema } from "./internal/OutputSchemaFile.ts"
import { INIT_PROMPT, projectContextSection, readProjectContext } from "./internal/ProjectContext.ts"
import { makeModelSwitch, modelsOverview, THINKING_LEVELS, toolsLayer, workspaceOf } from "./internal/Setup.ts"
import type { Thinking } from "./internal/Setup.ts"
import { makeSteering } from "./internal/Steering.ts"
import { buildSystemPrompt } from "./internal/SystemPrompt.ts"
import { eventLine, makeJsonRenderer, resultLine } from "./JsonOutput.ts"
import { PERMISSION_MODES } from "./Permissions.ts"
import type { PermissionMode } from "./Permissions.ts"
import { contextUsed, describeContext, describeHistory, formatTokens, makeRenderer } from "./Renderer.ts"
import type { Renderer } from "./Renderer.ts"
import { inMemoryEngine, RunEngine } from "./RunEngine.ts"
import type { RunRequest, WaitingCall } from "./RunEngine.ts"
import { stripControl } from "./Sanitize.ts"
import { makeScreen, useScreen } from "./Screen.ts"
import { listCommand } from "./SessionCommands.ts"
import {
  createSession,
  listSessions,
  openSession,
  readSession,
  SESSIONS_FOLDER,
  sessionToContinue
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
  /** `--mode MODE`: the permission mode (`--yes` is `yes`). */
  readonly mode: Option.Option<PermissionMode>
  readonly continue: boolean
  readonly resume: Option.Option<string>
  /** `--fork ID[:N]`: a new session from session ID's history up to and including prompt N (internal/Fork.ts). */
  readonly fork?: Option.Option<string> | undefined
  /** MCP servers to start (`--mcp "command args"`), repeatable. */
  readonly mcp: ReadonlyArray<string>
  /** MCP servers to connect to over HTTP (`--mcp-url URL`), repeatable. */
  readonly mcpUrl: ReadonlyArray<string>
  /** Each run is a durable run on the embedded engine (`--durable`). */
  readonly durable: boolean
  /** `--otlp URL`: spans go to this OTLP/HTTP endpoint (see internal/Tracing.ts). */
  readonly otlp?: Option.Option<string> | undefined
}

/** Whether `--otlp` or OpenTelemetry's environment asks for spans (cheap: the exporter loads only then). */
const wantsTracing = (flags: AgentFlags, env: NodeJS.ProcessEnv): boolean =>
  Option.isSome(flags.otlp ?? Option.none()) ||
  ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].some((name) => (env[name] ?? "").trim() !== "")

/**
 * `command` with its runs' spans sent over OTLP when asked for; the exporter closes with the command,
 * so the spans of a short run are sent before the process exits.
 */
const traced = (flags: AgentFlags) => <A, E>(command: Effect.Effect<A, E>): Effect.Effect<A, E | CliError> =>
  wantsTracing(flags, process.env) ?
    Effect.flatMap(
      Effect.promise(() => import("./internal/Tracing.ts")),
      (tracing) => tracing.withOtlpTracing(Option.getOrUndefined(flags.otlp ?? Option.none()), process.env, command)
    ) :
    command

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

/**
 * The line after a run: `usage:` the run's tokens and cost; the session's only when it holds more
 * than this run (`--continue`, a chat's later runs); how full the context is; and "cost unknown for
 * this model" only where `costNote` says (once a session: it does not change). Parts are left out
 * from the end (the note, the context, the session's) until the line fits `columns`.
 *
 * @since 0.1.0
 * @category usage
 */
export const usageLine = (options: {
  readonly last: Usage | undefined
  readonly session: Usage | undefined
  readonly context: string | undefined
  readonly costNote: boolean
  readonly columns: number | undefined
}): string => {
  const { last, session } = options
  const tokens = (u: Usage) =>
    `${formatTokens(u.input)} tokens in${
      u.cacheRead !== undefined && u.cacheRead > 0 ? ` (${formatTokens(u.cacheRead)} cached)` : ""
    }, ${formatTokens(u.output)} out${u.cost === undefined ? "" : ` · $${u.cost.toFixed(4)}`}`
  const same = last !== undefined && session !== undefined && last.input === session.input &&
    last.output === session.output && last.cacheRead === session.cacheRead && last.cost === session.cost
  const parts = [`usage: ${last === undefined ? "no usage reported" : tokens(last)}`]
  const optional = [
    ...(session === undefined || same ? [] : [`session: ${tokens(session)}`]),
    ...(options.context === undefined ? [] : [options.context]),
    ...(options.costNote && (last?.cost === undefined) && last !== undefined ? ["cost unknown for this model"] : [])
  ]
  const line = (count: number) => `  ${[...parts, ...optional.slice(0, count)].join(" · ")}`
  // (a terminal that does not say its width, 0 columns, is not fitted)
  const columns = options.columns !== undefined && options.columns > 0 ? options.columns : undefined
  let count = optional.length
  while (count > 0 && columns !== undefined && line(count).length > columns) count--
  return line(count)
}

interface Agent {
  readonly root: string
  readonly style: Style
  readonly out: (text: string) => void
  readonly err: (text: string) => void
  readonly controller: Controller
  readonly input: LineInput
  /**
   * Runs a prompt, with what it attaches (its `@` mentions and dropped image paths unless
   * `mentions` is false, and `images`); undefined when the program is leaving while a durable run
   * goes on (the run is kept in its database and resumes when the command runs again).
   */
  readonly runPrompt: (
    prompt: string,
    options?: {
      readonly images?: ReadonlyArray<string>
      readonly mentions?: boolean
      /** What the prompt attaches, read already (`run` reads it before anything is printed). */
      readonly attached?: Attached
    }
  ) => Effect.Effect<AgentRunResult | undefined, CliError>
  /** Resumes the session's interrupted durable run, when it has one (undefined otherwise, or when leaving). */
  readonly resumePending: Effect.Effect<AgentRunResult | undefined, CliError>
  /** The session's interrupted durable run, when it has one. */
  readonly pendingRun: () => RecordedRun | undefined
  readonly compactNow: Effect.Effect<void>
  /** `/undo` (the last prompt) and `/rewind N` (prompt N and the later ones): files and conversation. */
  readonly undo: (to: number | undefined) => Effect.Effect<void, CliError>
  /** The prompts `/rewind` can go back to, numbered from 1. */
  readonly prompts: Effect.Effect<ReadonlyArray<string>, CliError>
  readonly clear: Effect.Effect<void>
  readonly setModel: (name: string) => Effect.Effect<void, CliError>
  /** `/model` alone: the model in use, the provider's list, the known models. */
  readonly listModels: Effect.Effect<string>
  /** `/server:prompt args`: an MCP server's prompt as the text of the next turn. */
  readonly mcpPrompt: (spec: string, args: string) => Effect.Effect<string, CliError>
  /** `/thinking LEVEL`. */
  readonly setThinking: (level: Thinking) => Effect.Effect<void, CliError>
  /** The session's permission mode and rules (`/mode` switches the mode). */
  readonly permissions: Permissions
  readonly describe: () => string
  readonly cost: () => string
  readonly sessionFile: () => string
  /** The session's id, provider and model (for `run --json`'s first line). */
  readonly sessionInfo: () => { readonly id: string; readonly provider?: string; readonly model?: string }
  /** The session's conversation so far, told compactly (`--continue`, `--resume`). */
  readonly showHistory: Effect.Effect<void>
  /** `/last`: the whole output of the last tool calls. */
  readonly showLast: Effect.Effect<void>
}

/**
 * The session to open: the latest with a conversation (--continue, `sessionToContinue`), a given one
 * (--resume ID), or none (a new one).
 */
const sessionToOpen = (root: string, flags: AgentFlags): Effect.Effect<string | undefined, CliError> =>
  Effect.gen(function*() {
    let id = Option.getOrUndefined(flags.resume)
    if (flags.continue) {
      const latest = sessionToContinue(yield* listSessions(root))
      if (latest === undefined) {
        return yield* Effect.fail(new CliError(`--continue: there is no session in ${root}/.agentloop/sessions yet`))
      }
      id = latest.id
    }
    if (id !== undefined && !/^[A-Za-z0-9._-]+$/.test(id)) {
      return yield* Effect.fail(new CliError(`--resume: "${id}" is not a session id (see agentloop sessions)`))
    }
    // a durable session that another process is running now is left alone (its file is being written)
    if (flags.durable && id !== undefined && runnerBusy(root, id)) {
      return yield* Effect.fail(
        new CliError(
          `session ${id} is being run by another agentloop process right now (its durable runs' runner); ` +
            "answer its approvals with agentloop approve, or wait for it (agentloop runs)"
        )
      )
    }
    return id
  })

/**
 * A durable run found unfinished in the session: its input (the session up to its prompt) and its
 * calls still waiting for an answer.
 */
const unfinishedRunOf = (root: string, log: SessionLog, run: RecordedRun) =>
  Effect.gen(function*() {
    const text = yield* Effect.try({
      try: () => readFileSync(nodePath.join(root, log.file), "utf8"),
      catch: (e) => new CliError(`cannot read ${log.file}: ${(e as { code?: string }).code ?? e}`)
    })
    const split = splitAtRun(text, run.runId)
    if (split === undefined) return yield* Effect.fail(new CliError(`${log.file} has no run ${run.runId}`))
    const loaded = yield* parseTranscript(`${split.before.join("\n")}\n`, log.file).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
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
    const waiting: Array<WaitingCall> = []
    for (const p of run.pending) {
      const call = calls.get(p.callId)
      if (call !== undefined) waiting.push({ call, askedAt: p.askedAt })
    }
    // (without the runs an undo dropped, as the run was given it)
    return { input: sessionHistoryOf(loaded).messages, waiting }
  })

/** Sets up everything `run` and `chat` share. */
const makeAgent = (
  flags: AgentFlags,
  options: {
    /** The final answer's schema (`run --output-schema`): stdout is kept for the answer, the rest goes to stderr. */
    readonly output?: OutputSchema<unknown> | undefined
    /** `chat`: Ctrl-D while a run works leaves; the prompt history is used. */
    readonly chat?: boolean
    /** `run --json`: the events as JSON lines on stdout (`JsonOutput.ts`); the rest goes to stderr. */
    readonly json?: boolean
    /** `run --quiet`: no progress at all; errors still go to stderr. */
    readonly quiet?: boolean
  } = {}
): Effect.Effect<Agent, CliError, Scope.Scope> =>
  Effect.gen(function*() {
    const root = yield* workspaceOf(flags.workspace)
    const scope = yield* Effect.scope
    // what the run shows goes to stdout, or to stderr when stdout is kept for a typed answer
    const display = options.output === undefined && options.json !== true ? process.stdout : process.stderr
    const style = makeStyle(wantsColor(display.isTTY, process.env))
    const errStyle = makeStyle(wantsColor(process.stderr.isTTY, process.env))
    // the display: output above, the live footer (status line, the line typed while a run works) below
    let outputClosed = () => false
    const screen = makeScreen({
      write: (text) => {
        if (!outputClosed() && !display.destroyed) display.write(text)
      },
      live: display.isTTY === true,
      // (asked of the terminal at each draw: a resize is seen before its SIGWINCH is handled)
      columns: () => display.isTTY === true ? display.getWindowSize()[0] : display.columns,
      rows: () => display.isTTY === true ? display.getWindowSize()[1] : display.rows
    })
    yield* useScreen(screen)
    // (the controller shows no notice once the output is gone)
    // (through the renderer once there is one: it ends a streaming answer's line first)
    let notice = (text: string) => screen.write(`${style.yellow(text)}\n`)
    const controller = yield* installController((text) => notice(text))
    // the controller decides when the output is gone; nothing is written after that
    outputClosed = controller.outputClosed
    const out = options.quiet === true ? () => {} : screen.write
    // stdout for `--json`'s lines (nothing once the output is gone)
    const writeStdout = (text: string) => {
      if (!controller.outputClosed() && !process.stdout.destroyed) process.stdout.write(text)
    }
    // (stderr on the display's terminal goes above its footer too)
    const err = (text: string) => {
      if (controller.outputClosed() || process.stderr.destroyed) return
      if (screen.live && process.stderr.isTTY === true) screen.write(text)
      else process.stderr.write(text)
    }
    const settings = yield* resolveSettings(flags, root, process.env).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    if (flags.continue && Option.isSome(flags.resume)) {
      return yield* Effect.fail(new CliError("--continue and --resume cannot be used together"))
    }
    if (settings.provider !== undefined && settings.provider !== "scripted" && settings.model === undefined) {
      return yield* Effect.fail(
        new CliError(`a model name is needed with provider ${settings.provider} (--model NAME)`)
      )
    }
    const models = yield* makeModelSwitch(settings, settings.model)
    // MCP servers' questions and sampling requests: answered on the terminal once it is set up (below)
    const mcpUi = makeMcpUi()
    const tools = yield* toolsLayer(root, settings, flags, { ui: mcpUi, model: models.model }).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    const executor = yield* Layer.build(tools).pipe(
      Effect.mapError((e) =>
        new CliError(e._tag === "PlatformError" ? `cannot open the workspace ${root}: ${e.message}` : e.message)
      )
    )
    // --quiet shows no progress at all (the final answer is printed by `run`)
    const quietRenderer: Renderer = { render: () => Effect.void, line: () => Effect.void, hold: (effect) => effect }
    // the window of the model in use: the one given (--context-window, the config), else the price table's
    const contextWindow = () => {
      const name = models.name()
      return settings.contextWindow ?? (name === undefined ? undefined : knownContextWindow(name))
    }
    const renderer = options.json === true ?
      makeJsonRenderer(writeStdout, out) :
      options.quiet === true ?
      quietRenderer :
      yield* makeRenderer({
        write: out,
        style,
        live: display.isTTY === true,
        columns: display.columns,
        screen,
        expandHint: options.chat === true ? "/last shows all" : undefined,
        contextWindow
      })
    if (options.json !== true && options.quiet !== true) {
      notice = (text) => Effect.runSync(renderer.line(style.yellow(text)))
    }
    const report = (message: string) => err(`${errStyle.red(`agentloop: ${stripControl(message.split("\n")[0]!)}`)}\n`)
    // the prompt history of this project, for chat on a terminal
    const history = options.chat === true && process.stdin.isTTY === true
      ? yield* openHistory(historyFile(root, process.env), report)
      : undefined
    const permissions = makePermissions({
      mode: flags.yes ? "yes" : settings.permissionMode ?? "ask",
      rules: settings.rules,
      save: (rule) => saveAllowRule(root, rule).pipe(Effect.mapError((e) => new CliError(e.message)))
    })
    const input = yield* makeLineInput(controller, {
      history,
      leaveOnEof: options.chat === true,
      complete: mentionCompleter(root),
      screen,
      style,
      cycleMode: options.chat === true ?
        () => {
          permissions.mode = nextMode(permissions.mode)
          return `mode: ${permissions.mode} (Shift+Tab: next)`
        } :
        undefined,
      say: (line) => Effect.runSync(renderer.line(line))
    })

    // the system prompt of a new session: the built-in one (or its replacement), the config's addition, AGENTS.md
    // (read again for each new session: /init, then /clear)
    const promptNow = Effect.gen(function*() {
      const projectContext = yield* readProjectContext(root, process.env)
      for (const note of projectContext.notes) report(note)
      return buildSystemPrompt({
        tools: Context.get(executor, Executor).definitions,
        workspace: root,
        now: yield* Clock.currentTimeMillis,
        platform: `${process.platform} ${process.arch}`,
        addition: settings.systemPrompt,
        replacement: settings.systemPromptReplacement,
        projectContext: projectContextSection(projectContext)
      })
    })
    let configuredPrompt = yield* promptNow

    // the session: new, the latest (--continue) or a given one (--resume ID)
    const newSession = Effect.suspend(() =>
      createSession(root, {
        cwd: root,
        provider: settings.provider ?? "",
        model: settings.model ?? "",
        systemPrompt: configuredPrompt
      })
    )
    const fork = Option.getOrUndefined(flags.fork ?? Option.none())
    if (fork !== undefined && (flags.continue || Option.isSome(flags.resume))) {
      return yield* Effect.fail(
        new CliError("--fork starts a new session: it cannot be used with --continue or --resume")
      )
    }
    const resumeId = fork === undefined ?
      yield* sessionToOpen(root, flags) :
      (yield* forkFlag(root, fork, { provider: settings.provider, model: settings.model })).id
    const log = yield* (resumeId === undefined ? newSession : openSession(root, resumeId)).pipe(
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
    const session = makeAgentSession({
      root,
      scope,
      log,
      configuredPrompt: () => configuredPrompt,
      create: newSession,
      report
    })

    // (the estimate counts the system prompt and the tool definitions each request carries)
    const compactor = makeCompactor({
      contextWindow,
      model: models.model,
      initial: log.compaction,
      onCompact: (state, info) =>
        Effect.gen(function*() {
          // a run counts its compactions' usage itself; /compact is not in a run
          if (!info.inRun) session.addUsage(info.usage)
          yield* session.append({
            type: "compaction",
            at: yield* Clock.currentTimeMillis,
            summarized: state.covered,
            kept: info.kept,
            summary: state.summary,
            ...(info.usage === undefined ? {} : { usage: info.usage }),
            ...(info.inRun ? { inRun: true } : {})
          })
          yield* renderer.line(
            style.dim(`⇢ compacted: ${state.covered} earlier message(s) summarised, ${info.kept} kept verbatim`)
          )
        }),
      onError: (message) => renderer.line(style.yellow(`⚠ ${message}`))
    })
    const record = (r: ApprovalRecord) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => session.append({ type: "approval", at, ...r }))
    mcpUi.ask = input.interactive ? (question) => renderer.hold(input.read(question, { history: false })) : undefined
    mcpUi.print = (line) => renderer.line(line)
    mcpUi.allowSampling = () => permissions.mode === "yes"
    mcpUi.addUsage = (usage) => session.addUsage(usage)
    // the durable run a server's question came in (the session file's record of it is kept when the run's
    // part of the file is rebuilt from its journal after a resume)
    let runNow: string | undefined
    mcpUi.record = (r) =>
      Effect.flatMap(
        Clock.currentTimeMillis,
        (at) => session.append({ type: "mcp_request", at, ...r, ...(runNow === undefined ? {} : { runId: runNow }) })
      )
    // what a run's calls will change is saved first, for /undo, and the session's start, for replay (Checkpoints.ts)
    const checkpoints = yield* makeCheckpoints({
      root,
      sessionId: () => session.log().id,
      run: session.runNumber,
      append: session.append,
      notice: (text) => renderer.line(style.yellow(text)),
      stored: storedBytes(log.records),
      replayStart: !hadCalls(log.records)
    })

    // the engine the flags pick, on the model in use and the tools
    const engineLayer = flags.durable ?
      // durable runs' engine (effect/workflow, effect/cluster, SQLite) loads only for --durable
      (yield* Effect.promise(() => import("./internal/DurableEngine.ts"))).durableEngine({
        root,
        session: {
          id: () => session.log().id,
          file: () => session.log().file,
          reopen: session.reopen,
          append: session.append
        },
        stop: controller,
        permissions,
        approvalTimeout: settings.approvalTimeout,
        transformContext: compactor.transform,
        record,
        renderer,
        input,
        style,
        report
      }) :
      inMemoryEngine({
        policy: yield* makeApprovalPolicy({
          permissions,
          ask: input.interactive ?
            (question: string) => renderer.hold(input.read(question, { history: false })) :
            undefined,
          print: (text) => renderer.line(text),
          record,
          style,
          timeout: settings.approvalTimeout
        }),
        transformContext: compactor.transform,
        stop: controller
      })
    const engine = Context.get(
      yield* Layer.build(
        engineLayer.pipe(
          Layer.provide(
            Layer.mergeAll(Layer.succeed(Model, models.model), Layer.succeedContext(checkpoints.wrapContext(executor)))
          )
        )
      ),
      RunEngine
    )

    /**
     * Runs on the engine: the events go to the session file and the terminal; the end is recorded. In
     * chat, what is typed meanwhile goes to the run (steering, follow-ups), or waits for the next
     * prompt (a slash command, or a message the run ended without taking).
     */
    // (the usage line says "cost unknown for this model" once)
    let costNoted = false
    const runOn = (request: RunRequest, messages: boolean) =>
      Effect.gen(function*() {
        runNow = request.runId
        const steering = options.chat === true ? yield* makeSteering(screen, style) : undefined
        const run = engine.run(
          steering === undefined ? request : { ...request, inbox: steering.inbox },
          (event) => {
            // (shown as typed: steering that came too late for its turn is announced with the follow-ups)
            const shown = steering?.seen(event) ?? event
            return Effect.andThen(
              session.record(messages)(event),
              shown.type !== "turn_start" ?
                renderer.render(shown) :
                options.json === true ?
                Effect.sync(() => writeStdout(`${eventLine(event)}\n`)) :
                Effect.void
            )
          }
        ).pipe(
          // traced, the run is the agent `agentloop` of the session's conversation
          Effect.provideService(AgentTrace, { name: "agentloop", conversationId: session.log().id })
        )
        const result = steering === undefined ?
          yield* run :
          yield* input.whileRunning(run, (text, kind) =>
            Effect.gen(function*() {
              if (text.trim().startsWith("/")) return steering.hold(text)
              const attached = yield* attach(root, text)
              for (const note of attached.notes) yield* renderer.line(style.dim(stripControl(note)))
              yield* steering.push(kind, text, attached.content)
            }).pipe(Effect.catch((e) => Effect.sync(() => report(`not sent: ${e.message}`)))))
        for (const text of steering?.leftovers() ?? []) input.queue(text)
        if (result === undefined) return undefined
        yield* session.endRun(result, request.runId)
        const usage = session.usage()
        const context = contextUsed(result.messages)
        const windowSize = contextWindow()
        const line = usageLine({
          last: usage.last,
          session: usage.session,
          context: windowSize === undefined || context === undefined ? undefined : describeContext(context, windowSize),
          costNote: !costNoted,
          columns: display.isTTY === true ? display.columns : undefined
        })
        costNoted ||= line.includes("cost unknown")
        out(`${style.dim(line)}\n`)
        return result
      })

    const runPrompt: Agent["runPrompt"] = (prompt, attachments = {}) =>
      Effect.gen(function*() {
        const attached = attachments.attached ?? (yield* attach(root, prompt, attachments))
        for (const note of attached.notes) yield* renderer.line(style.dim(stripControl(note)))
        const run = yield* session.startRun(prompt, attached.content, engine.runIdOf)
        const result = yield* runOn({
          systemPrompt: session.systemPrompt() + modeSection(permissions.mode),
          messages: run.input,
          maxSteps: settings.maxSteps,
          output: options.output,
          runId: run.runId
        }, true)
        if (result?.reason === "error" && attached.images > 0 && result.steps <= 1) {
          report(
            `the request carried ${attached.images} image(s): if ${
              models.name() ?? "the model"
            } does not accept images, use a model that does (the error above is the provider's answer)`
          )
        }
        return result
      })

    const resumePending = Effect.gen(function*() {
      const run = unfinishedRun(session.log().records)
      if (run === undefined) return undefined
      const found = yield* unfinishedRunOf(root, session.log(), run)
      session.resumeRun(found.input)
      yield* renderer.line(
        style.dim(`↻ resuming the durable run ${run.runId}: ${stripControl(run.prompt).slice(0, 80)}`)
      )
      return yield* runOn({
        systemPrompt: session.systemPrompt() + modeSection(permissions.mode),
        messages: found.input,
        maxSteps: settings.maxSteps,
        output: options.output,
        runId: run.runId,
        resumed: { waiting: found.waiting }
      }, false)
    })

    return {
      root,
      style,
      out,
      err: report,
      controller,
      input,
      runPrompt,
      resumePending,
      pendingRun: () => unfinishedRun(session.log().records),
      compactNow: Effect.gen(function*() {
        const done = yield* compactor.compactNow(session.history())
        if (!done) out(`${style.dim("nothing to compact yet")}\n`)
      }),
      undo: (to) =>
        Effect.gen(function*() {
          const undone = yield* undoSession(root, session.log(), to).pipe(
            Effect.mapError((e) => new CliError(e.message))
          )
          yield* session.append(undone.record)
          yield* session.reload
          compactor.reset()
          for (const line of describeUndo(undone)) out(`${style.dim(line)}\n`)
        }),
      prompts: Effect.suspend(() => undoablePrompts(root, session.log().file)).pipe(
        Effect.map((runs) => runs.map((r) => promptLine(r.start.prompt ?? ""))),
        Effect.mapError((e) => new CliError(e.message))
      ),
      clear: Effect.gen(function*() {
        configuredPrompt = yield* promptNow
        yield* session.clear
        compactor.reset()
        permissions.session.length = 0
        out(`${style.dim(`new session ${session.log().id}`)}\n`)
      }),
      permissions,
      listModels: modelsOverview(models),
      mcpPrompt: (spec, args) => mcpPromptText(executor as Context.Context<never>, spec, args),
      setThinking: (level) =>
        Effect.gen(function*() {
          yield* models.setThinking(level)
          out(`${style.dim(`thinking: ${level}`)}\n`)
        }).pipe(Scope.provide(scope)),
      setModel: (name) =>
        Effect.gen(function*() {
          yield* models.set(name)
          yield* session.append({ type: "model", at: yield* Clock.currentTimeMillis, model: name })
          out(`${style.dim(`model: ${name}`)}\n`)
        }).pipe(Scope.provide(scope)),
      describe: () =>
        `${models.provider() ?? "?"} ${models.name() ?? ""}${
          models.settings().baseUrl === undefined ? "" : ` at ${models.settings().baseUrl}`
        }`,
      cost: () => {
        const usage = session.usage()
        const window = contextWindow()
        return `last run: ${describeUsage(usage.last)}\nsession:  ${describeUsage(usage.session)}${
          window === undefined ? "" : `\ncontext window: ${formatTokens(window)} tokens (compaction at 75%)`
        }`
      },
      sessionFile: () => session.log().file,
      sessionInfo: () => {
        const model = models.name()
        return {
          id: session.log().id,
          ...(settings.provider === undefined ? {} : { provider: settings.provider }),
          ...(model === undefined ? {} : { model })
        }
      },
      showHistory: Effect.suspend(() => {
        const lines = describeHistory(session.history(), { style })
        return lines.length === 0 ?
          Effect.void :
          Effect.sync(() =>
            out(`${[style.dim("── the conversation so far ──"), ...lines, style.dim("──")].join("\n")}\n`)
          )
      }),
      showLast: Effect.gen(function*() {
        // (no colours: a pager may not show them)
        const text = yield* lastOutput(root, session.history(), makeStyle(false), renderer.streamed)
        if (text === undefined) out(`${style.dim("no tool call yet")}\n`)
        else yield* input.page(text)
      })
    } satisfies Agent
  })

/**
 * `agentloop run "task"`: one run, printed live (plain text in a pipe); exits 0 when the model
 * stops, otherwise with `RUN_EXIT_CODES[reason]` and a line on stderr naming the reason.
 *
 * @since 0.1.0
 * @category commands
 */
export const runCommand = (
  flags: AgentFlags & {
    readonly task: string
    readonly outputSchema: Option.Option<string>
    /** `--image FILE`, repeatable: images in the workspace sent with the task. */
    readonly image: ReadonlyArray<string>
    /** `--json`: the events as JSON lines on stdout (see `JsonOutput.ts`). */
    readonly json?: boolean | undefined
    /** `--quiet`: no progress; only the final answer on stdout, errors on stderr. */
    readonly quiet?: boolean | undefined
  }
): Effect.Effect<void> =>
  Effect.scoped(Effect.gen(function*() {
    // `agentloop run -`: the task is stdin's text
    if (flags.task === "-") flags = { ...flags, task: yield* readStdin }
    if (flags.task.trim().length === 0) {
      return yield* Effect.fail(
        new CliError(flags.task.length === 0 ? "the task is empty" : "the task is empty (only spaces)")
      )
    }
    const output = Option.isSome(flags.outputSchema) ? yield* readOutputSchema(flags.outputSchema.value) : undefined
    // --durable: the same command again resumes the run it started, when that was interrupted
    let sameTask = false
    if (flags.durable && !flags.continue && Option.isNone(flags.resume) && Option.isNone(flags.fork ?? Option.none())) {
      const root = yield* workspaceOf(flags.workspace)
      const found = yield* interruptedTask(root, flags.task)
      if (found !== undefined) {
        flags = { ...flags, resume: Option.some(found) }
        sameTask = true
      }
    }
    const json = flags.json === true
    const quiet = flags.quiet === true
    // what the task attaches (--image, @ mentions) is read first: a file refused is one error, before anything is
    // printed or a session is started
    const attached = yield* attach(yield* workspaceOf(flags.workspace), flags.task, { images: flags.image })
    const agent = yield* makeAgent(flags, { output, json, quiet })
    const { style } = agent
    if (json && !agent.controller.outputClosed()) {
      const info = agent.sessionInfo()
      process.stdout.write(
        `${JSON.stringify({ v: 1, type: "session", ...info, file: agent.sessionFile(), workspace: agent.root })}\n`
      )
    }
    agent.out(
      `${style.bold("agentloop")} ${
        style.dim(`${agent.describe()} · ${agent.root} · session ${agent.sessionFile()}`)
      }\n`
    )
    let result = yield* agent.resumePending
    if (!sameTask && !agent.controller.exitRequested()) {
      result = yield* agent.runPrompt(flags.task, { attached })
    }
    const exit = Option.getOrUndefined(yield* Deferred.poll(agent.controller.exit))
    if (result === undefined) {
      process.exitCode = exit === undefined ? 1 : yield* exit
      return
    }
    let code = exit !== undefined ? yield* exit : RUN_EXIT_CODES[result.reason]
    if (result.reason !== "stop" && !agent.controller.outputClosed()) {
      agent.err(`run ended: ${result.reason}${result.error === undefined ? "" : ` (${stripControl(result.error)})`}`)
    }
    if (output !== undefined && code === 0 && result.output === undefined) {
      agent.err("the run ended without a final answer")
      code = 1
    }
    if (agent.controller.outputClosed()) {
      // nothing more is written
    } else if (json) {
      process.stdout.write(`${
        resultLine({
          reason: result.reason,
          steps: result.steps,
          usage: result.usage ?? { input: 0, output: 0 },
          exitCode: code,
          error: result.error,
          output: result.output
        })
      }\n`)
    } else if (output !== undefined && code === 0) {
      // the typed answer, alone on stdout
      process.stdout.write(`${JSON.stringify(result.output, null, 2)}\n`)
    } else if (quiet && result.reason === "stop") {
      // the final answer, alone on stdout
      // (model text, so no control sequences reach the terminal)
      const text = stripControl(finalText(result.messages))
      if (text.length > 0) process.stdout.write(text.endsWith("\n") ? text : `${text}\n`)
    }
    process.exitCode = code
  })).pipe(
    traced(flags),
    Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError),
    Effect.ensuring(exitSoon)
  )

/** stdin's whole text (`agentloop run -`). */
const readStdin: Effect.Effect<string, CliError> = Effect.tryPromise({
  try: async () => {
    const chunks: Array<Buffer> = []
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
    return Buffer.concat(chunks).toString("utf8")
  },
  catch: (e) => new CliError(`cannot read the task from stdin: ${(e as Error).message}`)
})

/** The text of the run's last assistant message. */
const finalText = (messages: ReadonlyArray<Message>): string => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!
    if (m.role === "assistant") {
      return m.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("")
    }
  }
  return ""
}

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
  "/last            the whole output of the last tool call(s) (in $PAGER when it is longer than the screen)",
  "/compact         summarise older turns now (the session file keeps everything)",
  "/model [NAME]    list the models, or switch (PROVIDER:NAME switches provider too)",
  "/thinking LEVEL  the model's thinking: off, low, medium, high",
  "/mode [MODE]     show or switch the permission mode: ask, accept-edits, read-only (plan), yes (Shift+Tab: next)",
  "/undo            put back the files the last prompt changed and take it out of the conversation",
  "/rewind [N]      list the prompts, or go back to before prompt N (its files and the later ones')",
  "/clear           start a new session",
  "/SERVER:PROMPT   an MCP server's prompt as the next message (args: key=value, or the text for one argument)",
  "/init            ask the agent to look at the project and write AGENTS.md (its write asks first)",
  "/edit            write the message in $EDITOR (Ctrl-G too)",
  "/exit            leave (or Ctrl-D, also while a run works); Ctrl-C or Esc aborts a run, two Ctrl-C in 2 s exit",
  "While a run works: type, then Enter steers it now (at its next safe point), Alt-Enter sends after the run.",
  "@path            attach a workspace file (Tab completes paths); an image (PNG, JPEG, GIF, WebP) goes as an image",
  "A new line: Ctrl-J, Alt-Enter, Shift-Enter (where the terminal tells it), or \\ at the end of a line.",
  "A paste is one message. ↑/↓ recall earlier messages (kept per project), Ctrl-R searches them."
].join("\n")

/**
 * `agentloop chat`: an interactive session (the terminal's line editor: multi-line input, pastes
 * whole, per-project history with search, an external editor; slash commands).
 *
 * @since 0.1.0
 * @category commands
 */
export const chatCommand = (flags: AgentFlags): Effect.Effect<void> =>
  Effect.scoped(Effect.gen(function*() {
    const agent = yield* makeAgent(flags, { chat: true })
    const { style, out } = agent
    out(`${style.bold("agentloop chat")} ${style.dim(`${agent.describe()} · ${agent.root}`)}\n`)
    out(`${style.dim(`session ${agent.sessionFile()} · /help for commands`)}\n`)
    if (flags.continue || Option.isSome(flags.resume)) yield* agent.showHistory
    yield* agent.resumePending.pipe(Effect.catch((e) => Effect.sync(() => agent.err(e.message))))
    let edit = false
    while (!agent.controller.exitRequested()) {
      const first = yield* agent.input.read(style.cyan("> "), { edit })
      edit = false
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
        else if (command === "/edit") {
          if (agent.input.interactive) edit = true
          else out("/edit needs a terminal\n")
        } else if (command === "/cost") out(`${agent.cost()}\n`)
        else if (command === "/last") yield* agent.showLast
        else if (command === "/compact") yield* agent.compactNow
        else if (command === "/undo" || (command === "/rewind" && arg.length > 0)) {
          const to = command === "/undo" ? undefined : Number(arg)
          yield* agent.undo(to).pipe(Effect.catch((e) => Effect.sync(() => agent.err(e.message))))
        } else if (command === "/rewind") {
          const prompts = yield* agent.prompts.pipe(
            Effect.catch((e) => Effect.as(Effect.sync(() => agent.err(e.message)), []))
          )
          if (prompts.length === 0) out("no prompt to go back to\n")
          prompts.forEach((p, i) => out(`${String(i + 1).padStart(3)}  ${p}\n`))
          if (prompts.length > 0) out(`${style.dim("/rewind N goes back to before prompt N")}\n`)
        } else if (command === "/clear") yield* agent.clear
        else if (command === "/init") {
          const result = yield* agent.runPrompt(INIT_PROMPT, { mentions: false }).pipe(
            Effect.catch((e) => Effect.as(Effect.sync(() => agent.err(e.message)), undefined))
          )
          if (result?.reason === "stop") {
            out(`${style.dim("AGENTS.md is read when a session starts: /clear starts one that has it")}\n`)
          }
        } else if (command === "/mode") {
          if (arg.length === 0) out(`mode: ${agent.permissions.mode} (${PERMISSION_MODES.join(", ")})\n`)
          else if ((PERMISSION_MODES as ReadonlyArray<string>).includes(arg)) {
            agent.permissions.mode = arg as PermissionMode
            out(`${style.dim(`mode: ${arg}`)}\n`)
          } else out(`unknown mode ${stripControl(arg)} (${PERMISSION_MODES.join(", ")})\n`)
        } else if (command === "/thinking") {
          if (arg.length === 0) out(`thinking levels: ${THINKING_LEVELS.join(", ")}\n`)
          else if ((THINKING_LEVELS as ReadonlyArray<string>).includes(arg)) {
            yield* agent.setThinking(arg as Thinking).pipe(Effect.catch((e) => Effect.sync(() => agent.err(e.message))))
          } else out(`unknown level ${stripControl(arg)} (${THINKING_LEVELS.join(", ")})\n`)
        } else if (command === "/model") {
          if (arg.length === 0) out(`${yield* agent.listModels}\n`)
          else yield* agent.setModel(arg).pipe(Effect.catch((e) => Effect.sync(() => agent.err(e.message))))
        } else if (/^\/[^:\s/]+:\S+$/.test(command!)) {
          // an MCP server's prompt, filled in, as the next turn
          const text = yield* agent.mcpPrompt(command!.slice(1), arg).pipe(
            Effect.catch((e) => Effect.as(Effect.sync(() => agent.err(e.message)), undefined))
          )
          if (text !== undefined) {
            yield* agent.runPrompt(text, { mentions: false }).pipe(
              Effect.catch((e) => Effect.sync(() => agent.err(e.message)))
            )
          }
        } else out(`unknown command ${command} (/help)\n`)
        continue
      }
      yield* agent.runPrompt(text).pipe(Effect.catch((e) => Effect.sync(() => agent.err(e.message))))
    }
    const exit = Option.getOrUndefined(yield* Deferred.poll(agent.controller.exit))
    if (exit !== undefined) process.exitCode = yield* exit
  })).pipe(
    traced(flags),
    Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError),
    Effect.ensuring(exitSoon)
  )

/**
 * `agentloop sessions [--all]`: the sessions of the workspace with a conversation, oldest first (with
 * `all`, the empty ones too); see `listCommand` in SessionCommands.ts.
 *
 * @since 0.1.0
 * @category commands
 */
export const sessionsCommand = (workspace: Option.Option<string>, all = false): Effect.Effect<void> =>
  listCommand({ workspace, all })

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
