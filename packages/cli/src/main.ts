/**
 * The `agentloop` command line.
 *
 * @since 0.1.0
 */
import type { Model } from "@agentloop/core"
import { anthropicFetchLayer, openAiCompatFetchLayer } from "@agentloop/providers"
import type { ProviderConfigError } from "@agentloop/providers"
import { scriptedModelLayer } from "@agentloop/testkit"
import { codingToolsLayer } from "@agentloop/tools"
import { NodeServices } from "@effect/platform-node"
import { Deferred, Effect, Layer, Option } from "effect"
import { Argument, CliOutput, Command, Flag } from "effect/cli"
import { mkdirSync, mkdtempSync, realpathSync } from "node:fs"
import { tmpdir } from "node:os"
import * as nodePath from "node:path"
import { abortCommand, approveCommand, chatCommand, runCommand, runsCommand, sessionsCommand } from "./Agent.ts"
import { ProviderName } from "./Config.ts"
import { demoFiles, demoPrompt, demoScript } from "./DemoScript.ts"
import { cliLoggerLayer } from "./Logs.ts"
import { makeRenderer } from "./Renderer.ts"
import { stripControl } from "./Sanitize.ts"
import { makeScreen, useScreen } from "./Screen.ts"
import { CODING_SYSTEM_PROMPT, runSession } from "./Session.ts"
import { makeStyle, wantsColor } from "./Style.ts"
import type { Style } from "./Style.ts"
import { exitSoon, installController } from "./Terminal.ts"
import type { Controller } from "./Terminal.ts"
import { viewSession } from "./view/index.ts"
import * as WorkspaceIO from "./WorkspaceIO.ts"

// a plain string, so an empty value reaches the check that refuses it (a path flag would turn it
// into the current folder)
const workspaceFlag = Flag.String("workspace").pipe(
  Flag.withDescription("folder to work in (default: a fresh temporary folder with the demo project)"),
  Flag.optional
)
const maxStepsFlag = Flag.Int("max-steps").pipe(
  Flag.withDescription("largest number of model requests per run"),
  Flag.withDefault(30)
)
const providerFlag = Flag.Literals("provider", ["scripted", "openai-compat", "anthropic"]).pipe(
  Flag.withDescription(
    "the model: scripted (built in, offline), openai-compat (OpenAI, Ollama, llama.cpp, vLLM, LM Studio...) " +
      "or anthropic"
  ),
  Flag.withDefault("scripted" as const)
)
const baseUrlFlag = Flag.String("base-url").pipe(
  Flag.withDescription(
    "API root, e.g. http://127.0.0.1:11434/v1 for Ollama (default: the provider's own: https://api.openai.com/v1, " +
      "https://api.anthropic.com)"
  ),
  Flag.optional
)
const modelFlag = Flag.String("model").pipe(
  Flag.withDescription("model name, e.g. gpt-4.1, claude-sonnet-4-5, qwen2.5-coder (required unless scripted)"),
  Flag.optional
)
const apiKeyEnvFlag = Flag.String("api-key-env").pipe(
  Flag.withDescription(
    "environment variable that holds the API key (default: OPENAI_API_KEY for api.openai.com, ANTHROPIC_API_KEY " +
      "for api.anthropic.com; local servers need none)"
  ),
  Flag.optional
)
const maxTokensFlag = Flag.Int("max-tokens").pipe(
  Flag.withDescription("output token budget per response"),
  Flag.optional
)

/** A failure of the command that the user can act on; printed without a stack trace. */
class UsageError extends Error {
  readonly _tag = "UsageError"
}

/** The demo was stopped by a signal or a closed output (the code to exit with). */
class Stopped {
  readonly _tag = "Stopped"
  readonly code: number
  constructor(code: number) {
    this.code = code
  }
}

interface ModelChoice {
  readonly provider: "scripted" | "openai-compat" | "anthropic"
  readonly baseUrl: Option.Option<string>
  readonly model: Option.Option<string>
  readonly apiKeyEnv: Option.Option<string>
  readonly maxTokens: Option.Option<number>
}

