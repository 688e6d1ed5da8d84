/**
 * A run waiting for an activity while its shard moves away gives the run up (internal/handoff.ts):
 * effect's shard release waits for the uninterruptible run, and the run for a reply only the
 * shard's next owner can give, so without this the handoff never ends.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber } from "effect"
import { ClusterSchema, Entity, EntityAddress, EntityId, EntityType, ShardId } from "effect/cluster"
import { TestClock } from "effect/testing"
import { abandonOnLostShard, lostShardCheck } from "../src/internal/handoff.ts"

const shard = ShardId.make("default", 7)
const address = EntityAddress.make({
  shardId: shard,
  entityType: EntityType.make("Workflow/agentloop/DurableRun"),
  entityId: EntityId.make("run-1")
})

/** A runner's view of its shards: `held` says whether shard 7 is acquired here. */
const shards = (held: boolean) => {
  const state = { held }
  return { state, sharding: { hasShardId: (id: ShardId.ShardId) => state.held && id.id === shard.id } }
}

const isAbandoned = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) &&
  exit.cause.reasons.some((r) => Cause.isInterruptReason(r) && r.annotations.has(ClusterSchema.Abandon.key))

describe("a run whose shard moves while it waits for an activity", () => {
  it.effect("is abandoned (effect's cluster abandonment, no result) once the shard is no longer acquired", () =>
    Effect.gen(function*() {
      const { state, sharding } = shards(true)
      const waiting = yield* Deferred.make<void>()
      const reply = yield* Deferred.make<string>()
      let waitInterrupted = false
      const activity = Deferred.succeed(waiting, undefined).pipe(
        Effect.andThen(Deferred.await(reply)),
        Effect.onInterrupt(() => Effect.sync(() => void (waitInterrupted = true)))
      )
      // the run's request is uninterruptible, as effect's workflow `run` is
      const fiber = yield* abandonOnLostShard(sharding)(activity).pipe(
        Effect.provideService(Entity.CurrentAddress, address),
        Effect.uninterruptible,
        Effect.forkChild
      )
      yield* Deferred.await(waiting)
      // held: several checks pass and the run keeps waiting
      yield* TestClock.adjust(lostShardCheck)
      yield* TestClock.adjust(lostShardCheck)
      yield* TestClock.adjust(lostShardCheck)
      assert.isUndefined(fiber.pollUnsafe(), "a run on a shard still held here keeps waiting")
      state.held = false
      yield* TestClock.adjust(lostShardCheck)
      const exit = yield* Fiber.await(fiber)
      assert.isTrue(isAbandoned(exit), `abandoned with effect's annotation, got ${String(exit)}`)
      assert.isTrue(waitInterrupted, "the wait for the reply is interrupted, not left running")
    }))

  it.effect("gets its activity's result while the shard stays acquired", () =>
    Effect.gen(function*() {
      const { sharding } = shards(true)
      const reply = yield* Deferred.make<string>()
      const fiber = yield* abandonOnLostShard(sharding)(Deferred.await(reply)).pipe(
        Effect.provideService(Entity.CurrentAddress, address),
        Effect.uninterruptible,
        Effect.forkChild
      )
      yield* TestClock.adjust(lostShardCheck)
      yield* TestClock.adjust(lostShardCheck)
      yield* Deferred.succeed(reply, "the call's output")
      assert.deepStrictEqual(yield* Fiber.await(fiber), Exit.succeed("the call's output"))
    }))

  it.effect("is abandoned before it asks, when its shard is already not acquired here", () =>
    Effect.gen(function*() {
      const { sharding } = shards(false)
      let asked = false
      const exit = yield* abandonOnLostShard(sharding)(Effect.sync(() => void (asked = true))).pipe(
        Effect.provideService(Entity.CurrentAddress, address),
        Effect.uninterruptible,
        Effect.forkChild,
        Effect.flatMap(Fiber.await)
      )
      assert.isTrue(isAbandoned(exit))
      assert.isFalse(asked, "no activity is requested for a shard this runner is handing off")
    }))

  it.effect("outside an entity (no address: an engine without shards) the activity runs as it is", () =>
    Effect.gen(function*() {
      const { sharding } = shards(false)
      assert.strictEqual(yield* abandonOnLostShard(sharding)(Effect.succeed(42)), 42)
    }))
})
