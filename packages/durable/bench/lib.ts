/**
 * What the durable bench (bench/index.ts) and soak (bench/soak.ts) share: a PostgreSQL (the one
 * AGENTLOOP_PG_* name, or a throwaway one from scripts/postgres.ts, stopped at the end), in-process
 * overhead per step, a cluster of runner processes (test/fixtures/crash-process.ts) with a client
 * starting many runs and, optionally, a runner killed with SIGKILL every few seconds, and the
 * analysis of what ran how many times against what the journal holds.
 */
import { allow, ask, defineTool, Model, noopSinkLayer, runAgentLoop, toolExecutorLayer } from "@agentloop/core"
import type { AgentRunResult, Executor, Message } from "@agentloop/core"
import { assistant, echoTool, toolCall } from "@agentloop/testkit"
import { Effect, Layer, Schedule, Schema, Stream } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  approve,
  awaitRun,
  balancedTimings,
  durableRunnerLayer,
  embeddedEngineLayer,
  memoryEngineLayer,
  pendingApprovals,
  postgresClientLayer,
  postgresRunnerLayer,
  postgresShardsPerGroup,
  runDurable,
  startRun
} from "../src/index.ts"
import type { DurableEvent } from "../src/index.ts"
import { awaitExit, freePort, kill9, lines, spawnProc, starts, tempDir, toolEndedIn, waitUntil } from "../test/crash.ts"
import type { LogEntry, Proc } from "../test/crash.ts"
import { oneCallModel, violationsOf } from "../test/harness.ts"

// -----------------------------------------------------------------------------
// PostgreSQL
// -----------------------------------------------------------------------------

import { dropDatabase, freshDatabase, query } from "../scripts/postgres.ts"
import type { Postgres as Pg } from "../scripts/postgres.ts"
export { dropDatabase, freshDatabase, postgres } from "../scripts/postgres.ts"
export type { Pg }

// -----------------------------------------------------------------------------
// Overhead per step, in process
// -----------------------------------------------------------------------------

/** The prompt of a run of `steps` steps (the model reads it). */
const promptOf = (steps: number) => `steps:${steps}`

/** A model asking for one echo call per turn until the prompt's number of turns, then stopping. */
const toolsAndModel = Layer.mergeAll(
  Layer.succeed(
    Model,
    Model.of({
      stream: (request) => {
        const first = request.messages[0]
        const steps = Number(/^steps:(\d+)$/.exec(typeof first?.content === "string" ? first.content : "")?.[1] ?? 1)
        const n = request.messages.filter((m) => m.role === "assistant").length
        const message = n + 1 < steps ?
          assistant("toolUse", { calls: [toolCall(`s${n}`, "echo", { n })] }) :
          assistant("stop", { text: "done" })
        return Stream.make({ type: "done" as const, message })
      }
    })
  ),
  toolExecutorLayer([echoTool("echo")]) as Layer.Layer<Executor>
)

const time = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const start = performance.now()
    yield* effect
    return performance.now() - start
  })

/** ms per step of `runAgentLoop` in memory (the baseline). */
export const inMemoryMsPerStep = (steps: number, runs: number) =>
  Effect.gen(function*() {
    const run = runAgentLoop({ messages: [{ role: "user", content: promptOf(steps) }] }).pipe(
      Effect.provide(Layer.mergeAll(toolsAndModel, noopSinkLayer))
    )
    yield* Effect.repeat(run, { times: 20 })
    return (yield* time(Effect.repeat(run, { times: runs - 1 }))) / (runs * steps)
  })

export type EngineName = "memory" | "embedded" | "postgres"

/**
 * Durable runs on `engine`, in this process: ms per step (wall and CPU) of one run after another,
 * a run's cost beyond its steps (runs of 1 step against runs of `steps`: per step is the difference
 * over the extra steps, the rest of a 1-step run is the run's own), and steps per second with each
 * of `concurrent` runs at once.
 */
