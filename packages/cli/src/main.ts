/**
 * The `agentloop` command line.
 *
 * Only the commands' flags and descriptions load up front (so `--help` and `--version` start in
 * about the time Node itself does); each command's code is imported when that command runs.
 *
 * @since 0.1.0
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Effect, Option, Stdio } from "effect"
import { Argument, CliOutput, Command, Flag } from "effect/cli"
import { PERMISSION_MODES, PROVIDER_NAMES, THINKING_LEVELS } from "./internal/Names.ts"
import { cliLoggerLayer } from "./Logs.ts"
import { stripControl } from "./Sanitize.ts"

/** The version `--version` prints. */
const VERSION = "0.1.0"

/**
 * A command's handler that is imported when the command runs: `load` names the module (a
 * literal `import()`, so the bundle puts it in a chunk of its own) and `pick` its handler.
 */
const lazy =
  <M, A, E, R>(load: () => Promise<M>, pick: (module: M) => (input: A) => Effect.Effect<void, E, R>) =>
  (input: A): Effect.Effect<void, E, R> => Effect.flatMap(Effect.promise(load), (module) => pick(module)(input))

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
const providerFlag = Flag.Literals("provider", PROVIDER_NAMES).pipe(
  Flag.withDescription(
    "the model: scripted (the built-in scripted model the demo and the tests use: offline, no API key), " +
      "openai-compat (OpenAI, Ollama, llama.cpp, vLLM, LM Studio...) or anthropic"
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
}, lazy(() => import("./internal/Demo.ts"), (m) => m.demoCommand)).pipe(Command.withDescription(
  "Run a coding session in a fresh temporary folder holding a small project with a bug: the model fixes it " +
    "with the read, write, edit and bash tools. By default the model is the built-in scripted one (no network, " +
    "no API key); --provider runs the same session against a real model."
))

/** The providers of a real model: what `run` and `chat` offer. */
const MODEL_PROVIDERS = ["openai-compat", "anthropic"] as const satisfies ReadonlyArray<(typeof PROVIDER_NAMES)[number]>

const optionalString = (name: string, description: string) =>
  Flag.String(name).pipe(Flag.withDescription(description), Flag.optional)
const optionalInt = (name: string, description: string) =>
  Flag.Int(name).pipe(Flag.withDescription(description), Flag.optional)

/** The flags of `run` and `chat`; unset ones fall back to the environment and the config files. */
const agentFlags = {
  workspace: optionalString("workspace", "project folder to work in (default: the current folder)"),
  // (not scripted: the built-in scripted model only plays the demo, so run and chat do not offer it)
  provider: Flag.Literals("provider", MODEL_PROVIDERS).pipe(
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
    Flag.withDescription("allow every tool call without asking, except what a deny rule names (--mode yes)"),
    Flag.withDefault(false)
  ),
  thinking: Flag.Literals("thinking", THINKING_LEVELS).pipe(
    Flag.withDescription(
      "the model's thinking: off (default), low, medium, high: Anthropic's extended thinking (a budget of 2048, " +
        "8192 or 24576 tokens) or OpenAI's reasoning_effort"
    ),
    Flag.optional
  ),
  mode: Flag.Literals("mode", PERMISSION_MODES).pipe(
    Flag.withDescription(
      "permission mode: ask (default: read-only tools run, the rest asks), accept-edits (writes and edits in the " +
        "workspace run, bash asks), read-only (plan: only read-only tools run), yes (everything runs); the config's " +
        "permissions.allow/deny rules apply in every mode"
    ),
    Flag.optional
  ),
  continue: Flag.Boolean("continue").pipe(
    Flag.withAlias("c"),
    Flag.withDescription(
      "continue the latest session with a conversation: the model answered at least once (stop, tool calls or " +
        "its token limit) in what undo left, or its last run has not ended; empty sessions (the one /clear opened, " +
        "runs that failed before any answer, every prompt undone) are skipped, unless every session is empty"
    ),
    Flag.withDefault(false)
  ),
  resume: optionalString("resume", "continue the session with this id (see agentloop sessions)"),
  fork: optionalString(
    "fork",
    "start a new session from session ID's history up to and including its prompt N (--fork ID:N; default: all of " +
      "it; agentloop sessions show ID numbers them), then go on; the original session is not changed"
  ),
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
  ),
  otlp: optionalString(
    "otlp",
    "send the run's traces (OpenTelemetry GenAI spans: the agent, each model turn, each tool call) to this OTLP/HTTP " +
      "endpoint, e.g. http://127.0.0.1:4318 (traces go to URL/v1/traces; default: OTEL_EXPORTER_OTLP_ENDPOINT)"
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
      "attach an image of the workspace (PNG, JPEG, GIF or WebP, by its content) to the task, resized as read " +
        "resizes images (at most 2000 px a side, 3.75 MiB); repeatable; the model must accept images"
    ),
    Flag.atLeast(0)
  ),
  json: Flag.Boolean("json").pipe(
    Flag.withDescription(
      "print one JSON object per line on stdout: a session line, each event of the run, and a result line last " +
        "(schema version 1, documented in the README's Scripting section); everything else goes to stderr"
    ),
    Flag.withDefault(false)
  ),
  quiet: Flag.Boolean("quiet").pipe(
    Flag.withAlias("q"),
    Flag.withDescription("no progress: only the final answer on stdout (errors still on stderr)"),
    Flag.withDefault(false)
  ),
  task: Argument.String("task").pipe(Argument.withDescription("the task; - reads it from stdin"))
}, lazy(() => import("./Agent.ts"), (m) => m.runCommand)).pipe(
  Command.withDescription(
    "Run one task in the current folder and exit: 0 when the model finished, non-zero naming the reason otherwise. " +
      "Calls that change things ask first on a terminal; in a pipe they are denied unless --yes."
  )
)

