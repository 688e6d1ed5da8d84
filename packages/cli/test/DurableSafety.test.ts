import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs"
import { basename, join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { parseAnswer } from "../src/Approvals.ts"
import {
  abortDurableRun,
  approveRun,
  listWorkspaceRuns,
  parseApproveAnswer,
  prepareDatabase,
  runnerBusy
} from "../src/Durable.ts"
import { makeWorkspace, providerFlags, scriptServer, startCli, testEnv } from "./helpers/agent.ts"

const SID = "20261201-010000-abcd"

/** A session whose durable run `${SID}.1` has not ended (so the commands open its database). */
const plantSession = (ws: string, lines: ReadonlyArray<Record<string, unknown>> = []) => {
  mkdirSync(join(ws, ".agentloop", "sessions"), { recursive: true })
  const records = [
    { type: "session", version: 1, id: SID, at: 1, cwd: ws, provider: "openai-compat", model: "m", systemPrompt: "s" },
    { type: "run_start", at: 2, prompt: "task", runId: `${SID}.1` },
    { role: "user", content: "task", timestamp: 2 },
    ...lines
  ]
  writeFileSync(
    join(ws, ".agentloop", "sessions", `${SID}.jsonl`),
    records.map((r) => `${JSON.stringify(r)}\n`).join("")
  )
}

/** A SQLite database someone cares about, outside the workspace. */
const preciousDatabase = (folder: string, name = "precious.db") => {
  const file = join(folder, name)
  const db = new DatabaseSync(file)
  db.exec("CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('keep me')")
  db.close()
  return file
}

/** Every file of a folder with its bytes (to see that nothing there changed or appeared). */
const snapshot = (folder: string) =>
  Object.fromEntries(readdirSync(folder).sort().map((n) => [n, readFileSync(join(folder, n)).toString("base64")]))

/** What every command that opens a session's database does on a workspace (none may throw). */
const everyCommand = (ws: string) =>
  Effect.gen(function*() {
    const runs = yield* listWorkspaceRuns(ws)
    const approve = yield* Effect.flip(approveRun(ws, `${SID}.1`, "c1", "y", []))
    const abort = yield* Effect.flip(abortDurableRun(ws, `${SID}.1`))
    const busy = runnerBusy(ws, SID)
    const prepare = yield* Effect.flip(prepareDatabase(ws, SID))
    return { runs, approve: approve.message, abort: abort.message, busy, prepare: prepare.message }
  })

const ESC = /[\u001b\u009b\u009d\u0090]/

describe("durable runs' files stay in <workspace>/.agentloop/durable", () => {
  it.effect(
    "run ids with .., /, absolute paths, NUL or 5,000 characters name no file: unknown run, nothing read " +
      "outside, no database created",
    () =>
      Effect.gen(function*() {
        const ws = makeWorkspace()
        const outside = makeWorkspace()
        // a session and a database two folders up from the sessions and durable folders: what `..` would reach
        const rel = `../../../${basename(outside)}/evil`
        writeFileSync(
          join(outside, "evil.jsonl"),
          `${JSON.stringify({ type: "run_start", at: 1, prompt: "p", runId: `${rel}.1` })}\n`
        )
        const before = snapshot(outside)
        plantSession(ws)
        const ids = [
          `${rel}.1`,
          `${outside}/evil.1`,
          "x\u0000y.1",
          `${"a".repeat(5000)}.1`,
          "a/b.1",
          "..",
          `${SID}.1/../x.1`,
          "x.1"
        ]
        for (const id of ids) {
          const approve = yield* Effect.flip(approveRun(ws, id, "c1", "y", []))
          const abort = yield* Effect.flip(abortDurableRun(ws, id))
          for (const e of [approve, abort]) {
            assert.match(e.message, /^unknown run /, id.slice(0, 40))
            assert.isBelow(e.message.length, 300, "a long id is cut in the message")
            assert.notInclude(e.message, "\u0000")
          }
        }
        // a well-formed id of a session without a database: no empty database is created for it
        const missing = yield* Effect.flip(approveRun(ws, `${SID}.1`, "c1", "y", []))
        assert.strictEqual(
          missing.message,
          `no durable runs database at ${join(ws, ".agentloop", "durable", `${SID}.db`)}`
        )
        assert.isFalse(existsSync(join(ws, ".agentloop", "durable")), "no database folder made by approve or abort")
        assert.isFalse(runnerBusy(ws, SID))
        assert.isFalse(existsSync(join(ws, ".agentloop", "durable")), "nor by the runner check")
        assert.deepStrictEqual(snapshot(outside), before, "nothing outside was created or changed")
      })
  )

  it.effect(
    "a .agentloop/durable that is a link out of the workspace is refused by runs, approve, abort and the " +
      "runner",
    () =>
      Effect.gen(function*() {
        const ws = makeWorkspace()
        const outside = makeWorkspace()
        preciousDatabase(outside, `${SID}.db`)
        plantSession(ws)
        symlinkSync(outside, join(ws, ".agentloop", "durable"))
        const before = snapshot(outside)
        const got = yield* everyCommand(ws)
        assert.include(got.runs[0]!.state, "leads out of the workspace (a link)")
        assert.include(got.approve, "leads out of the workspace (a link)")
        assert.include(got.abort, "leads out of the workspace (a link)")
        assert.include(got.prepare, "is outside the workspace (the symbolic link .agentloop/durable points outside)")
        assert.isFalse(got.busy)
        assert.deepStrictEqual(
          snapshot(outside),
          before,
          "the database out there was neither opened for writing nor joined by -wal/-shm/-runner files"
        )
      })
  )

  for (const which of ["db", "db-wal", "db-shm", "db-runner"] as const) {
    it.effect(`a ${SID}.${which} that is a symbolic link is refused; its target is not touched nor created`, () =>
      Effect.gen(function*() {
        const ws = makeWorkspace()
        const outside = makeWorkspace()
        plantSession(ws)
        mkdirSync(join(ws, ".agentloop", "durable"))
        const target = which === "db" ? preciousDatabase(outside) : join(outside, `planted-${which}`)
        if (which !== "db") preciousDatabase(join(ws, ".agentloop", "durable"), `${SID}.db`)
        symlinkSync(target, join(ws, ".agentloop", "durable", `${SID}.${which}`))
        const before = snapshot(outside)
        const got = yield* everyCommand(ws)
        const refused = `${SID}.${which} is a link: refusing to open it`
        assert.include(got.runs[0]!.state, refused)
        assert.include(got.approve, refused)
        assert.include(got.abort, refused)
        assert.include(got.prepare, refused)
        assert.isFalse(got.busy)
        assert.deepStrictEqual(snapshot(outside), before, "nothing outside was created or changed")
      }))
  }

  it.effect("a database that is a hard link to a file elsewhere is refused", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      const outside = makeWorkspace()
      const precious = preciousDatabase(outside)
      plantSession(ws)
      mkdirSync(join(ws, ".agentloop", "durable"))
      linkSync(precious, join(ws, ".agentloop", "durable", `${SID}.db`))
      const before = snapshot(outside)
      const got = yield* everyCommand(ws)
      assert.include(got.approve, `${SID}.db has another hard link: refusing to open it`)
      assert.include(got.runs[0]!.state, "has another hard link")
      assert.include(got.prepare, "has another hard link")
      assert.deepStrictEqual(snapshot(outside), before)
    }))

  it.effect("a session file that is a link out of the workspace is not read by runs, approve or abort", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      const outside = makeWorkspace()
      plantSession(outside)
      mkdirSync(join(ws, ".agentloop", "sessions"), { recursive: true })
      symlinkSync(
        join(outside, ".agentloop", "sessions", `${SID}.jsonl`),
        join(ws, ".agentloop", "sessions", `${SID}.jsonl`)
      )
      assert.deepStrictEqual(yield* listWorkspaceRuns(ws), [])
      const approve = yield* Effect.flip(approveRun(ws, `${SID}.1`, "c1", "y", []))
      assert.match(approve.message, /^unknown run /)
    }))
})