export const durableOverhead = (
  engine: EngineName,
  options: {
    readonly steps: number
    readonly runs: number
    readonly concurrent: ReadonlyArray<number>
    readonly pg?: Pg
  }
) =>
  Effect.gen(function*() {
    const dir = mkdtempSync(join(tmpdir(), "agentloop-bench-"))
    const database = engine === "postgres" ? freshDatabase(options.pg!, "overhead") : undefined
    const engineLayer = engine === "memory" ?
      memoryEngineLayer :
      engine === "embedded" ?
      embeddedEngineLayer({ filename: join(dir, "bench.db") }) :
      postgresRunnerLayer({
        postgres: { host: options.pg!.host, port: options.pg!.port, username: options.pg!.username, database },
        address: { host: "127.0.0.1", port: yield* freePort },
        timings: balancedTimings
      })
    const layer = durableRunnerLayer().pipe(
      Layer.provideMerge(engineLayer as Layer.Layer<never, unknown>),
      Layer.provide(toolsAndModel)
    )
    let ids = 0
    const runs = (n: number, steps = options.steps) =>
      Effect.forEach(Array.from({ length: n }), () =>
        runDurable({ runId: `bench-${++ids}`, messages: [{ role: "user", content: promptOf(steps) }] }), {
        concurrency: "unbounded",
        discard: true
      })
    const figures = yield* Effect.scoped(Effect.gen(function*() {
      const context = yield* Layer.build(layer)
      const run = <A, E>(effect: Effect.Effect<A, E, any>) =>
        Effect.provide(effect, context)
      yield* run(runs(2)) // warm up: tables, JIT
      const cpu = process.cpuUsage()
      let sequential = 0
      for (let i = 0; i < options.runs; i++) {
        sequential += yield* time(run(runs(1)))
      }
      const used = process.cpuUsage(cpu)
      let short = 0
      for (let i = 0; i < options.runs; i++) {
        short += yield* time(run(runs(1, 1)))
      }
      const marginal = (sequential - short) / (options.runs * (options.steps - 1))
      const stepsPerSecond = new Map<number, number>()
      for (const n of options.concurrent) {
        stepsPerSecond.set(n, (n * options.steps) / ((yield* time(run(runs(n)))) / 1000))
      }
      return {
        msPerStep: sequential / (options.runs * options.steps),
        cpuMsPerStep: (used.user + used.system) / 1000 / (options.runs * options.steps),
        marginalMsPerStep: marginal,
        perRunMs: short / options.runs - marginal,
        stepsPerSecond
      }
    }))
    rmSync(dir, { recursive: true, force: true })
    if (database !== undefined) {
      dropDatabase(options.pg!, database)
    }
    return figures
  })

// -----------------------------------------------------------------------------
// An approval answered by another engine on PostgreSQL
// -----------------------------------------------------------------------------

/**
 * How long an approval answered by a client-only engine (what `agentloop approve` or any other
 * process is) takes to reach the run waiting for it on a runner: from `approve` returning to the
 * approved call starting, `samples` times, one run after another, on `balancedTimings`. The two
 * engines share nothing but the database (each has its own sharding, storage and connections).
 */
