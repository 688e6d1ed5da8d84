/**
 * Every PostgreSQL runner checks the others' health itself (internal/health.ts), so a dead runner
 * is marked unhealthy even when it was the one running effect's health-check singleton.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Runner, RunnerAddress, RunnerStorage } from "effect/cluster"
import { checkOnce } from "../src/internal/health.ts"

const address = (port: number) => RunnerAddress.make("127.0.0.1", port)
const runner = (port: number) => Runner.make({ address: address(port), groups: ["default"], weight: 1 })

/** A runners' table holding `rows` (port, healthy), and which ports answer a ping. */
const table = (rows: ReadonlyArray<readonly [number, boolean]>) =>
  Effect.gen(function*() {
    const storage = yield* RunnerStorage.makeMemory
    for (const [port, healthy] of rows) yield* storage.register(runner(port), healthy)
    const healthOf = Effect.map(
      storage.getRunners,
      (all) => Object.fromEntries(all.map(([r, healthy]) => [r.address.port, healthy]))
    )
    return { storage, healthOf }
  })

describe("each runner's own health check", () => {
  it.effect("marks a runner that does not answer unhealthy, one that answers again healthy, never itself", () =>
    Effect.gen(function*() {
      const { storage, healthOf } = yield* table([[1, true], [2, true], [3, true], [4, false]])
      const pinged: Array<number> = []
      yield* checkOnce({
        self: address(1),
        storage,
        isAlive: (a) => Effect.sync(() => (pinged.push(a.port), a.port !== 2))
      })
      assert.deepStrictEqual(yield* healthOf, { 1: true, 2: false, 3: true, 4: true })
      assert.deepStrictEqual(pinged.sort(), [2, 3, 4], "it pings every other runner, not itself")
    }))

  it.effect("a runner whose own row says unhealthy marks no other runner down (it may be the one cut off)", () =>
    Effect.gen(function*() {
      const { storage, healthOf } = yield* table([[1, false], [2, true], [3, false]])
      yield* checkOnce({ self: address(1), storage, isAlive: (a) => Effect.succeed(a.port === 3) })
      assert.deepStrictEqual(yield* healthOf, { 1: false, 2: true, 3: true })
    }))

  it.effect("a runner found dead, then answering again, is marked healthy again by the next round", () =>
    Effect.gen(function*() {
      const { storage, healthOf } = yield* table([[1, true], [2, true], [3, true]])
      yield* checkOnce({ self: address(1), storage, isAlive: (a) => Effect.succeed(a.port !== 3) })
      assert.deepStrictEqual(yield* healthOf, { 1: true, 2: true, 3: false })
      yield* checkOnce({ self: address(1), storage, isAlive: () => Effect.succeed(true) })
      assert.deepStrictEqual(yield* healthOf, { 1: true, 2: true, 3: true })
    }))
})
