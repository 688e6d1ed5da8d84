/**
 * Runs the documentation's blocks that claim to run:
 *
 * - a block that imports `@effect/vitest` is a test file, run with vitest;
 * - a block preceded by `<!-- run -->` is a program, run with Node (in a fresh temporary working
 *   folder, so what it writes goes nowhere), which must exit 0 within two minutes;
 * - a shell block preceded by `<!-- run -->` is run with `bash -euo pipefail` the same way, with a
 *   fresh HOME and this clone's `agentloop` first on its PATH (the clone's Node 22 running
 *   packages/cli/bin/agentloop.js), as a reader who followed the README's install has it;
 * - each example (`examples/**.ts`, `packages/PACKAGE/examples/**.ts`) says in its header comment how
 *   to run it, as lines `* $ COMMAND`: each is run as written with `bash -euo pipefail` from the
 *   repository root, in this process's environment less the node_modules/.bin folders `npm run` adds
 *   to PATH (the `node` on PATH is the reader's own; the packages as built, no source condition), and
 *   must exit 0 within two minutes. An example whose header has no such line fails too.
 *
 *     node scripts/docs/run-snippets.ts                 # every Markdown file (see snippets.ts) and example
 *     node scripts/docs/run-snippets.ts FILE.md|FILE.ts # only these files
 *
 * In the Markdown blocks, `@agentloop/*` resolve to the packages' sources (the `agentloop-source`
 * condition), as in the repository's own tests. Typechecking is `check-snippets.ts`'s job; this one
 * only runs. Exits 1 naming the file and line of each block or command that failed.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { documentationFiles, extractSnippets } from "./snippets.ts"
import type { Snippet } from "./snippets.ts"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const outDir = path.join(root, "scripts/docs/.generated", `run-${process.pid}`)

const requested = process.argv.slice(2).filter((a) => !a.startsWith("--")).map((f) =>
  path.relative(root, path.resolve(f))
)

/** The examples: `.ts` files under `examples/` and `packages/PACKAGE/examples/`, relative to the root. */
const exampleFiles = (): Array<string> => {
  const folders = [
    "examples",
    ...fs.readdirSync(path.join(root, "packages")).sort().map((p) => path.join("packages", p, "examples"))
  ]
  return folders.filter((folder) => fs.existsSync(path.join(root, folder))).flatMap((folder) =>
    fs.readdirSync(path.join(root, folder), { recursive: true, encoding: "utf8" }).sort()
      .filter((name) => name.endsWith(".ts") && !name.endsWith(".d.ts")).map((name) => path.join(folder, name))
  )
}

const files = requested.length > 0 ? requested.filter((f) => f.endsWith(".md")) : documentationFiles(root)
const examples = requested.length > 0 ? requested.filter((f) => f.endsWith(".ts")) : exampleFiles()
const snippets = files.flatMap((file) => extractSnippets(file, fs.readFileSync(path.join(root, file), "utf8")))

const isTest = (s: Snippet) => s.lang === "ts" && /from\s+"@effect\/vitest"/.test(s.code)
const tests = snippets.filter(isTest)
const programs = snippets.filter((s) => s.lang === "ts" && s.run && !isTest(s))
const shells = snippets.filter((s) => s.lang === "sh")

fs.rmSync(outDir, { recursive: true, force: true })
fs.mkdirSync(outDir, { recursive: true })
const nameOf = (s: Snippet) => `${s.file.replace(/[^A-Za-z0-9]+/g, "_")}_L${s.fenceLine}`
const source = (s: Snippet) => `${s.prelude === undefined ? "" : `${s.prelude.code}\n`}${s.code}\n`
const env = {
  ...process.env,
  NODE_OPTIONS: [process.env["NODE_OPTIONS"], "--conditions=agentloop-source"].filter(Boolean).join(" ")
}

const failures: Array<string> = []

if (tests.length > 0) {
  for (const s of tests) fs.writeFileSync(path.join(outDir, `${nameOf(s)}.test.ts`), source(s))
  fs.writeFileSync(
    path.join(outDir, "vitest.config.ts"),
    [
      `import { defineConfig } from "vitest/config"`,
      `const conditions = ["agentloop-source"]`,
      `export default defineConfig({`,
      `  resolve: { conditions },`,
      `  ssr: { resolve: { conditions } },`,
      `  test: { root: ${JSON.stringify(outDir)}, include: ["*.test.ts"] }`,
      `})`,
      ``
    ].join("\n")
  )
  const vitest = spawnSync(
    process.execPath,
    [path.join(root, "node_modules/vitest/vitest.mjs"), "run", "--config", path.join(outDir, "vitest.config.ts")],
    { cwd: root, env, stdio: "inherit", timeout: 5 * 60_000 }
  )
  if (vitest.status !== 0) {
    failures.push(
      `vitest failed (exit ${vitest.status ?? vitest.signal}) for the test blocks: ${
        tests.map((s) => `${s.file}:${s.fenceLine}`).join(", ")
      } (files named FILE_md_L<line of the fence>.test.ts above)`
    )
  }
}

