/**
 * `npm run steady -w @agentloop/bench`: each contender at its steady state, one fresh process per
 * contender, cell and round (a second of full runs first, then every run of a few seconds timed),
 * the rounds interleaved; reports the 10th percentile of the runs (load only ever adds time, so a
 * low percentile is the steadiest figure on a shared machine) and the median. Also counts the
 * Effect operations agentloop runs per step of (b) — a figure no load can move.
 *
 * Environment: `STEADY_SECONDS` (measured seconds per process, default 3), `STEADY_ROUNDS`
 * (default 2), `STEADY_CELLS` (comma-separated, default every cell), `BENCH_BASELINE` (as for
 * `npm run bench`: another build of agentloop beside the others).
 *
 * @since 0.1.0
 */
import { spawnSync } from "node:child_process"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { prepareOf } from "./cell.ts"
import type { WorkloadKind } from "./cell.ts"
import type { Contender } from "./workloads.ts"
import { allSizes } from "./workloads.ts"

interface SteadyCell {
  readonly id: string
  readonly label: string
  readonly workload: WorkloadKind
  readonly size: number
  readonly calls: number
  /** µs per step (b), else ms per run. */
  readonly perStep: boolean
}

const full = allSizes.full
const allCells: ReadonlyArray<SteadyCell> = [
  { id: "a", label: "(a) 100,000 text deltas, ms", workload: "a", size: full.deltas, calls: 0, perStep: false },
  ...full.stepCounts.map((n): SteadyCell => ({
    id: `b${n}`,
    label: `(b) ${n.toLocaleString("en-US")} steps, µs per step`,
    workload: "b",
    size: n,
    calls: 0,
    perStep: true
  })),
  { id: "c", label: "(c) 10,000 concurrent calls, ms", workload: "c", size: full.batch, calls: 0, perStep: false },
  {
    id: "d",
    label: "(d) resume from 20,000 messages, ms",
    workload: "d",
    size: full.history,
    calls: 0,
    perStep: false
  },
  {
    id: "g",
    label: "(g) growing to 20,000 messages, ms",
    workload: "g",
    size: full.growing.turns,
    calls: full.growing.calls,
    perStep: false
  }
]

const here = dirname(fileURLToPath(import.meta.url))
const modules: Record<string, string> = {
  floor: join(here, "contenders", "floor.ts"),
  agentloop: join(here, "contenders", "agentloop.ts"),
  pi: join(here, "contenders", "pi.ts"),
  ...(process.env["BENCH_BASELINE"] === undefined ? {} : { baseline: process.env["BENCH_BASELINE"] })
}

const load = async (key: string): Promise<Contender> => {
  const module = await import(pathToFileURL(modules[key]!).href) as Record<string, Contender>
  return (key === "baseline" ? module["agentloop"] : module[key])!
}

