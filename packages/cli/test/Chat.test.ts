import { pairingViolations, parseTranscript } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import {
  answer,
  countingScript,
  eventually,
  isSummaryRequest,
  jsonLines,
  makeWorkspace,
  processesWith,
  providerFlags,
  scriptServer,
  sessionFiles,
  startCli,
  testEnv,
  uniqueSleep
} from "./helpers/agent.ts"

const transcriptOf = (file: string) => Effect.runSync(parseTranscript(readFileSync(file, "utf8"), file))

describe("agentloop chat (in a pseudo-terminal)", () => {
  it("approvals answered y, n with a reason, and a (always for this tool); /cost; /compact", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer((body, index) => {
      if (isSummaryRequest(body)) {
        return { text: "The user asked for files; a.txt and b.txt were written.", usage: { input: 50, output: 9 } }
      }
      return [
        {
          calls: [{ id: "c1", name: "bash", args: { command: "echo one > a.txt" } }],
          usage: { input: 100, output: 10 }
        },
        {
          calls: [{ id: "c2", name: "edit", args: { path: "a.txt", oldText: "one", newText: "two" } }],
          usage: { input: 110, output: 10 }
        },
        {
          calls: [{ id: "c3", name: "write", args: { path: "b.txt", content: "bee\n" } }],
          usage: { input: 120, output: 10 }
        },
        {
          calls: [{ id: "c4", name: "write", args: { path: "c.txt", content: "sea\n" } }],
          usage: { input: 130, output: 10 }
        },
        { text: "all done", usage: { input: 140, output: 10 } }
      ][index]!
    })
    try {
      // a model the providers' price table knows, so /cost shows money
      const flags = providerFlags(server).map((f) => (f === "test-model" ? "gpt-4.1" : f))
      const cli = startCli(["chat", ...flags], { cwd: ws, env: testEnv(ws), pty: true })
      let at = await answer(cli, "/help for commands", "make some files")
      at = await answer(cli, "allow?", "y", at)
      assert.include(cli.output(), "$ echo one > a.txt", "the command is shown before it runs")
      at = await answer(cli, "allow?", "n not this one", at)
      assert.include(cli.output().slice(0, cli.output().length), "- one")
      assert.include(cli.output(), "+ two", "the edit's diff is shown")
      at = await answer(cli, "allow?", "a", at)
      await cli.waitFor("all done", 90_000, at)
      at = await answer(cli, /usage:[^\n]*\n/, "/cost", at)
      // 600 input tokens at $2/M and 50 output tokens at $8/M
      await cli.waitFor(/session: +600 tokens in, 50 out · \$0\.0016/, 90_000, at)
      assert.match(cli.output().slice(at), /last run: +600 tokens in, 50 out · \$0\.0016/)
      at = await answer(cli, /session: +600/, "/compact", at)
      await cli.waitFor("compacted:", 90_000, at)
      cli.write("/exit\r")
      const { code } = await cli.exited
      assert.strictEqual(code, 0, cli.output())
      // the approvals, in the session file
      const [file] = sessionFiles(ws)
      const lines = jsonLines(file!)
      const approvals = lines.filter((l) => l["type"] === "approval").map((
        l
      ) => [l["name"], l["decision"], l["by"], l["reason"]])
      assert.deepStrictEqual(approvals, [
        ["bash", "approved", "user", undefined],
        ["edit", "denied", "user", "not this one"],
        ["write", "always", "user", undefined],
        ["write", "approved", "policy", "always"]
      ])
      assert.strictEqual(readFileSync(join(ws, "a.txt"), "utf8"), "one\n", "the denied edit did not run")
      assert.strictEqual(readFileSync(join(ws, "c.txt"), "utf8"), "sea\n", "the second write ran without asking")
      // the model saw the reason
      const third = server.bodies[2]!.body["messages"] as Array<{ role: string; content: unknown }>
      assert.include(JSON.stringify(third[third.length - 1]), "the user denied this call: not this one")
      assert.isTrue(lines.some((l) => l["type"] === "compaction"), "/compact recorded a summary")
      assert.deepStrictEqual(pairingViolations(transcriptOf(file!).messages), [])
    } finally {
      await server.close()
    }
  }, 240_000)

  it(
    "Ctrl-C during a bash call aborts the run, leaves no process, keeps the session paired; twice exits; " +
      "--continue picks it up",
    async () => {
      const ws = makeWorkspace()
      const sleep = uniqueSleep()
      const server = await scriptServer((_body, index) => {
        if (index === 0) {
          return {
            calls: [{
              id: "toolu_1",
              name: "bash",
              args: { command: `sleep ${sleep} & echo started > started.txt; wait` }
            }]
          }
        }
        return { text: "continued" }
      })
      try {
        const env = testEnv(ws, { AGENTLOOP_TEST_KEY: "sk-test-secret" })
        const cli = startCli(["chat", "--yes", ...providerFlags(server, "anthropic")], { cwd: ws, env, pty: true })
        await answer(cli, "/help for commands", "sleep please")
        await cli.waitFor("▶ bash", 90_000)
        assert.isTrue(await eventually(() => processesWith(sleep).length > 0, 60_000), "the command started")
        let at = cli.output().length
        cli.write("\u0003")
        await cli.waitFor("run ended: aborted", 90_000, at)
        await cli.waitFor("usage:", 90_000, at)
        assert.isTrue(
          await eventually(() => processesWith(sleep).length === 0, 10_000),
          "the command's process is gone"
        )
        // the prompt is back (the process did not exit on the first Ctrl-C); two Ctrl-C in a row exit
        await cli.waitFor("> ", 90_000, cli.output().lastIndexOf("usage:"))
        assert.strictEqual(cli.child.exitCode, null)
        cli.write("\u0003\u0003")
        const { code } = await cli.exited
        assert.strictEqual(code, 130)
        const [file] = sessionFiles(ws)
        const loaded = transcriptOf(file!)
        assert.strictEqual(loaded.repaired, 0, "the interrupted call's result was written, not made up on load")
        assert.deepStrictEqual(pairingViolations(loaded.messages), [])
        const end = jsonLines(file!).find((l) => l["type"] === "run_end")!
        assert.strictEqual(end["reason"], "aborted")
        // --continue sends the paired history
        const next = startCli(["run", "--continue", "--yes", ...providerFlags(server, "anthropic"), "go on"], {
          cwd: ws,
          env
        })
        const second = await next.exited
        assert.strictEqual(second.code, 0, next.output() + next.stderr())
        assert.deepStrictEqual(sessionFiles(ws), [file], "the same session file")
        const sent = server.bodies[1]!.body["messages"] as Array<
          { role: string; content: Array<{ type: string; tool_use_id?: string }> | string }
        >
        assert.deepStrictEqual(sent.map((m) => m.role), ["user", "assistant", "user", "user"].slice(0, sent.length))
        assert.include(JSON.stringify(sent), "\"tool_use_id\":\"toolu_1\"")
        assert.include(JSON.stringify(sent), "go on")
        // agentloop sessions lists it: two runs, the last one ended stop, the first prompt
        const list = startCli(["sessions"], { cwd: ws, env })
        assert.strictEqual((await list.exited).code, 0)
        const id = file!.split("/").pop()!.replace(".jsonl", "")
        assert.match(
          list.output(),
          new RegExp(`^${id}  \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d +2 step\\(s\\)  stop +sleep please\\n$`)
        )
      } finally {
        await server.close()
      }
    },
    240_000
  )
})

