import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { renderAllStatic, renderStatic } from "../src/internal/StaticOutput.ts"
import type { StaticOutput } from "../src/internal/StaticOutput.ts"
import { bin, makeWorkspace, startCli } from "./helpers/agent.ts"

// `--help`, `--version` and each command's `--help` are printed by the bin from the bundle's
// static.json, without loading the bundle (the start-up shortcut): here each is checked against the
// plain path, the command line itself run from the sources.
const staticFile = fileURLToPath(new URL("../bundle/static.json", import.meta.url))
const built = (): StaticOutput => JSON.parse(readFileSync(staticFile, "utf8")) as StaticOutput

/** The command's stdout, stderr and exit code, from the bundle (its shortcut) or from the sources. */
const printed = async (
  args: ReadonlyArray<string>,
  options: { readonly bundle: boolean; readonly pty?: boolean; readonly env?: Record<string, string> }
) => {
  const cwd = makeWorkspace()
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env }
  for (const name of ["NO_COLOR", "FORCE_COLOR"]) if (options.env?.[name] === undefined) delete env[name]
  const cli = startCli(args, { cwd, env, bundle: options.bundle, pty: options.pty === true })
  const exit = await cli.exitedWithin(60_000)
  return { code: exit.code, out: cli.output().replaceAll("\r\n", "\n"), err: cli.stderr() }
}

describe("the static help and version (the bin prints them without loading the bundle)", () => {
  it("the built static.json is what the command line renders now, for every command's help", async () => {
    const now = await Effect.runPromise(renderAllStatic)
    const file = built()
    assert.deepStrictEqual(Object.keys(file.entries).sort(), Object.keys(now.entries).sort())
    for (const [key, index] of Object.entries(now.entries)) {
      assert.deepStrictEqual(file.outputs[file.entries[key]!], now.outputs[index], key)
    }
    // every command and subcommand has its --help and -h there, and the version its two flags
    for (
      const key of [
        "[\"--help\"]",
        "[\"-h\"]",
        "[\"--version\"]",
        "[\"-v\"]",
        "[\"run\",\"--help\"]",
        "[\"mcp\",\"serve\",\"-h\"]"
      ]
    ) {
      assert.include(Object.keys(file.entries), key)
    }
    assert.isAbove(Object.keys(file.entries).length, 30)
  }, 60_000)

  it("the renderer prints what the plain command line prints, in a pipe and on a terminal", async () => {
    for (const args of [["--help"], ["run", "--help"], ["sessions", "fork", "-h"], ["--version"]]) {
      const [pipe, terminal] = await Promise.all([
        printed(args, { bundle: false }),
        printed(args, { bundle: false, pty: true })
      ])
      assert.strictEqual(pipe.code, 0, pipe.err)
      assert.strictEqual(terminal.code, 0, terminal.err)
      assert.strictEqual(pipe.out, await Effect.runPromise(renderStatic(args, false)), args.join(" "))
      assert.strictEqual(terminal.out, await Effect.runPromise(renderStatic(args, true)), args.join(" "))
    }
    // colored on a terminal, plain in a pipe: the comparison above compared different texts
    assert.match(await Effect.runPromise(renderStatic(["--help"], true)), /\u001b\[1mDESCRIPTION/)
    assert.notMatch(await Effect.runPromise(renderStatic(["--help"], false)), /\u001b\[/)
  }, 120_000)

  it("the bundle prints what the sources print, with colors decided as effect decides them", async () => {
    const cases: ReadonlyArray<{ args: ReadonlyArray<string>; pty?: boolean; env?: Record<string, string> }> = [
      { args: ["--help"] },
      { args: ["--help"], pty: true },
      { args: ["-h"], pty: true, env: { NO_COLOR: "1" } },
      { args: ["--help"], pty: true, env: { NO_COLOR: "" } },
      { args: ["--help"], env: { FORCE_COLOR: "1" } },
      { args: ["--help"], env: { FORCE_COLOR: "0" } },
      { args: ["--help"], env: { FORCE_COLOR: "false" } },
      { args: ["--help"], env: { FORCE_COLOR: "1", NO_COLOR: "1" } },
      { args: ["chat", "--help"], env: { TERM: "dumb", FORCE_COLOR: "1" } },
      { args: ["--version"] },
      { args: ["-v"], pty: true }
    ]
    for (const c of cases) {
      const what = `${c.args.join(" ")} ${c.pty === true ? "on a terminal" : "in a pipe"} ${
        JSON.stringify(c.env ?? {})
      }`
      const [plain, shortcut] = await Promise.all([
        printed(c.args, { ...c, bundle: false }),
        printed(c.args, { ...c, bundle: true })
      ])
      assert.strictEqual(plain.code, 0, plain.err)
      assert.deepStrictEqual(shortcut, plain, what)
    }
  }, 240_000)

  it("the shortcut loads none of the bundle; any other command line does", async () => {
    const dir = makeWorkspace()
    const marker = join(dir, "loaded.txt")
    const preload = join(dir, "hook.mjs")
    // a resolve hook that notes every module of the bundle the process loads
    writeFileSync(
      preload,
      `import { appendFileSync } from "node:fs"\nimport { registerHooks } from "node:module"\n` +
        `registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); ` +
        `if (r.url.includes("/cli/bundle/")) appendFileSync(${JSON.stringify(marker)}, r.url + "\\n"); return r } })\n`
    )
    const loaded = async (args: ReadonlyArray<string>) => {
      rmSync(marker, { force: true })
      const r = await printed(args, { bundle: true, env: { NODE_OPTIONS: `--import=${preload}` } })
      return { code: r.code, bundle: existsSync(marker) ? readFileSync(marker, "utf8") : "" }
    }
    for (const args of [["--help"], ["--version"], ["view", "-h"]]) {
      assert.deepStrictEqual(await loaded(args), { code: 0, bundle: "" }, args.join(" "))
    }
    const other = await loaded(["--bogus"])
    assert.strictEqual(other.code, 2)
    assert.include(other.bundle, "/cli/bundle/agentloop.js")
  }, 120_000)

  it("any other command line goes to the command line itself, and prints what the sources print", async () => {
    for (const args of [["--bogus", "-h"], ["run", "--yes", "--help"], ["--version", "run"]]) {
      const [plain, shortcut] = await Promise.all([
        printed(args, { bundle: false }),
        printed(args, { bundle: true })
      ])
      assert.deepStrictEqual(shortcut, plain, args.join(" "))
    }
    const bad = await printed(["--bogus"], { bundle: true })
    assert.strictEqual(bad.code, 2)
    assert.match(bad.err, /^agentloop: .*--bogus.*; see agentloop --help\n$/)
  }, 120_000)

  it("a reader that has gone away ends it quietly", async () => {
    const cwd = makeWorkspace()
    const { spawnSync } = await import("node:child_process")
    // `true` has exited before the command starts writing: every write meets a closed pipe
    const r = spawnSync("bash", [
      "-c",
      `"${process.execPath}" "${bin}" run --help | true; echo "exit \${PIPESTATUS[0]}"`
    ], {
      cwd,
      encoding: "utf8"
    })
    assert.strictEqual(r.stderr, "")
    assert.strictEqual(r.stdout, "exit 0\n")
  }, 60_000)
})
