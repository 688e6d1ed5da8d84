/**
 * The engines durable runs live on, as layers that provide effect's `WorkflowEngine` and the
 * runs' `DurableStore`:
 *
 * - `memoryEngineLayer`: `WorkflowEngine.layerMemory`. Survives: nothing (tests).
 * - `embeddedEngineLayer`: one process, one SQLite file (`node:sqlite`): `SingleRunner` + `ClusterWorkflowEngine`.
 *   Survives: a crash: start the same command again.
 * - `embeddedClientLayer`: another process on the same file: starts, lists, approves, aborts, steers; runs nothing.
 *   Survives: —.
 * - `postgresRunnerLayer` / `postgresClientLayer`: runner processes on PostgreSQL (`NodeClusterSocket`), client-only
 *   processes that start runs, approve and abort. Survives: a runner's crash: another runner takes its shards over.
 *
 * Each layer also provides the `SqlClient` it uses (the store's tables live in the same database).
 * Put `durableRunnerLayer(...)` on top of a runner engine with your `Model` and `Executor`.
 *
 * @since 0.1.0
 */
import { NodeClusterSocket, NodeCrypto } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Layer, Option, Schema } from "effect"
import {
  ClusterWorkflowEngine,
  RunnerAddress,
  ShardingConfig,
  SqlMessageStorage,
  SqlRunnerStorage
} from "effect/cluster"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { WorkflowEngine } from "effect/workflow"
import { existsSync } from "node:fs"
import { DurableStore, memoryStoreLayer, sqlStoreLayer } from "./DurableStore.ts"
import { abandonRunsOnLostShards } from "./internal/handoff.ts"
import { everyRunnerChecksHealth } from "./internal/health.ts"
import { DatabaseSync } from "./internal/nodeSqlite.ts"
import { sqliteClientEngineLayer, sqliteRunnerEngineLayer } from "./internal/sqliteEngine.ts"
import { reofferStaleClaims } from "./internal/staleClaims.ts"
import { runnerLockFileOf } from "./RunnerLock.ts"
import * as SqliteClient from "./SqliteClient.ts"

/**
 * Cluster timings, as effect's `ShardingConfig` fields.
 *
 * @since 0.1.0
 * @category models
 */
export type ClusterTimings = Partial<ShardingConfig.ShardingConfig["Service"]>

/**
 * Timings for a fast failover: a dead runner's shard locks expire after 6 s (effect's default is
 * 35 s), runners refresh their locks every 2 s and look for new assignments every second, and a
 * waiting run notices a message (an approval, an abort) within a second. The cost is more
 * database traffic per runner (a few small queries per second), and, on a loaded machine or a
 * slow database, lock refreshes that time out: the runner then gives its shards up and calls that
 * finished but were not journaled yet run again. Prefer `balancedTimings` outside tests.
 *
 * @since 0.1.0
 * @category constants
 */
export const fastTimings: ClusterTimings = {
  shardLockRefreshInterval: Duration.seconds(2),
  shardLockExpiration: Duration.seconds(6),
  refreshAssignmentsInterval: Duration.seconds(1),
  runnerHealthCheckInterval: Duration.seconds(2),
  entityMessagePollInterval: Duration.seconds(1),
  entityReplyPollInterval: Duration.millis(100)
}

/**
 * Timings for production on PostgreSQL: locks refreshed every 5 s and expiring after 15 s, the
 * rest as `fastTimings`. A dead runner's runs are taken over within 15 s. Measured on a loaded
 * 2-core machine (100 concurrent runs on 3 runners): with `fastTimings` the lock refresh (which
 * must answer within its interval) timed out several times, the runner released its shards, and
 * 59 tool calls whose results were not journaled yet ran a second time; with these, none.
 *
 * A runner joining moves shards to it. A run on a moved shard that waits for one of its steps is
 * given up by the old runner and replayed by the new one (no step runs again); a step still
 * running when its shard moves has effect's `entityTerminationTimeout` (left at its 15 s default
 * here) to end before the old runner stops waiting for it, and a call running longer runs again.
 *
 * @since 0.1.0
 * @category constants
 */
export const balancedTimings: ClusterTimings = {
  ...fastTimings,
  shardLockRefreshInterval: Duration.seconds(5),
  shardLockExpiration: Duration.seconds(15)
}

/**
 * In memory, for tests: nothing survives the process.
 *
 * @since 0.1.0
 * @category layers
 */
export const memoryEngineLayer: Layer.Layer<WorkflowEngine.WorkflowEngine | DurableStore> = Layer.merge(
  WorkflowEngine.layerMemory,
  memoryStoreLayer
)

/**
 * The embedded engine's layer failed to start: the database file cannot be opened, or another
 * process is already the runner of this file.
 *
 * @since 0.1.0
 * @category errors
 */
export class EmbeddedEngineError extends Schema.TaggedError<EmbeddedEngineError>()("EmbeddedEngineError", {
  message: Schema.String
}) {}