describe("agentloop chat: /model", () => {
  it("/model shows the model; /model NAME switches it for the next requests and records the switch", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer((_body, index) => ({ text: `answer ${index + 1}` }))
    try {
      const cli = startCli(["chat", ...providerFlags(server)], { cwd: ws, env: testEnv(ws), pty: true })
      let at = await answer(cli, "/help for commands", "first question")
      at = await answer(cli, "answer 1", "/model", at)
      await cli.waitFor(`openai-compat test-model at ${server.url}/v1`, 90_000, at)
      at = await answer(cli, /test-model at [^\n]*\n/, "/model other-model", at)
      await cli.waitFor("model: other-model", 90_000, at)
      at = await answer(cli, "model: other-model", "second question", at)
      await cli.waitFor("answer 2", 90_000, at)
      cli.write("/exit\r")
      assert.strictEqual((await cli.exited).code, 0, cli.output())
      assert.deepStrictEqual(server.bodies.map((b) => b.body["model"]), ["test-model", "other-model"])
      const [file] = sessionFiles(ws)
      const lines = jsonLines(file!)
      const switched = lines.findIndex((l) => l["type"] === "model")
      assert.strictEqual(lines[switched]!["model"], "other-model")
      const runStarts = lines.flatMap((l, i) => (l["type"] === "run_start" ? [i] : []))
      assert.isTrue(runStarts[0]! < switched && switched < runStarts[1]!, "recorded between the two runs")
    } finally {
      await server.close()
    }
  }, 240_000)
})

