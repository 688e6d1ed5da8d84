/**
 * A runner joining while runs are under way on PostgreSQL: the shards that move to it carry runs
 * that are waiting for their calls. Before internal/handoff.ts, effect's shard release waited for
 * such a run and the run for a reply only the shard's next owner could give: 3 of 8 tries left
 * runs stalled for good. Every run must end, with a valid transcript, and no call that was
 * journaled may run again (the runs given up on the old owner are replayed on the new one).
 *
 * Three runner processes (the third started once a third of the runs' first calls ended) and a
 * client starting 30 runs of 2 calls of 2 s: the bench's join scenario (bench/lib.ts `runCluster`),
 * checked with the bench's analysis. A stall fails it, naming the runs that did not end.
 *
 * Uses the PostgreSQL that AGENTLOOP_PG_* name, or starts a throwaway one (scripts/postgres.ts).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { analyze, runCluster } from "../bench/lib.ts"
import { dropDatabase, postgres, query } from "../scripts/postgres.ts"
import type { Postgres } from "../scripts/postgres.ts"

let server: Postgres | undefined
beforeAll(() => void (server = postgres()), 300_000)
afterAll(() => server?.stop())

describe("PostgreSQL: a runner joining while runs wait for their calls", () => {
  it.live("every run ends, its transcript valid, and no journaled call runs again", () =>
    Effect.gen(function*() {
      const run = yield* runCluster({
        pg: server!,
        runs: 30,
        steps: 3,
        callMs: 2000,
        killEveryMs: 0,
        // unstalled, the join takes 11-14 s on a 2-core machine
        timeoutMs: 120_000,
        runners: 3,
        joinUnderLoad: true
      })
      try {
        if (!run.completed) {
          const stalled = query(
            server!,
            run.database,
            "select entity_id, tag, shard_id from cluster_messages m where processed = false order by id"
          ).map((row) => `${String(row["entity_id"])} ${String(row["tag"])} on ${String(row["shard_id"])}`)
          assert.fail(`the runs did not all end within 120 s; unprocessed: ${stalled.join(", ")}`)
        }
        const analysis = analyze(server!, run)
        assert.strictEqual(analysis.runsEnded, 30)
        assert.strictEqual(analysis.violations, 0, analysis.examples.join("\n"))
        assert.strictEqual(analysis.notStop, 0)
        assert.strictEqual(analysis.rerunAfterJournaled, 0, analysis.examples.join("\n"))
        assert.strictEqual(analysis.journalMismatches, 0, analysis.examples.join("\n"))
        assert.strictEqual(analysis.calls, 60)
      } finally {
        dropDatabase(server!, run.database)
      }
    }), 300_000)
})