describe("no control sequences from untrusted text", () => {
  it.effect(
    "agentloop runs: a session file's run ids, reasons and prompts with escapes reach the output without " +
      "them",
    () =>
      Effect.gen(function*() {
        const ws = makeWorkspace()
        plantSession(ws, [
          { type: "run_end", at: 3, runId: `${SID}.1`, reason: "stop\u001b]52;c;ZXZpbA==\u0007\u009b2J", steps: 1 },
          { type: "run_start", at: 4, prompt: "clear \u001b[2J\u001b]0;title\u0007screen", runId: `${SID}.2` },
          { type: "run_end", at: 5, runId: `${SID}.2`, reason: "stop", steps: 1 },
          // a run id that is not this session's (nor a run id at all) is not listed
          { type: "run_start", at: 6, prompt: "x", runId: "\u001b]52;c;QUFB\u0007.1" },
          { type: "run_start", at: 7, prompt: "x", runId: "other-session.1" }
        ])
        const runs = yield* listWorkspaceRuns(ws)
        assert.deepStrictEqual(runs.map((r) => r.runId), [`${SID}.1`, `${SID}.2`])
        for (const r of runs) {
          assert.notMatch(r.state, ESC)
          assert.notMatch(r.prompt, ESC)
        }
        // a reason is a RunReason (core's SessionRecord): the run_end with escapes in it is no record,
        // so the run shows as not ended, and nothing of it reaches the output
        assert.match(runs[0]!.state, /^unknown: no durable runs database/)
        assert.strictEqual(runs[1]!.state, "ended stop after 1 step(s)")
        assert.strictEqual(runs[1]!.prompt, "clear screen")
      })
  )

  it("an approve reason is plain text (from agentloop approve and from the terminal's n REASON)", () => {
    const parsed = parseApproveAnswer("n", ["use\u001b]52;c;ZXZpbA==\u0007", "pnpm\u009b2J\u001b[31m!"])
    assert.deepStrictEqual(parsed, { approved: false, reason: "use pnpm!" })
    assert.deepStrictEqual(parseAnswer("n \u001b]0;x\u0007use pnpm\u001b[2J"), { kind: "no", reason: "use pnpm" })
  })

  it("agentloop approve with escapes in its arguments: the error line carries none", async () => {
    const ws = makeWorkspace()
    plantSession(ws)
    const run = async (...args: Array<string>) => {
      const p = startCli(["approve", ...args], { cwd: ws, env: testEnv(ws) })
      const { code } = await p.exited
      return { code, err: p.stderr(), out: p.output() }
    }
    const [badRun, badAnswer] = await Promise.all([
      run("\u001b]52;c;ZXZpbA==\u0007x.1", "c1", "y"),
      run(`${SID}.1`, "c1", "\u001b[2Jmaybe")
    ])
    assert.deepStrictEqual([badRun.code, badAnswer.code], [2, 2])
    assert.strictEqual(badRun.err, `agentloop: unknown run x.1 in ${ws} (agentloop runs lists them)\n`)
    assert.strictEqual(badAnswer.err, `agentloop: the answer must be y or n, not "maybe"\n`)
    assert.isFalse(existsSync(join(ws, ".agentloop", "durable")))
  }, 60_000)

  it(
    "a call id with escapes from the model: the run's lines and agentloop runs show it without them, and that " +
      "form approves it",
    async () => {
      const ws = makeWorkspace()
      const id = "b\u001b]52;c;ZXZpbA==\u0007\u001b[2J1"
      const server = await scriptServer([
        { calls: [{ id, name: "bash", args: { command: "echo approved > approved.txt" } }] },
        { text: "done" }
      ])
      try {
        const cli = startCli(["run", "--durable", ...providerFlags(server), "needs approval"], {
          cwd: ws,
          env: testEnv(ws)
        })
        cli.endInput()
        await cli.waitFor(/agentloop approve (\S+) b1 y\|n/, 90_000)
        const runId = /agentloop approve (\S+) b1/.exec(cli.output())![1]!
        const runs = startCli(["runs"], { cwd: ws, env: testEnv(ws) })
        await runs.exited
        assert.include(runs.output(), "waiting for approval: b1 (bash)")
        const approve = startCli(["approve", runId, "b1", "y"], { cwd: ws, env: testEnv(ws) })
        assert.strictEqual((await approve.exited).code, 0, approve.stderr())
        assert.strictEqual(approve.output(), `approved: call b1 (bash) of run ${runId}\n`)
        assert.strictEqual((await cli.exited).code, 0, cli.stderr())
        assert.isTrue(existsSync(join(ws, "approved.txt")))
        for (const text of [cli.output(), cli.stderr(), runs.output(), approve.output()]) assert.notMatch(text, ESC)
      } finally {
        await server.close()
      }
    },
    240_000
  )
})
