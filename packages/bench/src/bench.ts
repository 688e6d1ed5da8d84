/**
 * `npm run bench`: every workload against every contender, each cell in fresh node processes
 * (`cell.ts`), **cold** (one small warm-up run, then the first full run) and **warm** (the full
 * workload run several times first). Prints the tables (markdown) and writes
 * `results/results.json` and `results/chart.svg`.
 *
 * Environment:
 * - `BENCH_QUICK=1`: small sizes, one process per cell and mode, no repeats (about a minute; results
 *   in `results/quick/`).
 * - `BENCH_COLD_RUNS`: cold processes per cell (default 5; 1 quick); memory cells take at most 3.
 * - `BENCH_WARM_RUNS`: full runs before a warm cell measures (default 5; 3 quick).
 * - `BENCH_WARM_MS`: a warm cell also keeps warming up with full runs until this many milliseconds
 *   have passed (default 1000; 200 quick), so a short cell reaches its steady state.
 * - `BENCH_RUNS`: measured runs of a warm cell (default 7; 5 quick), tripled when they are under 100 ms.
 * - `BENCH_AISDK=1`: include the AI SDK (it takes about as long as all the others together).
 * - `BENCH_ONLY`: comma-separated cell ids (`a`, `b100`, `b500`, `b2000`, `c`, `d`, `g`); the results go
 *   to `results/partial/`, not over the full run's.
 * - `BENCH_MAX_OTHERS`: cores other processes may keep busy during a sample before it is taken
 *   again, once (default 0.8; quick: never); at most a quarter of the samples are.
 * - `BENCH_DIST=1`: run `@agentloop/core` from its built `dist/` instead of its sources.
 * - `BENCH_BASELINE`: the path of a module exporting an `agentloop` contender built on another core
 *   (the core before a change): it runs beside the others as "agentloop (baseline)", so a
 *   before/after comparison shares the machine's load.
 *
 * @since 0.1.0
 */
import { spawnSync } from "node:child_process"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import type { CellReport, CellSpec, WorkloadKind } from "./cell.ts"
import { renderChart } from "./chart.ts"
import { median } from "./measure.ts"
import { sizes } from "./workloads.ts"
import type { ContenderKey } from "./workloads.ts"

const quick = process.env["BENCH_QUICK"] === "1"
const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
const coldProcesses = env("BENCH_COLD_RUNS", quick ? 1 : 5)
/** Cold memory samples vary little between processes (the heap after a full collection). */
const coldMemoryProcesses = Math.min(coldProcesses, 3)
const warmRuns = env("BENCH_WARM_RUNS", quick ? 3 : 5)
const warmMinMs = env("BENCH_WARM_MS", quick ? 200 : 1000)
const runs = env("BENCH_RUNS", quick ? 5 : 7)
const memoryRuns = 3
/** The AI SDK is 20–100× slower than the rest: about half the bench's time. Not in the default run. */
const withAisdk = process.env["BENCH_AISDK"] === "1"
const only = process.env["BENCH_ONLY"]?.split(",").map((s) => s.trim()).filter((s) => s.length > 0)
const maxOthers = env("BENCH_MAX_OTHERS", quick ? Number.POSITIVE_INFINITY : 0.8)
/**
 * A busy sample is taken again once; at most a quarter of the samples are (a machine busy throughout gains nothing).
 */
const retries = 1
let retryBudget = 0
const fromDist = process.env["BENCH_DIST"] === "1"

interface ContenderInfo {
  readonly key: ContenderKey
  readonly label: string
}

const allContenders: ReadonlyArray<ContenderInfo> = [
  { key: "floor", label: "floor (minimal loop)" },
  { key: "agentloop", label: "agentloop" },
  { key: "baseline", label: "agentloop (baseline)" },
  { key: "pi", label: "pi-agent-core (cheapest)" },
  { key: "piFilter", label: "pi-agent-core (default filter)" },
  { key: "aisdk", label: "AI SDK (streamText)" }
]
const baseline = process.env["BENCH_BASELINE"]
const contenders = allContenders.filter((c) =>
  (c.key !== "aisdk" || withAisdk) && (c.key !== "baseline" || baseline !== undefined)
)

