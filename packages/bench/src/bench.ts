/**
 * `npm run bench`: the four workloads against the four contenders, side by side in this process.
 * Prints a table (markdown) and writes `results/results.json` and `results/chart.svg`.
 *
 * Environment: `BENCH_RUNS` (measured runs per cell, default 7; three times as many for cells
 * whose slowest contender takes under 100 ms), `BENCH_WARMUP` (warm-up runs per cell, default 2),
 * `BENCH_WARMUP_ROUNDS` (JIT warm-up rounds at small sizes, default 150),
 * `BENCH_QUICK=1` (small sizes, for a smoke run; results are then written to `results/quick/`).
 *
 * @since 0.1.0
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { runBreakdown } from "./breakdown.ts"
import type { BreakdownLine } from "./breakdown.ts"
import { renderChart } from "./chart.ts"
import type { Series } from "./chart.ts"
import { agentloop, streamDeltasAsyncSource } from "./contenders/agentloop.ts"
import { aisdk } from "./contenders/aisdk.ts"
import { floor } from "./contenders/floor.ts"
import { pi } from "./contenders/pi.ts"
import { canCollect, median, memoryOnce, timeOnce } from "./measure.ts"
import { sizes } from "./workloads.ts"
import type { Contender, ContenderKey, Prepared, Probe, WorkCount } from "./workloads.ts"

const contenders: ReadonlyArray<Contender> = [floor, agentloop, pi, aisdk]
const peers: ReadonlyArray<ContenderKey> = ["pi", "aisdk"]
const colors: Record<ContenderKey, string> = {
  floor: "#9e9e9e",
  agentloop: "#1f77b4",
  pi: "#ff7f0e",
  aisdk: "#2ca02c"
}
const runs = Number(process.env["BENCH_RUNS"] ?? 7)
const warmup = Number(process.env["BENCH_WARMUP"] ?? 2)
const memoryRuns = 3
const warmupRounds = Number(process.env["BENCH_WARMUP_ROUNDS"] ?? 150)
const aisdkWarmupRounds = 10
const quick = process.env["BENCH_QUICK"] === "1"

interface TimedWorkload {
  readonly id: string
  readonly label: string
  readonly prepare: (c: Contender) => (probe: Probe) => Prepared
}

const timed: ReadonlyArray<TimedWorkload> = [
  {
    id: "a",
    label: `(a) 1 turn, ${sizes.deltas.toLocaleString("en")} text deltas`,
    prepare: (c) => (probe) => c.streamDeltas(sizes.deltas, probe)
  },
  ...sizes.stepCounts.map((steps): TimedWorkload => ({
    id: `b${steps}`,
    label: `(b) ${steps.toLocaleString("en")} turns × 1 tool call`,
    prepare: (c) => (probe) => c.toolSteps(steps, probe)
  })),
  {
    id: "c",
    label: `(c) 1 batch of ${sizes.batch.toLocaleString("en")} tool calls`,
    prepare: (c) => (probe) => c.toolBatch(sizes.batch, probe)
  },
  {
    id: "d",
    label: `(d) resume from ${sizes.history.toLocaleString("en")} messages`,
    prepare: (c) => (probe) => c.longTranscript(sizes.history, probe)
  }
]

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

/** Every contender must have done the same work: same tool executions, same model requests. */
const checkWork = (workload: string, works: ReadonlyMap<ContenderKey, WorkCount>) => {
  const reference = works.get("floor")!
  for (const [key, work] of works) {
    if (work.toolRuns !== reference.toolRuns || work.requests !== reference.requests) {
      throw new Error(
        `${workload}: ${key} ran ${work.toolRuns} tools over ${work.requests} requests, ` +
          `the floor ${reference.toolRuns} over ${reference.requests}: not the same work`
      )
    }
  }
}

interface TimedResult {
  readonly samplesMs: Record<ContenderKey, Array<number>>
  readonly medianMs: Record<ContenderKey, number>
  readonly work: Record<ContenderKey, { events: number; toolRuns: number; requests: number; messages: number }>
}

