/**
 * Every runner checks the health of the others itself, every `runnerHealthCheckInterval`: one it
 * cannot ping (a few tries, a quarter second apart) is marked unhealthy in the runners' table, and
 * one that answers again is marked healthy; the runners then take a dead runner's shards over (on
 * PostgreSQL its shard locks went with its connection).
 *
 * effect/cluster runs this check as a cluster singleton, on one runner only: when that runner is
 * the one that died, no one marks it unhealthy, and its runs wait until its heartbeat is older than
 * `shardLockExpiration` (the bench's failover took 15.5 s in 6 of 8 kills with `balancedTimings`,
 * instead of 1.4–1.8 s). The singleton still runs; both write the same answers.
 */
import { Duration, Effect, Equal, Layer, Option, Schedule } from "effect"
import { Runners, RunnerStorage, ShardingConfig } from "effect/cluster"
import type { RunnerAddress } from "effect/cluster"

/** What one check needs: the runner it runs on, the runners' table, and a ping. */
export interface HealthCheck {
  readonly self: RunnerAddress.RunnerAddress
  readonly storage: Pick<RunnerStorage.RunnerStorage["Service"], "getRunners" | "setRunnerHealth">
  readonly isAlive: (address: RunnerAddress.RunnerAddress) => Effect.Effect<boolean>
}

/**
 * One round: each other runner is pinged, and its row says what the ping found. A runner marks
 * others unhealthy only while its own row says it is healthy, so a runner cut off from the rest does
 * not mark all of them down (it may still mark one healthy again).
 */
export const checkOnce = (check: HealthCheck) =>
  Effect.gen(function*() {
    const all = yield* check.storage.getRunners
    const selfHealthy = all.some(([runner, healthy]) => healthy && Equal.equals(runner.address, check.self))
    yield* Effect.forEach(all, ([runner, healthy]) => {
      if (Equal.equals(runner.address, check.self)) return Effect.void
      return Effect.flatMap(check.isAlive(runner.address), (alive) =>
        alive === healthy || (!alive && !selfHealthy) ?
          Effect.void :
          check.storage.setRunnerHealth(runner.address, alive))
    }, { concurrency: 10, discard: true })
  })

/** The check on this runner, every `runnerHealthCheckInterval`, for as long as the layer lives. */
export const everyRunnerChecksHealth = Layer.effectDiscard(Effect.gen(function*() {
  const storage = yield* RunnerStorage.RunnerStorage
  const runners = yield* Runners.Runners
  const config = yield* ShardingConfig.ShardingConfig
  const self = Option.getOrUndefined(config.runnerAddress)
  if (self === undefined) return
  const isAlive = (address: RunnerAddress.RunnerAddress) =>
    runners.ping(address).pipe(
      Effect.timeout(Duration.seconds(10)),
      Effect.retry({ times: 3, schedule: Schedule.spaced(Duration.millis(250)) }),
      Effect.isSuccess
    )
  yield* checkOnce({ self, storage, isAlive }).pipe(
    Effect.catchCause((cause) => Effect.logDebug("agentloop: a runner health check failed", cause)),
    Effect.andThen(Effect.sleep(config.runnerHealthCheckInterval)),
    Effect.forever,
    Effect.forkScoped
  )
}))
