/**
 * The `agentloop` command line.
 *
 * @since 0.1.0
 */
import { Effect, FileSystem, Layer, Option, Path } from "effect"
import { Command, Flag } from "effect/cli"
import { NodeServices } from "@effect/platform-node"
import { makeScriptedModel } from "@agentloop/testkit"
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

const demo = Command.make("demo", { workspace: workspaceFlag, maxSteps: maxStepsFlag }, (config) =>
  Effect.scoped(Effect.gen(function*() {
    const style = makeStyle(wantsColor(process.stdout.isTTY, process.env))
    const write = (text: string) => void process.stdout.write(text)
    const renderer = yield* makeRenderer({
      write,
      style,
      live: process.stdout.isTTY === true,
      columns: process.stdout.columns
    })
    const root = yield* prepareWorkspace(config.workspace)
    write(`${style.bold("agentloop demo")} — scripted model, real tools, workspace ${root}\n`)
    write(`${style.dim("user")}      ${demoPrompt}\n\n`)
    const model = yield* makeScriptedModel(demoScript)
    const report = yield* runSession({
      workspace: root,
      prompt: demoPrompt,
      systemPrompt: CODING_SYSTEM_PROMPT,
      maxSteps: config.maxSteps,
      continuations: 2,
      renderer
    }).pipe(Effect.provide(Layer.merge(model.layer, codingToolsLayer(root))))
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
      return yield* Effect.fail(new Error("the demo session did not end cleanly"))
    }
  }))).pipe(Command.withDescription(
    "Run a coding session on the built-in scripted model: no network, no API key. It fixes a bug in a small " +
      "project in a fresh temporary folder with the read, write, edit and bash tools."
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

