/**
 * A small `SqlClient` for `effect/sql` on Node's built-in `node:sqlite` (Node 22.13 and later),
 * so the embedded engine needs nothing beyond `npm ci`.
 *
 * It exists because no `@effect/sql-sqlite-*` release loads on effect 4.1 yet (the 4.0 betas
 * import `effect/unstable/*` paths that 4.1 no longer has). Replace it with the official driver
 * once one is published for effect 4.1.
 *
 * One connection, shared through a semaphore (effect's `makeSqliteAcquirers`), WAL journal mode
 * with `synchronous = NORMAL` (nothing is lost when the process dies), and a busy timeout, so
 * another process on the same file waits instead of failing.
 *
 * @since 0.1.0
 */
import { Effect, Layer, Semaphore, Stream } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient, SqlConnection, SqlError, Statement } from "effect/sql"
import type { SQLInputValue, StatementSync } from "node:sqlite"
import { DatabaseSync } from "./internal/nodeSqlite.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface SqliteClientConfig {
  /** The database file (`":memory:"` for a private in-memory database). */
  readonly filename: string
  /** How long a statement waits for another process's lock, in milliseconds (default 5000). */
  readonly busyTimeoutMs?: number | undefined
  /**
   * SQLite's `synchronous` setting (default `NORMAL`: survives a process crash; `FULL` also
   * survives an OS crash or power loss, at the cost of an fsync per commit).
   */
  readonly synchronous?: "NORMAL" | "FULL" | undefined
}

const toParam = (value: unknown): SQLInputValue => {
  if (value === undefined || value === null) return null
  if (typeof value === "boolean") return value ? 1 : 0
  if (typeof value === "number" || typeof value === "bigint" || typeof value === "string") return value
  if (value instanceof Uint8Array) return value
  if (value instanceof Date) return value.toISOString()
  return JSON.stringify(value)
}

/** node:sqlite puts SQLite's extended result code in `errcode` (its `code` is a Node error code). */
const sqliteCause = (cause: unknown): unknown =>
  typeof cause === "object" && cause !== null && "errcode" in cause && typeof cause.errcode === "number" ?
    { code: cause.errcode, message: cause instanceof Error ? cause.message : String(cause.errcode), original: cause } :
    cause

const sqlError = (cause: unknown, operation: string) =>
  new SqlError.SqlError({
    reason: SqlError.classifySqliteError(sqliteCause(cause), { message: `sqlite ${operation} failed`, operation })
  })

/**
 * A `SqlClient` on one `node:sqlite` database file.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (config: SqliteClientConfig) =>
  Effect.gen(function*() {
    const db = yield* Effect.acquireRelease(
      Effect.try({
        try: () => {
          const opened = new DatabaseSync(config.filename)
          opened.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.floor(config.busyTimeoutMs ?? 5000))}`)
          if (config.filename !== ":memory:") {
            opened.exec("PRAGMA journal_mode = WAL")
            // in WAL mode, NORMAL loses nothing when the process dies (kill -9); only an OS crash
            // or power loss may drop the last commits. FULL fsyncs every commit (tens of ms).
            opened.exec(`PRAGMA synchronous = ${config.synchronous ?? "NORMAL"}`)
          }
          return opened
        },
        catch: (cause) => sqlError(cause, "open")
      }),
      (opened) => Effect.sync(() => opened.isOpen && opened.close())
    )
    // Every statement is prepared once and kept (least recently used first out): effect's "unprepared"
    // statements (its transactions' BEGIN and COMMIT, some of the cluster's message queries) are
    // the same few texts each time, and preparing one costs more than running it. A statement with
    // its values inlined (a one-off text) only passes through the cache.
    const cache = new Map<string, StatementSync>()
    const prepare = (sql: string): StatementSync => {
      let statement = cache.get(sql)
      if (statement === undefined) {
        statement = db.prepare(sql)
        if (cache.size >= 256) cache.delete(cache.keys().next().value!)
      } else {
        cache.delete(sql)
      }
      cache.set(sql, statement)
      return statement
    }
    const rows = (sql: string, params: ReadonlyArray<unknown>) =>
      Effect.try({
        try: () => {
          const statement = prepare(sql)
          const values = params.map(toParam)
          // statements that return no columns (DDL, plain writes) are run, not read
          if (statement.columns().length === 0) {
            statement.run(...values)
            return [] as Array<Record<string, unknown>>
          }
          return statement.all(...values) as Array<Record<string, unknown>>
        },
        catch: (cause) => sqlError(cause, "execute")
      })
    // prepared or not, a statement goes through the one cache, so each pair is the same function
    const execute: SqlConnection.Connection["execute"] = (sql, params, transformRows) =>
      Effect.map(rows(sql, params), (r) => transformRows === undefined ? r : transformRows(r))
    const executeValues: SqlConnection.Connection["executeValues"] = (sql, params) =>
      Effect.map(rows(sql, params), (r) => r.map((row) => Object.values(row)))
    const connection: SqlConnection.Connection = {
      execute,
      executeUnprepared: execute,
      executeRaw: (sql, params) => rows(sql, params),
      executeStream: (sql, params, transformRows) => Stream.fromIterableEffect(execute(sql, params, transformRows)),
      executeValues,
      executeValuesUnprepared: executeValues
    }
    const semaphore = yield* Semaphore.make(1)
    const acquirers = SqlClient.makeSqliteAcquirers({
      connection: Effect.succeed(connection),
      semaphore,
      isTransaction: () => db.isTransaction
    })
    return yield* SqlClient.make({
      ...acquirers,
      compiler: Statement.makeCompilerSqlite(),
      driver: "sqlite",
      spanAttributes: [["db.system.name", "sqlite"]],
      beginTransaction: "BEGIN IMMEDIATE"
    })
  })

/**
 * The `SqlClient` layer for one database file.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (config: SqliteClientConfig): Layer.Layer<SqlClient.SqlClient, SqlError.SqlError> =>
  Layer.effect(SqlClient.SqlClient)(make(config)).pipe(Layer.provide(Reactivity.layer))
