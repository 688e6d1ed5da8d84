/**
 * `npm run soak`: 10,000 generated runs with faults injected at random (the testkit's
 * `runFaultInjection`), each checked with `checkInvariants` and the fault injector's own checks,
 * with the live heap measured (after a full collection) before, every 1,000 runs, and after.
 *
 * Exits with status 1 when a run breaks an invariant or the heap grows. Prints a summary and
 * writes `results/soak.json`.
 *
 * Runs include structured output and sub-agents (the fault injector's `output` and `subAgents`):
 * some runs have an output schema and final answers that are valid, invalid or given alongside
 * other calls; some call a sub-agent whose own script is generated with the same faults, so aborts,
 * hangs and interruptions land inside children too, and every run of the tree is checked.
 *
 * Environment: `SOAK_RUNS` (default 10000), `SOAK_SEED` (default 20240601), `SOAK_WARMUP`
 * (default 3000 runs with another seed, before the baseline heap is taken), `SOAK_PLAIN=1` (runs
 * without output schemas and sub-agents, as before issue 16), `SOAK_SHORT=1` (CI's short version:
 * 2,000 runs after 1,000 of warm-up, unless `SOAK_RUNS`/`SOAK_WARMUP` say otherwise; results in
 * `results/soak-short.json`, so the committed figures of the full soak stay as they are).
 *
 * The heap is reported in all and split into data (objects: the new, old and large-object
 * spaces) and code (compiled code, bytecode and its metadata: the code and trusted spaces). The
 * JIT keeps compiling for a while after warm-up, so code grows slowly and levels off; a leak
 * shows as data that keeps growing.
 *
 * @since 0.1.0
 */