for (const s of programs) {
  const file = path.join(outDir, `${nameOf(s)}.ts`)
  fs.writeFileSync(file, source(s))
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), "agentloop-docs-"))
  const run = spawnSync(process.execPath, ["--conditions=agentloop-source", file], {
    cwd,
    env,
    encoding: "utf8",
    timeout: 2 * 60_000
  })
  fs.rmSync(cwd, { recursive: true, force: true })
  if (run.status !== 0) {
    const output = `${run.stdout ?? ""}${run.stderr ?? ""}`.trim().split("\n").slice(-15).join("\n    ")
    failures.push(`${s.file}:${s.codeLine} - the block did not run (exit ${run.status ?? run.signal}):\n    ${output}`)
  }
}

if (shells.length > 0) {
  const bin = path.join(outDir, "bin")
  fs.mkdirSync(bin)
  const node = path.join(root, "node_modules/.bin/node")
  fs.writeFileSync(
    path.join(bin, "agentloop"),
    `#!/bin/sh\nexec ${JSON.stringify(node)} ${
      JSON.stringify(path.join(root, "packages/cli/bin/agentloop.js"))
    } "$@"\n`,
    { mode: 0o755 }
  )
  for (const s of shells) {
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), "agentloop-docs-"))
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "agentloop-docs-home-"))
    const run = spawnSync("bash", ["-euo", "pipefail", "-c", s.code], {
      cwd,
      env: { ...env, HOME: home, PATH: `${bin}${path.delimiter}${process.env["PATH"] ?? ""}` },
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 2 * 60_000
    })
    fs.rmSync(cwd, { recursive: true, force: true })
    fs.rmSync(home, { recursive: true, force: true })
    if (run.status !== 0) {
      const output = `${run.stdout ?? ""}${run.stderr ?? ""}`.trim().split("\n").slice(-15).join("\n    ")
      const why = run.error?.message ??
        (run.signal === null ? `exit ${run.status}` : `${run.signal}: still running after 2 minutes?`)
      failures.push(`${s.file}:${s.codeLine} - the shell block did not run (${why}):\n    ${output}`)
    }
  }
}

/** The `* $ COMMAND` lines of a file's first doc comment, with their 1-based line numbers. */
const headerCommands = (text: string): Array<{ readonly line: number; readonly command: string }> => {
  const lines = text.split("\n")
  const start = lines.findIndex((l) => l.trimStart().startsWith("/**"))
  const end = lines.findIndex((l, i) => i >= start && l.includes("*/"))
  if (start < 0 || end < 0) return []
  return lines.slice(start, end + 1).flatMap((l, i) => {
    const command = /^\s*\*\s+\$\s+(.+?)\s*$/.exec(l)?.[1]
    return command === undefined ? [] : [{ line: start + i + 1, command }]
  })
}

// A reader runs the command in a shell of their own: without the node_modules/.bin folders that
// `npm run` puts first on PATH (whose `node` is the clone's Node 22, not necessarily the reader's).
const shellPath = (process.env["PATH"] ?? "").split(path.delimiter).filter((dir) =>
  !dir.endsWith(path.join("node_modules", ".bin")) && !dir.includes("node-gyp-bin")
).join(path.delimiter)

let commands = 0
for (const example of examples) {
  const found = headerCommands(fs.readFileSync(path.join(root, example), "utf8"))
  if (found.length === 0) {
    failures.push(`${example}:1 - the header says no command that runs the example (a line \`* $ COMMAND\`)`)
  }
  for (const { command, line } of found) {
    commands++
    const run = spawnSync("bash", ["-euo", "pipefail", "-c", command], {
      cwd: root,
      env: { ...process.env, PATH: shellPath },
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 2 * 60_000
    })
    if (run.status !== 0) {
      const output = `${run.stdout ?? ""}${run.stderr ?? ""}`.trim().split("\n").slice(-15).join("\n    ")
      const why = run.error?.message ??
        (run.signal === null ? `exit ${run.status}` : `${run.signal}: still running after 2 minutes?`)
      failures.push(`${example}:${line} - \`${command}\` did not run (${why}):\n    ${output}`)
    }
  }
}

if (failures.length > 0) {
  for (const failure of failures) console.error(failure)
  console.error(`\nThe generated files are in ${path.relative(root, outDir)}/.`)
  process.exit(1)
}
fs.rmSync(outDir, { recursive: true, force: true })
console.log(
  `${tests.length} test block(s) passed, ${programs.length} program block(s) and ${shells.length} shell block(s) ` +
    `ran, in ${files.length} Markdown file(s); ${commands} command(s) of ${examples.length} example(s) ran.`
)
