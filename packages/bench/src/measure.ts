/**
 * Timing and memory measurement: medians over repeated runs after warm-up, and live-heap samples
 * taken after a full collection (`global.gc`, available when node runs with `--expose-gc`).
 *
 * Benchmarks print figures; nothing here asserts a timing.
 *
 * @since 0.1.0
 */
import type { Prepared, Probe, WorkCount } from "./workloads.ts"

/**
 * A full garbage collection, when node exposes it (`--expose-gc`); otherwise nothing.
 *
 * @since 0.1.0
 * @category memory
 */
export const collect = (): void => {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc !== undefined) gc()
}

/**
 * Whether `collect` really collects (node started with `--expose-gc`).
 *
 * @since 0.1.0
 * @category memory
 */
export const canCollect = (): boolean => typeof (globalThis as { gc?: unknown }).gc === "function"

/**
 * Lets work that a previous run left on the event loop (promise chains, stream pumps) finish, so
 * it is neither timed nor counted against the next run: a few turns of the event loop, without
 * idling. (Idling for milliseconds lets V8's memory reducer shrink the young generation, after
 * which an allocation-heavy run pays for many more scavenges, as after a forced `gc()`.)
 *
 * @since 0.1.0
 * @category timing
 */
export const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve))
}

/**
 * Lets timers that a previous run left pending fire too (for memory runs, where time is free).
 *
 * @since 0.1.0
 * @category memory
 */
export const settleTimers = async (): Promise<void> => {
  for (let i = 0; i < 3; i++) {
    await new Promise<void>((resolve) => setTimeout(resolve, 2))
    await settle()
  }
}

/**
 * The median of a non-empty list.
 *
 * @since 0.1.0
 * @category statistics
 */
export const median = (values: ReadonlyArray<number>): number => {
  const sorted = values.slice().sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/**
 * One timed run: prepare and settle (not timed), run (timed). No forced collection before it: a
 * full `gc()` shrinks the young generation back to its minimum, and the next run then pays for
 * many more scavenges than a program in its steady state does (3× slower for agentloop's (b)
 * in a test), so the timing runs leave the heap as the previous run left it, and the rotating
 * order spreads that evenly.
 *
 * @since 0.1.0
 * @category timing
 */
export const timeOnce = async (
  prepare: (probe: Probe) => Prepared
): Promise<{ readonly ms: number; readonly work: WorkCount }> => {
  const run = prepare({})
  await settle()
  const start = performance.now()
  const work = await run()
  const ms = performance.now() - start
  return { ms, work }
}

/**
 * What a memory run found, in bytes above the heap in use (after a full collection) just before
 * the run started, with the scripted data already built.
 *
 * @since 0.1.0
 * @category memory
 */
export interface MemorySample {
  /** The largest live heap seen at the sampling points during the run. */
  readonly peak: number
  /** The live heap after the run while its result is still held. */
  readonly retained: number
  readonly work: WorkCount
}

/**
 * One memory run. At each sampling point (`sampleTool(i)` / `sampleRequest(i)` true) the probe
 * collects garbage and reads `heapUsed`: so the figures are live memory at the same points of
 * every contender's run, not garbage that happens not to be collected yet. Needs `--expose-gc`.
 *
 * @since 0.1.0
 * @category memory
 */
export const memoryOnce = async (
  prepare: (probe: Probe) => Prepared,
  points: { readonly tool: (index: number) => boolean; readonly request: (index: number) => boolean }
): Promise<MemorySample> => {
  let peak = 0
  let baseline = 0
  const sample = () => {
    collect()
    peak = Math.max(peak, process.memoryUsage().heapUsed - baseline)
  }
  const run = prepare({
    onToolExecute: (i) => {
      if (points.tool(i)) sample()
    },
    onRequest: (i) => {
      if (points.request(i)) sample()
    }
  })
  await settleTimers()
  collect()
  collect()
  baseline = process.memoryUsage().heapUsed
  const work = await run()
  collect()
  const retained = process.memoryUsage().heapUsed - baseline
  peak = Math.max(peak, retained)
  // `work.result` is held until here
  return { peak, retained: Math.max(0, retained), work }
}