export const approvalLatency = (pg: Pg, samples: number) =>
  Effect.gen(function*() {
    const database = freshDatabase(pg, "approval")
    const postgres = { host: pg.host, port: pg.port, username: pg.username, database }
    let started: (() => void) | undefined
    const gate = defineTool({
      name: "gate",
      description: "a call that needs an approval",
      parameters: Schema.Struct({}),
      execute: () => Effect.sync(() => (started?.(), "passed"))
    })
    const runner = durableRunnerLayer({ policy: (call) => call.name === "gate" ? ask : allow }).pipe(
      Layer.provideMerge(
        postgresRunnerLayer({
          postgres,
          address: { host: "127.0.0.1", port: yield* freePort },
          timings: balancedTimings
        })
      ),
      Layer.provide(Layer.merge(oneCallModel("gate"), toolExecutorLayer([gate]) as Layer.Layer<Executor>))
    )
    const latencies = yield* Effect.scoped(Effect.gen(function*() {
      const onRunner = yield* Layer.build(runner)
      const onClient = yield* Layer.build(postgresClientLayer({ postgres, timings: balancedTimings }))
      const out: Array<number> = []
      for (let i = 0; i <= samples; i++) {
        const runId = `approval-${i}`
        yield* Effect.provide(startRun({ runId, messages: [{ role: "user", content: "go" }] }), onRunner)
        const pending = yield* Effect.provide(pendingApprovals(runId), onClient).pipe(
          Effect.flatMap((all) => all.length > 0 ? Effect.succeed(all[0]!) : Effect.fail("not yet" as const)),
          Effect.retry({ schedule: Schedule.spaced("10 millis") }),
          Effect.orDie
        )
        const ran = new Promise<number>((resolve) => (started = () => resolve(performance.now())))
        yield* Effect.provide(approve(runId, pending.call.id, { approved: true }), onClient)
        const answered = performance.now()
        const at = yield* Effect.promise(() => ran)
        yield* Effect.provide(awaitRun(runId, { interval: "20 millis" }), onClient)
        if (i > 0) out.push(at - answered) // the first one warms up
      }
      return out
    }))
    dropDatabase(pg, database)
    return latencies
  })

// -----------------------------------------------------------------------------
// Failover
// -----------------------------------------------------------------------------

/**
 * kill -9 the runner executing a run while a call runs (2 runners, balancedTimings); the time
 * until the interrupted call starts again on the other runner.
 */
export const failover = (pg: Pg) =>
  Effect.gen(function*() {
    const database = freshDatabase(pg, "failover")
    const dir = tempDir("agentloop-durable-failover-")
    const s = {
      engine: "postgres",
      pg: { host: pg.host, port: pg.port, username: pg.username, database },
      runId: "run-1",
      log: join(dir, "side-effects.ndjson"),
      events: join(dir, "events.ndjson"),
      result: join(dir, "result.json"),
      slowMs: 30_000
    }
    const all: Array<Proc> = []
    yield* Effect.addFinalizer(() => Effect.sync(() => all.forEach((p) => p.child.kill("SIGKILL"))))
    const up = () => starts(s.log).entries.filter((e) => e.kind === "process").length
    for (let i = 0; i < 2; i++) {
      all.push(spawnProc("runner", { ...s, port: yield* freePort }))
      yield* waitUntil("a runner up", () => up() === i + 1, 120_000, all)
    }
    all.push(spawnProc("client-start", s))
    yield* waitUntil(
      "c2 running, c1 finished",
      () => starts(s.log).call("c2") === 1 && toolEndedIn(s.events, "c1"),
      120_000,
      all
    )
    const ownerPid = starts(s.log).entries.find((e) => e.kind === "tool" && e.call === "c2")!.pid
    const killedAt = Date.now()
    yield* kill9(all.find((p) => p.child.pid === ownerPid)!)
    yield* waitUntil("c2 running again", () => starts(s.log).call("c2") === 2, 120_000, all)
    const again = starts(s.log).entries.filter((e) => e.kind === "tool" && e.call === "c2" && e.phase === "start")[1]!
    dropDatabase(pg, database)
    return (again as unknown as { readonly t: number }).t - killedAt
  }).pipe(Effect.scoped)

// -----------------------------------------------------------------------------
// A cluster of runner processes on PostgreSQL
// -----------------------------------------------------------------------------

export interface ClusterOptions {
  readonly pg: Pg
  readonly runs: number
  readonly steps: number
  /** How long each tool call takes (default 0). */
  readonly callMs?: number | undefined
  /** Kill a runner (SIGKILL) this often and start a new one; 0: never. */
  readonly killEveryMs: number
  /** Stop killing after this many kills. */
  readonly maxKills?: number | undefined
  /** Give up (and report what ended) after this long. */
  readonly timeoutMs: number
  readonly timings?: "balanced" | "fast" | undefined
  /** How many runner processes (default 3). */
  readonly runners?: number | undefined
  /**
   * Start the client with one runner fewer, and the last runner once a third of the runs' first
   * calls ended: the time a runner joining under load costs (its shards move while runs are on them).
   */
  readonly joinUnderLoad?: boolean | undefined
}

