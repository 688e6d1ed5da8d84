/**
 * Figures for durable runs: overhead per step (durable versus in memory) on the memory,
 * embedded (SQLite) and PostgreSQL engines, and steps per second with many concurrent runs.
 *
 *   NODE_OPTIONS=--conditions=agentloop-source node packages/durable/bench/overhead.ts
 *   (PostgreSQL rows when AGENTLOOP_PG_* are set: `. "$(packages/durable/scripts/postgres.sh env)"`)
 *
 * A step is one model turn with one tool call (an echo); the model answers at once, so what is
 * measured is the engine: journal writes, replays, polling.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Layer, Stream } from "effect"
import { Model, noopSinkLayer, runAgentLoop, toolExecutorLayer } from "@agentloop/core"
import type { Executor } from "@agentloop/core"
import { assistant, echoTool, toolCall } from "@agentloop/testkit"
import {
  durableRunnerLayer,
  embeddedEngineLayer,
  fastTimings,
  memoryEngineLayer,
  postgresRunnerLayer,
  runDurable
} from "../src/index.ts"

const STEPS = Number(process.env["BENCH_STEPS"] ?? 10)
const CONCURRENT = Number(process.env["BENCH_CONCURRENT"] ?? 100)

/** A model that asks for one echo call per turn until `STEPS` turns, then stops. */
const ModelLive = Layer.succeed(Model, Model.of({
  stream: (request) => {
    const n = request.messages.filter((m) => m.role === "assistant").length
    const message = n + 1 < STEPS ?
      assistant("toolUse", { calls: [toolCall(`s${n}`, "echo", { n })] }) :
      assistant("stop", { text: "done" })
    return Stream.make({ type: "done" as const, message })
  }
}))
const Tools = Layer.mergeAll(ModelLive, toolExecutorLayer([echoTool("echo")]) as Layer.Layer<Executor>)

const time = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const start = performance.now()
    yield* effect
    return performance.now() - start
  })

const perStep = (ms: number, runs: number) => ms / (runs * STEPS)

let ids = 0
const durableRuns = (n: number) =>
  Effect.forEach(Array.from({ length: n }), () =>
    runDurable({ runId: `bench-${process.pid}-${++ids}`, messages: [{ role: "user", content: "go" }] }), {
    concurrency: "unbounded",
    discard: true
  })

const measureEngine = <E>(name: string, engine: Layer.Layer<never, E, never> | Layer.Layer<any, E, never>) =>
  Effect.gen(function*() {
    const layer = durableRunnerLayer().pipe(Layer.provideMerge(engine), Layer.provide(Tools))
    return yield* Effect.scoped(Effect.gen(function*() {
      const context = yield* Layer.build(layer)
      const run = <A, E2>(effect: Effect.Effect<A, E2, any>) => Effect.provide(effect, context)
      yield* run(durableRuns(1)) // warm up: tables, JIT
      const one = yield* time(run(durableRuns(1)))
      const many = yield* time(run(durableRuns(CONCURRENT)))
      return {
        name,
        sequentialMsPerStep: perStep(one, 1),
        concurrentStepsPerSecond: (CONCURRENT * STEPS) / (many / 1000)
      }
    }))
  })

const program = Effect.gen(function*() {
  const inMemoryRun = runAgentLoop({ messages: [{ role: "user", content: "go" }] }).pipe(
    Effect.provide(Layer.mergeAll(Tools, noopSinkLayer))
  )
  yield* Effect.repeat(inMemoryRun, { times: 50 })
  const baseline = perStep(yield* time(Effect.repeat(inMemoryRun, { times: 99 })), 100)
  const rows = [yield* measureEngine("memory engine", memoryEngineLayer)]
  const dir = mkdtempSync(join(tmpdir(), "agentloop-bench-"))
  rows.push(yield* measureEngine("embedded (SQLite)", embeddedEngineLayer({ filename: join(dir, "bench.db") })))
  rmSync(dir, { recursive: true, force: true })
  const pgPort = process.env["AGENTLOOP_PG_PORT"]
  if (pgPort !== undefined) {
    rows.push(yield* measureEngine("PostgreSQL (1 runner, in process)", postgresRunnerLayer({
      postgres: {
        host: process.env["AGENTLOOP_PG_HOST"] ?? "127.0.0.1",
        port: Number(pgPort),
        username: process.env["AGENTLOOP_PG_USER"] ?? "agentloop",
        database: process.env["AGENTLOOP_PG_DATABASE"] ?? "agentloop"
      },
      address: { host: "127.0.0.1", port: 34990 },
      timings: fastTimings
    })))
  }
  console.log(`durable runs: ${STEPS} steps a run (one model turn + one echo call each)`)
  console.log(`in memory (runAgentLoop): ${(baseline * 1000).toFixed(1)} µs/step`)
  for (const row of rows) {
    console.log(
      `${row.name}: one run ${row.sequentialMsPerStep.toFixed(2)} ms/step ` +
        `(+${(row.sequentialMsPerStep - baseline).toFixed(2)} ms over in memory); ` +
        `${CONCURRENT} concurrent runs: ${row.concurrentStepsPerSecond.toFixed(0)} steps/s`
    )
  }
})

Effect.runPromise(program as Effect.Effect<void, unknown>).then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