interface Cell {
  readonly id: string
  readonly label: string
  readonly workload: WorkloadKind
  readonly size: number
  readonly calls: number
  /** Also measure the live heap. */
  readonly memory: boolean
}

const n = (x: number) => x.toLocaleString("en")
const growingMessages = 2 + sizes.growing.turns * (1 + sizes.growing.calls)
const allCells: ReadonlyArray<Cell> = [
  {
    id: "a",
    label: `(a) 1 turn, ${n(sizes.deltas)} text deltas`,
    workload: "a",
    size: sizes.deltas,
    calls: 0,
    memory: false
  },
  ...sizes.stepCounts.map((steps): Cell => ({
    id: `b${steps}`,
    label: `(b) ${n(steps)} turns × 1 tool call`,
    workload: "b",
    size: steps,
    calls: 1,
    memory: false
  })),
  {
    id: "c",
    label: `(c) 1 batch of ${n(sizes.batch)} tool calls`,
    workload: "c",
    size: sizes.batch,
    calls: 0,
    memory: true
  },
  {
    id: "d",
    label: `(d) resume from ${n(sizes.history)} messages`,
    workload: "d",
    size: sizes.history,
    calls: 0,
    memory: true
  },
  {
    id: "g",
    label: `(g) a run growing to ${n(growingMessages)} messages (${
      n(sizes.growing.turns)
    } turns × ${sizes.growing.calls} calls)`,
    workload: "g",
    size: sizes.growing.turns,
    calls: sizes.growing.calls,
    memory: true
  }
]
const cells = allCells.filter((c) => only === undefined || only.includes(c.id))

/** The AI SDK converts the whole prompt on every step: the growing run would take minutes. */
const runsCell = (contender: ContenderKey, cell: Cell) => !(contender === "aisdk" && cell.workload === "g")

type Mode = "cold" | "warm"
type Kind = "time" | "memory"

interface Task {
  readonly cell: Cell
  readonly contender: ContenderKey
  readonly mode: Mode
  readonly kind: Kind
}

/** One process's report, with how busy the machine was while it ran. */
interface Sample {
  readonly report: CellReport
  /** Cores other processes kept busy, on average, while this one ran. */
  readonly othersCores: number
  readonly attempts: number
}

const log = (line: string) => process.stdout.write(`${line}\n`)

