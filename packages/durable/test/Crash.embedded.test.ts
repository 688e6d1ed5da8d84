/**
 * kill -9 on the embedded engine (one process, one SQLite file): start the same command again and
 * the run completes; what completed before the kill never runs again; what was running runs
 * again with the same idempotency key, read by the tool from its context (or, for a tool defined
 * with `atMostOnce: true`, is answered interrupted); the transcript passes checkInvariants.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { join } from "node:path"
import type { DurableEvent } from "../src/index.ts"
import {
  awaitExit,
  kill9,
  lines,
  ranOnceAndStopped,
  resultAndViolations,
  spawnProc,
  starts,
  tempDir,
  toolEndedIn,
  waitUntil
} from "./crash.ts"
import type { LogEntry } from "./crash.ts"

const setup = (extra: object = {}) => {
  const dir = tempDir("agentloop-durable-")
  return {
    engine: "embedded",
    db: join(dir, "runs.db"),
    runId: "run-1",
    log: join(dir, "side-effects.ndjson"),
    events: join(dir, "events.ndjson"),
    result: join(dir, "result.json"),
    slowMs: 1500,
    ...extra
  }
}

const slowRunning = (log: string) => () => {
  const s = starts(log)
  return s.call("c2") === 1 && s.call("c3") === 1 &&
    lines<LogEntry>(log).some((e) => e.call === "c1" && e.phase === "end")
}

describe("embedded engine: kill -9 and start the same command again", () => {
  it.live(
    "during a tool batch: the finished call is not run again, the running ones are, with the same key",
    () =>
      Effect.gen(function*() {
        const s = setup()
        const first = spawnProc("runner-start", s)
        yield* waitUntil("c2 and c3 running, c1 finished", slowRunning(s.log))
        yield* waitUntil("c1's result journaled", () => toolEndedIn(s.events, "c1"))
        yield* Effect.promise(() => new Promise((r) => setTimeout(r, 300))) // c1's journal write lands
        yield* kill9(first)
        const second = spawnProc("runner-start", { ...s, approveAtStart: true })
        yield* awaitExit(second)
        const c = starts(s.log)
        assert.strictEqual(c.call("c1"), 1)
        assert.strictEqual(c.call("c2"), 2)
        assert.strictEqual(c.call("c3"), 2)
        // the tool read the same key from its context on both runs (the log records it at start and end)
        assert.deepStrictEqual(c.keys("c1"), ["agentloop:run-1:1:0"])
        assert.deepStrictEqual(c.keys("c2"), ["agentloop:run-1:1:1"])
        assert.deepStrictEqual(c.keys("c3"), ["agentloop:run-1:1:2"])
        assert.strictEqual(
          new Set(c.entries.filter((e) => e.call === "c2" && e.phase === "start").map((e) => e.pid)).size,
          2
        )
        assert.strictEqual(c.call("d1"), 1)
        assert.deepStrictEqual([c.turn(0), c.turn(1), c.turn(2)], [1, 1, 1])
        const { result, violations } = resultAndViolations(s.result, s.events)
        assert.strictEqual(result.reason, "stop")
        assert.deepStrictEqual(violations, [])
      }),
    60_000
  )

  it.live(
    "during a tool batch of a tool defined atMostOnce (no runner list): the running calls are answered " +
      "interrupted, not run again",
    () =>
      Effect.gen(function*() {
        const s = setup({ atMostOnce: true })
        const first = spawnProc("runner-start", s)
        yield* waitUntil("c2 and c3 running, c1 finished", slowRunning(s.log))
        yield* waitUntil("c1's result journaled", () => toolEndedIn(s.events, "c1"))
        yield* Effect.promise(() => new Promise((r) => setTimeout(r, 300)))
        yield* kill9(first)
        const second = spawnProc("runner-start", { ...s, approveAtStart: true })
        yield* awaitExit(second)
        const c = starts(s.log)
        assert.deepStrictEqual([c.call("c1"), c.call("c2"), c.call("c3")], [1, 1, 1])
        const { result, violations } = resultAndViolations(s.result, s.events)
        const details = result.messages.flatMap((m) => m.role === "toolResult" ? [[m.toolCallId, m.details]] : [])
        assert.deepStrictEqual(details.slice(0, 3), [["c1", undefined], ["c2", { interrupted: true }], ["c3", {
          interrupted: true
        }]])
        assert.deepStrictEqual(violations, [])
      }),
    60_000
  )

  it.live("during a model turn: the turn runs again, its message is appended once", () =>
    Effect.gen(function*() {
      const s = setup({ turnMs: 1500, slowMs: 50 })
      const first = spawnProc("runner-start", s)
      yield* waitUntil("turn 0 running", () => starts(s.log).turn(0) === 1)
      yield* kill9(first)
      const second = spawnProc("runner-start", { ...s, approveAtStart: true })
      yield* awaitExit(second)
      const c = starts(s.log)
      assert.strictEqual(c.turn(0), 2)
      assert.deepStrictEqual([c.call("c1"), c.call("c2"), c.call("c3")], [1, 1, 1])
      const { result, violations } = resultAndViolations(s.result, s.events)
      assert.strictEqual(result.messages.filter((m) => m.role === "assistant").length, 3)
      assert.deepStrictEqual(violations, [])
    }), 60_000)

  it.live(
    "while it waits for an approval: nothing runs again; an approval given by the next process completes it",
    () =>
      Effect.gen(function*() {
        const s = setup({ slowMs: 50 })
        const first = spawnProc("runner-start", s)
        yield* waitUntil(
          "the approval request",
          () => lines<DurableEvent>(s.events).some((e) => e.event.type === "approval_request")
        )
        yield* Effect.promise(() => new Promise((r) => setTimeout(r, 300))) // the run parks
        yield* kill9(first)
        const second = spawnProc("runner-start", { ...s, approveAtStart: true })
        yield* awaitExit(second)
        ranOnceAndStopped(s)
      }),
    60_000
  )

  it.live(
    "while it waits for an approval: an approval written by a client while no process runs is found by the next one",
    () =>
      Effect.gen(function*() {
        const s = setup({ slowMs: 50 })
        const first = spawnProc("runner-start", s)
        yield* waitUntil(
          "the approval request",
          () => lines<DurableEvent>(s.events).some((e) => e.event.type === "approval_request")
        )
        yield* Effect.promise(() => new Promise((r) => setTimeout(r, 300))) // the run parks
        yield* kill9(first)
        // the answer goes to the file alone: no runner reads it as it is written
        yield* awaitExit(spawnProc("client", { ...s, ops: ["approve"] }))
        const second = spawnProc("runner-start", s)
        yield* awaitExit(second)
        ranOnceAndStopped(s)
      }),
    60_000
  )
})