import { runFaultInjection } from "@agentloop/testkit"
import type { FaultInjectionSummary } from "@agentloop/testkit"
import { Effect } from "effect"
import { mkdirSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import * as v8 from "node:v8"
import { canCollect, collect, settleTimers } from "./measure.ts"

const short = process.env["SOAK_SHORT"] === "1"
const runs = Number(process.env["SOAK_RUNS"] ?? (short ? 2_000 : 10_000))
const seed = Number(process.env["SOAK_SEED"] ?? 20_240_601)
const warmupRuns = Number(process.env["SOAK_WARMUP"] ?? (short ? 1_000 : 3_000))
const checkpointEvery = 1_000
const resultFile = short ? "soak-short.json" : "soak.json"
/** Structured output and sub-agents in the generated runs (off with SOAK_PLAIN=1). */
const extended = process.env["SOAK_PLAIN"] !== "1"
const generation = { output: extended, subAgents: extended }
/** Growth of the whole heap from the baseline to the end that counts as a leak. */
const leakBytes = 2 * 1024 * 1024

const log = (line: string) => process.stdout.write(`${line}\n`)
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(2)} MB`

interface Heap {
  readonly totalBytes: number
  /** Objects: the new, old and large-object spaces. */
  readonly dataBytes: number
  /** Compiled code, bytecode and their metadata. */
  readonly codeBytes: number
}

/** Live heap: after full collections, with pending timers and immediates drained. */
const liveHeap = async (): Promise<Heap> => {
  await settleTimers()
  collect()
  collect()
  let dataBytes = 0
  let codeBytes = 0
  for (const space of v8.getHeapSpaceStatistics()) {
    if (/code|trusted/.test(space.space_name)) codeBytes += space.space_used_size
    else if (!/read_only|shared/.test(space.space_name)) dataBytes += space.space_used_size
  }
  return { totalBytes: process.memoryUsage().heapUsed, dataBytes, codeBytes }
}

const fmtHeap = (h: Heap) => `${mb(h.totalBytes)} (data ${mb(h.dataBytes)}, code ${mb(h.codeBytes)})`

const main = async () => {
  if (!canCollect()) log("warning: node runs without --expose-gc: heap figures include garbage")
  const cpu = os.cpus()[0]?.model ?? "cpu"
  log(
    `soak: ${runs.toLocaleString("en")} generated runs with faults${
      extended ? ", output schemas and sub-agents" : ""
    }, ` +
      `seed ${seed} (${cpu}, node ${process.version})`
  )

  // warm-up with another seed: JIT, module state and lazily built caches settle before the baseline
  const warm = await Effect.runPromise(runFaultInjection({ runs: warmupRuns, seed: seed ^ 0x5EED, ...generation }))
  const heapBefore = await liveHeap()
  log(`warm-up: ${warmupRuns} runs, ${warm.violations} violations; heap before: ${fmtHeap(heapBefore)}`)

  const checkpoints: Array<{ runs: number } & Heap> = [{ runs: 0, ...heapBefore }]
  const started = performance.now()
  let pausedMs = 0
  const summary: FaultInjectionSummary = await Effect.runPromise(runFaultInjection({
    runs,
    seed,
    ...generation,
    onRun: (index) =>
      (index + 1) % checkpointEvery === 0 ?
        Effect.promise(async () => {
          const pause = performance.now()
          const heap = await liveHeap()
          checkpoints.push({ runs: index + 1, ...heap })
          log(`  ${(index + 1).toLocaleString("en").padStart(6)} runs: heap ${fmtHeap(heap)}`)
          pausedMs += performance.now() - pause
        }) :
        Effect.void
  }))
  const durationMs = performance.now() - started - pausedMs
  const heapAfter = await liveHeap()
  const growth = heapAfter.totalBytes - heapBefore.totalBytes
  const dataGrowth = heapAfter.dataBytes - heapBefore.dataBytes
  const heapMax = Math.max(...checkpoints.map((c) => c.totalBytes))

  log("")
  log(`runs: ${summary.runs.toLocaleString("en")} (seed ${summary.seed})`)
  log(`invariant violations: ${summary.violations} (runs with a violation: ${summary.failedRuns})`)
  log(`outcomes: ${Object.entries(summary.outcomes).map(([k, v]) => `${k} ${v}`).join(", ")}`)
  log(
    `work: ${summary.requests.toLocaleString("en")} model requests, ` +
      `${summary.toolExecutions.toLocaleString("en")} tool executions, ${summary.events.toLocaleString("en")} events`
  )
  const total = (record: Readonly<Record<string, number>>) => Object.values(record).reduce((a, b) => a + b, 0)
  log(
    `faults met: ${total(summary.faults).toLocaleString("en")} of ${Object.keys(summary.faults).length} kinds ` +
      `(planned: ${total(summary.planned).toLocaleString("en")}; the others were not reached)`
  )
  const byGroup = new Map<string, number>()
  for (const [fault, n] of Object.entries(summary.faults)) {
    const group = fault.split(":")[0]!
    byGroup.set(group, (byGroup.get(group) ?? 0) + n)
  }
  log(`  by kind: ${[...byGroup].map(([g, n]) => `${g} ${n.toLocaleString("en")}`).join(", ")}`)
  const perRun = (durationMs / summary.runs).toFixed(3)
  log(`duration: ${(durationMs / 1000).toFixed(2)} s (${perRun} ms per run, heap checkpoints excluded)`)
  log(`heap before: ${fmtHeap(heapBefore)}`)
  log(`heap after:  ${fmtHeap(heapAfter)}`)
  log(`growth: ${mb(growth)} in all, ${mb(dataGrowth)} of data; highest checkpoint ${mb(heapMax)}`)
  for (const failure of summary.failures.slice(0, 5)) {
    log(`  failing run, seed ${failure.seed}: ${failure.violations.join("; ")}`)
    log(`    replay: runFaultPlan(generateFaultPlan(${failure.seed}))`)
  }

  const here = dirname(fileURLToPath(import.meta.url))
  const outDir = join(here, "..", "results")
  mkdirSync(outDir, { recursive: true })
  writeFileSync(
    join(outDir, resultFile),
    `${
      JSON.stringify(
        {
          generated: new Date().toISOString(),
          command: "npm run soak",
          node: process.version,
          cpu: os.cpus()[0]?.model ?? "unknown",
          runs: summary.runs,
          seed: summary.seed,
          outputAndSubAgents: extended,
          warmupRuns,
          violations: summary.violations,
          failedRuns: summary.failedRuns,
          failingSeeds: summary.failures.map((f) => f.seed),
          outcomes: summary.outcomes,
          faultsMet: Object.fromEntries(Object.entries(summary.faults).sort(([a], [b]) => a.localeCompare(b))),
          faultsPlanned: Object.fromEntries(Object.entries(summary.planned).sort(([a], [b]) => a.localeCompare(b))),
          work: { requests: summary.requests, toolExecutions: summary.toolExecutions, events: summary.events },
          durationMs: Math.round(durationMs),
          heap: { before: heapBefore, after: heapAfter, growthBytes: growth, dataGrowthBytes: dataGrowth, checkpoints }
        },
        null,
        1
      )
    }\n`
  )
  log(`wrote ${join(outDir, resultFile)}`)

  const leaked = canCollect() && growth > leakBytes
  if (leaked) log(`FAIL: the heap grew by ${mb(growth)} over ${runs} runs (limit ${mb(leakBytes)})`)
  if (summary.violations > 0) log(`FAIL: ${summary.violations} invariant violations`)
  process.exitCode = summary.violations > 0 || leaked ? 1 : 0
}

await main()