/** A deterministic shuffle (a fixed-seed LCG), so a run of the bench is repeatable. */
let shuffleState = 12345
const shuffled = <A>(items: ReadonlyArray<A>): Array<A> => {
  const out = items.slice()
  for (let i = out.length - 1; i > 0; i--) {
    shuffleState = (Math.imul(shuffleState, 1103515245) + 12345) >>> 0
    const j = shuffleState % (i + 1)
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}

/** Busy CPU time of the whole machine so far, in ms (from /proc/stat; 0 where there is none). */
const machineBusyMs = (): number => {
  try {
    const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
    const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = fields
    return (user + nice + system + irq + softirq + steal) * 10
  } catch {
    return 0
  }
}

const here = dirname(fileURLToPath(import.meta.url))
const cellScript = join(here, "cell.ts")

const spawnCell = (task: Task): { report: CellReport; othersCores: number } => {
  const spec: CellSpec = {
    contender: task.contender,
    workload: task.cell.workload,
    size: task.cell.size,
    calls: task.cell.calls,
    mode: task.mode,
    kind: task.kind,
    warmRuns: task.contender === "aisdk" ? Math.min(2, warmRuns) : warmRuns,
    warmMinMs: task.contender === "aisdk" ? 0 : warmMinMs,
    runs: task.kind === "memory" ? memoryRuns : task.contender === "aisdk" ? Math.min(3, runs) : runs
  }
  const args = [
    "--expose-gc",
    ...(fromDist ? [] : ["--conditions=agentloop-source"]),
    cellScript,
    JSON.stringify(spec)
  ]
  const busyBefore = machineBusyMs()
  const started = performance.now()
  const child = spawnSync(process.execPath, args, { encoding: "utf8", maxBuffer: 16 * 1024 * 1024 })
  const wallMs = performance.now() - started
  const busyMs = machineBusyMs() - busyBefore
  const line = child.stdout?.split("\n").find((l) => l.startsWith("CELL "))
  if (child.status !== 0 || line === undefined) {
    throw new Error(
      `cell ${task.cell.id} ${task.contender} ${task.mode} ${task.kind} failed (exit ${child.status}):\n${child.stderr}`
    )
  }
  const report = JSON.parse(line.slice(5)) as CellReport
  const othersCores = busyMs === 0 ? 0 : Math.max(0, busyMs - report.cpuMs) / wallMs
  return { report, othersCores }
}

/** Runs a task's process; again (twice at most) when other processes kept a core busy meanwhile. */
const runTask = (task: Task): Sample => {
  let best: { report: CellReport; othersCores: number } | undefined
  let attempts = 0
  while (attempts <= retries) {
    attempts++
    const sample = spawnCell(task)
    if (best === undefined || sample.othersCores < best.othersCores) best = sample
    if (sample.othersCores <= maxOthers || retryBudget < 1) break
    retryBudget--
  }
  return { ...best!, attempts }
}

/** What a mode found for one cell and contender. */
interface Figures {
  readonly ms: number
  readonly peakBytes: number
  readonly retainedBytes: number
  readonly importMs: number
  readonly samplesMs: ReadonlyArray<number>
  readonly othersCores: ReadonlyArray<number>
  readonly work: CellReport["work"]
}

type Results = Record<Mode, Record<string, Partial<Record<ContenderKey, Figures>>>>

const runMode = (mode: Mode): { results: Results[Mode]; repeated: number; othersCores: Array<number> } => {
  const started = performance.now()
  const tasks: Array<Task> = []
  for (const cell of cells) {
    for (const c of contenders) {
      if (!runsCell(c.key, cell)) continue
      tasks.push({ cell, contender: c.key, mode, kind: "time" })
      if (cell.memory) tasks.push({ cell, contender: c.key, mode, kind: "memory" })
    }
  }
  const samples = new Map<Task, Array<Sample>>()
  for (const task of tasks) samples.set(task, [])
  // cold: a sample is one process, so every cell gets several, in rounds of a new order each time
  // (no contender always runs right after another, and load from other work spreads evenly)
  const rounds = mode === "cold" ? coldProcesses : 1
  retryBudget = Math.floor((tasks.length * rounds) / 4)
  for (let round = 0; round < rounds; round++) {
    for (const task of shuffled(tasks)) {
      if (task.kind === "memory" && round >= coldMemoryProcesses) continue
      samples.get(task)!.push(runTask(task))
    }
    log(`  ${mode}: round ${round + 1}/${rounds} done (${((performance.now() - started) / 1000).toFixed(0)} s)`)
  }
  const results: Results[Mode] = {}
  let repeated = 0
  const othersAll: Array<number> = []
  for (const cell of cells) {
    const row: Partial<Record<ContenderKey, Figures>> = {}
    for (const c of contenders) {
      if (!runsCell(c.key, cell)) continue
      const timeTask = tasks.find((t) => t.cell === cell && t.contender === c.key && t.kind === "time")!
      const memoryTask = tasks.find((t) => t.cell === cell && t.contender === c.key && t.kind === "memory")
      const time = samples.get(timeTask)!
      const memory = memoryTask === undefined ? [] : samples.get(memoryTask)!
      for (const s of [...time, ...memory]) {
        repeated += s.attempts - 1
        othersAll.push(s.othersCores)
      }
      const samplesMs = time.flatMap((s) => s.report.samplesMs)
      // warm: the median of each process's runs, then of the processes (one by default)
      const ms = median(time.map((s) => median(s.report.samplesMs)))
      const peaks = memory.flatMap((s) => s.report.peakBytes)
      const retained = memory.flatMap((s) => s.report.retainedBytes)
      row[c.key] = {
        ms,
        peakBytes: peaks.length === 0 ? Number.NaN : median(peaks),
        retainedBytes: retained.length === 0 ? Number.NaN : median(retained),
        importMs: median(time.map((s) => s.report.importMs)),
        samplesMs: samplesMs.map((x) => Number(x.toPrecision(4))),
        othersCores: time.map((s) => Number(s.othersCores.toFixed(2))),
        work: time[time.length - 1]!.report.work
      }
    }
    checkWork(cell, row)
    results[cell.id] = row
  }
  return { results, repeated, othersCores: othersAll }
}

/** Every contender must have done the same work: same tool executions, same model requests. */
const checkWork = (cell: Cell, row: Partial<Record<ContenderKey, Figures>>) => {
  const reference = row.floor?.work
  if (reference === undefined) return
  for (const [key, figures] of Object.entries(row)) {
    const work = figures.work
    if (work.toolRuns !== reference.toolRuns || work.requests !== reference.requests) {
      throw new Error(
        `${cell.label}: ${key} ran ${work.toolRuns} tools over ${work.requests} requests, ` +
          `the floor ${reference.toolRuns} over ${reference.requests}: not the same work`
      )
    }
  }
}

const packageVersion = (name: string): string => {
  try {
    const require = createRequire(import.meta.url)
    let dir = dirname(require.resolve(name))
    for (let i = 0; i < 6; i++) {
      try {
        const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: string; version?: string }
        if (pkg.name === name && pkg.version !== undefined) return pkg.version
      } catch {
        // keep looking upwards
      }
      dir = dirname(dir)
    }
  } catch {
    // unresolvable
  }
  return "unknown"
}