const emptyRecord = <A>(f: () => A): Record<ContenderKey, A> => ({
  floor: f(),
  agentloop: f(),
  pi: f(),
  aisdk: f()
})

const runTimed = async (workload: TimedWorkload): Promise<TimedResult> => {
  const started = performance.now()
  const samplesMs = emptyRecord((): Array<number> => [])
  const works = new Map<ContenderKey, WorkCount>()
  const warmMs: Array<number> = [0]
  for (let w = 0; w < warmup; w++) {
    for (const c of contenders) {
      const { ms, work } = await timeOnce(workload.prepare(c))
      works.set(c.key, work)
      warmMs.push(ms)
    }
  }
  checkWork(workload.label, works)
  // short cells get more runs (their medians are noisier)
  const n = Math.max(...warmMs) < 100 ? runs * 3 : runs
  for (let r = 0; r < n; r++) {
    // a new order each round, so no contender always runs right after another (whose garbage and
    // cache footprint it would inherit)
    for (const c of shuffled(contenders)) {
      const { ms, work } = await timeOnce(workload.prepare(c))
      samplesMs[c.key].push(ms)
      works.set(c.key, work)
    }
  }
  checkWork(workload.label, works)
  const medianMs = emptyRecord(() => 0)
  const work = emptyRecord(() => ({ events: 0, toolRuns: 0, requests: 0, messages: 0 }))
  for (const c of contenders) {
    medianMs[c.key] = median(samplesMs[c.key])
    const { events, toolRuns, requests, messages } = works.get(c.key)!
    work[c.key] = { events, toolRuns, requests, messages }
  }
  log(
    `  ${workload.label}: ` +
      contenders.map((c) => `${c.label} ${medianMs[c.key].toFixed(2)} ms`).join(", ") +
      ` (${((performance.now() - started) / 1000).toFixed(1)} s)`
  )
  return { samplesMs, medianMs, work }
}

interface MemoryResult {
  readonly peakBytes: Record<ContenderKey, number>
  readonly retainedBytes: Record<ContenderKey, number>
}

