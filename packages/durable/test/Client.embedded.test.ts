/**
 * A second process on the embedded engine's file, while the runner process holds it (what
 * `agentloop approve` and `agentloop runs` do in another terminal): `embeddedClientLayer` lists
 * runs, steers, approves and aborts without becoming a runner, and the runner picks each up
 * within about a second. A second runner on a held file does not start.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { join } from "node:path"
import type { DurableEvent, DurableRunStatus } from "../src/index.ts"
import { awaitExit, lines, resultAndViolations, spawnProc, starts, tempDir, waitUntil } from "./crash.ts"
import type { Proc } from "./crash.ts"

const setup = (extra: object = {}) => {
  const dir = tempDir("agentloop-durable-client-")
  return {
    engine: "embedded",
    db: join(dir, "runs.db"),
    runId: "run-1",
    log: join(dir, "side-effects.ndjson"),
    events: join(dir, "events.ndjson"),
    result: join(dir, "result.json"),
    slowMs: 50,
    ...extra
  }
}

interface ClientEntry {
  readonly kind: "client"
  readonly op: string
  readonly value?: unknown
  readonly t: number
}
const clientEntries = (log: string) => lines<ClientEntry>(log).filter((e) => e.kind === "client")

const approvalRequested = (events: string) => () =>
  lines<DurableEvent>(events).some((e) => e.event.type === "approval_request")

/** Runs a client-only process doing `ops` and waits for it to exit 0. */
const client = (s: ReturnType<typeof setup>, ops: ReadonlyArray<string>, all: Array<Proc>) =>
  Effect.gen(function*() {
    const proc = spawnProc("client", { ...s, ops })
    all.push(proc)
    yield* awaitExit(proc)
  })

const killAll = (all: Array<Proc>) =>
  Effect.addFinalizer(() => Effect.sync(() => all.forEach((p) => p.child.kill("SIGKILL"))))

describe("embedded engine: a client-only process beside the runner", () => {
  it.live(
    "steers, lists and approves while the runner holds the file; the runner picks the approval up within ~1 s",
    () =>
      Effect.gen(function*() {
        const s = setup()
        const all: Array<Proc> = []
        yield* killAll(all)
        const runner = spawnProc("runner-start", s)
        all.push(runner)
        // the run waits for the approval of d1 until the client answers, so the steering message
        // is certain to be pushed before the next boundary (after d1's result)
        yield* waitUntil("the approval request", approvalRequested(s.events), 60_000, all)
        yield* client(s, ["steer", "list", "approve"], all)
        yield* awaitExit(runner)
        yield* client(s, ["list"], all)

        const entries = clientEntries(s.log)
        assert.deepStrictEqual(entries.map((e) => e.op), ["steer", "list", "approve", "list"])
        const [waiting, ended] = entries.filter((e) => e.op === "list").map((e) =>
          e.value as ReadonlyArray<DurableRunStatus>
        )
        assert.deepStrictEqual(waiting!.map((r) => [r.runId, r.state]), [["run-1", "waiting"]])
        // what waits, with the call's tool and arguments (what `agentloop runs` shows, `agentloop approve` answers)
        assert.deepStrictEqual(waiting![0]!.approvals.map((a) => [a.runId, a.call.id, a.call.name, a.call.arguments]), [
          ["run-1", "d1", "deploy", { ms: 50 }]
        ])
        assert.deepStrictEqual(ended!.map((r) => [r.runId, r.state, r.reason, r.steps, r.approvals]), [
          ["run-1", "ended", "stop", 3, []]
        ])
        const approvedAt = entries.find((e) => e.op === "approve")!.t
        const d1 = starts(s.log).entries.find((e) => e.kind === "tool" && e.call === "d1" && e.phase === "start")
        const pickup = (d1 as unknown as { readonly t: number }).t - approvedAt
        console.log(`approval written by a client process -> the call runs in the runner process: ${pickup} ms`)
        assert.isBelow(pickup, 2000) // the runner reads its mailbox every 500 ms; a runner per process took ~20 s

        const { result, violations } = resultAndViolations(s.result, s.events)
        assert.strictEqual(result.reason, "stop")
        const contents = result.messages.map((m) => m.role === "toolResult" ? `result ${m.toolCallId}` : m.role)
        // the steering message joined at the next boundary: after d1's result, before the next request
        assert.deepStrictEqual(contents, [
          "user",
          "assistant",
          "result c1",
          "result c2",
          "result c3",
          "assistant",
          "result d1",
          "user",
          "assistant"
        ])
        assert.deepStrictEqual(result.messages[7], { role: "user", content: "steered" })
        assert.deepStrictEqual(["c1", "c2", "c3", "d1"].map(starts(s.log).call), [1, 1, 1, 1])
        assert.deepStrictEqual(violations, [])
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "a second runner on the held file does not start; an abort from a client ends the waiting run aborted",
    () =>
      Effect.gen(function*() {
        const s = setup()
        const all: Array<Proc> = []
        yield* killAll(all)
        const runner = spawnProc("runner-start", s)
        all.push(runner)
        yield* waitUntil("the approval request", approvalRequested(s.events), 60_000, all)
        const second = spawnProc("second-runner", s)
        all.push(second)
        const code = yield* Effect.promise(() => second.exited)
        assert.strictEqual(code, 1)
        assert.include(second.output(), "another process is the runner of")
        assert.strictEqual(starts(s.log).entries.filter((e) => e.kind === "process").length, 1)

        yield* client(s, ["abort"], all)
        yield* awaitExit(runner, 10_000)
        const { result, violations } = resultAndViolations(s.result, s.events)
        assert.strictEqual(result.reason, "aborted")
        const d1 = result.messages.find((m) => m.role === "toolResult" && m.toolCallId === "d1")
        assert.deepInclude(d1, { isError: true })
        assert.strictEqual(starts(s.log).call("d1"), 0)
        assert.deepStrictEqual(violations, [])
      }).pipe(Effect.scoped),
    90_000
  )
})