const chat = Command.make("chat", agentFlags, lazy(() => import("./Agent.ts"), (m) => m.chatCommand)).pipe(
  Command.withDescription("An interactive coding session in the current folder (/help inside for commands).")
)

const sessionArgument = Argument.String("session").pipe(
  Argument.withDescription("the session's id (agentloop sessions lists them)")
)

const sessionsShow = Command.make("show", {
  workspace: optionalString("workspace", "project folder (default: the current folder)"),
  session: sessionArgument
}, lazy(() => import("./SessionCommands.ts"), (m) => m.showCommand)).pipe(
  Command.withDescription("Show a session's prompts, numbered from 1 (the numbers sessions fork --at takes).")
)

const sessionsFork = Command.make("fork", {
  workspace: optionalString("workspace", "project folder (default: the current folder)"),
  session: sessionArgument,
  at: optionalInt(
    "at",
    "the prompt to fork at: the new session holds prompts 1 to N with everything their runs did (default: all)"
  )
}, lazy(() => import("./SessionCommands.ts"), (m) => m.forkCommand)).pipe(
  Command.withDescription(
    "Start a new session from a session's history up to and including prompt N, and print its id (continue it " +
      "with chat --resume ID); the original session is not changed. run/chat --fork ID[:N] does the same and goes on."
  )
)

const sessions = Command.make("sessions", {
  workspace: optionalString("workspace", "project folder (default: the current folder)"),
  all: Flag.Boolean("all").pipe(
    Flag.withDescription("also list the empty sessions (no answer from the model, or every prompt undone)"),
    Flag.withDefault(false)
  )
}, lazy(() => import("./SessionCommands.ts"), (m) => m.listCommand)).pipe(
  Command.withDescription(
    "List the sessions of this folder with a conversation (--all: the empty ones too): id, date, steps (the " +
      "model's answers, undone prompts not counted), how it ended, first prompt (sessions show ID: its prompts; " +
      "sessions fork ID: a copy to go on from)."
  ),
  Command.withSubcommands([sessionsShow, sessionsFork])
)

const runs = Command.make("runs", {
  workspace: optionalString("workspace", "project folder (default: the current folder)")
}, lazy(() => import("./Agent.ts"), (m) => ({ workspace }) => m.runsCommand(workspace))).pipe(
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
}, lazy(() => import("./Agent.ts"), (m) => m.approveCommand)).pipe(
  Command.withDescription(
    "Answer a durable run's approval request from any terminal: agentloop approve RUN CALL y|n [reason]."
  )
)