const quantile = (sorted: ReadonlyArray<number>, q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!

/** In a child process: one contender, one cell. Prints `STEADY <json>`. */
const measureHere = async (key: string, cellId: string, seconds: number) => {
  const cell = allCells.find((c) => c.id === cellId)!
  const prepare = prepareOf(await load(key), cell.workload, cell.size, cell.calls)
  const make = () => prepare({})
  const warmStart = performance.now()
  while (performance.now() - warmStart < 1000) await make()()
  const samples: Array<number> = []
  const start = performance.now()
  while (performance.now() - start < seconds * 1000 || samples.length < 5) {
    const run = make()
    const t = performance.now()
    await run()
    const ms = performance.now() - t
    samples.push(cell.perStep ? (ms * 1000) / cell.size : ms)
  }
  samples.sort((a, b) => a - b)
  process.stdout.write(
    `STEADY ${JSON.stringify({ p10: quantile(samples, 0.1), median: quantile(samples, 0.5), runs: samples.length })}\n`
  )
}

/**
 * Effect operations per step of (b): the fiber run loop's own operation counter, summed over a
 * run of 200 steps minus a run of 100 steps, divided by 100 (so the run's fixed cost cancels out).
 */
const countOps = async (key: string) => {
  const require = createRequire(import.meta.url)
  const effectDir = dirname(require.resolve("effect/package.json"))
  const internal = await import(pathToFileURL(join(effectDir, "dist", "internal", "effect.js")).href) as {
    readonly FiberImpl: { prototype: { runLoop: (this: { currentOpCount: number }, effect: unknown) => unknown } }
  }
  let ops = 0
  const runLoop = internal.FiberImpl.prototype.runLoop
  internal.FiberImpl.prototype.runLoop = function(effect) {
    const out = runLoop.call(this, effect)
    ops += this.currentOpCount
    return out
  }
  const contender = await load(key)
  const opsOf = async (steps: number) => {
    await contender.toolSteps(steps, {})()
    ops = 0
    await contender.toolSteps(steps, {})()
    return ops
  }
  const perStep = ((await opsOf(200)) - (await opsOf(100))) / 100
  process.stdout.write(`STEADY ${JSON.stringify({ opsPerStep: perStep })}\n`)
}

const child = (args: ReadonlyArray<string>): Record<string, number> => {
  const out = spawnSync(process.execPath, ["--conditions=agentloop-source", fileURLToPath(import.meta.url), ...args], {
    encoding: "utf8",
    maxBuffer: 16 * 1024 * 1024
  })
  const line = out.stdout.split("\n").find((l) => l.startsWith("STEADY "))
  if (line === undefined) throw new Error(`steady: ${args.join(" ")} printed no result:\n${out.stderr}`)
  return JSON.parse(line.slice("STEADY ".length)) as Record<string, number>
}

const main = () => {
  const seconds = Number(process.env["STEADY_SECONDS"] ?? 3)
  const rounds = Number(process.env["STEADY_ROUNDS"] ?? 2)
  const only = process.env["STEADY_CELLS"]?.split(",").map((s) => s.trim())
  const cells = allCells.filter((c) => only === undefined || only.includes(c.id))
  const keys = Object.keys(modules)
  const found = new Map<string, Array<{ p10: number; median: number }>>()
  for (let round = 0; round < rounds; round++) {
    for (const cell of cells) {
      // a new order each round, so no contender always follows the same one
      const order = round % 2 === 0 ? keys : [...keys].reverse()
      for (const key of order) {
        const r = child(["--measure", key, cell.id, String(seconds)])
        const k = `${cell.id}/${key}`
        found.set(k, [...(found.get(k) ?? []), { p10: r["p10"]!, median: r["median"]! }])
      }
    }
    process.stderr.write(`round ${round + 1}/${rounds} done\n`)
  }
  const best = (cell: string, key: string, field: "p10" | "median") =>
    Math.min(...found.get(`${cell}/${key}`)!.map((r) => r[field]))
  const fmt = (x: number) => x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2)
  const header = [
    "cell (steady state; lowest over rounds of each process's p10)",
    ...keys,
    "agentloop ÷ pi",
    "agentloop ÷ floor"
  ]
  const lines = [`| ${header.join(" | ")} |`, `| --- | ${keys.map(() => "---:").join(" | ")} | ---: | ---: |`]
  for (const cell of cells) {
    const p10 = (key: string) => best(cell.id, key, "p10")
    const extra = cell.perStep ? ` (${fmt(p10("agentloop") - p10("floor"))} µs above)` : ""
    lines.push(
      `| ${cell.label} | ${keys.map((k) => fmt(p10(k))).join(" | ")} | ${
        (p10("agentloop") / p10("pi")).toFixed(2)
      }× | ${(p10("agentloop") / p10("floor")).toFixed(2)}×${extra} |`
    )
  }
  const ops = keys.filter((k) => k === "agentloop" || k === "baseline").map((k) =>
    `${k}: ${child(["--ops", k])["opsPerStep"]!.toFixed(1)}`
  )
  lines.push("", `Effect operations per step of (b): ${ops.join("; ")}.`)
  process.stdout.write(`${lines.join("\n")}\n`)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [flag, key, cell, seconds] = process.argv.slice(2)
  if (flag === "--measure") await measureHere(key!, cell!, Number(seconds))
  else if (flag === "--ops") await countOps(key!)
  else main()
}
