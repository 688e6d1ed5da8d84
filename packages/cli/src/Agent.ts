/**
 * `agentloop run` and `agentloop chat`: a coding agent in the current folder, with sessions,
 * approvals, stopping, compaction and usage (see the package README).
 *
 * @since 0.1.0
 */
import { Clock, Context, Deferred, Effect, Layer, Option, Scope, Stream } from "effect"
import type { Duration } from "effect"
import { callbackSinkLayer, Model, startAgentLoop } from "@agentloop/core"
import type { AgentRunResult, LoopEvent, Message, TranscriptEntry, Usage, UserMessage } from "@agentloop/core"
import { anthropicFetchLayer, openAiCompatFetchLayer } from "@agentloop/providers"
import { decodeMcpServers, mcpExecutorLayer, mcpToolsLayer, serversFromFlags } from "@agentloop/mcp"
import { bashOptionsLayer, codingTools, codingToolsLayer, workspaceLayer } from "@agentloop/tools"
import { NodeServices } from "@effect/platform-node"
import { realpathSync, statSync } from "node:fs"
import * as nodePath from "node:path"
import { makeApprovalPolicy } from "./Approvals.ts"
import type { ApprovalRecord } from "./Approvals.ts"
import { makeCompactor, knownContextWindow } from "./Compaction.ts"
import type { CompactionState } from "./Compaction.ts"
import { resolveSettings } from "./Config.ts"
import type { FlagSettings, Settings } from "./Config.ts"
import { makeRenderer } from "./Renderer.ts"
import { CODING_SYSTEM_PROMPT } from "./Session.ts"
import { addUsage, appendOrReport, createSession, listSessions, openSession, summarize } from "./Sessions.ts"
import type { SessionLog } from "./Sessions.ts"
import { stripControl } from "./Sanitize.ts"
import { makeStyle, wantsColor } from "./Style.ts"
import type { Style } from "./Style.ts"
import { exitSoon, installController, makeLineInput } from "./Terminal.ts"
import type { Controller, LineInput } from "./Terminal.ts"

/**
 * A failure the user can act on: printed as one line on stderr, exit code 2.
 *
 * @since 0.1.0
 * @category errors
 */
export class CliError extends Error {
  readonly _tag = "CliError"
}

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
}

/** The workspace: the folder given (never an empty string) or the current one. */
const workspaceOf = (given: Option.Option<string>): Effect.Effect<string, CliError> =>
  Effect.suspend(() => {
    if (Option.isSome(given) && given.value.trim().length === 0) {
      return Effect.fail(new CliError("--workspace is empty: give a folder (or leave the flag out for the current one)"))
    }
    const path = nodePath.resolve(Option.getOrElse(given, () => process.cwd()))
    try {
      if (!statSync(path).isDirectory()) return Effect.fail(new CliError(`--workspace ${path} is not a folder`))
      return Effect.succeed(realpathSync(path))
    } catch {
      return Effect.fail(new CliError(`--workspace ${path} does not exist`))
    }
  })

/** Builds the model the settings ask for. */
const modelOf = (settings: Settings, model: string) =>
  Effect.gen(function*() {
    const provider = settings.provider
    if (provider === undefined) {
      return yield* Effect.fail(
        new CliError(
          "no model configured: pass --provider openai-compat|anthropic and --model NAME, set AGENTLOOP_PROVIDER and " +
            "AGENTLOOP_MODEL, or write .agentloop/config.json (see agentloop --help and the README)"
        )
      )
    }
    if (provider === "scripted") {
      return yield* Effect.fail(new CliError("the scripted model only plays the demo (agentloop demo); choose openai-compat or anthropic"))
    }
    let apiKey: string | undefined
    if (settings.apiKeyEnv !== undefined) {
      apiKey = process.env[settings.apiKeyEnv]
      if (apiKey === undefined || apiKey.length === 0) {
        return yield* Effect.fail(new CliError(`the environment variable ${settings.apiKeyEnv} (apiKeyEnv) is not set`))
      }
    }
    const options = {
      model,
      baseUrl: settings.baseUrl,
      apiKey,
      maxTokens: settings.maxTokens,
      ...(Object.keys(settings.timeouts).length > 0 ?
        { timeouts: settings.timeouts as { readonly [K in keyof Settings["timeouts"]]: Duration.Input } } :
        {})
    }
    const layer = provider === "anthropic" ? anthropicFetchLayer(options) : openAiCompatFetchLayer(options)
    const context = yield* Layer.build(layer).pipe(
      Effect.mapError((e) => new CliError(`${e.message} (the CLI reads API keys from the environment: see --api-key-env)`))
    )
    return context
  })

/**
 * The tools: the coding tools (bash never sees the known provider keys nor the one named by
 * apiKeyEnv), plus the tools of the MCP servers of the config file's `mcpServers` and of
 * `--mcp` / `--mcp-url`.
 */