const abortCmd = Command.make("abort", {
  workspace: optionalString("workspace", "project folder (default: the current folder)"),
  run: Argument.String("run").pipe(Argument.withDescription("the durable run's id (agentloop runs)"))
}, lazy(() => import("./Agent.ts"), (m) => m.abortCommand)).pipe(
  Command.withDescription(
    "Abort a durable run from any terminal: calls waiting or not started are skipped, a running call finishes, " +
      "the run ends aborted."
  )
)

const undoCmd = Command.make("undo", {
  workspace: optionalString("workspace", "project folder (default: the current folder)"),
  session: optionalString("session", "the session (default: the latest; agentloop sessions lists them)"),
  to: optionalInt("to", "go back to before prompt N (--list numbers them), undoing it and every later one"),
  list: Flag.Boolean("list").pipe(
    Flag.withDescription("number the prompts that can be undone"),
    Flag.withDefault(false)
  )
}, lazy(() => import("./Undo.ts"), (m) => m.undoCommand)).pipe(
  Command.withDescription(
    "Put back the files the session's last prompt changed (--to N: prompt N and the later ones) and take it out of " +
      "the conversation --continue continues, as /undo and /rewind do in chat."
  )
)

const view = Command.make(
  "view",
  {
    session: Argument.String("session").pipe(Argument.optional),
    port: optionalInt("port", "port on 127.0.0.1 (default: any free one)"),
    workspace: optionalString("workspace", "project folder (default: the current folder)")
  },
  ({ port, session, workspace }) =>
    Effect.flatMap(Effect.promise(() => import("./view/index.ts")), ({ viewSession }) =>
      viewSession({
        workspace: Option.getOrElse(workspace, () => process.cwd()),
        session: Option.getOrUndefined(session),
        port: Option.getOrUndefined(port)
      })).pipe(
        Effect.catchTag("ViewError", (e) =>
          Effect.sync(() => {
            process.stderr.write(`agentloop: ${e.message}\n`)
            process.exitCode = 2
          }))
      )
).pipe(
  Command.withDescription("Show a session (default: the latest) as a timeline in the browser, served on 127.0.0.1.")
)

const mcpName = Argument.String("name").pipe(Argument.withDescription("the server's name in the config's mcpServers"))
const mcp = Command.make("mcp").pipe(
  Command.withDescription(
    "MCP: log in to (or out of) an HTTP server that wants OAuth; serve agentloop's tools to other agents."
  ),
  Command.withSubcommands([
    Command.make("login", {
      workspace: optionalString("workspace", "project folder (default: the current folder)"),
      name: mcpName
    }, lazy(() => import("./internal/McpCommands.ts"), (m) => m.mcpLoginCommand)).pipe(
      Command.withDescription(
        "Authorize an HTTP MCP server of the config (OAuth 2.1 with PKCE): prints the URL to open (and opens the " +
          "browser on a terminal), waits on a loopback redirect, keeps the tokens in a 0600 file of yours."
      )
    ),
    Command.make("logout", {
      workspace: optionalString("workspace", "project folder (default: the current folder)"),
      name: mcpName
    }, lazy(() => import("./internal/McpCommands.ts"), (m) => m.mcpLogoutCommand)).pipe(
      Command.withDescription("Forget an HTTP MCP server's tokens.")
    ),
    Command.make("serve", {
      workspace: optionalString("workspace", "folder the tools are confined to (default: the current folder)"),
      http: optionalInt("http", "serve Streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio (0: any free port)"),
      yes: Flag.Boolean("yes").pipe(
        Flag.withDescription("run every tool (default: read-only tools only; nobody can be asked)"),
        Flag.withDefault(false)
      ),
      allow: Flag.String("allow").pipe(
        Flag.withDescription("also run this tool, e.g. --allow edit (repeatable)"),
        Flag.atLeast(0)
      ),
      subAgents: Flag.Boolean("sub-agents").pipe(
        Flag.withDescription("offer an agent tool: a whole agentloop run on the configured model, same tools and rule"),
        Flag.withDefault(false)
      )
    }, lazy(() => import("./internal/McpServe.ts"), (m) => m.mcpServeCommand)).pipe(
      Command.withDescription(
        "Offer the coding tools, confined to the workspace, to other agents over MCP (stdio, or --http on loopback)."
      )
    )
  ])
)

