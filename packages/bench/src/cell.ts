/**
 * One cell of the benchmark (one contender, one workload, one mode) in a process of its own, so no
 * contender inherits another's compiled code, heap or garbage. `bench.ts` starts one process per
 * cell and sample; run alone: `node --expose-gc src/cell.ts '<CellSpec as JSON>'`. Prints one line,
 * `CELL <CellReport as JSON>`.
 *
 * - **cold**: import the contender, one small warm-up run of the same workload (as a CLI or a
 *   serverless function starts), then the first run at full size is the sample.
 * - **warm**: import, the full workload `warmRuns` times and for at least `warmMinMs` (a short cell,
 *   say 100 steps, is far from its steady state after five runs), then `runs` measured runs (three
 *   times as many when they are short); the median is the sample.
 *
 * A `memory` cell does the same but its measured runs sample the live heap (after a full
 * collection) at fixed points of the run instead of timing it.
 *
 * @since 0.1.0
 */
import { fileURLToPath } from "node:url"
import { canCollect, median, memoryOnce, settle, timeOnce } from "./measure.ts"
import { allSizes } from "./workloads.ts"
import type { Contender, ContenderKey, Prepared, Probe, WorkCount } from "./workloads.ts"

/**
 * The workloads: (a) streaming, (b) steps, (c) a wide batch, (d) a resumed history, (g) a run that
 * grows.
 *
 * @since 0.1.0
 * @category models
 */
export type WorkloadKind = "a" | "b" | "c" | "d" | "g"

/**
 * What one cell process measures.
 *
 * @since 0.1.0
 * @category models
 */
export interface CellSpec {
  readonly contender: ContenderKey
  readonly workload: WorkloadKind
  /** Deltas (a), steps (b), calls (c), history messages (d) or turns (g). */
  readonly size: number
  /** Calls per turn (g). */
  readonly calls: number
  readonly mode: "cold" | "warm"
  readonly kind: "time" | "memory"
  /** Warm: full runs before measuring (at least). */
  readonly warmRuns: number
  /** Warm: keep warming up with full runs until this many milliseconds have passed. */
  readonly warmMinMs: number
  /** Warm: measured runs (tripled when the warm-up runs took under 100 ms each). */
  readonly runs: number
}

/**
 * What one cell process found.
 *
 * @since 0.1.0
 * @category models
 */
export interface CellReport {
  /** Timed runs (time cells): one for a cold cell, `runs` for a warm one. */
  readonly samplesMs: ReadonlyArray<number>
  /** Peak and retained live heap of each memory run, bytes above the heap before the run. */
  readonly peakBytes: ReadonlyArray<number>
  readonly retainedBytes: ReadonlyArray<number>
  /** Importing the contender's module (its library included), in this fresh process. */
  readonly importMs: number
  /** The process's own CPU time (user + system) until the report, in ms. */
  readonly cpuMs: number
  readonly work: Omit<WorkCount, "result">
}

const modules: Record<ContenderKey, () => Promise<Contender>> = {
  floor: async () => (await import("./contenders/floor.ts")).floor,
  agentloop: async () => (await import("./contenders/agentloop.ts")).agentloop,
  // another build of agentloop (say, the core before a change), from a module exporting `agentloop`
  baseline: async () => {
    const path = process.env["BENCH_BASELINE"]
    if (path === undefined) throw new Error("the baseline contender needs BENCH_BASELINE")
    return {
      ...(await import(path) as { agentloop: Contender }).agentloop,
      key: "baseline",
      label: "agentloop (baseline)"
    }
  },
  pi: async () => (await import("./contenders/pi.ts")).pi,
  piFilter: async () => (await import("./contenders/pi.ts")).piFilter,
  aisdk: async () => (await import("./contenders/aisdk.ts")).aisdk
}

/**
 * Prepares one run of a workload for a contender (the run starts when the returned function is
 * called).
 *
 * @since 0.1.0
 * @category measurements
 */
export const prepareOf =
  (c: Contender, workload: WorkloadKind, size: number, calls: number) => (probe: Probe): Prepared => {
    switch (workload) {
      case "a":
        return c.streamDeltas(size, probe)
      case "b":
        return c.toolSteps(size, probe)
      case "c":
        return c.toolBatch(size, probe)
      case "d":
        return c.longTranscript(size, probe)
      case "g":
        return c.growingRun(size, calls, probe)
    }
  }

const smallSize = (workload: WorkloadKind): number => {
  const small = allSizes.small
  switch (workload) {
    case "a":
      return small.deltas
    case "b":
      return small.stepCounts[0]!
    case "c":
      return small.batch
    case "d":
      return small.history
    case "g":
      return small.growing.turns
  }
}

/**
 * Where a memory run samples the live heap: the same points for every contender.
 * (c): when the 1/4, 1/2, 3/4 and last call executes, and at the final request; (d): at the first
 * call and every request; (g): at every quarter of the turns' requests and the final request.
 */
const memoryPoints = (workload: WorkloadKind, size: number) => {
  if (workload === "c") {
    const at = new Set([Math.floor(size / 4), Math.floor(size / 2), Math.floor((3 * size) / 4), size - 1])
    return { tool: (i: number) => at.has(i), request: (i: number) => i === 1 }
  }
  if (workload === "g") {
    const quarter = Math.max(1, Math.floor(size / 4))
    return { tool: () => false, request: (i: number) => i % quarter === 0 || i === size }
  }
  return { tool: (i: number) => i === 0, request: () => true }
}

/**
 * Runs one cell and returns its report.
 *
 * @since 0.1.0
 * @category running
 */
export const runCell = async (spec: CellSpec): Promise<CellReport> => {
  const importStart = performance.now()
  const contender = await modules[spec.contender]()
  const importMs = performance.now() - importStart
  const full = prepareOf(contender, spec.workload, spec.size, spec.calls)
  const samplesMs: Array<number> = []
  const peakBytes: Array<number> = []
  const retainedBytes: Array<number> = []
  let work: WorkCount | undefined
  const measureOnce = async () => {
    if (spec.kind === "time") {
      const timed = await timeOnce(full)
      samplesMs.push(timed.ms)
      work = timed.work
    } else {
      const sample = await memoryOnce(full, memoryPoints(spec.workload, spec.size))
      peakBytes.push(sample.peak)
      retainedBytes.push(sample.retained)
      work = sample.work
    }
  }
  if (spec.mode === "cold") {
    await prepareOf(contender, spec.workload, smallSize(spec.workload), spec.calls)({})()
    await settle()
    await measureOnce()
  } else {
    const warmMs: Array<number> = []
    const warmStart = performance.now()
    for (let i = 0; i < spec.warmRuns || performance.now() - warmStart < spec.warmMinMs; i++) {
      warmMs.push((await timeOnce(full)).ms)
    }
    const runs = spec.kind === "time" && warmMs.length > 0 && median(warmMs) < 100 ? spec.runs * 3 : spec.runs
    for (let i = 0; i < runs; i++) await measureOnce()
  }
  const cpu = process.cpuUsage()
  const { events, toolRuns, requests, messages } = work!
  return {
    samplesMs,
    peakBytes,
    retainedBytes,
    importMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
    work: { events, toolRuns, requests, messages }
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const spec = JSON.parse(process.argv[2] ?? "") as CellSpec
  if (spec.kind === "memory" && !canCollect()) throw new Error("a memory cell needs node --expose-gc")
  const report = await runCell(spec)
  process.stdout.write(`CELL ${JSON.stringify(report)}\n`)
}
