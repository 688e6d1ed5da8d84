/**
 * A request that the runner claimed from storage and then dropped is offered again
 * (internal/staleClaims.ts). effect's storage read claims a request by setting its `last_read`,
 * and reads a claimed request again only once that is ten minutes old. So an approval whose
 * `deferred` request was claimed and dropped left its run waiting for ten minutes. The guard test
 * found this under load, 1 run in 300, in 2 of 55 tries.
 *
 * Here the drop is made certain: a trigger in the test's own database marks every `deferred`
 * request claimed as it is stored, and the approval comes from a client-only engine, so it reaches
 * the runner only through storage. Only a runner that offers stale claims again can wake the run
 * before effect's ten minutes. The approved call must then run exactly once, and the run must end
 * with a valid transcript. A second test holds a call running past the stale-claim delay, and its
 * request is released and read again while it runs: the call must not start twice.
 *
 * Uses the PostgreSQL that AGENTLOOP_PG_* name, or starts a throwaway one (scripts/postgres.ts).
 */
import { allow, ask, defineTool, toolExecutorLayer } from "@agentloop/core"
import type { Message } from "@agentloop/core"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import { dropDatabase, freshDatabase, postgres, query } from "../scripts/postgres.ts"
import type { Postgres } from "../scripts/postgres.ts"
import {
  approve,
  awaitRun,
  balancedTimings,
  durableRunnerLayer,
  pendingApprovals,
  postgresClientLayer,
  postgresRunnerLayer,
  startRun
} from "../src/index.ts"
import { freePort } from "./crash.ts"
import { oneCallModel } from "./harness.ts"

let server: Postgres | undefined
beforeAll(() => void (server = postgres()), 300_000)
afterAll(() => server?.stop())

/** The stale-claim delay in these tests (30 s in production). */
const staleClaimAfter = Duration.seconds(2)

/** The transcript's roles, and each tool result's call and text: one result per call, in place. */
const shape = (messages: ReadonlyArray<Message>) =>
  messages.map((m) =>
    m.role === "toolResult" ?
      `toolResult ${m.toolCallId} ${m.content.map((c) => (c.type === "text" ? c.text : c.type)).join("")}` :
      m.role === "assistant" ?
      `assistant ${
        m.content.map((c) => (c.type === "toolCall" ? `call ${c.id}` : c.type === "text" ? c.text : c.type)).join(" ")
      }` :
      m.role
  )

/** A runner on a fresh database, with `tools` and the policy given. */
const runner = (database: string, tools: Parameters<typeof toolExecutorLayer>[0], tool: string, needsAsk: boolean) =>
  Effect.map(
    freePort,
    (port) =>
      durableRunnerLayer({ policy: (call) => needsAsk && call.name === tool ? ask : allow }).pipe(
        Layer.provideMerge(postgresRunnerLayer({
          postgres: { ...server!, database },
          address: { host: "127.0.0.1", port },
          timings: balancedTimings,
          staleClaimAfter
        })),
        Layer.provide(Layer.merge(oneCallModel(tool), toolExecutorLayer(tools)))
      )
  )