describe("agentloop chat: Ctrl-C while a call waits for approval", () => {
  it("aborts the run: the waiting call is paired (skipped, aborted), nothing runs, the prompt comes back", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([{ calls: [{ id: "w1", name: "bash", args: { command: "touch ran.txt" } }] }])
    try {
      const cli = startCli(["chat", ...providerFlags(server)], { cwd: ws, env: testEnv(ws), pty: true })
      await answer(cli, "/help for commands", "do it")
      await cli.waitFor("allow?", 90_000)
      const at = cli.output().length
      cli.write("\u0003")
      await cli.waitFor("run ended: aborted", 90_000, at)
      await cli.waitFor("usage:", 90_000, at)
      await cli.waitFor("> ", 90_000, cli.output().lastIndexOf("usage:"))
      cli.write("/exit\r")
      assert.strictEqual((await cli.exited).code, 0, cli.output())
      const [file] = sessionFiles(ws)
      const loaded = transcriptOf(file!)
      assert.deepStrictEqual(pairingViolations(loaded.messages), [])
      assert.strictEqual(loaded.repaired, 0)
      const result = loaded.messages[loaded.messages.length - 1]!
      assert.strictEqual(result.role, "toolResult")
      assert.deepStrictEqual(result.role === "toolResult" ? result.details : undefined, {
        skipped: true,
        reason: "aborted"
      })
      assert.deepStrictEqual(readdirSync(ws).filter((n) => n === "ran.txt"), [], "the call did not run")
    } finally {
      await server.close()
    }
  }, 240_000)
})

describe("agentloop chat --approval-timeout (in a pseudo-terminal)", () => {
  it(
    "a question left unanswered goes away when the time is up: the call is denied, the model told why, the " +
      "prompt comes back",
    async () => {
      const ws = makeWorkspace()
      const server = await scriptServer([
        { calls: [{ id: "t1", name: "bash", args: { command: "touch ran.txt" } }] },
        { text: "understood" }
      ])
      try {
        const cli = startCli(["chat", "--approval-timeout", "2", ...providerFlags(server)], {
          cwd: ws,
          env: testEnv(ws),
          pty: true
        })
        await answer(cli, "/help for commands", "do it")
        await cli.waitFor("allow?", 90_000)
        await cli.waitFor("⊘ bash denied: no answer to the approval request within 2s", 90_000)
        await cli.waitFor("understood", 90_000)
        await cli.waitFor("usage:", 90_000)
        await cli.waitFor("> ", 90_000, cli.output().lastIndexOf("usage:"))
        cli.write("/exit\r")
        assert.strictEqual((await cli.exited).code, 0, cli.output())
        assert.deepStrictEqual(readdirSync(ws).filter((n) => n === "ran.txt"), [], "the call did not run")
        assert.include(
          JSON.stringify(server.bodies[1]!.body["messages"]),
          "no answer to the approval request within 2s"
        )
        const [file] = sessionFiles(ws)
        const approvals = jsonLines(file!).filter((l) => l["type"] === "approval")
        assert.deepStrictEqual(approvals.map((a) => [a["decision"], a["by"]]), [["denied", "timeout"]])
      } finally {
        await server.close()
      }
    },
    240_000
  )
})

