/**
 * A guard against two effect/cluster bugs reported upstream, on PostgreSQL storage: executions that
 * stall (a reset `run` request claimed, then skipped: the execution waits for minutes), and a
 * `DurableDeferred` wake lost for executions started with `discard: true`. 300 short runs, half
 * started with `startRun` (a discarded execution, as `agentloop run --durable` starts them) and
 * half with `runDurable` (an attached one), all at once on one runner; each asks for an approval
 * (a DurableDeferred) that another fiber answers through the client as soon as it is pending. The
 * test fails naming each run that did not end, and where it stopped: never asked, or asked and not
 * woken by its answer. Under load, 1 of the 300 approvals' requests was sometimes claimed by the
 * runner's storage read and dropped (2 of 55 tries on 2026-12-04), which effect would re-read only
 * after ten minutes: the runner now offers such a request again after `staleClaimAfter` (30 s;
 * internal/staleClaims.ts, StaleClaims.postgres.test.ts).
 *
 * A stall is told from a slow machine by progress, not by a deadline for the whole batch: the runs
 * are given up once none of them has been asked for its approval or ended for two minutes (four
 * times `staleClaimAfter` and its sweep), however long they have taken until then. On a machine
 * running two suites at once, the 300 runs took from two to over three minutes, all progressing.
 *
 * Uses the PostgreSQL that AGENTLOOP_PG_* name, or starts a throwaway one (scripts/postgres.ts).
 */
import { allow, ask, defineTool, toolExecutorLayer } from "@agentloop/core"
import type { AgentRunResult } from "@agentloop/core"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import { freshDatabase, postgres } from "../scripts/postgres.ts"
import type { Postgres } from "../scripts/postgres.ts"
import {
  approve,
  awaitRun,
  balancedTimings,
  durableRunnerLayer,
  pendingApprovals,
  postgresRunnerLayer,
  runDurable,
  startRun
} from "../src/index.ts"
import { freePort } from "./crash.ts"
import { oneCallModel } from "./harness.ts"

let server: Postgres | undefined
beforeAll(() => void (server = postgres()), 300_000)
afterAll(() => server?.stop())

const RUNS = 300
/** How long nothing may move (no run asked or ended) before the runs left count as stalled. */
const STALL = Duration.minutes(2)

describe("300 short executions on PostgreSQL (upstream stalls and lost wakes)", () => {
  it.live("every run, discarded or attached, asks once, is woken by its answer and ends", () =>
    Effect.gen(function*() {
      const ran = new Map<string, number>()
      const gate = defineTool({
        name: "gate",
        description: "a call that needs an approval",
        parameters: Schema.Struct({}),
        execute: (_args, context) =>
          Effect.sync(() => {
            // the key is agentloop:<runId>:<step>:<call>
            const runId = context.idempotencyKey?.split(":")[1] ?? "?"
            ran.set(runId, (ran.get(runId) ?? 0) + 1)
            return "passed"
          })
      })
      const layer = durableRunnerLayer({ policy: (call) => call.name === "gate" ? ask : allow }).pipe(
        Layer.provideMerge(postgresRunnerLayer({
          postgres: { ...server!, database: freshDatabase(server!, "guard") },
          address: { host: "127.0.0.1", port: yield* freePort },
          timings: balancedTimings
        })),
        Layer.provide(Layer.merge(oneCallModel("gate"), toolExecutorLayer([gate])))
      )
      const ids = Array.from({ length: RUNS }, (_, i) => `${i % 2 === 0 ? "discarded" : "attached"}-${i}`)
      const asked = new Set<string>()
      const ended = new Map<string, AgentRunResult>()
      const outcome = yield* Effect.scoped(Effect.gen(function*() {
        const context = yield* Layer.build(layer)
        const provided = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
        // the answering fiber: every pending approval is approved from the client once it is pending
        yield* provided(
          Effect.gen(function*() {
            for (const pending of yield* pendingApprovals()) {
              if (asked.has(pending.runId)) continue
              asked.add(pending.runId)
              yield* approve(pending.runId, pending.call.id, { approved: true })
            }
          })
        ).pipe(Effect.orDie, Effect.repeat(Schedule.spaced("20 millis")), Effect.forkScoped)
        const one = (runId: string) => {
          const options = { runId, messages: [{ role: "user" as const, content: "go" }] }
          const run = runId.startsWith("discarded") ?
            Effect.andThen(startRun(options), awaitRun(runId, { interval: "50 millis" })) :
            runDurable(options)
          return provided(run).pipe(Effect.tap((result) => Effect.sync(() => ended.set(runId, result))))
        }
        // warm up (the cluster's tables, the shards' assignment), then all at once
        yield* one("attached-warm-up")
        // given up only when nothing moves: no run asked or ended for STALL
        const moved = () => asked.size + ended.size
        let last = { moved: moved(), at: yield* Clock.currentTimeMillis }
        const noProgress = Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          if (moved() !== last.moved) last = { moved: moved(), at: now }
          return now - last.at >= Duration.toMillis(STALL)
        }).pipe(Effect.repeat({ schedule: Schedule.spaced("1 second"), until: (stuck) => stuck }))
        return yield* Effect.forEach(ids, one, { concurrency: "unbounded", discard: true }).pipe(
          Effect.map(Option.some),
          Effect.raceFirst(Effect.as(noProgress, Option.none()))
        )
      }))
      const stalled = ids.filter((id) => !ended.has(id)).map((id) =>
        `${id}: ${asked.has(id) ? "asked, approved, never woken" : "never asked for its approval"}`
      )
      assert.deepStrictEqual(
        stalled,
        [],
        `${stalled.length} of ${RUNS} runs stalled${
          Option.isNone(outcome) ? ` (nothing moved for ${Duration.format(STALL)})` : ""
        }`
      )
      for (const id of ids) {
        assert.strictEqual(ended.get(id)?.reason, "stop", id)
        assert.strictEqual(ran.get(id), 1, `${id}: the approved call ran ${ran.get(id) ?? 0} times`)
      }
    }), 600_000)
})
