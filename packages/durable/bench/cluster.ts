/**
 * Durable runs on 3 runner processes on PostgreSQL: steps per second with many concurrent runs,
 * and (with SOAK_KILL_EVERY_MS) a soak where a runner is killed with SIGKILL every few seconds and
 * started again. At the end: every run ended, invariant violations (checkInvariants per run over
 * the events of all processes), and calls that ran more than once (allowed only when the process
 * that ran them before was killed).
 *
 *   . "$(packages/durable/scripts/postgres.sh env)"    # after scripts/postgres.sh start
 *   NODE_OPTIONS=--conditions=agentloop-source node packages/durable/bench/cluster.ts
 *   BENCH_RUNS=200 SOAK_KILL_EVERY_MS=5000 NODE_OPTIONS=... node packages/durable/bench/cluster.ts
 */
import { execFileSync } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import type { AgentRunResult, Message } from "@agentloop/core"
import type { DurableEvent } from "../src/index.ts"
import { awaitExit, lines, spawnProc, starts, tempDir, waitUntil } from "../test/crash.ts"
import type { Proc } from "../test/crash.ts"
import { violationsOf } from "../test/harness.ts"

const RUNS = Number(process.env["BENCH_RUNS"] ?? 100)
const STEPS = Number(process.env["BENCH_STEPS"] ?? 3)
const KILL_EVERY = Number(process.env["SOAK_KILL_EVERY_MS"] ?? 0)
const pg = {
  host: process.env["AGENTLOOP_PG_HOST"] ?? "127.0.0.1",
  port: Number(process.env["AGENTLOOP_PG_PORT"] ?? 54329),
  username: process.env["AGENTLOOP_PG_USER"] ?? "agentloop"
}
const database = `bench_${process.pid}`
execFileSync("psql", ["-q", "-h", pg.host, "-p", String(pg.port), "-U", pg.username, "-d", "postgres", "-c", `create database ${database}`])
const dir = tempDir("agentloop-cluster-bench-")
const settings = {
  engine: "postgres",
  scenario: "bench",
  pg: { ...pg, database },
  runId: "b",
  runs: RUNS,
  steps: STEPS,
  log: join(dir, "side-effects.ndjson"),
  events: join(dir, "events.ndjson"),
  result: join(dir, "result.json")
}

let port = 35100
const all: Array<Proc> = []
const killed = new Set<number>()
const startRunner = Effect.gen(function*() {
  const before = starts(settings.log).entries.filter((e) => e.kind === "process").length
  const proc = spawnProc("runner", { ...settings, port: port++ })
  all.push(proc)
  yield* waitUntil("a runner up", () => starts(settings.log).entries.filter((e) => e.kind === "process").length > before)
  return proc
})

const program = Effect.gen(function*() {
  const runners = [yield* startRunner, yield* startRunner, yield* startRunner]
  const client = spawnProc("client-many", settings)
  all.push(client)
  let kills = 0
  if (KILL_EVERY > 0) {
    yield* Effect.gen(function*() {
      let i = 0
      while (client.child.exitCode === null) {
        yield* Effect.sleep(KILL_EVERY)
        const victim = runners[i % 3]!
        killed.add(victim.child.pid!)
        victim.child.kill("SIGKILL")
        kills++
        runners[i % 3] = yield* startRunner
        i++
      }
    }).pipe(Effect.forkDetach)
  }
  const cpuOf = (pid: number | undefined) => {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
      return (Number(fields[11]) + Number(fields[12])) * 10
    } catch {
      return 0
    }
  }
  let runnerCpu = 0
  client.child.on("exit", () => void (runnerCpu = runners.reduce((sum, r) => sum + cpuOf(r.child.pid), 0)))
  yield* awaitExit(client, 15 * 60_000)
  const { elapsed, results } = JSON.parse(readFileSync(settings.result, "utf8")) as {
    elapsed: number
    results: Array<{ runId: string; result: AgentRunResult }>
  }
  const events = lines<DurableEvent>(settings.events)
  const byRun = new Map<string, Array<DurableEvent>>()
  for (const e of events) byRun.set(e.runId, [...(byRun.get(e.runId) ?? []), e])
  let violations = 0
  let notStop = 0
  for (const { runId, result } of results) {
    const input: ReadonlyArray<Message> = [{ role: "user", content: runId }]
    violations += violationsOf(input, result, byRun.get(runId) ?? []).length
    if (result.reason !== "stop") notStop++
  }
  const toolStarts = starts(settings.log).entries.filter((e) => e.kind === "tool" && e.phase === "start")
  const seen = new Map<string, number>()
  let reranAfterKill = 0
  let reranWithoutKill = 0
  for (const e of toolStarts) {
    const previous = seen.get(e.call!)
    if (previous !== undefined) {
      if (killed.has(previous)) reranAfterKill++
      else reranWithoutKill++
    }
    seen.set(e.call!, e.pid)
  }
  all.forEach((p, i) => writeFileSync(join(dir, `process-${i}.out`), p.output()))
  console.log(`logs in ${dir}`)
  console.log(`${RUNS} runs x ${STEPS} steps on 3 runners (PostgreSQL, ${process.env["AGENTLOOP_TIMINGS"] === "fast" ? "fastTimings" : "balancedTimings"})${KILL_EVERY > 0 ? `, a runner killed every ${KILL_EVERY} ms (${kills} kills)` : ""}`)
  console.log(`elapsed ${(elapsed / 1000).toFixed(1)} s: ${((RUNS * STEPS) / (elapsed / 1000)).toFixed(1)} steps/s`)
  console.log(`CPU of the ${runners.length} runners: ${(runnerCpu / 1000).toFixed(1)} s (${(runnerCpu / (RUNS * STEPS)).toFixed(1)} ms a step)`)
  console.log(`runs ended: ${results.length}/${RUNS} (${notStop} not "stop"); invariant violations: ${violations}`)
  console.log(`calls run again: ${reranAfterKill} after their runner was killed (at least once), ${reranWithoutKill} otherwise`)
})

Effect.runPromise(program.pipe(Effect.ensuring(Effect.sync(() => all.forEach((p) => p.child.kill(process.env["BENCH_PROFILE"] ? "SIGTERM" : "SIGKILL")))))).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
