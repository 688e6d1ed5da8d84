/**
 * A run whose shard starts moving while the run waits for one of its activities gives the run up
 * to the shard's next owner, instead of waiting for a reply that cannot come.
 *
 * Why: on effect 4.1.0 a runner joining under load left runs stalled for good (3 of 8 tries of
 * the bench's join scenario, 2026-12-03): the old owner of a shard being released waits for the
 * shard's entities to end, and a workflow's `run` request is uninterruptible, so it waits for the
 * run; the run waits for the reply to its next activity, which it sent once the shard was no longer
 * acquired here. effect routes such a request to the shard's new owner and leaves the caller
 * waiting for its reply in storage (the rebalance behaviour of Effect-TS/effect#7485), but the new
 * owner reads the shard's messages only once it holds the shard's lock, which the old owner gives
 * up only when the run ends. Nothing breaks that cycle: the activity stays unread, the `run`
 * message claimed, the shard "releasing" on the old owner (seen for more than 100 s, and for the
 * whole 10 minutes of a bench run). Not reported upstream as of 2026-12-03 (#8312, a reset `run`
 * claimed then skipped, is the nearest, and is fixed in 4.1.0); remove this when effect's shard
 * release abandons such waits itself.
 *
 * What: every activity the workflow body awaits on a runner is raced against the loss of the run's
 * shard (`Sharding.hasShardId`, checked every `lostShardCheck`: effect offers no event for it).
 * When the shard is lost first, the run ends with effect's own abandonment interrupt (the one a
 * runner shutting down uses, `ClusterSchema.Abandon`): no reply is saved, the run's entity ends, the
 * shard is released, and its next owner replays the run from the journal (the activity's request
 * is stored under its primary key, so the replay awaits the same request; nothing runs twice).
 */
import { Duration, Effect, Layer, Option, Schedule } from "effect"
import { ClusterSchema, Entity, Sharding } from "effect/cluster"
import { WorkflowEngine } from "effect/workflow"

/** How often a run waiting for an activity checks that its shard is still acquired here. */
export const lostShardCheck = Duration.millis(250)

/** Ends the current fiber with effect's cluster abandonment, even inside an uninterruptible run. */
const abandon: Effect.Effect<never> = Effect.interruptible(
  Effect.withFiber((fiber) => {
    fiber.interruptUnsafe(fiber.id, ClusterSchema.Abandon.annotation)
    return Effect.never
  })
)

/** `effect`, unless the run's shard is no longer acquired here first: then the run is abandoned. */
export const abandonOnLostShard =
  (sharding: Pick<Sharding.Sharding["Service"], "hasShardId">) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(Effect.serviceOption(Entity.CurrentAddress), (address) => {
      if (Option.isNone(address)) return effect
      const shardId = address.value.shardId
      if (!sharding.hasShardId(shardId)) return abandon
      const lost = Effect.repeat(
        Effect.sync(() => sharding.hasShardId(shardId)),
        { while: (held) => held, schedule: Schedule.spaced(lostShardCheck) }
      )
      // effect's race runs both sides interruptibly, inside the uninterruptible run too, and
      // interrupts the loser
      return Effect.raceFirst(
        Effect.map(effect, Option.some),
        Effect.as(lost, Option.none<A>())
      ).pipe(Effect.flatMap(Option.match({ onNone: () => abandon, onSome: Effect.succeed })))
    })

/**
 * The cluster's `WorkflowEngine` with every activity await guarded by `abandonOnLostShard`. The
 * workflow layers built on it register through it, so their bodies' activities go through it.
 */
export const abandonRunsOnLostShards = Layer.effect(
  WorkflowEngine.WorkflowEngine,
  Effect.gen(function*() {
    const engine = yield* WorkflowEngine.WorkflowEngine
    const guard = abandonOnLostShard(yield* Sharding.Sharding)
    return WorkflowEngine.WorkflowEngine.of({
      ...engine,
      activityExecute: (activity, attempt) => guard(engine.activityExecute(activity, attempt))
    })
  })
)
