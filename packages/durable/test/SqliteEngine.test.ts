/**
 * The embedded engine's `WorkflowEngine` on its own (effect/workflow's engine kept in a SQLite file):
 * what it keeps across a restart (an activity's result with its schema's types, a durable clock's
 * wake-up time), a run a client-only process starts while the runner is live, and a file whose runs
 * an earlier version's engine (effect/cluster's) left unfinished. Time is the test clock's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Option, Schema, Scope } from "effect"
import { TestClock } from "effect/testing"
import { Activity, DurableClock, Workflow } from "effect/workflow"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { embeddedClientLayer, embeddedEngineLayer } from "../src/index.ts"
import { tempDir } from "./crash.ts"

const Greet = Workflow.make("Greet", {
  payload: { name: Schema.String, nap: Schema.Boolean },
  success: Schema.Struct({ text: Schema.String, at: Schema.Date }),
  idempotencyKey: ({ name }) => name
})

/** The workflow, counting the runs of its activity (a date, which JSON alone would not bring back). */
const greetLayer = (stamps: { count: number }) =>
  Greet.toLayer(({ name, nap }) =>
    Effect.gen(function*() {
      const at = yield* Activity.make({
        name: "stamp",
        success: Schema.Date,
        execute: Effect.sync(() => new Date(1_700_000_000_000 + ++stamps.count))
      })
      if (nap) yield* DurableClock.sleep({ name: "nap", duration: "2 minutes" })
      return { text: `hello ${name}`, at }
    })
  )

/**
 * Waits, on the real event loop (not the test clock), until `query` counts a row in the file: for
 * what another fiber writes after a real asynchronous step. Gives up after 60 s.
 */
const written = (filename: string, query: string) =>
  Effect.promise(async () => {
    const db = new DatabaseSync(filename, { readOnly: true })
    try {
      const deadline = Date.now() + 60_000
      while (Number((db.prepare(query).get() as { n: number } | undefined)?.n ?? 0) === 0) {
        if (Date.now() > deadline) throw new Error(`nothing was written for: ${query}`)
        await new Promise((resolve) => setImmediate(resolve))
      }
    } finally {
      db.close()
    }
  })

/** Builds `layer` in a scope of its own, closed by the returned effect (a process that ends). */
const open = <A, E>(layer: Layer.Layer<A, E>) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(layer, scope)
    return { context, close: Scope.close(scope, Exit.void) }
  })

const runner = (filename: string, stamps: { count: number }) =>
  greetLayer(stamps).pipe(Layer.provideMerge(embeddedEngineLayer({ filename })), Layer.orDie)

describe("the embedded engine (effect/workflow on SQLite)", () => {
  it.effect("a restart replays from the file: the activity's date is the first run's, the clock keeps its time", () =>
    Effect.gen(function*() {
      const filename = join(tempDir("agentloop-sqlite-engine-"), "runs.db")
      const stamps = { count: 0 }
      const first = yield* open(runner(filename, stamps))
      yield* Greet.execute({ name: "a", nap: true }, { discard: true }).pipe(Effect.provide(first.context))
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(stamps.count, 1)
      yield* first.close // the process ends half-way through its nap

      const second = yield* open(runner(filename, stamps))
      const id = yield* Greet.executionId({ name: "a", nap: true })
      const poll = Greet.poll(id).pipe(Effect.provide(second.context))
      // the nap ends two minutes after it began, not two minutes after the restart
      yield* TestClock.adjust("59 seconds")
      assert.isTrue(Option.isNone(yield* poll) || Option.getOrThrow(yield* poll)._tag === "Suspended")
      yield* TestClock.adjust("2 seconds")
      const done = Option.getOrThrow(yield* poll)
      assert.strictEqual(done._tag, "Complete")
      if (done._tag !== "Complete") return
      assert.deepStrictEqual(
        Exit.getSuccess(done.exit),
        Option.some({ text: "hello a", at: new Date(1_700_000_000_001) })
      )
      assert.strictEqual(stamps.count, 1) // journaled: not run again by the replay
      // a later start of the same run answers from the file
      const again = yield* Greet.execute({ name: "a", nap: true }).pipe(Effect.provide(second.context))
      assert.deepStrictEqual(again, { text: "hello a", at: new Date(1_700_000_000_001) })
      yield* second.close
    }))

  it.effect("a run a client-only process starts is run by the live runner, and the client reads its result", () =>
    Effect.gen(function*() {
      const filename = join(tempDir("agentloop-sqlite-engine-"), "runs.db")
      const stamps = { count: 0 }
      const live = yield* open(runner(filename, stamps))
      const client = yield* open(Layer.orDie(embeddedClientLayer({ filename, pollInterval: "100 millis" })))
      const waiting = yield* Greet.execute({ name: "b", nap: false }).pipe(
        Effect.provide(client.context),
        Effect.forkChild
      )
      // the client writes the run once its execution id is hashed (Web Crypto: a real promise, which
      // the test clock does not drive; on a busy machine it can settle after the runner's first read):
      // the clock moves only once the run is in the file
      yield* written(filename, "select count(*) as n from agentloop_wf_executions")
      // the runner reads what the client wrote every half second (its default)
      yield* TestClock.adjust("400 millis")
      assert.strictEqual(stamps.count, 0)
      yield* TestClock.adjust("200 millis")
      assert.strictEqual(stamps.count, 1)
      yield* TestClock.adjust("100 millis")
      assert.deepStrictEqual(yield* Fiber.join(waiting), { text: "hello b", at: new Date(1_700_000_000_001) })
      yield* client.close
      yield* live.close
    }))

  it.effect("a file with runs an earlier version's engine left unfinished is refused, with why", () =>
    Effect.gen(function*() {
      const filename = join(tempDir("agentloop-sqlite-engine-"), "runs.db")
      const db = new DatabaseSync(filename)
      db.exec("create table cluster_messages (id integer primary key, processed boolean not null default false)")
      db.exec("insert into cluster_messages (processed) values (1), (0)")
      const refused = yield* Effect.exit(Effect.scoped(Layer.build(embeddedEngineLayer({ filename }))))
      assert.isTrue(Exit.isFailure(refused))
      const error = Exit.isFailure(refused) ? refused.cause.reasons.find((r) => r._tag === "Fail") : undefined
      assert.strictEqual(error?._tag === "Fail" ? error.error._tag : undefined, "EmbeddedEngineError")
      assert.include(error?._tag === "Fail" ? error.error.message : "", "did not finish (1 unprocessed")
      // once they ended there, the file is used
      db.exec("update cluster_messages set processed = 1")
      db.close()
      const opened = yield* Effect.exit(Effect.scoped(Layer.build(embeddedEngineLayer({ filename }))))
      assert.isTrue(Exit.isSuccess(opened))
    }))
})
