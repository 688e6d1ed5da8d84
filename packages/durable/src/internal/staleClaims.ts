/**
 * A request that a PostgreSQL runner claimed from storage and then never handled is offered to the
 * runner again after `staleClaimAfter`, instead of after effect's ten minutes.
 *
 * Why: on effect 4.1.0 an approval could stay unanswered for minutes under load. In the guard test
 * (`test/Guard.postgres.test.ts`, 300 runs on one runner) 1 of the 300 runs was approved and never
 * woken, twice in 55 runs of the test on 2026-12-04 with other work competing for the CPU (and
 * once on 2026-12-03, with two test suites running at once). The
 * database of one of them (2026-12-04) held the run's `run` request answered `Suspended`, and the
 * approval's `deferred` request unanswered. That request was claimed (`last_read` set by the
 * runner's storage read) and never processed, and effect reads a claimed request again only once
 * its `last_read` is ten minutes old (`NOW() - INTERVAL '10 minutes'`, hard-coded in effect's
 * `SqlMessageStorage`). The read loop drops a claimed request in several places without releasing
 * its claim: an entity that is closing or retired takes it as an interrupt, which the loop ignores.
 * The run's entity had been idle past the workflow engine's 10 s `maxIdleTime` when the approval
 * came, so it was being reaped. The exact interleaving is not pinned down. It is the shape of
 * Effect-TS/effect#8312 (a reset `run` request claimed, then skipped), which 4.1.0 fixes for the
 * `run` request; not reported upstream as of 2026-12-04. Remove this when effect re-offers such
 * claims itself.
 *
 * What: every `staleClaimAfter / 3`, the runner lists the requests of its own shards that are
 * unprocessed, have no reply, and were claimed longer than `staleClaimAfter` ago. It releases
 * their claims with effect's own `MessageStorage.resetRequests` (the call its read loop makes for
 * a claim it skips) and reads storage at once.
 *
 * Why this is safe: effect's read loop already expects to read a request it holds. A request still
 * being processed on this runner is skipped (`isProcessingFor`), and one with its reply saved is not
 * read at all. So a long call's request, released and read again, is skipped, and only a dropped
 * request is delivered. The cost is one query per sweep, plus a reset and a read when a claim is
 * stale.
 */
import { Duration, Effect, Layer, Schedule } from "effect"
import { MessageStorage, ShardId, Sharding, Snowflake } from "effect/cluster"
import { SqlClient } from "effect/sql"

/** How long a claimed, unanswered request waits before it is offered again (effect's own: 10 minutes). */
export const staleClaimAfter = Duration.seconds(30)

/** effect's message tables (`SqlMessageStorage.layer`, default prefix). */
const messages = "cluster_messages"
const replies = "cluster_replies"

/** The sweep described above, every `after / 3`, for as long as the layer's scope is open. */
export const reofferStaleClaims = (after: Duration.Input = staleClaimAfter) => {
  const afterMillis = Duration.toMillis(Duration.fromInputUnsafe(after))
  if (!(Number.isFinite(afterMillis) && afterMillis >= 1000)) {
    throw new Error(
      `agentloop: postgresRunnerLayer's staleClaimAfter must be a finite duration of at least 1 second ` +
        `(got ${Duration.format(Duration.fromInputUnsafe(after))})`
    )
  }
  return Layer.effectDiscard(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const storage = yield* MessageStorage.MessageStorage
    const sharding = yield* Sharding.Sharding
    const sweep = Effect.gen(function*() {
      // requests (kind 0) only; the reply condition is the one effect's claim query uses
      const rows = yield* sql<{ readonly id: string; readonly shard_id: string }>`
        SELECT m.id, m.shard_id FROM ${sql(messages)} m
        WHERE m.processed = false AND m.kind = 0
        AND m.last_read IS NOT NULL
        AND m.last_read < NOW() - make_interval(secs => ${afterMillis / 1000})
        AND NOT EXISTS (
          SELECT 1 FROM ${sql(replies)} r WHERE r.request_id = m.request_id AND (r.kind = 0 OR r.acked = false)
        )
      `
      const mine = rows.filter((row) => sharding.hasShardId(ShardId.fromString(row.shard_id)))
      if (mine.length === 0) return
      yield* Effect.logDebug(`offering ${mine.length} claimed, unanswered request(s) again`)
      yield* storage.resetRequests(mine.map((row) => Snowflake.Snowflake(row.id)))
      yield* sharding.pollStorage
    })
    yield* sweep.pipe(
      Effect.catchCause((cause) => Effect.logWarning("could not offer stale claims again", cause)),
      Effect.repeat(Schedule.spaced(Duration.millis(afterMillis / 3))),
      Effect.annotateLogs({ module: "@agentloop/durable/staleClaims" }),
      Effect.forkScoped
    )
  }))
}