const machine = () => ({
  cpu: os.cpus()[0]?.model ?? "unknown",
  cores: os.cpus().length,
  memoryGiB: Math.round(os.totalmem() / 1024 ** 3),
  platform: `${os.platform()} ${os.release()} ${os.arch()}`,
  node: process.version,
  v8: process.versions.v8,
  packages: {
    effect: packageVersion("effect"),
    "@mariozechner/pi-agent-core": packageVersion("@mariozechner/pi-agent-core"),
    ai: packageVersion("ai"),
    zod: packageVersion("zod")
  }
})

// ---------------------------------------------------------------------------------------------

const fmtNum = (x: number, digits = 2) =>
  !Number.isFinite(x) ?
    "–" :
    x >= 1000 ?
    Math.round(x).toLocaleString("en") :
    x >= 100 ?
    x.toFixed(0) :
    x.toFixed(digits)
const fmtRatio = (x: number) =>
  !Number.isFinite(x) ? "n/a" : x >= 100 ? `${x.toFixed(0)}×` : x >= 10 ? `${x.toFixed(1)}×` : `${x.toFixed(2)}×`

/** One metric of one cell: a value per contender (NaN where it does not apply). Lower is better. */
interface Row {
  readonly cell: string
  readonly label: string
  readonly metric: string
  readonly values: Partial<Record<ContenderKey, number>>
  readonly digits?: number
}

/** One contender's cost ÷ another's (n/a when the other's is 0). */
const ratioOf = (row: Row, one: ContenderKey, other: ContenderKey): number => {
  const a = row.values[one]
  const b = row.values[other]
  return a === undefined || b === undefined || !(b > 0) ? Number.NaN : a / b
}

/** agentloop's cost ÷ the other's (below 1: agentloop is cheaper). */
const ratio = (row: Row, other: ContenderKey): number => ratioOf(row, "agentloop", other)