/** The `Model` layer the flags ask for. API keys come from the environment, never from a flag. */
const chooseModel = (choice: ModelChoice): Effect.Effect<Layer.Layer<Model, ProviderConfigError>, UsageError> =>
  Effect.suspend(() => {
    if (choice.provider === "scripted") {
      if (Option.isSome(choice.model) || Option.isSome(choice.baseUrl)) {
        return Effect.fail(new UsageError("--model and --base-url need --provider openai-compat or anthropic"))
      }
      return Effect.succeed(scriptedModelLayer(demoScript))
    }
    if (Option.isNone(choice.model)) {
      return Effect.fail(new UsageError(`--model is required with --provider ${choice.provider}`))
    }
    let apiKey: string | undefined
    if (Option.isSome(choice.apiKeyEnv)) {
      apiKey = process.env[choice.apiKeyEnv.value]
      if (apiKey === undefined || apiKey.length === 0) {
        return Effect.fail(
          new UsageError(`the environment variable ${choice.apiKeyEnv.value} (--api-key-env) is not set`)
        )
      }
    }
    const options = {
      model: choice.model.value,
      baseUrl: Option.getOrUndefined(choice.baseUrl),
      apiKey,
      maxTokens: Option.getOrUndefined(choice.maxTokens)
    }
    return Effect.succeed(
      choice.provider === "anthropic" ? anthropicFetchLayer(options) : openAiCompatFetchLayer(options)
    )
  })

/**
 * Creates the demo project in `root` (a fresh temporary folder when none is given). Every file
 * goes through the confined writer (never through a link, never outside `root`); an existing file
 * is only replaced with `--force`.
 */
const prepareWorkspace = (given: Option.Option<string>, force: boolean) =>
  Effect.gen(function*() {
    if (Option.isSome(given) && given.value.trim().length === 0) {
      return yield* Effect.fail(
        new UsageError("--workspace is empty: give a folder (or leave the flag out for a fresh one)")
      )
    }
    const root = Option.isSome(given) ?
      nodePath.resolve(given.value) :
      mkdtempSync(nodePath.join(tmpdir(), "agentloop-demo-"))
    yield* Effect.try({
      try: () => mkdirSync(root, { recursive: true }),
      catch: (e) => new UsageError(`cannot create --workspace ${root}: ${(e as { code?: string }).code ?? e}`)
    })
    const real = realpathSync(root)
    for (const [file, content] of Object.entries(demoFiles)) {
      const write = force ? WorkspaceIO.writeFile(real, file, content) : WorkspaceIO.createFile(real, file, content)
      yield* write.pipe(Effect.mapError((e) =>
        new UsageError(
          e.reason === "AlreadyExists" ?
            `${
              nodePath.join(real, file)
            } already exists: the demo does not overwrite your files (use --force, or another --workspace)` :
            e.message
        )
      ))
    }
    return real
  })

/**
 * What the scripted demo ends with: the one command that runs the same session on a real model,
 * as the reader started the demo (`npm run demo` in a clone, or the `agentloop` command).
 */
const nextSteps = (fromNpm: boolean, style: Style): string => {
  const command = (flags: string) => fromNpm ? `npm run demo -- ${flags}` : `agentloop demo ${flags}`
  return [
    ``,
    `${style.bold("Next")}: the same session on a real model`,
    `  export ANTHROPIC_API_KEY=...   # or OPENAI_API_KEY with --provider openai-compat --model gpt-4.1`,
    `  ${command("--provider anthropic --model claude-sonnet-4-5")}`,
    `  a local OpenAI-compatible server needs no key: ${
      command("--provider openai-compat --base-url http://127.0.0.1:11434/v1 --model qwen2.5-coder")
    }`,
    `Then your own project: \`agentloop chat\` in its folder (docs/guide/cli.md).`,
    ``
  ].join("\n")
}

