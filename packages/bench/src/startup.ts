/**
 * How fast the installed `agentloop` command starts: `--version`, `--help`, and a one-turn `run`
 * up to its first model request (a loopback OpenAI-compatible server notes when the request
 * arrives), each beside a bare `node -e 0` on the same Node, with the ratio to it; and the peak
 * memory (RSS) of each. Runs the shipped bundle (bin/agentloop.js without the source condition),
 * as an outside project's `npx agentloop` does. Median of N fresh processes; a figure, not a test.
 *
 *     node packages/bench/src/startup.ts        # BENCH_STARTUP_RUNS (default 10, 5 with BENCH_QUICK=1) per row
 *
 * The goal (issue 24): --help and --version within 4× of `node -e 0`, the run's first request
 * within 6×, peak RSS under 100 MiB. The first process of each row fills Node's compile cache (in
 * the user's cache folder, as a user's first start does) and is not counted.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

interface Helpers {
  readonly scriptServer: (
    next: (body: Record<string, unknown>, index: number) => { readonly text: string }
  ) => Promise<{ readonly url: string; readonly close: () => Promise<void> }>
  readonly makeWorkspace: () => string
  readonly testEnv: (workspace: string) => NodeJS.ProcessEnv
}

const helpersPath = fileURLToPath(new URL("../../cli/test/helpers/agent.ts", import.meta.url))
const h = (await import(helpersPath)) as Helpers
const bin = fileURLToPath(new URL("../../cli/bin/agentloop.js", import.meta.url))
const bundle = fileURLToPath(new URL("../../cli/bundle/agentloop.js", import.meta.url))
if (!existsSync(bundle)) {
  process.stderr.write("startup bench: packages/cli/bundle is missing: run `npm run build` first\n")
  process.exit(1)
}
const runs = Number(process.env["BENCH_STARTUP_RUNS"] ?? (process.env["BENCH_QUICK"] === "1" ? 5 : 10))

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

let arrived: (() => void) | undefined
const server = await h.scriptServer(() => {
  arrived?.()
  return { text: "done" }
})
const workspace = h.makeWorkspace()
const cache = mkdtempSync(join(tmpdir(), "agentloop-startup-cache-"))
const rssFolder = mkdtempSync(join(tmpdir(), "agentloop-startup-rss-"))
// the user's cache folder (compile cache) is a fresh one, filled by each row's first process
const env: NodeJS.ProcessEnv = { ...h.testEnv(workspace), XDG_CACHE_HOME: cache }
delete env["NODE_COMPILE_CACHE"]
delete env["NODE_OPTIONS"]

/** Peak RSS in KiB, written by a preloaded module at exit (only in the processes that measure it). */
const rssPreload = (file: string) =>
  `--import=data:text/javascript,${
    encodeURIComponent(
      `import{writeFileSync}from"node:fs";process.on("exit",()=>writeFileSync(${
        JSON.stringify(file)
      },String(process.resourceUsage().maxRSS)))`
    )
  }`

interface Sample {
  readonly ms: number
  readonly firstRequestMs?: number
}

/** One process: its wall time to exit and, for a run, to the model's first request. */
const once = (args: ReadonlyArray<string>, withRss?: string): Promise<Sample> =>
  new Promise((resolve, reject) => {
    const start = performance.now()
    let firstRequestMs: number | undefined
    arrived = () => (firstRequestMs ??= performance.now() - start)
    const child = spawn(process.execPath, [...(withRss === undefined ? [] : [rssPreload(withRss)]), ...args], {
      cwd: workspace,
      env,
      stdio: ["ignore", "ignore", "pipe"]
    })
    let err = ""
    child.stderr.on("data", (d) => (err += String(d)))
    child.on("error", reject)
    child.on("close", (code) => {
      const ms = performance.now() - start
      if (code !== 0) return reject(new Error(`${args.join(" ")} exited ${code}: ${err.slice(0, 500)}`))
      resolve(firstRequestMs === undefined ? { ms } : { ms, firstRequestMs })
    })
  })

interface Row {
  readonly name: string
  readonly args: ReadonlyArray<string>
  readonly toRequest?: boolean
}
const runArgs = [
  bin,
  "run",
  "--provider",
  "openai-compat",
  "--base-url",
  `${server.url}/v1`,
  "--model",
  "test-model",
  "say done"
]
const rows: ReadonlyArray<Row> = [
  { name: "node -e 0", args: ["-e", "0"] },
  { name: "agentloop --version", args: [bin, "--version"] },
  { name: "agentloop --help", args: [bin, "--help"] },
  { name: "agentloop run: first request", args: runArgs, toRequest: true },
  { name: "agentloop run: whole turn", args: runArgs }
]

// Rows take turns (each round runs every row once), so that a machine whose speed drifts during the
// bench (another job starting, a CPU clocking down) moves every row alike and the ratios stay fair.
for (const row of rows) await once(row.args) // fills the compile cache
const samples = rows.map(() => [] as Array<number>)
for (let i = 0; i < runs; i++) {
  for (const [j, row] of rows.entries()) {
    const s = await once(row.args)
    samples[j]!.push(row.toRequest === true ? s.firstRequestMs ?? Number.NaN : s.ms)
  }
}
const rssFile = join(rssFolder, "rss")
const results: Array<{ name: string; ms: number; rssMiB: number }> = []
for (const [j, row] of rows.entries()) {
  const rss: Array<number> = []
  for (let i = 0; i < Math.min(runs, 5); i++) {
    await once(row.args, rssFile)
    rss.push(Number(readFileSync(rssFile, "utf8")) / 1024)
  }
  results.push({ name: row.name, ms: median(samples[j]!), rssMiB: median(rss) })
}
await server.close()
rmSync(workspace, { recursive: true, force: true })
rmSync(cache, { recursive: true, force: true })
rmSync(rssFolder, { recursive: true, force: true })

const node = results[0]!.ms
const goal: Record<string, number> = {
  "agentloop --version": 4,
  "agentloop --help": 4,
  "agentloop run: first request": 6
}
process.stdout.write(
  `\nstart-up of the bundled agentloop (median of ${runs} fresh processes, Node ${process.version})\n`
)
process.stdout.write(
  `${"".padEnd(30)} ${"ms".padStart(8)} ${"× node".padStart(8)} ${"goal".padStart(6)} ${"peak RSS".padStart(10)}\n`
)
for (const r of results) {
  const ratio = r.ms / node
  const g = goal[r.name]
  process.stdout.write(
    `${r.name.padEnd(30)} ${r.ms.toFixed(1).padStart(8)} ${ratio.toFixed(2).padStart(8)} ${
      (g === undefined ? "" : `≤${g}×`).padStart(6)
    } ${`${r.rssMiB.toFixed(0)} MiB`.padStart(10)}${g !== undefined && ratio > g ? "  (over the goal)" : ""}\n`
  )
}
process.stdout.write("peak RSS goal for a run: under 100 MiB (Codex 45 MB, Claude Code 333 MB as published)\n")
