/**
 * The `agentloop demo` command: the scripted (or a real model's) coding session in a fresh
 * temporary folder. Loaded by `main.ts` only when `demo` runs.
 */
import type { Model } from "@agentloop/core"
import type { ProviderConfigError } from "@agentloop/providers"
import { scriptedModelLayer } from "@agentloop/testkit"
import { codingToolsLayer } from "@agentloop/tools"
import { Deferred, Effect, Layer, Option } from "effect"
import { mkdirSync, mkdtempSync, realpathSync } from "node:fs"
import { tmpdir } from "node:os"
import * as nodePath from "node:path"
import { demoFiles, demoPrompt, demoScript } from "../DemoScript.ts"
import { makeRenderer } from "../Renderer.ts"
import { makeScreen, useScreen } from "../Screen.ts"
import { CODING_SYSTEM_PROMPT, runSession } from "../Session.ts"
import { makeStyle, wantsColor } from "../Style.ts"
import type { Style } from "../Style.ts"
import { exitSoon, installController } from "../Terminal.ts"
import type { Controller } from "../Terminal.ts"
import * as WorkspaceIO from "../WorkspaceIO.ts"
import { providerModelLayer } from "./Setup.ts"

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
    return Effect.succeed(providerModelLayer(choice.provider, options))
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

/** The options of `agentloop demo`, as its flags give them. */
export interface DemoOptions extends ModelChoice {
  readonly workspace: Option.Option<string>
  readonly maxSteps: number
  readonly force: boolean
}

/** Runs `agentloop demo`. */
export const demoCommand = (config: DemoOptions) =>
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
  )