describe("agentloop chat: compaction in a small context window", () => {
  it("a second prompt past 75% of --context-window is sent with the older turns summarised", async () => {
    const ws = makeWorkspace()
    let turns = 0
    const server = await scriptServer((body) => {
      if (isSummaryRequest(body)) return { text: "Listed numbers with seq.", usage: { input: 30, output: 5 } }
      const index = turns++
      if (index === 0) return { calls: [{ id: "q1", name: "bash", args: { command: "seq 1 300" } }] }
      return { text: `answer ${index}` }
    })
    try {
      const cli = startCli(["chat", "--yes", "--context-window", "500", ...providerFlags(server)], {
        cwd: ws,
        env: testEnv(ws),
        pty: true
      })
      let at = await answer(cli, "/help for commands", "count")
      await cli.waitFor("answer 1", 90_000, at)
      at = await answer(cli, "usage:", "and now?", at)
      await cli.waitFor("compacted:", 90_000, at)
      await cli.waitFor("answer 2", 90_000, at)
      await cli.waitFor("usage:", 90_000, at)
      cli.write("/exit\r")
      assert.strictEqual((await cli.exited).code, 0, cli.output())
      const requests = server.bodies.filter((b) => !isSummaryRequest(b.body))
      const last = requests[requests.length - 1]!.body["messages"] as Array<{ role: string; content: unknown }>
      assert.match(
        String(last.find((m) => m.role === "user")!.content),
        /^\[agentloop: summary of the earlier conversation/
      )
      assert.include(JSON.stringify(last), "and now?", "the latest turn is verbatim")
      const [file] = sessionFiles(ws)
      assert.include(JSON.stringify(transcriptOf(file!).messages), "\\n300", "the session file keeps the full history")
    } finally {
      await server.close()
    }
  }, 240_000)
})

describe("agentloop run: compaction, SIGHUP and a closed pipe", () => {
  it(
    "a small context window: older turns are summarised into one message, the latest kept, the file keeps everything",
    async () => {
      const ws = makeWorkspace()
      const server = await scriptServer(countingScript(4, { input: 40, output: 6 }))
      try {
        const cli = startCli(["run", "--yes", "--context-window", "1000", ...providerFlags(server), "count"], {
          cwd: ws,
          env: testEnv(ws)
        })
        const { code } = await cli.exited
        assert.strictEqual(code, 0, cli.output() + cli.stderr())
        assert.include(cli.output(), "compacted:")
        const requests = server.bodies.filter((b) => !isSummaryRequest(b.body))
        const last = requests[requests.length - 1]!.body["messages"] as Array<
          { role: string; content: unknown; tool_call_id?: string }
        >
        const withoutSystem = last.filter((m) => m.role !== "system")
        assert.match(
          String(withoutSystem[0]!.content),
          new RegExp(
            /^\[agentloop: summary of the earlier conversation \(\d+ messages\)\]/.source +
              /\n<summary>\nRan seq; it printed numbers.\n<\/summary>/.source
          )
        )
        assert.notInclude(JSON.stringify(last), "\\n399\\n", "the big output is summarised away")
        // no call split from its result: every tool message follows the assistant message making its call
        for (let i = 0; i < withoutSystem.length; i++) {
          if (withoutSystem[i]!.role === "tool") assert.include(["assistant", "tool"], withoutSystem[i - 1]!.role)
        }
        const [file] = sessionFiles(ws)
        const loaded = transcriptOf(file!)
        assert.strictEqual(loaded.messages.length, 1 + 4 * 2 + 1, "the session file keeps the full history")
        assert.include(JSON.stringify(loaded.messages), "399")
        const record = jsonLines(file!).find((l) => l["type"] === "compaction")!
        assert.isAbove(record["summarized"] as number, 0)
      } finally {
        await server.close()
      }
    },
    240_000
  )

  const stuckRun = async (after: string) => {
    const sleep = uniqueSleep()
    const command = `sleep ${sleep} & ${after}`
    const ws = makeWorkspace()
    const server = await scriptServer([{ calls: [{ id: "k1", name: "bash", args: { command } }] }, { text: "never" }])
    const cli = startCli(["run", "--yes", ...providerFlags(server), "hang"], { cwd: ws, env: testEnv(ws) })
    await cli.waitFor("▶ bash", 90_000)
    assert.isTrue(await eventually(() => processesWith(sleep).length > 0, 60_000), "the command started")
    return { ws, server, cli, sleep }
  }

  it("SIGHUP aborts the run, kills the command's processes, saves the session and exits 129", async () => {
    const { cli, server, sleep, ws } = await stuckRun("wait")
    try {
      cli.child.kill("SIGHUP")
      const { code } = await cli.exited
      assert.strictEqual(code, 129)
      assert.isTrue(await eventually(() => processesWith(sleep).length === 0, 10_000), "no process survives")
      const [file] = sessionFiles(ws)
      const loaded = transcriptOf(file!)
      assert.deepStrictEqual(pairingViolations(loaded.messages), [])
      assert.strictEqual(loaded.repaired, 0, "the interrupted result was written before exiting")
      assert.strictEqual(jsonLines(file!).find((l) => l["type"] === "run_end")!["reason"], "aborted")
    } finally {
      await server.close()
    }
  }, 240_000)

  it("a closed output pipe aborts the run, kills the command's processes and exits", async () => {
    const { cli, server, sleep, ws } = await stuckRun("while true; do echo tick; sleep 0.2; done")
    try {
      cli.child.stdout!.destroy()
      const { code } = await cli.exited
      assert.strictEqual(code, 0)
      assert.isTrue(await eventually(() => processesWith(sleep).length === 0, 10_000), "no process survives")
      const [file] = sessionFiles(ws)
      const loaded = transcriptOf(file!)
      assert.deepStrictEqual(pairingViolations(loaded.messages), [])
      assert.strictEqual(loaded.repaired, 0, "the interrupted result was written before exiting")
    } finally {
      await server.close()
    }
  }, 240_000)
})
