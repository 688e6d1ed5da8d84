/**
 * What the command prints for the command lines that run no command: `--help` and `--version`, and
 * each command's `--help`. The build renders them here, through the command line itself
 * (`commandLine`, effect's help and version presenter, both with and without colors), into the
 * bundle's `static.json`; the bin prints an entry of it without loading the bundle, which is what
 * lets `agentloop --help` start in about the time Node itself does.
 *
 * The texts depend on the command definitions only (no flag's description or default reads the
 * environment), so the build's rendering is the user's; a test compares every entry with the
 * plain path's output, on a terminal and in a pipe.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Console, Effect } from "effect"
import { CliOutput } from "effect/cli"
import type { Command } from "effect/cli"
import { agentloop, commandLine } from "../main.ts"

/** One entry: the output without and with colors (effect's presenter colors it on a terminal). */
export interface StaticEntry {
  readonly plain: string
  readonly color: string
}

/**
 * The file the bin reads: `entries` maps `JSON.stringify` of the arguments after the script to an
 * index in `outputs` (`-h` and `--help` print the same).
 */
export interface StaticOutput {
  readonly version: 1
  readonly outputs: ReadonlyArray<StaticEntry>
  readonly entries: Readonly<Record<string, number>>
}

/** The command lines with a static output: the top level's help and version, every command's help. */
export const staticCommandLines = (): ReadonlyArray<ReadonlyArray<string>> => {
  const paths: Array<ReadonlyArray<string>> = []
  const visit = (command: Command.Command.Any, path: ReadonlyArray<string>): void => {
    paths.push(path)
    for (const group of command.subcommands) {
      for (const sub of group.commands) visit(sub, [...path, sub.name])
    }
  }
  visit(agentloop, [])
  return [["--version"], ["-v"], ...paths.flatMap((path) => [[...path, "--help"], [...path, "-h"]])]
}

/** A console that keeps what is written to it. */
const capturing = (out: Array<string>, err: Array<string>): Console.Console => {
  const text = (args: ReadonlyArray<unknown>) => {
    if (!args.every((a) => typeof a === "string")) throw new Error("static output: a non-string was printed")
    return `${args.join(" ")}\n`
  }
  const none = () => {}
  return {
    assert: none,
    clear: none,
    count: none,
    countReset: none,
    debug: (...args) => void out.push(text(args)),
    dir: none,
    dirxml: none,
    error: (...args) => void err.push(text(args)),
    group: none,
    groupCollapsed: none,
    groupEnd: none,
    info: (...args) => void out.push(text(args)),
    log: (...args) => void out.push(text(args)),
    table: none,
    time: none,
    timeEnd: none,
    timeLog: none,
    trace: (...args) => void err.push(text(args)),
    warn: (...args) => void err.push(text(args))
  }
}

/**
 * What `agentloop ARGS` prints on stdout, rendered by the command line with colors on or off. Fails
 * when it would print on stderr or set an exit code: such a command line has no static output.
 */
export const renderStatic = (args: ReadonlyArray<string>, colors: boolean): Effect.Effect<string, Error> =>
  Effect.gen(function*() {
    const out: Array<string> = []
    const err: Array<string> = []
    const exitCode = process.exitCode
    yield* commandLine(args).pipe(
      Effect.provideService(Console.Console, capturing(out, err)),
      Effect.provideService(CliOutput.Formatter, CliOutput.defaultFormatter({ colors })),
      Effect.provide(NodeServices.layer),
      Effect.mapError((e) => new Error(`static output of ${args.join(" ")}: ${String(e)}`))
    )
    if (err.length > 0 || process.exitCode !== exitCode || out.length === 0) {
      process.exitCode = exitCode
      return yield* Effect.fail(new Error(`static output of ${args.join(" ")}: not a help or version output`))
    }
    return out.join("")
  })

/** Every static command line's output, as the bin reads it. */
export const renderAllStatic: Effect.Effect<StaticOutput, Error> = Effect.gen(function*() {
  const outputs: Array<StaticEntry> = []
  const entries: Record<string, number> = {}
  for (const args of staticCommandLines()) {
    const entry = { plain: yield* renderStatic(args, false), color: yield* renderStatic(args, true) }
    const same = outputs.findIndex((o) => o.plain === entry.plain && o.color === entry.color)
    entries[JSON.stringify(args)] = same >= 0 ? same : outputs.push(entry) - 1
  }
  return { version: 1, outputs, entries }
})