export interface ClusterRun {
  readonly dir: string
  readonly database: string
  readonly elapsedMs: number
  readonly kills: number
  /** Calls that were running on the runners killed, when they were killed. */
  readonly interrupted: number
  readonly killed: ReadonlySet<number>
  readonly runnerCpuMs: number
  readonly results: ReadonlyArray<{ readonly runId: string; readonly result: AgentRunResult }>
  readonly completed: boolean
}

/** The pid of each call execution started and not ended, per the side-effect log. */
const inFlight = (log: string): Array<number> => {
  const open = new Map<string, number>()
  for (const e of lines<LogEntry & { readonly exec?: string }>(log)) {
    if (e.kind !== "tool" || e.exec === undefined) continue
    if (e.phase === "start") open.set(e.exec, e.pid)
    else open.delete(e.exec)
  }
  return [...open.values()]
}

const cpuMsOf = (pid: number | undefined): number => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return (Number(fields[11]) + Number(fields[12])) * 10
  } catch {
    return 0
  }
}

/**
 * Whether these runners hold every shard between them, each some, and none is releasing one, per
 * the last shard counts each recorded. Until then a shard can be moving: its old owner releases it
 * only once the run on it has ended, and a run waiting for an activity there is given up to the
 * shard's next owner (src/internal/handoff.ts), which replays it once it holds the shard's lock.
 */
const settled = (log: string, runners: ReadonlyArray<Proc>): boolean => {
  const last = new Map<number, { readonly held: number; readonly releasing: number }>()
  for (const e of lines<LogEntry & { readonly held?: number; readonly releasing?: number }>(log)) {
    if (e.kind === "shards") last.set(e.pid, { held: e.held!, releasing: e.releasing! })
  }
  const counts = runners.map((r) => last.get(r.child.pid!))
  return counts.every((c) => c !== undefined && c.held > 0 && c.releasing === 0) &&
    counts.reduce((sum, c) => sum + c!.held, 0) === Number(process.env["AGENTLOOP_SHARDS"] ?? postgresShardsPerGroup)
}

