/**
 * Knowing when the code under test has started a sleep, so a test can move the `TestClock`
 * without racing it: the HTTP round trip before a retry's sleep happens in real time.
 */
import { Clock, Deferred, Duration, Effect } from "effect"

export interface SleepWatch {
  /** Runs `effect` with the watching clock. */
  readonly watch: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Waits until `count` sleeps have started. */
  readonly started: (count: number) => Effect.Effect<void>
  /** Waits until `count` sleeps of exactly `millis` have started. */
  readonly startedOf: (millis: number, count: number) => Effect.Effect<void>
  /** The durations of the sleeps so far, in milliseconds. */
  readonly durations: Effect.Effect<ReadonlyArray<number>>
}

/** Wraps the current clock (the `TestClock` in `it.effect`), recording every sleep. */
export const makeSleepWatch: Effect.Effect<SleepWatch> = Effect.gen(function*() {
  const clock = yield* Clock.clockWith(Effect.succeed)
  const durations: Array<number> = []
  const signals: Array<Deferred.Deferred<void>> = []
  const signal = (count: number) => {
    while (signals.length < count) signals.push(Deferred.makeUnsafe<void>())
    return signals[count - 1]!
  }
  const byDuration = new Map<number, Array<Deferred.Deferred<void>>>()
  const signalOf = (millis: number, count: number) => {
    const list = byDuration.get(millis) ?? []
    byDuration.set(millis, list)
    while (list.length < count) list.push(Deferred.makeUnsafe<void>())
    return list[count - 1]!
  }
  const watched: Clock.Clock = {
    ...clock,
    sleep: (duration) =>
      Effect.suspend(() => {
        const millis = Duration.toMillis(duration)
        durations.push(millis)
        Deferred.doneUnsafe(signal(durations.length), Effect.void)
        Deferred.doneUnsafe(signalOf(millis, durations.filter((d) => d === millis).length), Effect.void)
        return clock.sleep(duration)
      })
  }
  return {
    watch: (effect) => Effect.provideService(effect, Clock.Clock, watched),
    started: (count) => Deferred.await(signal(count)),
    startedOf: (millis, count) => Deferred.await(signalOf(millis, count)),
    durations: Effect.sync(() => durations.slice())
  }
})