const demo = Command.make("demo", {
  workspace: workspaceFlag,
  maxSteps: maxStepsFlag,
  provider: providerFlag,
  baseUrl: baseUrlFlag,
  model: modelFlag,
  apiKeyEnv: apiKeyEnvFlag,
  maxTokens: maxTokensFlag,
  force: Flag.Boolean("force").pipe(
    Flag.withDescription("replace the demo's files when they exist in --workspace"),
    Flag.withDefault(false)
  )
}, (config) =>
  Effect.scoped(Effect.gen(function*() {
    const style = makeStyle(wantsColor(process.stdout.isTTY, process.env))
    // Ctrl-C, SIGTERM, SIGHUP and a closed output pipe stop the session through its scopes (the
    // tools' processes are killed, the transcript keeps every call paired), then the demo exits
    let controller: Controller | undefined
    const write = (text: string) => {
      if (controller?.outputClosed() !== true && !process.stdout.destroyed) process.stdout.write(text)
    }
    // (the logger's lines go above the screen's status line)
    const screen = makeScreen({
      write,
      live: process.stdout.isTTY === true,
      columns: () => process.stdout.columns,
      rows: () => process.stdout.rows
    })
    yield* useScreen(screen)
    controller = yield* installController((text) => screen.write(`${style.yellow(text)}\n`))
    const stop = controller
    stop.setRun(Effect.sync(() => stop.requestExit(130)))
    const renderer = yield* makeRenderer({
      write,
      style,
      live: process.stdout.isTTY === true,
      columns: process.stdout.columns,
      screen
    })
    // build the model first, so a missing key or a bad option fails before anything else happens
    const model = yield* chooseModel(config).pipe(
      Effect.flatMap(Layer.build),
      Effect.catchTag("ProviderConfigError", (e) =>
        Effect.fail(new UsageError(`${e.message} (the CLI reads API keys from the environment: see --api-key-env)`)))
    )
    const root = yield* prepareWorkspace(config.workspace, config.force)
    const who = config.provider === "scripted" ?
      "scripted model" :
      `${config.provider} ${
        Option.getOrElse(config.model, () => "")
      }${
        Option.match(config.baseUrl, {
          onNone: () => "",
          onSome: (url) => ` at ${url}`
        })
      }`
    write(`${style.bold("agentloop demo")} — ${who}, real tools, workspace ${root}\n`)
    write(`${style.dim("user")}      ${demoPrompt}\n\n`)
    const report = yield* runSession({
      workspace: root,
      prompt: demoPrompt,
      systemPrompt: CODING_SYSTEM_PROMPT,
      maxSteps: config.maxSteps,
      continuations: 2,
      renderer
    }).pipe(
      Effect.provide(codingToolsLayer(root, { bash: { hideEnv: Option.toArray(config.apiKeyEnv) } })),
      Effect.provideContext(model),
      Effect.raceFirst(Effect.flatMap(Deferred.await(stop.exit), (code) => Effect.fail(new Stopped(code))))
    )
    const first = report.runs[0]!
    if (config.provider !== "scripted" && first.reason === "error" && first.steps <= 1) {
      const where = Option.getOrElse(config.baseUrl, () => "the provider's API")
      write(style.red(`\nNo answer from ${where}: ${first.error}\n`))
      write("Is the server running and the model name right? Is the API key set (see --api-key-env)?\n")
    }
    write(`\n${style.bold("Summary")}\n`)
    write(`  runs         ${report.runs.map((r) => r.reason).join(" → ")}\n`)
    write(`  steps        ${report.steps}\n`)
    write(`  tools run    ${report.toolsRun} (${report.toolErrors} failed, ${report.skipped} skipped)\n`)
    write(`  final        ${report.final.reason}\n`)
    write(
      report.violations.length === 0 ?
        `  invariants   ${style.green("all three hold (checkInvariants: 0 violations)")}\n` :
        `  invariants   ${style.red(`${report.violations.length} violation(s)`)}\n${
          report.violations.map((v) => `    [${v.invariant}] ${v.message}\n`).join("")
        }`
    )
    write(`  transcript   ${report.transcriptFile}\n`)
    if (config.provider === "scripted") write(nextSteps(process.env["npm_lifecycle_event"] === "demo", style))
    if (report.violations.length > 0 || report.final.reason !== "stop") {
      return yield* Effect.fail(new UsageError(`the session ended with reason "${report.final.reason}"`))
    }
  })).pipe(
    Effect.catchIf((e): e is UsageError => e instanceof UsageError, (e) =>
      Effect.sync(() => {
        process.stderr.write(`agentloop: ${e.message}\n`)
        process.exitCode = 1
      })),
    // a write that failed or was refused (a link, outside the workspace), a run that could not go on: one line,
    // no stack
    Effect.catchTag(["PersistenceError", "CliError"], (e) =>
      Effect.sync(() => {
        process.stderr.write(`agentloop: ${e.message}\n`)
        process.exitCode = 1
      })),
    Effect.catchTag("Stopped", (e) =>
      Effect.sync(() => {
        process.exitCode = e.code
      })),
    Effect.ensuring(exitSoon)
  )).pipe(Command.withDescription(
    "Run a coding session in a fresh temporary folder holding a small project with a bug: the model fixes it " +
      "with the read, write, edit and bash tools. By default the model is the built-in scripted one (no network, " +
      "no API key); --provider runs the same session against a real model."
  ))

const optionalString = (name: string, description: string) =>
  Flag.String(name).pipe(Flag.withDescription(description), Flag.optional)
const optionalInt = (name: string, description: string) =>
  Flag.Int(name).pipe(Flag.withDescription(description), Flag.optional)