const runMemory = async (
  label: string,
  prepare: (c: Contender) => (probe: Probe) => Prepared,
  points: { readonly tool: (i: number) => boolean; readonly request: (i: number) => boolean }
): Promise<MemoryResult> => {
  const peak = emptyRecord((): Array<number> => [])
  const retained = emptyRecord((): Array<number> => [])
  for (let r = 0; r < memoryRuns; r++) {
    for (const c of contenders) {
      const sample = await memoryOnce(prepare(c), points)
      peak[c.key].push(sample.peak)
      retained[c.key].push(sample.retained)
    }
  }
  const peakBytes = emptyRecord(() => 0)
  const retainedBytes = emptyRecord(() => 0)
  for (const c of contenders) {
    peakBytes[c.key] = median(peak[c.key])
    retainedBytes[c.key] = median(retained[c.key])
  }
  log(`  ${label} memory: ` + contenders.map((c) => `${c.label} peak ${mb(peakBytes[c.key])}`).join(", "))
  return { peakBytes, retainedBytes }
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`

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

const fmtNum = (n: number, digits = 2) =>
  n >= 1000 ? Math.round(n).toLocaleString("en") : n >= 100 ? n.toFixed(0) : n.toFixed(digits)
const fmtRatio = (n: number) =>
  !Number.isFinite(n) ? "n/a" : n >= 100 ? `${n.toFixed(0)}×` : n >= 10 ? `${n.toFixed(1)}×` : `${n.toFixed(2)}×`

interface Row {
  readonly workload: string
  readonly metric: string
  readonly values: Record<ContenderKey, number>
  /** `lower` when a smaller figure is better (times, bytes). */
  readonly better: "lower" | "higher"
  readonly digits?: number
}

const table = (rows: ReadonlyArray<Row>): string => {
  const head = [
    "workload",
    "metric",
    ...contenders.map((c) => c.label),
    "agentloop ÷ floor",
    ...peers.map((p) => `agentloop ÷ ${contenders.find((c) => c.key === p)!.label}`)
  ]
  const lines = [`| ${head.join(" | ")} |`, `|${head.map((_, i) => (i < 2 ? " --- " : " ---: ")).join("|")}|`]
  for (const row of rows) {
    // ratios are "agentloop's cost ÷ the other's cost": below 1 means agentloop is cheaper
    // (a cost of zero, such as nothing retained, has no meaningful ratio: n/a)
    const ratio = (other: ContenderKey) =>
      row.values[other] <= 0 ?
        Number.NaN :
        row.better === "lower" ?
        row.values.agentloop / row.values[other] :
        row.values[other] / row.values.agentloop
    lines.push(
      `| ${
        [
          row.workload,
          row.metric,
          ...contenders.map((c) => fmtNum(row.values[c.key], row.digits)),
          fmtRatio(ratio("floor")),
          ...peers.map((p) => fmtRatio(ratio(p)))
        ].join(" | ")
      } |`
    )
  }
  return lines.join("\n")
}

const main = async () => {
  const started = performance.now()
  const facts = machine()
  log(`agentloop benchmark: ${facts.cpu}, ${facts.cores} cores, ${facts.memoryGiB} GiB, node ${facts.node}`)
  log(
    `median of ${runs} runs (${runs * 3} for cells under 100 ms) after ${warmup} warm-up runs, contenders in a ` +
      `shuffled order each round; memory: median of ${memoryRuns}${quick ? "; QUICK sizes" : ""}`
  )
  if (!canCollect()) log("warning: node runs without --expose-gc: no collection between runs and no memory figures")

  // JIT warm-up: every contender runs every workload at a small size until its code paths are
  // compiled. agentloop's per-run code (Effect's fibers, layers, streams) reaches its steady speed
  // only after a hundred runs or more; the AI SDK does far more work per run (thousands of
  // invocations of its per-part code in one round), so a few rounds warm it as much.
  const warmStart = performance.now()
  const small = quick ?
    { deltas: 500, steps: 20, batch: 50, history: 100 } :
    { deltas: 5_000, steps: 200, batch: 500, history: 1_000 }
  const roundsOf = (c: Contender) => (c.key === "aisdk" ? Math.min(aisdkWarmupRounds, warmupRounds) : warmupRounds)
  for (let round = 0; round < warmupRounds; round++) {
    for (const c of contenders) {
      if (round >= roundsOf(c)) continue
      await c.streamDeltas(small.deltas, {})()
      await c.toolSteps(small.steps, {})()
      await c.toolBatch(small.batch, {})()
      await c.longTranscript(small.history, {})()
    }
  }
  const warmSeconds = ((performance.now() - warmStart) / 1000).toFixed(1)
  log(
    `  JIT warm-up: ${warmupRounds} rounds (AI SDK ${Math.min(aisdkWarmupRounds, warmupRounds)}) ` +
      `of every workload at small sizes (${warmSeconds} s)`
  )

  const results = new Map<string, TimedResult>()
  for (const workload of timed) results.set(workload.id, await runTimed(workload))

  // (a) again with agentloop's model reading an async generator (one promise per event, as the
  // floor's model does), against the floor: the loop's cost when the source costs the same
  const asyncSamples: Array<number> = []
  const floorSamples: Array<number> = []
  for (let r = 0; r < warmup + runs; r++) {
    const pair: Array<[Array<number>, (probe: Probe) => Prepared]> = [
      [asyncSamples, (probe) => streamDeltasAsyncSource(sizes.deltas, probe)],
      [floorSamples, (probe) => floor.streamDeltas(sizes.deltas, probe)]
    ]
    for (const [samples, prepare] of r % 2 === 0 ? pair : pair.slice().reverse()) {
      const { ms } = await timeOnce(prepare)
      if (r >= warmup) samples.push(ms)
    }
  }
  const asyncSource = { agentloopMs: median(asyncSamples), floorMs: median(floorSamples) }
  log(
    `  (a) with an async model source: agentloop ${asyncSource.agentloopMs.toFixed(2)} ms, floor ${
      asyncSource.floorMs.toFixed(2)
    } ms (${(asyncSource.agentloopMs / asyncSource.floorMs).toFixed(2)}× the floor)`
  )

  let memC: MemoryResult | undefined
  let memD: MemoryResult | undefined
  if (canCollect()) {
    const n = sizes.batch
    const quarter = new Set([Math.floor(n / 4), Math.floor(n / 2), Math.floor((3 * n) / 4), n - 1])
    memC = await runMemory("(c)", (c) => (probe) => c.toolBatch(n, probe), {
      tool: (i) => quarter.has(i),
      request: (i) => i === 1
    })
    memD = await runMemory("(d)", (c) => (probe) => c.longTranscript(sizes.history, probe), {
      tool: (i) => i === 0,
      request: () => true
    })
  }

  log("  cost breakdown (tight loops, steady state)...")
  const breakdown: Array<BreakdownLine> = await runBreakdown()

  const get = (id: string) => results.get(id)!
  const mapValues = (f: (key: ContenderKey) => number): Record<ContenderKey, number> => ({
    floor: f("floor"),
    agentloop: f("agentloop"),
    pi: f("pi"),
    aisdk: f("aisdk")
  })
  const rows: Array<Row> = []
  const a = get("a")
  rows.push({ workload: timed[0]!.label, metric: "time (ms)", values: a.medianMs, better: "lower" })
  rows.push({
    workload: "",
    metric: "deltas per second",
    values: mapValues((k) => sizes.deltas / (a.medianMs[k] / 1000)),
    better: "higher"
  })
  const perStep: Record<string, Array<number>> = {}
  for (const c of contenders) perStep[c.key] = []
  for (const steps of sizes.stepCounts) {
    const b = get(`b${steps}`)
    const values = mapValues((k) => (b.medianMs[k] * 1000) / steps)
    for (const c of contenders) perStep[c.key]!.push(values[c.key])
    rows.push({
      workload: steps === sizes.stepCounts[0] ? "(b) N turns × 1 tool call" : "",
      metric: `µs per step, N = ${steps.toLocaleString("en")}`,
      values,
      better: "lower",
      digits: 1
    })
  }
  const growth = mapValues((k) => perStep[k]![perStep[k]!.length - 1]! / perStep[k]![0]!)
  rows.push({
    workload: "",
    metric: `per-step growth ${sizes.stepCounts[0]} → ${sizes.stepCounts[sizes.stepCounts.length - 1]} (1.00 = flat)`,
    values: growth,
    better: "lower"
  })
  const c = get("c")
  rows.push({ workload: timed[timed.length - 2]!.label, metric: "time (ms)", values: c.medianMs, better: "lower" })
  if (memC !== undefined) {
    rows.push({
      workload: "",
      metric: "peak live heap (MB)",
      values: mapValues((k) => memC.peakBytes[k] / 1024 / 1024),
      better: "lower"
    })
  }
  const d = get("d")
  rows.push({ workload: timed[timed.length - 1]!.label, metric: "time (ms)", values: d.medianMs, better: "lower" })
  if (memD !== undefined) {
    rows.push({
      workload: "",
      metric: "peak live heap per message (bytes)",
      values: mapValues((k) => memD.peakBytes[k] / sizes.history),
      better: "lower",
      digits: 1
    })
    rows.push({
      workload: "",
      metric: "retained per message (bytes)",
      values: mapValues((k) => memD.retainedBytes[k] / sizes.history),
      better: "lower",
      digits: 1
    })
  }

  const markdown = table(rows)
  log("")
  log(markdown)
  log("")
  log("Work done per run (events are in each loop's own vocabulary; tool runs and requests must match):")
  for (const w of timed) {
    const r = get(w.id)
    log(
      `  ${w.label}: ` +
        contenders.map((c) =>
          `${c.label} ${r.work[c.key].events} events/${r.work[c.key].toolRuns} tools/${r.work[c.key].requests} requests`
        ).join("; ")
    )
  }

  log("")
  log("Where agentloop's cost goes (tight loops, steady state; `src/breakdown.ts`):")
  log("")
  log("| measurement | µs | per |")
  log("| --- | ---: | --- |")
  for (const line of breakdown) {
    log(`| ${line.what} | ${line.micros.toFixed(2)} | ${line.unit.replace("µs per ", "")} |`)
  }

  const here = dirname(fileURLToPath(import.meta.url))
  const outDir = join(here, "..", "results", ...(quick ? ["quick"] : []))
  mkdirSync(outDir, { recursive: true })
  const json = {
    generated: new Date().toISOString(),
    command: "npm run bench",
    machine: facts,
    settings: { runs, warmup, memoryRuns, sizes, exposeGc: canCollect() },
    contenders: contenders.map((c) => ({ key: c.key, label: c.label })),
    timed: Object.fromEntries(
      timed.map((w) => {
        const r = get(w.id)
        return [w.id, { label: w.label, medianMs: round(r.medianMs), samplesMs: roundAll(r.samplesMs), work: r.work }]
      })
    ),
    breakdown: breakdown.map((line) => ({ ...line, micros: Number(line.micros.toPrecision(4)) })),
    asyncSource: { ...round(asyncSource), samplesAgentloopMs: asyncSamples, samplesFloorMs: floorSamples },
    memory: {
      c: memC === undefined ? null : { peakBytes: memC.peakBytes, retainedBytes: memC.retainedBytes },
      d: memD === undefined ?
        null :
        { peakBytes: memD.peakBytes, retainedBytes: memD.retainedBytes, messages: sizes.history }
    },
    table: rows.map((r) => ({ workload: r.workload, metric: r.metric, values: round(r.values) })),
    markdown
  }
  writeFileSync(join(outDir, "results.json"), `${JSON.stringify(json, null, 1)}\n`)

  const series: Array<Series> = contenders.map((c) => ({ key: c.key, label: c.label, color: colors[c.key] }))
  const ratioToFloor = (id: string) => mapValues((k) => get(id).medianMs[k] / get(id).medianMs.floor)
  const lastSteps = sizes.stepCounts[sizes.stepCounts.length - 1]!
  const svg = renderChart({
    title: "agentloop vs pi-agent-core vs AI SDK vs a minimal loop",
    subtitle: `median of ${runs} runs (${runs * 3} for cells under 100 ms); ` +
      `${facts.cpu}, ${facts.cores} cores, node ${facts.node}; ${new Date().toISOString().slice(0, 10)}`,
    series,
    groups: [
      { label: "(a) deltas", values: ratioToFloor("a") },
      { label: `(b) ${lastSteps} steps`, values: ratioToFloor(`b${lastSteps}`) },
      { label: "(c) batch", values: ratioToFloor("c") },
      { label: "(d) resume", values: ratioToFloor("d") }
    ],
    steps: sizes.stepCounts,
    perStep
  })
  writeFileSync(join(outDir, "chart.svg"), svg)
  log("")
  log(`wrote ${join(outDir, "results.json")} and ${join(outDir, "chart.svg")}`)
  log(`total ${((performance.now() - started) / 1000).toFixed(1)} s`)
}

const round = (record: Record<string, number>): Record<string, number> =>
  Object.fromEntries(Object.entries(record).map(([k, v]) => [k, Number(v.toPrecision(5))]))
const roundAll = (record: Record<string, Array<number>>): Record<string, Array<number>> =>
  Object.fromEntries(Object.entries(record).map(([k, v]) => [k, v.map((x) => Number(x.toPrecision(4)))]))

await main()