// in a module of its own, importing nothing: a program that only needs the lock file's name (the
// CLI, to tell whether a run's process is alive) does not load the engines to get it
export { runnerLockFileOf } from "./RunnerLock.ts"

/**
 * Holds the runner lock of an embedded database file for as long as the scope lives: an exclusive
 * SQLite lock on `<filename>-runner`, which the operating system releases when the process dies
 * (kill -9 included), so a restarted process takes it at once. A second live runner on the same
 * file fails here: every embedded runner has the same runner address, so two of them would both
 * hold every shard and run the same runs.
 */
const runnerLock = (filename: string) =>
  Layer.effectDiscard(Effect.acquireRelease(
    Effect.try({
      try: () => {
        const lock = new DatabaseSync(runnerLockFileOf(filename), { timeout: 0 })
        try {
          lock.exec("PRAGMA locking_mode = EXCLUSIVE")
          lock.exec("BEGIN EXCLUSIVE")
          return lock
        } catch (error) {
          lock.close()
          throw error
        }
      },
      catch: (cause) =>
        new EmbeddedEngineError({
          message: String((cause as Error)?.message ?? cause).includes("locked") ?
            `another process is the runner of ${filename}: one runner per file (use embeddedClientLayer ` +
            "to start runs, approve, abort or list runs from another process)" :
            `cannot open the runner lock ${runnerLockFileOf(filename)}: ${String((cause as Error)?.message ?? cause)}`
        })
    }),
    (lock) => Effect.sync(() => lock.isOpen && lock.close())
  ))

const openSql = (filename: string, mustExist: boolean) =>
  Layer.unwrap(Effect.gen(function*() {
    if (mustExist && filename !== ":memory:" && !existsSync(filename)) {
      return yield* new EmbeddedEngineError({ message: `no durable runs database at ${filename}` })
    }
    return Layer.effect(SqlClient.SqlClient)(
      Effect.mapError(
        SqliteClient.make({ filename }),
        (error) => new EmbeddedEngineError({ message: `cannot open ${filename}: ${error.message}` })
      )
    ).pipe(Layer.provide(Reactivity.layer))
  }))

/**
 * How soon the embedded runner sees what another process wrote to its file (a run started, an
 * approval, an abort), by default: it reads the rows it has not seen this often.
 */
const embeddedPollInterval = Duration.millis(500)

/**
 * Shards per group on PostgreSQL (effect's default is 300). Every reply a runner stores (each
 * journaled activity) waits for a check of its shard's lock, made on the runner's one lock
 * connection; replies on the same shard share a check. With 300 shards and 100 concurrent runs
 * nearly every reply made its own check, one after the other: 17–20 steps/s on one runner; with
 * 30, 58–69 steps/s. 30 shards still spread runs evenly over a handful of runners. Every runner
 * and client of a database must use the same number, and it must not change once the database
 * holds runs (a message's shard is stored with it).
 *
 * @since 0.1.0
 * @category constants
 */
export const postgresShardsPerGroup = 30

/**
 * Refuses a file whose runs the embedded engine of earlier versions (effect/cluster's, which kept
 * them as cluster messages) left unfinished: this engine keeps executions in tables of its own and
 * cannot continue those.
 */
const refuseFormerEngineRuns = (filename: string) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const fail = (error: unknown) =>
      new EmbeddedEngineError({ message: `cannot read ${filename}: ${String((error as Error)?.message ?? error)}` })
    const tables = yield* sql`select name from sqlite_master where type = 'table' and name = 'cluster_messages'`.pipe(
      Effect.mapError(fail)
    )
    if (tables.length === 0) return
    const [row] = yield* sql<{ n: number }>`select count(*) as n from cluster_messages where processed = 0`.pipe(
      Effect.mapError(fail)
    )
    const n = Number(row?.n ?? 0)
    if (n === 0) return
    return yield* new EmbeddedEngineError({
      message: `${filename} holds runs an earlier agentloop's embedded engine did not finish (${n} unprocessed ` +
        "cluster message(s)); this version keeps runs in tables of its own and cannot continue them: let them end " +
        "with the version that started them, or use another file"
    })
  }))

/**
 * The embedded engine's options: its file, and (for the runner) how often it reads what other
 * processes wrote to it (half a second by default).
 *
 * @since 0.1.0
 * @category models
 */
export interface EmbeddedOptions {
  readonly filename: string
  readonly pollInterval?: Duration.Input | undefined
}

/** The engine on an embedded file, as its runner or (`client`: it runs nothing, the file must exist) beside it. */
const embeddedLayer = (options: EmbeddedOptions, client: boolean) => {
  const pollInterval = Duration.fromInputUnsafe(options.pollInterval ?? embeddedPollInterval)
  return (client ? sqliteClientEngineLayer({ pollInterval }) : sqliteRunnerEngineLayer({ pollInterval })).pipe(
    Layer.provideMerge(sqlStoreLayer),
    Layer.provideMerge(Layer.provideMerge(refuseFormerEngineRuns(options.filename), openSql(options.filename, client)))
  )
}