const rowsOf = (mode: Mode, results: Results[Mode]): Array<Row> => {
  const rows: Array<Row> = []
  const values = (cell: string, f: (x: Figures) => number) => {
    const out: Partial<Record<ContenderKey, number>> = {}
    for (const c of contenders) {
      const figures = results[cell]?.[c.key]
      if (figures !== undefined) out[c.key] = f(figures)
    }
    return out
  }
  const mb = (bytes: number) => bytes / 1024 / 1024
  for (const cell of cells) {
    if (results[cell.id] === undefined) continue
    const first = (metric: string) => ({ cell: cell.id, label: cell.label, metric })
    if (cell.workload === "b") {
      rows.push({
        ...first(`µs per step, N = ${n(cell.size)}`),
        values: values(cell.id, (x) => (x.ms * 1000) / cell.size),
        digits: 1
      })
      continue
    }
    rows.push({ ...first("time (ms)"), values: values(cell.id, (x) => x.ms) })
    if (cell.workload === "c") {
      rows.push({ ...first("peak live heap (MB)"), values: values(cell.id, (x) => mb(x.peakBytes)) })
    } else if (cell.workload === "d") {
      rows.push({
        ...first("peak live heap per message (bytes)"),
        values: values(cell.id, (x) => x.peakBytes / cell.size),
        digits: 1
      })
      rows.push({
        ...first("retained per message (bytes)"),
        values: values(cell.id, (x) => x.retainedBytes / cell.size),
        digits: 1
      })
    } else if (cell.workload === "g") {
      rows.push({ ...first("peak live heap (MB)"), values: values(cell.id, (x) => mb(x.peakBytes)) })
      rows.push({ ...first("retained (MB)"), values: values(cell.id, (x) => mb(x.retainedBytes)) })
    }
  }
  if (mode === "cold") {
    const importMs: Partial<Record<ContenderKey, Array<number>>> = {}
    for (const cell of cells) {
      for (const c of contenders) {
        const figures = results[cell.id]?.[c.key]
        if (figures !== undefined) (importMs[c.key] ??= []).push(figures.importMs)
      }
    }
    const out: Partial<Record<ContenderKey, number>> = {}
    for (const c of contenders) if (importMs[c.key] !== undefined) out[c.key] = median(importMs[c.key]!)
    rows.push({ cell: "import", label: "import (a fresh process)", metric: "ms, not in any cell's time", values: out })
  }
  return rows
}

const table = (rows: ReadonlyArray<Row>): string => {
  const head = [
    "workload",
    "metric",
    ...contenders.map((c) => c.label),
    "agentloop ÷ pi-agent-core (cheapest)",
    "agentloop ÷ floor"
  ]
  const lines = [`| ${head.join(" | ")} |`, `|${head.map((_, i) => (i < 2 ? " --- " : " ---: ")).join("|")}|`]
  let previous = ""
  for (const row of rows) {
    lines.push(
      `| ${
        [
          row.label === previous ? "" : row.label,
          row.metric,
          ...contenders.map((c) => fmtNum(row.values[c.key] ?? Number.NaN, row.digits)),
          fmtRatio(ratio(row, "pi")),
          fmtRatio(ratio(row, "floor"))
        ].join(" | ")
      } |`
    )
    previous = row.label
  }
  return lines.join("\n")
}