/** 3 runner processes and a client starting `runs` runs of `steps` steps and waiting for them. */
export const runCluster = (options: ClusterOptions) =>
  Effect.gen(function*() {
    const database = freshDatabase(options.pg, "cluster")
    const dir = tempDir("agentloop-durable-cluster-")
    const settings = {
      engine: "postgres",
      scenario: "bench",
      pg: { host: options.pg.host, port: options.pg.port, username: options.pg.username, database },
      runId: "b",
      runs: options.runs,
      steps: options.steps,
      callMs: options.callMs ?? 0,
      log: join(dir, "side-effects.ndjson"),
      events: join(dir, "events.ndjson"),
      result: join(dir, "result.json")
    }
    const env = options.timings === "fast" ? { AGENTLOOP_TIMINGS: "fast" } : {}
    const all: Array<Proc> = []
    const killed = new Set<number>()
    let runnerCpuMs = 0
    let interrupted = 0
    const processesUp = () => starts(settings.log).entries.filter((e) => e.kind === "process").length
    const startRunner = Effect.gen(function*() {
      const before = processesUp()
      const proc = spawnProc("runner", { ...settings, port: yield* freePort }, env)
      all.push(proc)
      yield* waitUntil("a runner up", () => processesUp() > before, 120_000, [proc])
      return proc
    })
    const firstCallsEnded = () =>
      starts(settings.log).entries.filter((e) => e.kind === "tool" && e.phase === "end").length >= options.runs / 3
    return yield* Effect.gen(function*() {
      const runners: Array<Proc> = []
      const count = options.runners ?? 3
      for (let i = 0; i < count - (options.joinUnderLoad === true ? 1 : 0); i++) runners.push(yield* startRunner)
      // Each runner computes its shards from the runners it has seen, once a second: a runner that
      // has not seen the last one yet still holds shards that move to it, and a run started on such
      // a shard waits for the handoff (see `settled`). Throughput is measured once the assignments
      // have settled; `joinUnderLoad` measures a handoff under way on purpose.
      yield* waitUntil(
        "the runners' shard assignments to settle",
        () => settled(settings.log, runners),
        120_000,
        runners
      )
      const client = spawnProc("client-many", settings, env)
      all.push(client)
      if (options.joinUnderLoad === true) {
        yield* waitUntil("calls under way", () => client.child.exitCode !== null || firstCallsEnded(), 600_000)
        runners.push(yield* startRunner)
      }
      let kills = 0
      if (options.killEveryMs > 0) {
        yield* Effect.gen(function*() {
          // kills start once runs are under way (a third of the runs' first calls ended), and
          // hit the runner running the most calls, so each kill interrupts work
          yield* waitUntil("calls under way", () => client.child.exitCode !== null || firstCallsEnded(), 600_000)
          while (client.child.exitCode === null && kills < (options.maxKills ?? Infinity)) {
            const running = inFlight(settings.log)
            const busiest = runners.map((_, i) => ({
              i,
              n: running.filter((pid) => pid === runners[i]!.child.pid).length
            }))
              .sort((a, b) => b.n - a.n)[0]!.i
            interrupted += running.filter((pid) => pid === runners[busiest]!.child.pid).length
            const victim = runners[busiest]!
            runnerCpuMs += cpuMsOf(victim.child.pid)
            killed.add(victim.child.pid!)
            victim.child.kill("SIGKILL")
            kills++
            runners[busiest] = yield* startRunner
            yield* Effect.sleep(options.killEveryMs)
          }
        }).pipe(Effect.forkDetach)
      }
      client.child.on("exit", () => void (runnerCpuMs += runners.reduce((sum, r) => sum + cpuMsOf(r.child.pid), 0)))
      const exit = yield* Effect.exit(awaitExit(client, options.timeoutMs))
      all.forEach((p, i) => writeFileSync(join(dir, `process-${i}.out`), p.output()))
      if (exit._tag === "Failure") {
        return {
          dir,
          database,
          elapsedMs: options.timeoutMs,
          kills,
          interrupted,
          killed,
          runnerCpuMs,
          results: [],
          completed: false
        } satisfies ClusterRun
      }
      const { elapsed, results } = JSON.parse(readFileSync(settings.result, "utf8")) as {
        elapsed: number
        results: Array<{ runId: string; result: AgentRunResult }>
      }
      return {
        dir,
        database,
        elapsedMs: elapsed,
        kills,
        interrupted,
        killed,
        runnerCpuMs,
        results,
        completed: true
      } satisfies ClusterRun
    }).pipe(Effect.ensuring(Effect.sync(() => all.forEach((p) => p.child.kill("SIGKILL")))))
  })

// -----------------------------------------------------------------------------
// What ran how many times, against the journal
// -----------------------------------------------------------------------------

interface ToolEntry extends LogEntry {
  readonly exec: string
  readonly t: number
}

/** A snowflake id's time (epoch ms): effect's snowflakes count ms since 2025-01-01. */
const snowflakeMillis = (id: string) => Number(BigInt(id) >> 22n) + Date.UTC(2025, 0, 1)