const exportCmd = Command.make("export", {
  session: Argument.String("session").pipe(
    Argument.withDescription("a session id, the start of one, or a session file (default: the latest session)"),
    Argument.optional
  ),
  out: optionalString(
    "out",
    "the HTML file to write (default: .agentloop/exports/<session>.html in the workspace); outside the workspace " +
      "it is written to a new file and renamed onto FILE, so a link there is replaced, never followed"
  ),
  workspace: optionalString("workspace", "project folder (default: the current folder)")
}, lazy(() => import("./ExportCommand.ts"), (m) => m.exportCommand)).pipe(
  Command.withDescription(
    "Write a session's timeline (the page agentloop view serves) as one self-contained HTML file: the session's " +
      "data embedded, no script, nothing loaded from the network."
  )
)

const replayCmd = Command.make("replay", {
  session: Argument.String("session").pipe(
    Argument.withDescription("a session id, the start of one, or a session file (e.g. one kept in the repository)")
  ),
  workspace: optionalString(
    "workspace",
    "folder the tools run in, as it is (default: a fresh temporary copy of the current folder's git HEAD, or of the " +
      "folder without .agentloop/ when it is not a git repository)"
  )
}, lazy(() => import("./ReplayCommand.ts"), (m) => m.replayCommand)).pipe(
  Command.withDescription(
    "Re-run a recorded session offline against its recorded model answers with the coding tools, checking each " +
      "request, each run's end and the invariants: exit 0 when it replays the same, 1 naming the run, step, call " +
      "and difference when it does not, 2 for bad input."
  )
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
        const first = event.errors[0]
        const line = first === undefined ? "invalid command line" : describeUsageError(first)
        const more = event.errors.length > 1 ? ` (and ${event.errors.length - 1} more)` : ""
        process.stderr.write(`agentloop: ${stripControl(line)}${more}; see ${event.commandPath.join(" ")} --help\n`)
      }) :
      CliOutput.defaultPresenter.present(event)
}

/**
 * A usage error as one sentence: its message's lines joined as sentences, and the names it
 * suggests (an unknown command's or flag's nearest ones) as `(did you mean run?)` from the error's
 * own list.
 */
const describeUsageError = (error: CliOutput.Presenter.InvalidInvocation["errors"][number]): string => {
  const suggestions = "suggestions" in error ? error.suggestions : []
  // effect's message lists the suggestions on lines of their own, after a blank line
  const [head = ""] = error.message.split("\n\n")
  const text = head.split("\n").map((l) => l.trim()).filter((l) => l.length > 0).reduce(
    (sentence, l) => sentence.length === 0 ? l : /[.:;?!]$/.test(sentence) ? `${sentence} ${l}` : `${sentence}. ${l}`,
    ""
  )
  return suggestions.length === 0 ? text : `${text} (did you mean ${suggestions.join(" or ")}?)`
}

/**
 * The `agentloop` command.
 *
 * @since 0.1.0
 * @category commands
 */
export const agentloop = Command.make("agentloop").pipe(
  Command.withDescription("agentloop: a coding agent in your terminal, on a verifiable agent loop (Effect 4)."),
  Command.withSubcommands([
    run,
    chat,
    sessions,
    runs,
    approveCmd,
    abortCmd,
    undoCmd,
    view,
    exportCmd,
    replayCmd,
    mcp,
    demo
  ])
)

/**
 * The command line for `args` (without `node` and the script), reported as `main` reports it: help
 * and version through effect's presenter, a usage error as one line and exit code 2, log entries as
 * one line each. Needs the platform's services (`main` gives it Node's).
 *
 * @since 0.1.0
 * @category main
 */
export const commandLine = (args: ReadonlyArray<string>) =>
  Command.runWith(agentloop, { version: VERSION })(args).pipe(
    // a bad flag or command: one line and where the help is, exit 2 (the help itself only on --help)
    Effect.catchTag("ShowHelp", (e) =>
      Effect.sync(() => {
        if (e.errors.length > 0) process.exitCode = 2
      })),
    Effect.provide(CliOutput.layerPresenter(usagePresenter)),
    // log entries (a provider's retries) as one readable line each
    Effect.provide(cliLoggerLayer)
  )

/**
 * Runs the command line with `process.argv`.
 *
 * @since 0.1.0
 * @category main
 */
export const main = Stdio.Stdio.use(({ args }) => Effect.flatMap(args, commandLine)).pipe(
  Effect.provide(NodeServices.layer)
)