describe("PostgreSQL: a request claimed and then dropped is offered again", () => {
  it.live(
    "an approval whose request was claimed and dropped still wakes its run, and its call runs once",
    () =>
      Effect.gen(function*() {
        const database = freshDatabase(server!, "stale")
        let ran = 0
        const gate = defineTool({
          name: "gate",
          description: "a call that needs an approval",
          parameters: Schema.Struct({}),
          execute: () => Effect.sync(() => (ran++, "passed"))
        })
        const outcome = yield* Effect.scoped(Effect.gen(function*() {
          const context = yield* Layer.build(yield* runner(database, [gate], "gate", true))
          const provided = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
          // the runner has made effect's tables; from now on every `deferred` request is stored claimed
          query(
            server!,
            database,
            "create function claim_on_insert() returns trigger language plpgsql as " +
              "$$ begin new.last_read := now(); return new; end $$"
          )
          query(
            server!,
            database,
            "create trigger claim_deferred before insert on cluster_messages for each row " +
              "when (new.tag = 'deferred') execute function claim_on_insert()"
          )
          yield* provided(startRun({ runId: "stale-1", messages: [{ role: "user", content: "go" }] }))
          const pending = yield* provided(pendingApprovals()).pipe(
            Effect.repeat({ until: (list) => list.length > 0, schedule: Schedule.spaced("50 millis") })
          )
          // answered from a client-only engine, as `agentloop approve` does: the request reaches the
          // runner only through storage (a runner's own approval would also be handed to it directly)
          const client = yield* Layer.build(postgresClientLayer({ postgres: { ...server!, database } }))
          yield* Effect.provide(approve("stale-1", pending[0]!.call.id, { approved: true }), client)
          // the approval's request is stored claimed, as a dropped claim leaves it
          const stored = query(
            server!,
            database,
            "select last_read is not null as claimed from cluster_messages where tag = 'deferred'"
          )
          assert.deepStrictEqual(stored, [{ claimed: true }], "the approval's request is stored claimed")
          // far below effect's ten minutes, far above the 2 s delay and its sweep
          return yield* provided(awaitRun("stale-1", { interval: "100 millis" })).pipe(
            Effect.timeoutOption(Duration.seconds(90))
          )
        }))
        dropDatabase(server!, database)
        assert.isTrue(Option.isSome(outcome), "the approved run was not woken within 90 s")
        const result = Option.getOrThrow(outcome)
        assert.strictEqual(result.reason, "stop")
        assert.strictEqual(ran, 1, "the approved call ran once")
        assert.deepStrictEqual(shape(result.messages), [
          "user",
          "assistant call gate-1",
          "toolResult gate-1 passed",
          "assistant done"
        ])
      }),
    300_000
  )

  it.live(
    "a call running past the stale-claim delay is not started again when its request is offered again",
    () =>
      Effect.gen(function*() {
        const database = freshDatabase(server!, "stale")
        const started = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        let starts = 0
        const slow = defineTool({
          name: "slow",
          description: "a call that runs until the test lets it end",
          parameters: Schema.Struct({}),
          execute: () =>
            Effect.gen(function*() {
              starts++
              yield* Deferred.succeed(started, undefined)
              yield* Deferred.await(release)
              return "ended"
            })
        })
        const result = yield* Effect.scoped(Effect.gen(function*() {
          const context = yield* Layer.build(yield* runner(database, [slow], "slow", false))
          const provided = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context)
          yield* provided(startRun({ runId: "slow-1", messages: [{ role: "user", content: "go" }] }))
          yield* Deferred.await(started)
          // the call's request is claimed while it runs: wait until it has been released and read
          // again at least twice (its claim renewed past two stale-claim delays)
          const claimedAt = () =>
            query(
              server!,
              database,
              "select extract(epoch from last_read) * 1000 as at from cluster_messages " +
                "where tag = 'activity' and payload::text like '%call/1/0%'"
            )[0]?.["at"]
          const first = Number(claimedAt())
          const renewed = yield* Effect.sync(() => Number(claimedAt())).pipe(
            Effect.repeat({
              until: (at) => at >= first + 2 * Duration.toMillis(staleClaimAfter),
              schedule: Schedule.spaced("200 millis")
            }),
            Effect.timeoutOption(Duration.seconds(60))
          )
          assert.isTrue(Option.isSome(renewed), "the running call's request was never offered again")
          yield* Deferred.succeed(release, undefined)
          return yield* provided(awaitRun("slow-1", { interval: "100 millis" }))
        }))
        dropDatabase(server!, database)
        assert.strictEqual(result.reason, "stop")
        assert.strictEqual(starts, 1, "the running call was started again")
        assert.deepStrictEqual(shape(result.messages), [
          "user",
          "assistant call slow-1",
          "toolResult slow-1 ended",
          "assistant done"
        ])
      }),
    300_000
  )

  it("a stale-claim delay under a second, or not finite, is refused when the layer is made", () => {
    const layer = (staleClaimAfter: Duration.Input) => () =>
      postgresRunnerLayer({
        postgres: { host: "127.0.0.1", port: 1, database: "none" },
        address: { host: "127.0.0.1", port: 1 },
        staleClaimAfter
      })
    for (const wrong of [Duration.zero, Duration.millis(999), Duration.infinity, Duration.millis(-5)]) {
      assert.throws(layer(wrong), /staleClaimAfter must be a finite duration of at least 1 second/)
    }
    assert.doesNotThrow(layer(Duration.seconds(1)))
  })
})