/** The flags of `run` and `chat`; unset ones fall back to the environment and the config files. */
const agentFlags = {
  workspace: optionalString("workspace", "project folder to work in (default: the current folder)"),
  provider: Flag.Literals("provider", ProviderName.literals).pipe(
    Flag.withDescription("openai-compat (OpenAI, Ollama, llama.cpp, vLLM, LM Studio...) or anthropic"),
    Flag.optional
  ),
  model: optionalString("model", "model name, e.g. gpt-4.1, claude-sonnet-4-5, qwen2.5-coder"),
  baseUrl: optionalString("base-url", "API root, e.g. http://127.0.0.1:11434/v1 for Ollama"),
  apiKeyEnv: optionalString(
    "api-key-env",
    "environment variable holding the API key (default: OPENAI_API_KEY / ANTHROPIC_API_KEY for the providers' own " +
      "servers); bash never sees it"
  ),
  maxTokens: optionalInt("max-tokens", "output token budget per response"),
  maxSteps: optionalInt("max-steps", "largest number of model requests per run (default 50)"),
  contextWindow: optionalInt(
    "context-window",
    "the model's context window in tokens; older turns are summarised past 75% of it (default: known models' own)"
  ),
  firstByteTimeout: optionalString(
    "first-byte-timeout",
    "longest wait for the response's headers (seconds or e.g. \"2 minutes\")"
  ),
  idleTimeout: optionalString("idle-timeout", "longest silence while a response streams"),
  requestTimeout: optionalString("request-timeout", "longest time for one model request"),
  promptCache: Flag.Boolean("prompt-cache").pipe(
    Flag.withDescription(
      "Anthropic's prompt caching (cache breakpoints on the tools, the system prompt and the latest turns; on by " +
        "default): --no-prompt-cache turns it off (OpenAI-compatible servers cache on their own, with no option)"
    ),
    Flag.optional
  ),
  approvalTimeout: optionalString(
    "approval-timeout",
    "a call that asks for approval and gets no answer within this time is denied (seconds or e.g. \"10 minutes\", " +
      "\"3 days\"; default: it waits)"
  ),
  systemPrompt: optionalString(
    "system-prompt",
    "replaces the built-in system prompt (instructions, tools, workspace, date, platform) and the config's " +
      "systemPrompt; the project's AGENTS.md files are still added"
  ),
  yes: Flag.Boolean("yes").pipe(
    Flag.withAlias("y"),
    Flag.withDescription("allow every tool call without asking"),
    Flag.withDefault(false)
  ),
  continue: Flag.Boolean("continue").pipe(
    Flag.withAlias("c"),
    Flag.withDescription("continue the latest session"),
    Flag.withDefault(false)
  ),
  resume: optionalString("resume", "continue the session with this id (see agentloop sessions)"),
  mcp: Flag.String("mcp").pipe(
    Flag.withDescription(
      "start an MCP server and give its tools to the model, e.g. --mcp \"npx -y " +
        "@modelcontextprotocol/server-everything\" (repeatable)"
    ),
    Flag.atLeast(0)
  ),
  mcpUrl: Flag.String("mcp-url").pipe(
    Flag.withDescription("connect to an MCP server over streamable HTTP (repeatable)"),
    Flag.atLeast(0)
  ),
  durable: Flag.Boolean("durable").pipe(
    Flag.withDescription(
      "run as a durable run (.agentloop/durable/<session>.db): a run whose process was stopped or killed resumes " +
        "when the same command runs again; approvals can be answered from another terminal (agentloop approve)"
    ),
    Flag.withDefault(false)
  )
}

const run = Command.make("run", {
  ...agentFlags,
  outputSchema: optionalString(
    "output-schema",
    "a JSON Schema file: the model gives its final answer as a value of that schema, printed alone as JSON on " +
      "stdout (everything else goes to stderr); no valid answer: a non-zero exit"
  ),
  image: Flag.String("image").pipe(
    Flag.withDescription(
      "attach an image of the workspace (PNG, JPEG, GIF or WebP, by its content; at most 5 MiB) to the task " +
        "(repeatable); the model must accept images"
    ),
    Flag.atLeast(0)
  ),
  task: Argument.String("task")
}, runCommand).pipe(
  Command.withDescription(
    "Run one task in the current folder and exit: 0 when the model finished, non-zero naming the reason otherwise. " +
      "Calls that change things ask first on a terminal; in a pipe they are denied unless --yes."
  )
)

const chat = Command.make("chat", agentFlags, chatCommand).pipe(
  Command.withDescription("An interactive coding session in the current folder (/help inside for commands).")
)