const toolsLayer = (root: string, settings: Settings, flags: AgentFlags) =>
  Effect.gen(function*() {
    const hideEnv = settings.apiKeyEnv === undefined ? [] : [settings.apiKeyEnv]
    const fromFile = settings.mcpServers === undefined ? [] : yield* decodeMcpServers(settings.mcpServers)
    const fromFlags = yield* serversFromFlags({ mcp: flags.mcp, mcpUrl: flags.mcpUrl }, fromFile.map((s) => s.name))
    const servers = [...fromFile, ...fromFlags]
    if (servers.length === 0) return codingToolsLayer(root, { bash: { hideEnv } })
    return mcpExecutorLayer(codingTools).pipe(
      Layer.provideMerge(mcpToolsLayer(servers)),
      Layer.provide(workspaceLayer(root)),
      Layer.provide(bashOptionsLayer({ hideEnv })),
      Layer.provide(NodeServices.layer)
    )
  })

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
  readonly runPrompt: (prompt: string) => Effect.Effect<AgentRunResult>
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
    if (r.type === "compaction" && typeof r["summarized"] === "number" && typeof r["summary"] === "object") {
      return { summary: r["summary"] as UserMessage, covered: r["summarized"] }
    }
  }
  return undefined
}

/** Sets up everything `run` and `chat` share. */
const makeAgent = (flags: AgentFlags): Effect.Effect<Agent, CliError, Scope.Scope> =>
  Effect.gen(function*() {
    const root = yield* workspaceOf(flags.workspace)
    const scope = yield* Effect.scope
    const style = makeStyle(wantsColor(process.stdout.isTTY, process.env))
    const errStyle = makeStyle(wantsColor(process.stderr.isTTY, process.env))
    // the controller decides when the output is gone; nothing is written after that
    let controllerRef: Controller | undefined
    const safeWrite = (stream: NodeJS.WriteStream) => (text: string) => {
      if (controllerRef?.outputClosed() === true || stream.destroyed) return
      stream.write(text)
    }
    const out = safeWrite(process.stdout)
    const err = safeWrite(process.stderr)
    const controller = yield* installController((text) => out(`${style.yellow(text)}\n`))
    controllerRef = controller
    const settings = yield* resolveSettings(flags, root, process.env).pipe(Effect.mapError((e) => new CliError(e.message)))
    if (flags.continue && Option.isSome(flags.resume)) {
      return yield* Effect.fail(new CliError("--continue and --resume cannot be used together"))
    }
    let modelName = settings.model
    if (settings.provider !== undefined && settings.provider !== "scripted" && modelName === undefined) {
      return yield* Effect.fail(new CliError(`a model name is needed with provider ${settings.provider} (--model NAME)`))
    }
    let modelContext: Context.Context<Model> = yield* modelOf(settings, modelName ?? "")
    const tools = yield* toolsLayer(root, settings, flags).pipe(Effect.mapError((e) => new CliError(e.message)))
    const executor = yield* Layer.build(tools).pipe(
      Effect.mapError((e) =>
        new CliError(e._tag === "PlatformError" ? `cannot open the workspace ${root}: ${e.message}` : e.message)
      )
    )
    const renderer = yield* makeRenderer({ write: out, style, live: process.stdout.isTTY === true, columns: process.stdout.columns })
    const input = yield* makeLineInput(controller)
    const report = (message: string) => err(`${errStyle.red(`agentloop: ${message.split("\n")[0]}`)}\n`)

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
      if (latest === undefined) return yield* Effect.fail(new CliError(`--continue: there is no session in ${root}/.agentloop/sessions yet`))
      resumeId = latest.id
    }
    if (resumeId !== undefined && !/^[A-Za-z0-9._-]+$/.test(resumeId)) {
      return yield* Effect.fail(new CliError(`--resume: "${resumeId}" is not a session id (see agentloop sessions)`))
    }
    let log: SessionLog = yield* (resumeId === undefined ? newSession : openSession(root, resumeId)).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    if (log.repairedTornLine) report(`the session's last line was torn (a crash); it was cut off`)
    // a resumed session keeps the system prompt it started with
    let systemPrompt = log.header.systemPrompt.length > 0 ? log.header.systemPrompt : configuredPrompt
    let history: ReadonlyArray<Message> = log.messages
    let sessionUsage: Usage | undefined = summarize(log.id, log.records).usage
    let lastUsage: Usage | undefined
    const append = (entry: TranscriptEntry) => appendOrReport(log, entry, report)

    const contextWindow = settings.contextWindow ?? (modelName === undefined ? undefined : knownContextWindow(modelName))
    // the model in use now (`/model` switches it)
    const currentModel = Model.of({ stream: (request) => Stream.suspend(() => Context.get(modelContext, Model).stream(request)) })
    const compactor = makeCompactor({
      contextWindow,
      systemPrompt,
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
          yield* renderer.line(style.dim(`⇢ compacted: ${state.covered} earlier message(s) summarised, ${info.kept} kept verbatim`))
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
      record: (r: ApprovalRecord) => Effect.flatMap(Clock.currentTimeMillis, (at) => append({ type: "approval", at, ...r })),
      style,
      always
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

    const runPrompt = (prompt: string): Effect.Effect<AgentRunResult> =>
      Effect.scoped(Effect.gen(function*() {
        const at = yield* Clock.currentTimeMillis
        yield* append({ type: "run_start", at, prompt })
        const userMessage: Message = { role: "user", content: prompt, timestamp: at }
        yield* append(userMessage)
        const input = [...history, userMessage]
        history = input
        let step = 0
        const model = Layer.succeed(Model, Model.of({
          stream: (request) =>
            Stream.unwrap(Effect.gen(function*() {
              step++
              yield* append({ type: "turn_start", at: yield* Clock.currentTimeMillis, step })
              return currentModel.stream(request)
            }))
        }))
        const sink = callbackSinkLayer((event) => Effect.andThen(persist(event), renderer.render(event)))
        const run = yield* startAgentLoop({
          systemPrompt,
          messages: input,
          maxSteps: settings.maxSteps,
          policy,
          transformContext: compactor.transform
        }).pipe(Effect.provide(Layer.mergeAll(model, sink)), Effect.provideContext(executor))
        controller.setRun(run.abort)
        if (controller.exitRequested()) yield* Effect.forkChild(run.abort)
        const result = yield* run.result
        controller.setRun(undefined)
        history = result.messages
        lastUsage = result.usage
        sessionUsage = addUsage(sessionUsage, result.usage)
        yield* append({
          type: "run_end",
          at: yield* Clock.currentTimeMillis,
          reason: result.reason,
          steps: result.steps,
          ...(result.error === undefined ? {} : { error: result.error }),
          ...(result.usage === undefined ? {} : { usage: result.usage })
        })
        out(`${style.dim(`  usage: ${describeUsage(result.usage)} · session: ${describeUsage(sessionUsage)}`)}\n`)
        return result
      }))

    return {
      root,
      style,
      out,
      err: report,
      controller,
      input,
      runPrompt,
      compactNow: Effect.gen(function*() {
        const done = yield* compactor.compactNow(history)
        if (!done) out(`${style.dim("nothing to compact yet")}\n`)
      }),
      clear: Effect.gen(function*() {
        log = yield* newSession.pipe(Effect.catch((e) => Effect.as(Effect.sync(() => report(e.message)), log)))
        history = []
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
        `${settings.provider ?? "?"} ${modelName ?? ""}${settings.baseUrl === undefined ? "" : ` at ${settings.baseUrl}`}`,
      cost: () =>
        `last run: ${describeUsage(lastUsage)}\nsession:  ${describeUsage(sessionUsage)}${
          contextWindow === undefined ? "" : `\ncontext window: ${formatTokens(contextWindow)} tokens (compaction at 75%)`
        }`,
      sessionFile: () => log.file
    } satisfies Agent
  })

const reportCliError = (e: CliError) =>
  Effect.sync(() => {
    process.stderr.write(`agentloop: ${e.message}\n`)
    process.exitCode = 2
  })

/**
 * `agentloop run "task"`: one run, printed live (plain text in a pipe); exits 0 when the model
 * stops, otherwise with `RUN_EXIT_CODES[reason]` and a line on stderr naming the reason.
 *
 * @since 0.1.0
 * @category commands
 */
export const runCommand = (flags: AgentFlags & { readonly task: string }): Effect.Effect<void> =>
  Effect.scoped(Effect.gen(function*() {
    if (flags.task.trim().length === 0) return yield* Effect.fail(new CliError("the task is empty"))
    const agent = yield* makeAgent(flags)
    const { style } = agent
    agent.out(`${style.bold("agentloop")} ${style.dim(`${agent.describe()} · ${agent.root} · session ${agent.sessionFile()}`)}\n`)
    const result = yield* agent.runPrompt(flags.task)
    const exit = Option.getOrUndefined(yield* Deferred.poll(agent.controller.exit))
    const code = exit !== undefined ? yield* exit : RUN_EXIT_CODES[result.reason]
    if (result.reason !== "stop" && !agent.controller.outputClosed()) {
      agent.err(`run ended: ${result.reason}${result.error === undefined ? "" : ` (${stripControl(result.error)})`}`)
    }
    process.exitCode = code
  })).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError), Effect.ensuring(exitSoon))

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
      yield* agent.runPrompt(text)
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
      process.stdout.write(
        `${s.id}  ${date}  ${String(s.steps).padStart(3)} step(s)  ${s.ended.padEnd(11)}  ${
          prompt.length > 60 ? `${prompt.slice(0, 59)}…` : prompt
        }\n`
      )
    }
  }).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError))