export interface Analysis {
  readonly runsEnded: number
  readonly notStop: number
  readonly violations: number
  readonly calls: number
  readonly executions: number
  /** Executions after the first of a call whose result was journaled before they started: must be 0. */
  readonly rerunAfterJournaled: number
  /** Re-runs of a call that was running, or had finished but was not journaled, when its runner was killed. */
  readonly rerunInFlightAtKill: number
  /** Re-runs of a call that was not journaled although no runner that ran it was killed (lost its lock). */
  readonly rerunUnjournaledNoKill: number
  /** Calls whose journaled result came from an execution the side-effect log does not show. */
  readonly journalMismatches: number
  readonly examples: ReadonlyArray<string>
}

/**
 * Checks every run (checkInvariants over the events of all processes), and classifies each call
 * executed more than once: the journal (the stored reply of the call's activity, read from
 * PostgreSQL) names the execution whose result it holds and when it was written (the reply's
 * snowflake id is taken just before the write, so a re-run counted "after the journal" may, at
 * worst, have started just before the commit: the count errs towards reporting).
 */
export const analyze = (pg: Pg, run: ClusterRun): Analysis => {
  const events = lines<DurableEvent>(join(run.dir, "events.ndjson"))
  const byRun = new Map<string, Array<DurableEvent>>()
  for (const e of events) {
    const list = byRun.get(e.runId)
    if (list === undefined) byRun.set(e.runId, [e])
    else list.push(e)
  }
  let violations = 0
  let notStop = 0
  for (const { result, runId } of run.results) {
    const input: ReadonlyArray<Message> = [{ role: "user", content: runId }]
    violations += violationsOf(input, result, byRun.get(runId) ?? []).length
    if (result.reason !== "stop") notStop++
  }
  // the journal: each call activity's stored reply, with the execution it holds
  const journal = new Map<string, { readonly exec: string; readonly at: number }>()
  const rows = query(
    pg,
    run.database,
    "select r.id, r.payload from cluster_messages m join cluster_replies r on r.request_id = m.id " +
      "where m.tag = 'activity' and m.payload like '{\"name\":\"call/%' and r.kind = 0"
  )
  for (const row of rows) {
    const id = String(row["id"])
    const payload = String(row["payload"])
    const match = /"toolCallId":"([^"]+)".*? ok (\d+\/\d+)/.exec(payload)
    if (match === null) continue
    // the first time a result of the call was journaled is what counts
    const at = snowflakeMillis(id)
    const known = journal.get(match[1]!)
    if (known === undefined || at < known.at) journal.set(match[1]!, { exec: match[2]!, at })
  }
  const log = lines<ToolEntry>(join(run.dir, "side-effects.ndjson")).filter((e) => e.kind === "tool")
  const byCall = new Map<string, Array<ToolEntry>>()
  for (const e of log) {
    if (e.phase !== "start") continue
    const list = byCall.get(e.call!)
    if (list === undefined) byCall.set(e.call!, [e])
    else list.push(e)
  }
  let rerunAfterJournaled = 0
  let rerunInFlightAtKill = 0
  let rerunUnjournaledNoKill = 0
  let journalMismatches = 0
  let executions = 0
  const examples: Array<string> = []
  for (const [call, list] of byCall) {
    executions += list.length
    const journaled = journal.get(call)
    if (journaled !== undefined && !list.some((e) => e.exec === journaled.exec)) journalMismatches++
    list.sort((a, b) => a.t - b.t)
    for (let i = 1; i < list.length; i++) {
      const rerun = list[i]!
      if (journaled !== undefined && rerun.t > journaled.at) {
        rerunAfterJournaled++
        if (examples.length < 5) {
          examples.push(
            `${call}: journaled ${journaled.exec} at ${journaled.at}, ran again as ${rerun.exec} at ${rerun.t}`
          )
        }
      } else if (list.slice(0, i).some((e) => run.killed.has(e.pid))) rerunInFlightAtKill++
      else rerunUnjournaledNoKill++
    }
  }
  return {
    runsEnded: run.results.length,
    notStop,
    violations,
    calls: byCall.size,
    executions,
    rerunAfterJournaled,
    rerunInFlightAtKill,
    rerunUnjournaledNoKill,
    journalMismatches,
    examples
  }
}
