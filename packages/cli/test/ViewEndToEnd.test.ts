/**
 * The viewer against a session the real CLI wrote: `agentloop run` (in a pipe, against a loopback
 * server speaking the OpenAI format) saves a session with parallel reads and a call denied for
 * want of a terminal, then `agentloop view` runs as a process, prints its address, serves the
 * session (page and JSON), and stops on Ctrl-C (SIGINT).
 */
import { runScripted, scriptedSubAgent, toolCall, turn } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import type { Timeline } from "../src/view/index.ts"
import { makeWorkspace, providerFlags, scriptServer, sessionFiles, startCli, testEnv } from "./helpers/agent.ts"

describe("agentloop view on a session written by agentloop run", () => {
  it("serves the latest session: its turns, lanes, denial, tokens and invariants; exits on SIGINT", async () => {
    const ws = makeWorkspace()
    writeFileSync(join(ws, "a.txt"), "content of a\n")
    writeFileSync(join(ws, "b.txt"), "content of b\n")
    const server = await scriptServer([
      {
        calls: [
          { id: "r1", name: "read", args: { path: "a.txt" } },
          { id: "r2", name: "read", args: { path: "b.txt" } },
          { id: "b1", name: "bash", args: { command: "touch pwned" } }
        ],
        usage: { input: 200, output: 20 }
      },
      { text: "Both files read; bash was denied.", usage: { input: 260, output: 9, cached: 200 } }
    ])
    try {
      const run = startCli(["run", ...providerFlags(server), "read both files"], { cwd: ws, env: testEnv(ws) })
      await run.exited
      const [file] = sessionFiles(ws)
      assert.isDefined(file, run.output() + run.stderr())

      const view = startCli(["view"], { cwd: ws, env: testEnv(ws) })
      try {
        await view.waitFor(/open http:\/\/127\.0\.0\.1:\d+\//)
        assert.include(view.output(), `agentloop view: ${file}`)
        const url = /open (http:\/\/127\.0\.0\.1:\d+\/)/.exec(view.output())![1]!

        const { timeline } = await (await fetch(`${url}api/session`)).json() as { timeline: Timeline }
        assert.strictEqual(timeline.runs.length, 1)
        const run1 = timeline.runs[0]!
        assert.strictEqual(run1.prompt, "read both files")
        assert.strictEqual(run1.end?.reason, "stop")
        assert.deepStrictEqual(run1.turns.map((t) => t.lanes.length), [3, 0])
        const lanes = run1.turns[0]!.lanes
        assert.deepStrictEqual(lanes.map((l) => [l.name, l.status]), [["read", "ok"], ["read", "ok"], [
          "bash",
          "denied"
        ]])
        assert.deepStrictEqual([lanes[2]!.approval?.decision, lanes[2]!.approval?.by], ["denied", "no-terminal"])
        for (const lane of lanes.slice(0, 2)) {
          assert.isTrue(lane.startedAt !== undefined && lane.endedAt !== undefined && lane.endedAt >= lane.startedAt)
        }
        // OpenAI counts cached tokens in prompt_tokens; the session keeps them apart.
        assert.deepStrictEqual([timeline.totals.input, timeline.totals.cacheRead, timeline.totals.output], [
          260,
          200,
          29
        ])
        for (const check of timeline.invariants) assert.deepStrictEqual([check.id, check.violations], [check.id, []])
        assert.deepStrictEqual(timeline.problems, [])

        const page = await (await fetch(url)).text()
        assert.strictEqual(page.match(/data-testid="turn"/g)?.length, 2)
        assert.strictEqual(page.match(/data-testid="lane"/g)?.length, 3)
        assert.include(page, "✓ Invariants hold")
      } finally {
        view.child.kill("SIGINT")
      }
      // Ctrl-C interrupts the server's fiber: the process ends by itself, as an interrupted program does.
      assert.deepStrictEqual(await view.exited, { code: 130, signal: null })
    } finally {
      await server.close()
    }
  }, 120_000)

  it(
    "serves a transcript whose calls started sub-agents, each run nested under its call, two levels deep",
    async () => {
      const messages = await Effect.runPromise(Effect.gen(function*() {
        const checker = yield* scriptedSubAgent({ name: "checker", script: [turn.text("checked: fine")] })
        const researcher = yield* scriptedSubAgent({
          name: "researcher",
          tools: [checker.tool],
          script: [
            turn.toolCalls([toolCall("k1", "checker", { task: "check the notes" })]),
            turn.text("The notes say 42.")
          ]
        })
        const run = yield* runScripted(
          [turn.toolCalls([toolCall("s1", "researcher", { task: "find the answer" })]), turn.text("It is 42.")],
          { tools: [researcher.tool], messages: [{ role: "user", content: "what is the answer?" }] }
        )
        assert.deepStrictEqual(run.violations, [])
        return run.result.messages
      }))
      const ws = makeWorkspace()
      writeFileSync(join(ws, "tree.jsonl"), messages.map((m) => JSON.stringify(m)).join("\n") + "\n")
      const view = startCli(["view", "tree.jsonl"], { cwd: ws, env: testEnv(ws) })
      try {
        await view.waitFor(/open http:\/\/127\.0\.0\.1:\d+\//, 90_000)
        const url = /open (http:\/\/127\.0\.0\.1:\d+\/)/.exec(view.output())![1]!
        const { timeline } = await (await fetch(`${url}api/session`)).json() as { timeline: Timeline }
        const researcher = timeline.runs[0]!.turns[0]!.lanes[0]!.subAgent!
        assert.deepStrictEqual([researcher.agent, researcher.reason, researcher.steps], ["researcher", "stop", 2])
        const checker = researcher.turns[0]!.lanes[0]!.subAgent!
        assert.deepStrictEqual([checker.agent, checker.task, checker.turns[0]!.text], [
          "checker",
          "check the notes",
          "checked: fine"
        ])
        for (const check of timeline.invariants) assert.deepStrictEqual([check.id, check.violations], [check.id, []])
        const page = await (await fetch(url)).text()
        assert.strictEqual(page.match(/data-testid="subagent"/g)?.length, 2)
        assert.isTrue(page.indexOf(`data-agent="researcher"`) < page.indexOf(`data-agent="checker"`))
      } finally {
        view.child.kill("SIGINT")
        await view.exited
      }
    },
    120_000
  )
})