/** The goals of issue 15, cell by cell: both ratios, cold and warm, and (b)'s µs above the floor. */
const summary = (cold: ReadonlyArray<Row>, warm: ReadonlyArray<Row>): string => {
  const withBaseline = contenders.some((c) => c.key === "baseline")
  const head = [
    "cell",
    "metric",
    "cold ÷ pi (cheapest)",
    "warm ÷ pi (cheapest)",
    "cold ÷ floor",
    "warm ÷ floor",
    "µs per step above the floor (cold / warm)",
    ...(withBaseline ? ["baseline: cold ÷ pi / warm ÷ pi", "agentloop ÷ baseline (cold / warm)"] : [])
  ]
  const lines = [`| ${head.join(" | ")} |`, `|${head.map((_, i) => (i < 2 ? " --- " : " ---: ")).join("|")}|`]
  const key = (r: Row) => `${r.cell}/${r.metric}`
  const warmByKey = new Map(warm.map((r) => [key(r), r]))
  const coldByKey = new Map(cold.map((r) => [key(r), r]))
  const keys = [...new Set([...cold.map(key), ...warm.map(key)])]
  for (const k of keys) {
    const c = coldByKey.get(k)
    const w = warmByKey.get(k)
    const any = (c ?? w)!
    if (any.cell === "import") continue
    const above = (r: Row | undefined) =>
      r === undefined || !any.metric.startsWith("µs per step") ?
        "" :
        ((r.values.agentloop ?? Number.NaN) - (r.values.floor ?? Number.NaN)).toFixed(1)
    lines.push(
      `| ${
        [
          any.cell,
          any.metric,
          fmtRatio(c === undefined ? Number.NaN : ratio(c, "pi")),
          fmtRatio(w === undefined ? Number.NaN : ratio(w, "pi")),
          fmtRatio(c === undefined ? Number.NaN : ratio(c, "floor")),
          fmtRatio(w === undefined ? Number.NaN : ratio(w, "floor")),
          any.metric.startsWith("µs per step") ? `${above(c)} / ${above(w)}` : "",
          ...(withBaseline ?
            [
              `${fmtRatio(c === undefined ? Number.NaN : ratioOf(c, "baseline", "pi"))} / ${
                fmtRatio(w === undefined ? Number.NaN : ratioOf(w, "baseline", "pi"))
              }`,
              `${fmtRatio(c === undefined ? Number.NaN : ratio(c, "baseline"))} / ${
                fmtRatio(w === undefined ? Number.NaN : ratio(w, "baseline"))
              }`
            ] :
            [])
        ].join(" | ")
      } |`
    )
  }
  return lines.join("\n")
}

const loadText = (load: ReadonlyArray<number>) => load.map((x) => x.toFixed(2)).join(", ")

