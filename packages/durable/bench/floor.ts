/**
 * The floor of the durable bench: what a durable step has to write at least, written directly,
 * with no engine. A step of the bench's runs is one model turn and one echo call; its journal is
 * the turn's message, the call's start claim and the call's result, so the floor writes those three
 * rows in one transaction per step (and a row when a run starts and one when it ends), with the
 * same settings the engines use:
 *
 * - SQLite: `node:sqlite` on a file in WAL mode with `synchronous = NORMAL` (SqliteClient.ts),
 *   prepared statements, `BEGIN IMMEDIATE … COMMIT` per step;
 * - PostgreSQL: `@effect/sql-pg` (the driver the engine uses), one `withTransaction` per step, runs
 *   at once sharing the client's pool.
 *
 * Every durable figure of the bench is divided by the matching one here.
 */
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import type { Pg } from "./lib.ts"

/** What one floor measurement gives, in the same units as the engines' figures. */
export interface Floor {
  /** A run of `steps` steps, one after another, divided by its steps (its own cost included). */
  readonly msPerStep: number
  readonly cpuMsPerStep: number
  /** What one more step adds to a run. */
  readonly marginalMsPerStep: number
  /** A run's cost beyond its steps (its start and end rows). */
  readonly perRunMs: number
  /** Steps per second with this many runs at once. */
  readonly stepsPerSecond: ReadonlyMap<number, number>
}

/** The rows of step `n` of run `runId`: the turn's message, the call's claim and its result. */
const stepRows = (runId: string, n: number) => ({
  turn: JSON.stringify({
    role: "assistant",
    content: [{ type: "toolCall", id: `s${n}`, name: "echo", arguments: { n } }],
    stopReason: "toolUse"
  }),
  claim: `${runId}/call/${n}/0`,
  result: JSON.stringify({
    role: "toolResult",
    toolCallId: `s${n}`,
    toolName: "echo",
    content: [{ type: "text", text: JSON.stringify({ n }) }],
    isError: false
  })
})

const cpuMs = (since: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(since)
  return (used.user + used.system) / 1000
}

/**
 * `runs` runs of `steps` steps, one after another, then `concurrent` of them at once (for SQLite,
 * one connection: "at once" interleaves their transactions, as one process's runs do).
 */
