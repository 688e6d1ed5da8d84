/**
 * The `agentloop` command line.
 *
 * @since 0.1.0
 */
import { Effect, FileSystem, Layer, Option, Path } from "effect"
import { Command, Flag } from "effect/cli"
import { NodeServices } from "@effect/platform-node"
import type { Model } from "@agentloop/core"
import { anthropicFetchLayer, openAiCompatFetchLayer } from "@agentloop/providers"
import type { ProviderConfigError } from "@agentloop/providers"
import { scriptedModelLayer } from "@agentloop/testkit"
import { codingToolsLayer } from "@agentloop/tools"
import { demoFiles, demoPrompt, demoScript } from "./DemoScript.ts"
import { makeRenderer } from "./Renderer.ts"
import { CODING_SYSTEM_PROMPT, runSession } from "./Session.ts"
import { makeStyle, wantsColor } from "./Style.ts"

const workspaceFlag = Flag.Directory("workspace", { mustExist: false }).pipe(
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
const maxTokensFlag = Flag.Int("max-tokens").pipe(Flag.withDescription("output token budget per response"), Flag.optional)

/** A failure of the command that the user can act on; printed without a stack trace. */
class UsageError extends Error {}

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
        return Effect.fail(new UsageError(`the environment variable ${choice.apiKeyEnv.value} (--api-key-env) is not set`))
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

/** Creates the demo project in `root` (a fresh temporary folder when none is given). */
const prepareWorkspace = (given: Option.Option<string>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const root = Option.isSome(given) ?
      path.resolve(given.value) :
      yield* fs.makeTempDirectory({ prefix: "agentloop-demo-" })
    for (const [file, content] of Object.entries(demoFiles)) {
      yield* fs.makeDirectory(path.dirname(path.join(root, file)), { recursive: true })
      yield* fs.writeFileString(path.join(root, file), content)
    }
    return yield* fs.realPath(root)
  })

const demo = Command.make("demo", {
  workspace: workspaceFlag,
  maxSteps: maxStepsFlag,
  provider: providerFlag,
  baseUrl: baseUrlFlag,
  model: modelFlag,
  apiKeyEnv: apiKeyEnvFlag,
  maxTokens: maxTokensFlag
}, (config) =>
  Effect.scoped(Effect.gen(function*() {
    const style = makeStyle(wantsColor(process.stdout.isTTY, process.env))
    const write = (text: string) => void process.stdout.write(text)
    const renderer = yield* makeRenderer({
      write,
      style,
      live: process.stdout.isTTY === true,
      columns: process.stdout.columns
    })
    // build the model first, so a missing key or a bad option fails before anything else happens
    const model = yield* chooseModel(config).pipe(
      Effect.flatMap(Layer.build),
      Effect.catchTag("ProviderConfigError", (e) =>
        Effect.fail(new UsageError(`${e.message} (the CLI reads API keys from the environment: see --api-key-env)`)))
    )
    const root = yield* prepareWorkspace(config.workspace)
    const who = config.provider === "scripted" ?
      "scripted model" :
      `${config.provider} ${Option.getOrElse(config.model, () => "")}${
        Option.match(config.baseUrl, { onNone: () => "", onSome: (url) => ` at ${url}` })
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
    }).pipe(Effect.provide(codingToolsLayer(root)), Effect.provideContext(model))
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
    if (report.violations.length > 0 || report.final.reason !== "stop") {
      return yield* Effect.fail(new UsageError(`the session ended with reason "${report.final.reason}"`))
    }
  })).pipe(
    Effect.catchIf((e): e is UsageError => e instanceof UsageError, (e) =>
      Effect.sync(() => {
        process.stderr.write(`agentloop: ${e.message}\n`)
        process.exitCode = 1
      }))
  )).pipe(Command.withDescription(
    "Run a coding session in a fresh temporary folder holding a small project with a bug: the model fixes it " +
      "with the read, write, edit and bash tools. By default the model is the built-in scripted one (no network, " +
      "no API key); --provider runs the same session against a real model."
  ))

/**
 * The `agentloop` command.
 *
 * @since 0.1.0
 * @category commands
 */
export const agentloop = Command.make("agentloop").pipe(
  Command.withDescription("agentloop: a verifiable agent loop on Effect 4."),
  Command.withSubcommands([demo])
)

/**
 * Runs the command line with `process.argv`.
 *
 * @since 0.1.0
 * @category main
 */
export const main = Command.run(agentloop, { version: "0.1.0" }).pipe(Effect.provide(NodeServices.layer))