const main = () => {
  const started = performance.now()
  const facts = machine()
  log(`agentloop benchmark: ${facts.cpu}, ${facts.cores} cores, ${facts.memoryGiB} GiB, node ${facts.node}`)
  log(
    `every cell in fresh processes; cold: ${coldProcesses} processes per cell (${coldMemoryProcesses} for ` +
      `memory) (one small warm-up run, then the ` +
      `first full run); warm: at least ${warmRuns} full runs and ${warmMinMs} ms of them, then the median of ${runs} (${
        runs * 3
      } under 100 ms); ` +
      `memory: median of ${memoryRuns}${quick ? "; QUICK sizes" : ""}; core from ${fromDist ? "dist" : "source"}`
  )
  const loads: Record<string, Array<number>> = { start: os.loadavg() }
  log(`load average (1, 5, 15 min) at start: ${loadText(loads["start"]!)}`)
  const cold = runMode("cold")
  loads["afterCold"] = os.loadavg()
  const warm = runMode("warm")
  loads["end"] = os.loadavg()
  const results: Results = { cold: cold.results, warm: warm.results }
  const coldRows = rowsOf("cold", results.cold)
  const warmRows = rowsOf("warm", results.warm)
  const loadNote = (m: { repeated: number; othersCores: Array<number> }) =>
    `other processes kept ${median(m.othersCores).toFixed(2)} cores busy (median over samples; ` +
    `max ${Math.max(...m.othersCores).toFixed(2)}); ${m.repeated} samples repeated for load above ${maxOthers}`
  const markdown = [
    `**Cold** (a fresh process per sample: import, one small warm-up run, then the first full run; median of ` +
    `${coldProcesses} processes). ` +
    `Load: ${loadNote(cold)}.`,
    "",
    table(coldRows),
    "",
    `**Warm** (a fresh process per cell: at least ${warmRuns} full runs and ${warmMinMs} ms of them, ` +
    `then the median of ${runs} runs, ${runs * 3} under 100 ms). ` +
    `Load: ${loadNote(warm)}.`,
    "",
    table(warmRows),
    "",
    "**Goals** (issue 15: ≤ 1.00× pi-agent-core at its cheapest everywhere; ≤ 3× the floor on (a) and (c); " +
    "on (b) at most 5 µs per step above the floor):",
    "",
    summary(coldRows, warmRows),
    "",
    `Load average (1, 5, 15 min): start ${loadText(loads["start"]!)}; after cold ${loadText(loads["afterCold"]!)}; ` +
    `end ${loadText(loads["end"]!)}.`
  ].join("\n")
  log("")
  log(markdown)

  // a run of some cells only does not replace the full results
  const outDir = join(here, "..", "results", ...(quick ? ["quick"] : only !== undefined ? ["partial"] : []))
  mkdirSync(outDir, { recursive: true })
  const json = {
    generated: new Date().toISOString(),
    command: `${quick ? "BENCH_QUICK=1 " : ""}npm run bench`,
    machine: facts,
    settings: {
      coldProcesses,
      warmRuns,
      warmMinMs,
      runs,
      memoryRuns,
      sizes,
      aisdk: withAisdk,
      core: fromDist ? "dist" : "source"
    },
    load: { average: loads, cold: loadNote(cold), warm: loadNote(warm) },
    contenders,
    cells: cells.map(({ id, label, workload, size, calls }) => ({ id, label, workload, size, calls })),
    results,
    tables: {
      cold: coldRows.map((r) => ({ ...r, values: round(r.values) })),
      warm: warmRows.map((r) => ({ ...r, values: round(r.values) }))
    },
    markdown
  }
  writeFileSync(join(outDir, "results.json"), `${JSON.stringify(json, null, 1)}\n`)

  const panel = (label: string, rows: ReadonlyArray<Row>) => ({
    label,
    groups: rows.filter((r) => r.cell !== "import" && !r.metric.startsWith("retained")).map((r) => ({
      label: `${r.cell} ${shortMetric(r.metric)}`,
      values: { pi: ratio(r, "pi"), floor: ratio(r, "floor") }
    }))
  })
  const svg = renderChart({
    title: "agentloop ÷ pi-agent-core (cheapest) and ÷ a minimal loop, cold and warm",
    subtitle: `${facts.cpu}, ${facts.cores} cores, node ${facts.node}; ${new Date().toISOString().slice(0, 10)}` +
      `${quick ? " (quick sizes)" : ""}; cold: median of ${coldProcesses} fresh processes; ` +
      `warm: after ≥ ${warmRuns} full runs and ≥ ${warmMinMs} ms`,
    series: [
      { key: "pi", label: "agentloop ÷ pi-agent-core (cheapest)", color: "#ff7f0e" },
      { key: "floor", label: "agentloop ÷ floor (minimal loop)", color: "#9e9e9e" }
    ],
    panels: [panel("cold", coldRows), panel("warm", warmRows)]
  })
  writeFileSync(join(outDir, "chart.svg"), svg)
  log("")
  log(`wrote ${join(outDir, "results.json")} and ${join(outDir, "chart.svg")}`)
  log(`total ${((performance.now() - started) / 1000).toFixed(1)} s`)
}

const shortMetric = (metric: string): string =>
  metric.startsWith("µs per step") ?
    "µs/step" :
    metric.startsWith("time") ?
    "time" :
    metric.startsWith("peak") ?
    "heap" :
    metric

const round = (record: Partial<Record<string, number>>): Record<string, number> =>
  Object.fromEntries(Object.entries(record).map(([k, v]) => [k, Number((v ?? Number.NaN).toPrecision(5))]))

main()