export const sqliteFloor = (options: {
  readonly steps: number
  readonly runs: number
  readonly concurrent: ReadonlyArray<number>
}): Floor => {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-floor-"))
  const db = new DatabaseSync(join(dir, "floor.db"))
  try {
    db.exec("PRAGMA journal_mode = WAL")
    db.exec("PRAGMA synchronous = NORMAL")
    db.exec("create table runs (run_id text primary key, started_at integer not null, ended_at integer)")
    db.exec(
      "create table journal (run_id text not null, name text not null, payload text not null, " +
        "primary key (run_id, name))"
    )
    db.exec("create table call_starts (call_key text primary key)")
    const begin = db.prepare("BEGIN IMMEDIATE")
    const commit = db.prepare("COMMIT")
    const start = db.prepare("insert into runs (run_id, started_at) values (?, ?)")
    const end = db.prepare("update runs set ended_at = ? where run_id = ?")
    const journal = db.prepare("insert into journal (run_id, name, payload) values (?, ?, ?)")
    const claim = db.prepare("insert into call_starts (call_key) values (?) on conflict do nothing")
    let ids = 0
    const transaction = (write: () => void) => {
      begin.run()
      write()
      commit.run()
    }
    /** One run's writes, as `steps + 2` transactions to interleave with other runs'. */
    const runWrites = (steps: number): Array<() => void> => {
      const runId = `floor-${++ids}`
      const writes: Array<() => void> = [() => transaction(() => start.run(runId, Date.now()))]
      for (let n = 0; n < steps; n++) {
        writes.push(() =>
          transaction(() => {
            const rows = stepRows(runId, n)
            journal.run(runId, `turn/${n}`, rows.turn)
            claim.run(rows.claim)
            journal.run(runId, `call/${n}/0`, rows.result)
          })
        )
      }
      writes.push(() => transaction(() => end.run(Date.now(), runId)))
      return writes
    }
    const timeRuns = (count: number, steps: number) => {
      const all = Array.from({ length: count }, () => runWrites(steps))
      const t0 = performance.now()
      // round robin: each run's next transaction in turn
      for (let i = 0; i < steps + 2; i++) for (const writes of all) writes[i]!()
      return performance.now() - t0
    }
    timeRuns(20, options.steps) // warm up
    const cpu = process.cpuUsage()
    let long = 0
    for (let i = 0; i < options.runs; i++) long += timeRuns(1, options.steps)
    const cpuPerStep = cpuMs(cpu) / (options.runs * options.steps)
    let short = 0
    for (let i = 0; i < options.runs; i++) short += timeRuns(1, 1)
    const marginal = (long - short) / (options.runs * (options.steps - 1))
    const stepsPerSecond = new Map<number, number>()
    for (const n of options.concurrent) {
      stepsPerSecond.set(n, (n * options.steps) / (timeRuns(n, options.steps) / 1000))
    }
    return {
      msPerStep: long / (options.runs * options.steps),
      cpuMsPerStep: cpuPerStep,
      marginalMsPerStep: marginal,
      perRunMs: short / options.runs - marginal,
      stepsPerSecond
    }
  } finally {
    db.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

/** The same writes on PostgreSQL (a fresh database of `pg`'s server, dropped after). */
export const pgFloor = (pg: Pg, database: string, options: {
  readonly steps: number
  readonly runs: number
  readonly concurrent: ReadonlyArray<number>
}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`create table runs (run_id text primary key, started_at bigint not null, ended_at bigint)`
    yield* sql`create table journal (run_id text not null, name text not null, payload text not null,
      primary key (run_id, name))`
    yield* sql`create table call_starts (call_key text primary key)`
    let ids = 0
    const run = (steps: number) =>
      Effect.gen(function*() {
        const runId = `floor-${++ids}`
        yield* sql.withTransaction(sql`insert into runs (run_id, started_at) values (${runId}, ${Date.now()})`)
        for (let n = 0; n < steps; n++) {
          const rows = stepRows(runId, n)
          yield* sql.withTransaction(Effect.all([
            sql`insert into journal (run_id, name, payload) values (${runId}, ${`turn/${n}`}, ${rows.turn})`,
            sql`insert into call_starts (call_key) values (${rows.claim}) on conflict do nothing`,
            sql`insert into journal (run_id, name, payload) values (${runId}, ${`call/${n}/0`}, ${rows.result})`
          ], { discard: true }))
        }
        yield* sql.withTransaction(sql`update runs set ended_at = ${Date.now()} where run_id = ${runId}`)
      })
    const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.map(Effect.timed(effect), ([duration]) => Duration.toMillis(duration))
    yield* Effect.forEach(Array.from({ length: 20 }), () => run(options.steps), { concurrency: 10, discard: true })
    const cpu = process.cpuUsage()
    let long = 0
    for (let i = 0; i < options.runs; i++) long += yield* timed(run(options.steps))
    const cpuPerStep = cpuMs(cpu) / (options.runs * options.steps)
    let short = 0
    for (let i = 0; i < options.runs; i++) short += yield* timed(run(1))
    const marginal = (long - short) / (options.runs * (options.steps - 1))
    const stepsPerSecond = new Map<number, number>()
    for (const n of options.concurrent) {
      const ms = yield* timed(
        Effect.forEach(Array.from({ length: n }), () => run(options.steps), { concurrency: "unbounded", discard: true })
      )
      stepsPerSecond.set(n, (n * options.steps) / (ms / 1000))
    }
    return {
      msPerStep: long / (options.runs * options.steps),
      cpuMsPerStep: cpuPerStep,
      marginalMsPerStep: marginal,
      perRunMs: short / options.runs - marginal,
      stepsPerSecond
    } satisfies Floor
  }).pipe(
    Effect.provide(
      PgClient.layer({ host: pg.host, port: pg.port, username: pg.username, database }).pipe(Layer.orDie)
    )
  )
