/**
 * Runs the documentation's blocks that claim to run:
 *
 * - a block that imports `@effect/vitest` is a test file, run with vitest;
 * - a block preceded by `<!-- run -->` is a program, run with Node (in a fresh temporary working
 *   folder, so what it writes goes nowhere), which must exit 0 within two minutes;
 * - a shell block preceded by `<!-- run -->` is run with `bash -euo pipefail` the same way, with a
 *   fresh HOME and this clone's `agentloop` first on its PATH (the clone's Node 22 running
 *   packages/cli/bin/agentloop.js), as a reader who followed the README's install has it.
 *
 *     node scripts/docs/run-snippets.ts            # every Markdown file (see snippets.ts)
 *     node scripts/docs/run-snippets.ts FILE.md…   # only these files
 *
 * `@agentloop/*` resolve to the packages' sources (the `agentloop-source` condition), as in the
 * repository's own tests. Typechecking is `check-snippets.ts`'s job; this one only runs. Exits 1
 * naming the file and line of each block that failed.
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

const requested = process.argv.slice(2).filter((a) => !a.startsWith("--"))
const files = requested.length > 0
  ? requested.map((f) => path.relative(root, path.resolve(f)))
  : documentationFiles(root)
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

if (failures.length > 0) {
  for (const failure of failures) console.error(failure)
  console.error(`\nThe generated files are in ${path.relative(root, outDir)}/.`)
  process.exit(1)
}
fs.rmSync(outDir, { recursive: true, force: true })
console.log(
  `${tests.length} test block(s) passed, ${programs.length} program block(s) and ${shells.length} shell block(s) ` +
    `ran, ` +
    `in ${files.length} Markdown file(s).`
)