const sessions = Command.make("sessions", {
  workspace: optionalString("workspace", "project folder (default: the current folder)")
}, ({ workspace }) => sessionsCommand(workspace)).pipe(
  Command.withDescription("List the sessions of this folder: id, date, steps, how it ended, first prompt.")
)

const runs = Command.make("runs", {
  workspace: optionalString("workspace", "project folder (default: the current folder)")
}, ({ workspace }) => runsCommand(workspace)).pipe(
  Command.withDescription(
    "List the durable runs of this folder (agentloop run/chat --durable): id, start, state (running, waiting for " +
      "approval with the calls waiting, ended with its reason and steps), prompt."
  )
)

const approveCmd = Command.make("approve", {
  workspace: optionalString("workspace", "project folder (default: the current folder)"),
  run: Argument.String("run").pipe(Argument.withDescription("the durable run's id (agentloop runs)")),
  call: Argument.String("call").pipe(Argument.withDescription("the id of the call waiting for approval")),
  answer: Argument.String("answer").pipe(Argument.withDescription("y (allow it) or n (deny it)")),
  reason: Argument.String("reason").pipe(
    Argument.withDescription("with n: the reason the model sees"),
    Argument.variadic()
  )
}, approveCommand).pipe(
  Command.withDescription(
    "Answer a durable run's approval request from any terminal: agentloop approve RUN CALL y|n [reason]."
  )
)

const abortCmd = Command.make("abort", {
  workspace: optionalString("workspace", "project folder (default: the current folder)"),
  run: Argument.String("run").pipe(Argument.withDescription("the durable run's id (agentloop runs)"))
}, abortCommand).pipe(
  Command.withDescription(
    "Abort a durable run from any terminal: calls waiting or not started are skipped, a running call finishes, " +
      "the run ends aborted."
  )
)

const view = Command.make("view", {
  session: Argument.String("session").pipe(Argument.optional),
  port: optionalInt("port", "port on 127.0.0.1 (default: any free one)"),
  workspace: optionalString("workspace", "project folder (default: the current folder)")
}, ({ port, session, workspace }) =>
  viewSession({
    workspace: Option.getOrElse(workspace, () => process.cwd()),
    session: Option.getOrUndefined(session),
    port: Option.getOrUndefined(port)
  }).pipe(
    Effect.catchTag("ViewError", (e) =>
      Effect.sync(() => {
        process.stderr.write(`agentloop: ${e.message}\n`)
        process.exitCode = 2
      }))
  )).pipe(
    Command.withDescription("Show a session (default: the latest) as a timeline in the browser, served on 127.0.0.1.")
  )

/**
 * How effect's command line reports what it was asked for: help and version as usual; a usage error
 * (an unknown flag or command, a bad or missing value) as one line on stderr plus the command whose
 * `--help` to read, instead of the whole help.
 *
 * @since 0.1.0
 * @category commands
 */
export const usagePresenter: CliOutput.Presenter = {
  present: (event) =>
    event._tag === "InvalidInvocation" ?
      Effect.sync(() => {
        const first = event.errors[0]?.message ?? "invalid command line"
        const line = first.split("\n").map((l) => l.trim()).filter((l) => l.length > 0).join(" ")
        const more = event.errors.length > 1 ? ` (and ${event.errors.length - 1} more)` : ""
        process.stderr.write(`agentloop: ${stripControl(line)}${more}; see ${event.commandPath.join(" ")} --help\n`)
      }) :
      CliOutput.defaultPresenter.present(event)
}

/**
 * The `agentloop` command.
 *
 * @since 0.1.0
 * @category commands
 */
export const agentloop = Command.make("agentloop").pipe(
  Command.withDescription("agentloop: a coding agent in your terminal, on a verifiable agent loop (Effect 4)."),
  Command.withSubcommands([run, chat, sessions, runs, approveCmd, abortCmd, view, demo])
)

/**
 * Runs the command line with `process.argv`.
 *
 * @since 0.1.0
 * @category main
 */
export const main = Command.run(agentloop, { version: "0.1.0" }).pipe(
  // a bad flag or command: one line and where the help is, exit 2 (the help itself only on --help)
  Effect.catchTag("ShowHelp", (e) =>
    Effect.sync(() => {
      if (e.errors.length > 0) process.exitCode = 2
    })),
  Effect.provide(CliOutput.layerPresenter(usagePresenter)),
  // log entries (a provider's retries) as one readable line each
  Effect.provide(cliLoggerLayer),
  Effect.provide(NodeServices.layer)
)