/**
 * The embedded engine: one process, one SQLite database file, nothing to install. A run that was
 * going when the process died resumes when a process starts on the same file again.
 *
 * effect/workflow's engine kept directly in the file, without effect/cluster: each execution's
 * payload and result, each activity's, deferred's and durable clock's outcome, encoded with their
 * own schemas (see `internal/sqliteEngine.ts`). A file whose runs an earlier version's embedded
 * engine (effect/cluster's) left unfinished is refused with `EmbeddedEngineError`.
 *
 * One runner per file: the layer takes the file's runner lock (`<filename>-runner`, released by
 * the operating system when the process ends, however it ends) and fails with
 * `EmbeddedEngineError` while another live process holds it. Other processes use
 * `embeddedClientLayer` on the same file.
 *
 * @since 0.1.0
 * @category layers
 */
export const embeddedEngineLayer = (options: EmbeddedOptions) =>
  embeddedLayer(options, false).pipe(
    Layer.provide(options.filename === ":memory:" ? Layer.empty : runnerLock(options.filename))
  )

/**
 * A client-only process on an embedded database file, beside the process that runs the runs (or
 * while none does): starts runs, lists them, reads results, approves, aborts, steers. It runs
 * nothing and takes no lock; what it writes is picked up by the runner within the runner's
 * `pollInterval` (half a second by default). Fails with `EmbeddedEngineError` when
 * the file does not exist.
 *
 * @since 0.1.0
 * @category layers
 */
export const embeddedClientLayer = (options: EmbeddedOptions) => embeddedLayer(options, true)

/**
 * Where PostgreSQL is.
 *
 * @since 0.1.0
 * @category models
 */
export type PostgresConfig = PgClient.PgPoolConfig

/**
 * A runner process on PostgreSQL: it hosts shards and runs the runs of its shards; when it dies,
 * the other runners take its shards over once one of them finds it dead (each pings the others
 * every `timings.runnerHealthCheckInterval`), at the latest when its heartbeat is older than
 * `timings.shardLockExpiration`. `address` is where the other runners reach this one (a loopback
 * or private address).
 *
 * @since 0.1.0
 * @category layers
 */
export const postgresRunnerLayer = (options: {
  readonly postgres: PostgresConfig
  readonly address: { readonly host: string; readonly port: number }
  readonly timings?: ClusterTimings | undefined
  /**
   * How long a request this runner claimed from storage and has not answered waits before it is
   * offered to the runner again: 30 s by default (effect's own is 10 minutes; see
   * internal/staleClaims.ts). A request still being processed is not run twice.
   */
  readonly staleClaimAfter?: Duration.Input | undefined
}) => {
  const shardingConfig = {
    shardsPerGroup: postgresShardsPerGroup,
    ...options.timings,
    runnerAddress: Option.some(RunnerAddress.make(options.address.host, options.address.port))
  }
  // the cluster's storage is built here ("byo"), once, so that every runner's own health check
  // below can read and mark the runners it shares with the sharding
  const config = ShardingConfig.layerFromEnv(shardingConfig)
  const storage = Layer.mergeAll(
    SqlMessageStorage.layer.pipe(Layer.provide(NodeCrypto.layerDigest)),
    Layer.orDie(SqlRunnerStorage.layer)
  ).pipe(Layer.provide(config))
  // the runs' activities are guarded against a shard handoff that would otherwise wait for them
  // for good (see internal/handoff.ts)
  const engine = abandonRunsOnLostShards.pipe(Layer.provide(ClusterWorkflowEngine.layer))
  // requests claimed and then dropped by effect's storage read are offered again (internal/staleClaims.ts)
  const claims = reofferStaleClaims(options.staleClaimAfter)
  return Layer.mergeAll(engine, everyRunnerChecksHealth.pipe(Layer.provide(config)), claims).pipe(
    Layer.provideMerge(NodeClusterSocket.layer({ storage: "byo", shardingConfig })),
    Layer.provideMerge(storage),
    Layer.provideMerge(sqlStoreLayer),
    Layer.provideMerge(PgClient.layer(options.postgres))
  )
}

/**
 * A client-only process on PostgreSQL: starts runs, reads results, approves, aborts, steers; runs
 * nothing itself.
 *
 * @since 0.1.0
 * @category layers
 */
export const postgresClientLayer = (options: {
  readonly postgres: PostgresConfig
  readonly timings?: ClusterTimings | undefined
}) =>
  ClusterWorkflowEngine.layer.pipe(
    Layer.provideMerge(NodeClusterSocket.layer({
      storage: "sql",
      clientOnly: true,
      shardingConfig: { shardsPerGroup: postgresShardsPerGroup, ...options.timings, runnerAddress: Option.none() }
    })),
    Layer.provideMerge(sqlStoreLayer),
    Layer.provideMerge(PgClient.layer(options.postgres))
  )

/**
 * The `SqlClient` type the engines provide, re-exported for convenience.
 *
 * @since 0.1.0
 * @category models
 */
export type EngineSql = SqlClient.SqlClient
