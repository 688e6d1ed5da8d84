import { decodeSessionRecord, loadTranscript, pairingViolations } from "@agentloop/core"
import type { LoopEvent, ToolResultMessage, TranscriptRecord } from "@agentloop/core"
import { checkInvariants } from "@agentloop/testkit"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { buildTimeline, parseSessionText } from "../src/view/index.ts"
import {
  afterRun,
  countingScript,
  eventually,
  isSummaryRequest,
  jsonLines,
  killAll,
  makeWorkspace,
  providerFlags,
  scriptServer,
  sessionFiles,
  sleepingWith,
  startCli,
  testEnv,
  uniqueSleep
} from "./helpers/agent.ts"

const load = (file: string) => Effect.runPromise(loadTranscript(file).pipe(Effect.provide(NodeServices.layer)))

describe("agentloop --durable", () => {
  it("a durable run completes, the session is written as for any run, and agentloop runs lists it ended", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([
      {
        calls: [{ id: "c1", name: "write", args: { path: "hello.txt", content: "hi\n" } }],
        usage: { input: 100, output: 10 }
      },
      { text: "done", usage: { input: 120, output: 5 } }
    ])
    try {
      const cli = startCli(["run", "--durable", "--yes", ...providerFlags(server), "write hello.txt"], {
        cwd: ws,
        env: testEnv(ws)
      })
      const { code } = await cli.exited
      assert.strictEqual(code, 0, cli.output() + cli.stderr())
      assert.include(cli.output(), "✓ write hello.txt")
      assert.strictEqual(readFileSync(join(ws, "hello.txt"), "utf8"), "hi\n")
      const [file] = sessionFiles(ws)
      const lines = jsonLines(file!)
      const start = lines.find((l) => l["type"] === "run_start")!
      const runId = start["runId"] as string
      assert.match(runId, /^\d{8}-\d{6}-[a-z0-9]{4}\.1$/)
      const loaded = await load(file!)
      assert.deepStrictEqual(loaded.messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"])
      assert.deepStrictEqual(pairingViolations(loaded.messages), [])
      const runs = startCli(["runs"], { cwd: ws, env: testEnv(ws) })
      assert.strictEqual((await runs.exited).code, 0, runs.stderr())
      assert.include(runs.output(), `${runId}  `)
      assert.include(runs.output(), "ended stop after 2 step(s)")
      assert.isTrue(existsSync(join(ws, ".agentloop", "durable", `${runId.split(".")[0]}.db`)))
    } finally {
      await server.close()
    }
  }, 240_000)

  it(
    "a call waiting for approval is answered by agentloop approve from another process; bad answers are refused " +
      "with exit 2",
    async () => {
      const ws = makeWorkspace()
      const server = await scriptServer([
        { calls: [{ id: "b1", name: "bash", args: { command: "echo approved > approved.txt" } }] },
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
        const approveCli = async (...args: Array<string>) => {
          const p = startCli(["approve", ...args], { cwd: ws, env: testEnv(ws) })
          const { code } = await p.exited
          return { code, out: p.output(), err: p.stderr() }
        }
        const [file] = sessionFiles(ws)
        const sessionBefore = readFileSync(file!, "utf8")
        const [unknownRun, unknownCall, badAnswer, listed, second] = await Promise.all([
          approveCli("20260101-000000-zzzz.1", "b1", "y"),
          approveCli(runId, "nope", "y"),
          approveCli(runId, "b1", "maybe"),
          (async () => {
            const p = startCli(["runs"], { cwd: ws, env: testEnv(ws) })
            await p.exited
            return p.output()
          })(),
          // the same command while the first process still runs the run: refused, the session left alone
          (async () => {
            const p = startCli(["run", "--durable", ...providerFlags(server), "needs approval"], {
              cwd: ws,
              env: testEnv(ws)
            })
            const { code } = await p.exited
            return { code, err: p.stderr() }
          })()
        ])
        assert.strictEqual(second.code, 2)
        assert.include(second.err, `is being run by another agentloop process right now`)
        assert.strictEqual(readFileSync(file!, "utf8"), sessionBefore)
        assert.strictEqual(server.bodies.length, 1)
        assert.strictEqual(unknownRun.code, 2)
        assert.strictEqual(
          unknownRun.err,
          `agentloop: unknown run 20260101-000000-zzzz.1 in ${ws} (agentloop runs lists them)\n`
        )
        assert.strictEqual(unknownCall.code, 2)
        assert.include(unknownCall.err, `run ${runId} has no approval waiting for call nope (waiting: b1)`)
        assert.strictEqual(badAnswer.code, 2)
        assert.include(badAnswer.err, `the answer must be y or n, not "maybe"`)
        assert.include(listed, `${runId}  `)
        assert.include(listed, "waiting for approval: b1 (bash)")
        assert.isFalse(existsSync(join(ws, "approved.txt")), "nothing ran before the answer")
        const yes = await approveCli(runId, "b1", "y")
        assert.strictEqual(yes.code, 0, yes.err)
        assert.include(yes.out, `approved: call b1 (bash) of run ${runId}`)
        const { code } = await cli.exited
        assert.strictEqual(code, 0, cli.output() + cli.stderr())
        assert.strictEqual(readFileSync(join(ws, "approved.txt"), "utf8"), "approved\n")
        assert.include(cli.output(), "approved from another terminal")
        // every record the CLI wrote is one of core's session records, as written
        for (const l of jsonLines(file!)) {
          if (typeof l["type"] === "string") {
            assert.isTrue(decodeSessionRecord(l as TranscriptRecord)?.ok, JSON.stringify(l))
          }
        }
        const approvals = jsonLines(file!).filter((l) => l["type"] === "approval")
        assert.deepStrictEqual(approvals.map((a) => [a["toolCallId"], a["decision"], a["by"]]), [[
          "b1",
          "approved",
          "remote"
        ]])
        assert.isNumber(approvals[0]!["askedAt"])
        const again = await approveCli(runId, "b1", "y")
        assert.strictEqual(again.code, 2)
        assert.include(again.err, `run ${runId} has ended (stop): nothing to approve`)
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it("kill -9 in the middle of a batch: the same command again resumes the run, which completes paired", async () => {
    const ws = makeWorkspace()
    writeFileSync(join(ws, "a.txt"), "content of a\n")
    const marker = uniqueSleep()
    // the first attempt of the bash call sleeps (and is killed), the second one finishes
    const command =
      `echo attempt >> count.txt; if [ "$(wc -l < count.txt)" -lt 2 ]; then sleep ${marker}; fi; echo finished`
    const server = await scriptServer([
      { calls: [{ id: "r1", name: "read", args: { path: "a.txt" } }, { id: "b1", name: "bash", args: { command } }] },
      { text: "all done" }
    ])
    const args = ["run", "--durable", "--yes", ...providerFlags(server), "read and run"]
    try {
      const first = startCli(args, { cwd: ws, env: testEnv(ws) })
      await first.waitFor("✓ read a.txt", 90_000)
      assert.isTrue(await eventually(() => sleepingWith(marker).length > 0, 90_000), first.output())
      first.child.kill("SIGKILL")
      await first.exited
      killAll(marker)
      const [file] = sessionFiles(ws)
      const before = jsonLines(file!)
      assert.isUndefined(before.find((l) => l["type"] === "run_end"), "the run did not end")

      const second = startCli(args, { cwd: ws, env: testEnv(ws) })
      const { code } = await second.exited
      assert.strictEqual(code, 0, second.output() + second.stderr())
      assert.include(second.output(), "↻ resuming the durable run")
      assert.include(second.output(), "all done")
      assert.strictEqual(sessionFiles(ws).length, 1, "the same session goes on")
      assert.strictEqual(server.bodies.length, 2, "the journaled turn was not asked again")
      assert.strictEqual(
        readFileSync(join(ws, "count.txt"), "utf8"),
        "attempt\nattempt\n",
        "the interrupted call ran again"
      )

      const lines = jsonLines(file!)
      const ends = lines.filter((l) => l["type"] === "run_end")
      assert.strictEqual(ends.length, 1)
      assert.strictEqual(ends[0]!["reason"], "stop")
      const loaded = await load(file!)
      assert.strictEqual(loaded.repaired, 0, "every call has its result in the file")
      const messages = loaded.messages
      assert.deepStrictEqual(messages.map((m) => m.role), [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "assistant"
      ])
      const bash = messages[3] as ToolResultMessage
      assert.strictEqual(bash.toolCallId, "b1")
      assert.include(JSON.stringify(bash.content), "finished")
      const events: Array<LoopEvent> = [
        ...messages.slice(1).map((m): LoopEvent =>
          m.role === "assistant"
            ? { type: "assistant_message", message: m }
            : { type: "tool_end", result: m as ToolResultMessage }
        ),
        { type: "turn_end", reason: "stop", steps: ends[0]!["steps"] as number }
      ]
      assert.deepStrictEqual(
        checkInvariants({
          input: messages.slice(0, 1),
          result: { messages, reason: "stop", steps: ends[0]!["steps"] as number },
          events
        }),
        []
      )
      // the viewer's checks hold too: the call that ran twice is recorded once (its last run), each turn once
      const timeline = buildTimeline(parseSessionText(readFileSync(file!, "utf8")))
      for (const check of timeline.invariants) assert.deepStrictEqual([check.id, check.violations], [check.id, []])
      const lanes = timeline.runs[0]!.turns[0]!.lanes
      assert.deepStrictEqual(lanes.map((l) => [l.toolCallId, l.status, l.startedAt !== undefined]), [
        ["r1", "ok", true],
        ["b1", "ok", true]
      ])
    } finally {
      killAll(marker)
      await server.close()
    }
  }, 240_000)

  it(
    "chat --durable in a terminal: the first answer wins, from this terminal (a: always for the tool) or " +
      "agentloop approve in another; Ctrl-C aborts",
    async () => {
      const ws = makeWorkspace()
      const server = await scriptServer([
        { calls: [{ id: "c1", name: "write", args: { path: "a.txt", content: "one\n" } }] },
        { calls: [{ id: "c2", name: "bash", args: { command: "echo two > b.txt" } }] },
        { text: "all done" },
        {
          calls: [
            { id: "c3", name: "write", args: { path: "c.txt", content: "three\n" } },
            { id: "c4", name: "bash", args: { command: "echo four > d.txt" } }
          ]
        }
      ])
      try {
        const cli = startCli(["chat", "--durable", ...providerFlags(server)], { cwd: ws, env: testEnv(ws), pty: true })
        await cli.waitFor("/help for commands", 90_000)
        cli.write("make files\r")
        await cli.waitFor("allow?", 90_000)
        assert.match(cli.output(), /or from another terminal: agentloop approve \S+ c1 y\|n/)
        let at = cli.output().length
        cli.write("a\r")
        await cli.waitFor(/agentloop approve (\S+) c2 y\|n/, 90_000, at)
        await cli.waitFor("allow?", 90_000, at)
        const runId = /agentloop approve (\S+) c2/.exec(cli.output().slice(at))![1]!
        at = cli.output().length
        const other = startCli(["approve", runId, "c2", "n", "use", "the", "other", "file"], {
          cwd: ws,
          env: testEnv(ws)
        })
        assert.strictEqual((await other.exited).code, 0, other.stderr())
        await cli.waitFor("bash c2: denied from another terminal", 90_000, at)
        // Ctrl-C at a question aborts the run: the waiting call is answered skipped, the prompt comes back
        at = await afterRun(cli, "all done", "one more", at)
        await cli.waitFor("allow?", 90_000, at)
        cli.write("\u0003")
        await cli.waitFor("run ended: aborted", 90_000, at)
        await cli.waitFor("> ", 90_000, cli.output().lastIndexOf("run ended: aborted"))
        cli.write("/exit\r")
        assert.strictEqual((await cli.exited).code, 0, cli.output())
        assert.strictEqual(readFileSync(join(ws, "c.txt"), "utf8"), "three\n", "write was allowed for the session (a)")
        assert.isFalse(existsSync(join(ws, "d.txt")), "the call waiting when Ctrl-C came did not run")
        assert.strictEqual(server.bodies.length, 4, "no request after the abort")
        assert.strictEqual(readFileSync(join(ws, "a.txt"), "utf8"), "one\n")
        assert.isFalse(existsSync(join(ws, "b.txt")), "the call denied from the other terminal did not run")
        const third = JSON.stringify(server.bodies[2]!.body["messages"])
        assert.include(third, "the user denied this call: use the other file")
        const [file] = sessionFiles(ws)
        const lines = jsonLines(file!)
        assert.deepStrictEqual(lines.filter((l) => l["type"] === "run_end").map((l) => l["reason"]), [
          "stop",
          "aborted"
        ])
        const loaded = await load(file!)
        assert.strictEqual(loaded.repaired, 0)
        const last = loaded.messages[loaded.messages.length - 1] as ToolResultMessage
        assert.deepStrictEqual([last.toolCallId, (last.details as { reason?: string }).reason], ["c4", "aborted"])
        const approvals = lines.filter((l) => l["type"] === "approval")
        assert.deepStrictEqual(
          approvals.map((a) => [a["toolCallId"], a["decision"], a["by"], a["reason"], typeof a["askedAt"]]),
          [
            ["c1", "always", "user", undefined, "number"],
            ["c2", "denied", "remote", "use the other file", "number"],
            ["c3", "approved", "policy", "always", "undefined"]
          ]
        )
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it(
    "SIGTERM keeps a run waiting for approval; answered while no process runs it, the same command again finishes it",
    async () => {
      const ws = makeWorkspace()
      const server = await scriptServer([
        { calls: [{ id: "w1", name: "write", args: { path: "later.txt", content: "written later\n" } }] },
        { text: "written" }
      ])
      const args = ["run", "--durable", ...providerFlags(server), "write it later"]
      try {
        const first = startCli(args, { cwd: ws, env: testEnv(ws) })
        first.endInput()
        await first.waitFor(/agentloop approve (\S+) w1 y\|n/, 90_000)
        const runId = /agentloop approve (\S+) w1/.exec(first.output())![1]!
        first.child.kill("SIGTERM")
        assert.strictEqual((await first.exited).code, 143)
        assert.include(first.stderr(), `the durable run ${runId} is kept: run the same command again to resume it`)

        const list = startCli(["runs"], { cwd: ws, env: testEnv(ws) })
        await list.exited
        assert.include(list.output(), `waiting for approval: w1 (write) (no process is running it`)
        const yes = startCli(["approve", runId, "w1", "y"], { cwd: ws, env: testEnv(ws) })
        assert.strictEqual((await yes.exited).code, 0, yes.stderr())
        assert.isFalse(existsSync(join(ws, "later.txt")), "nothing runs the call until the run resumes")

        const second = startCli(args, { cwd: ws, env: testEnv(ws) })
        second.endInput()
        assert.strictEqual((await second.exited).code, 0, second.output() + second.stderr())
        assert.include(second.output(), "approved from another terminal")
        assert.strictEqual(readFileSync(join(ws, "later.txt"), "utf8"), "written later\n")
        assert.strictEqual(server.bodies.length, 2)
        const [file] = sessionFiles(ws)
        const lines = jsonLines(file!)
        assert.deepStrictEqual(lines.filter((l) => l["type"] === "approval").map((a) => [a["toolCallId"], a["by"]]), [[
          "w1",
          "remote"
        ]])
        assert.deepStrictEqual(lines.filter((l) => l["type"] === "run_end").map((l) => [l["runId"], l["reason"]]), [[
          runId,
          "stop"
        ]])
        const loaded = await load(file!)
        assert.strictEqual(loaded.repaired, 0)
        assert.deepStrictEqual(loaded.messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"])
        const timeline = buildTimeline(parseSessionText(readFileSync(file!, "utf8")))
        for (const check of timeline.invariants) assert.deepStrictEqual([check.id, check.violations], [check.id, []])
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it("agentloop abort from another process ends a waiting run aborted, the waiting call paired", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([{ calls: [{ id: "x1", name: "bash", args: { command: "touch never" } }] }])
    try {
      const cli = startCli(["run", "--durable", ...providerFlags(server), "abort me"], { cwd: ws, env: testEnv(ws) })
      cli.endInput()
      await cli.waitFor(/agentloop approve (\S+) x1 y\|n/, 90_000)
      const runId = /agentloop approve (\S+) x1/.exec(cli.output())![1]!
      const [unknown, abort] = await Promise.all(
        [["abort", "20260101-000000-zzzz.1"], ["abort", runId]].map(async (args) => {
          const p = startCli(args, { cwd: ws, env: testEnv(ws) })
          const { code } = await p.exited
          return { code, out: p.output(), err: p.stderr() }
        })
      )
      assert.strictEqual(unknown!.code, 2)
      assert.include(unknown!.err, "unknown run 20260101-000000-zzzz.1")
      assert.strictEqual(abort!.code, 0, abort!.err)
      assert.include(abort!.out, `abort requested: run ${runId}`)
      assert.strictEqual((await cli.exited).code, 130, cli.output() + cli.stderr())
      assert.include(cli.stderr(), "run ended: aborted")
      assert.isFalse(existsSync(join(ws, "never")))
      const [file] = sessionFiles(ws)
      const loaded = await load(file!)
      const last = loaded.messages[loaded.messages.length - 1] as ToolResultMessage
      assert.deepStrictEqual([loaded.repaired, last.toolCallId, (last.details as { reason?: string }).reason], [
        0,
        "x1",
        "aborted"
      ])
      const again = startCli(["abort", runId], { cwd: ws, env: testEnv(ws) })
      assert.strictEqual((await again.exited).code, 2)
      assert.include(again.stderr(), `run ${runId} has ended (aborted): nothing to abort`)
    } finally {
      await server.close()
    }
  }, 240_000)

  it(
    "compaction works in a durable run: past 75% of --context-window the request carries the summary, the file " +
      "keeps everything",
    async () => {
      const ws = makeWorkspace()
      const server = await scriptServer(countingScript(3))
      try {
        const cli = startCli([
          "run",
          "--durable",
          "--yes",
          "--context-window",
          "1000",
          ...providerFlags(server),
          "count"
        ], {
          cwd: ws,
          env: testEnv(ws)
        })
        const { code } = await cli.exited
        assert.strictEqual(code, 0, cli.output() + cli.stderr())
        assert.include(cli.output(), "compacted:")
        const requests = server.bodies.filter((b) => !isSummaryRequest(b.body))
        const last = JSON.stringify(requests[requests.length - 1]!.body["messages"])
        assert.include(last, "[agentloop: summary of the earlier conversation")
        assert.notInclude(last, "\\n399\\n", "the big output is summarised away")
        const [file] = sessionFiles(ws)
        const loaded = await load(file!)
        assert.strictEqual(loaded.messages.length, 1 + 3 * 2 + 1, "the session file keeps the full history")
        assert.include(JSON.stringify(loaded.messages), "399")
        assert.isDefined(jsonLines(file!).find((l) => l["type"] === "compaction"))
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it(
    "a durable run writes the session file an in-memory run writes: a turn_start per request with its step, after " +
      "the compaction that request needed",
    async () => {
      /** The records and messages of a session file, without what differs from run to run (times, ids). */
      const shapeOf = (file: string) =>
        jsonLines(file).flatMap((l) => {
          switch (l["type"]) {
            case "session":
              return []
            case "turn_start":
              return [`turn_start ${l["step"]}`]
            case "compaction":
              return [`compaction ${l["summarized"]} ${l["kept"]}`]
            case "tool_start":
            case "tool_end":
            case "approval":
              return [`${l["type"]} ${l["toolCallId"]}`]
            case undefined:
              return [`${l["role"]}`]
            default:
              return [`${l["type"]}`]
          }
        })
      const runOnce = async (durable: boolean) => {
        const ws = makeWorkspace()
        const server = await scriptServer(countingScript(3))
        try {
          const cli = startCli([
            "run",
            ...(durable ? ["--durable"] : []),
            "--yes",
            "--context-window",
            "1000",
            ...providerFlags(server),
            "count"
          ], { cwd: ws, env: testEnv(ws) })
          const { code } = await cli.exited
          assert.strictEqual(code, 0, cli.output() + cli.stderr())
          const [file] = sessionFiles(ws)
          return shapeOf(file!)
        } finally {
          await server.close()
        }
      }
      const [inMemory, durable] = await Promise.all([runOnce(false), runOnce(true)])
      assert.include(inMemory, "turn_start 4")
      assert.isTrue(inMemory.some((l) => l.startsWith("compaction ")), "the run was compacted")
      // the compaction comes before the turn_start of the request it shrank
      const compacted = inMemory.findIndex((l) => l.startsWith("compaction "))
      assert.match(inMemory[compacted + 1]!, /^turn_start \d$/)
      assert.deepStrictEqual(durable, inMemory)
    },
    240_000
  )

  it(
    "kill -9 during a model turn: the same command again asks the model again, the session keeps that turn once",
    async () => {
      const ws = makeWorkspace()
      const server = await scriptServer((
        _body,
        index
      ) => (index === 0 ? { hang: true } : { text: "answered after the restart" }))
      const args = ["run", "--durable", "--yes", ...providerFlags(server), "answer me"]
      try {
        const first = startCli(args, { cwd: ws, env: testEnv(ws) })
        assert.isTrue(await eventually(() => server.bodies.length === 1, 90_000), first.output() + first.stderr())
        first.child.kill("SIGKILL")
        await first.exited
        const second = startCli(args, { cwd: ws, env: testEnv(ws) })
        assert.strictEqual((await second.exited).code, 0, second.output() + second.stderr())
        assert.include(second.output(), "answered after the restart")
        assert.strictEqual(server.bodies.length, 2, "the interrupted turn was asked again, once")
        const [file] = sessionFiles(ws)
        const lines = jsonLines(file!)
        assert.deepStrictEqual(lines.filter((l) => l["type"] === "turn_start").map((l) => l["step"]), [1])
        const loaded = await load(file!)
        assert.deepStrictEqual(loaded.messages.map((m) => m.role), ["user", "assistant"])
        const timeline = buildTimeline(parseSessionText(readFileSync(file!, "utf8")))
        for (const check of timeline.invariants) assert.deepStrictEqual([check.id, check.violations], [check.id, []])
      } finally {
        await server.close()
      }
    },
    240_000
  )
})
