/**
 * Sessions a user can find again: which session `--continue` picks and which ones `agentloop
 * sessions` lists. A session holds a conversation when the model answered at least once in what it
 * continues (runs an undo dropped left out), or its last run has not ended (`hasConversation`). The
 * summary is read from each file's records and its messages' outlines (`outlineSession`), checked
 * here against core's whole reader (`parseTranscript` + `sessionHistoryOf`) on generated files; then
 * end to end against a loopback model: `/clear` then `--continue` (in a pseudo-terminal), a run that
 * failed before any answer (a closed port), and undone prompts.
 */
import { parseTranscript, sessionHistoryOf } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import { readFileSync } from "node:fs"
import { createServer } from "node:net"
import type { AddressInfo } from "node:net"
import { ANSWERED, hasConversation, outlineSession, sessionToContinue, summarize } from "../src/Sessions.ts"
import type { SessionLine, SessionSummary } from "../src/Sessions.ts"
import {
  afterRun,
  jsonLines,
  makeWorkspace,
  providerFlags,
  scriptServer,
  sessionFiles,
  startCli,
  testEnv
} from "./helpers/agent.ts"
import type { Running, ScriptServer } from "./helpers/agent.ts"

const header = { type: "session", at: 1, model: "m" } as const
const start = (prompt: string) => ({ type: "run_start", at: 2, prompt }) as const
const end = (reason: "stop" | "error", steps: number) => ({ type: "run_end", at: 3, reason, steps }) as const
const user = { role: "user" } as const
const answer = (stopReason: "stop" | "toolUse" | "length" | "error" | "aborted") =>
  ({ role: "assistant", stopReason }) as const
const summary = (lines: ReadonlyArray<SessionLine>) => summarize("s", lines)

describe("what counts as a conversation (hasConversation, summarize)", () => {
  it("a run that failed before the model answered (its request counted as a step by run_end) is empty", () => {
    const failed = summary([header, start("lost"), user, { type: "turn_start", at: 2, step: 1 }, end("error", 1)])
    assert.strictEqual(failed.steps, 0)
    assert.strictEqual(failed.ended, "error")
    assert.isFalse(hasConversation(failed))
    // an answer that ended in an error or was aborted is no step either
    for (const reason of ["error", "aborted"] as const) {
      assert.isFalse(hasConversation(summary([header, start("p"), user, answer(reason), end("error", 1)])))
    }
    for (const reason of ANSWERED) {
      assert.isTrue(hasConversation(summary([header, start("p"), user, answer(reason), end("stop", 1)])), reason)
    }
  })

  it("the session /clear opens (a header alone) is empty; a run that has not ended is a conversation", () => {
    assert.isFalse(hasConversation(summary([header])))
    assert.strictEqual(summary([header]).ended, "no runs")
    const killed = summary([header, start("p"), user])
    assert.deepStrictEqual([killed.ended, killed.unfinished, hasConversation(killed)], ["interrupted", true, true])
  })

  it("undone runs are not counted: steps, runs, first prompt and end are what undo left; all undone is empty", () => {
    const runs: Array<SessionLine> = [
      header,
      start("one"),
      user,
      answer("toolUse"),
      { role: "toolResult" },
      answer("stop"),
      end("stop", 2),
      start("two"),
      user,
      answer("stop"),
      end("error", 3)
    ]
    const full = summary(runs)
    assert.deepStrictEqual([full.steps, full.runs, full.firstPrompt, full.ended], [3, 2, "one", "error"])
    const last = summary([...runs, { type: "undo", at: 4, runs: [2] }])
    assert.deepStrictEqual([last.steps, last.runs, last.firstPrompt, last.ended], [2, 1, "one", "stop"])
    const first = summary([...runs, { type: "undo", at: 4, runs: [1] }])
    assert.deepStrictEqual([first.steps, first.runs, first.firstPrompt], [1, 1, "two"])
    const all = summary([...runs, { type: "undo", at: 4, runs: [2] }, { type: "undo", at: 5, runs: [1] }])
    assert.deepStrictEqual([all.steps, all.runs, all.ended, hasConversation(all)], [0, 0, "undone", false])
  })

  it("--continue takes the latest session with a conversation; when none has one, the latest that reads", () => {
    const s = (id: string, steps: number, ended = "stop"): SessionSummary => ({
      id,
      at: 1,
      firstPrompt: "",
      runs: 1,
      steps,
      ended,
      unfinished: false,
      usage: undefined,
      model: ""
    })
    assert.strictEqual(sessionToContinue([s("a", 2), s("b", 1), s("c", 0), s("d", 0, "no runs")])?.id, "b")
    assert.strictEqual(sessionToContinue([s("a", 0), s("b", 0, "undone"), s("c", 0, "unreadable: x")])?.id, "b")
    assert.strictEqual(sessionToContinue([s("c", 0, "unreadable: x")]), undefined)
  })
})

/** A generated session file: runs with answers and tool results, killed runs, undos, compactions. */
const sessionFile = fc.record({
  beforeRuns: fc.array(fc.constantFrom<"stop" | "error">("stop", "error"), { maxLength: 2 }),
  runs: fc.array(
    fc.record({
      answers: fc.array(fc.constantFrom("stop", "toolUse", "length", "error", "aborted"), { maxLength: 3 }),
      ended: fc.boolean(),
      afterEnd: fc.boolean(),
      compaction: fc.boolean()
    }),
    { maxLength: 5 }
  ),
  undos: fc.array(fc.array(fc.nat({ max: 6 }), { minLength: 1, maxLength: 3 }), { maxLength: 3 }),
  noise: fc.boolean()
}).map(({ beforeRuns, noise, runs, undos }) => {
  const lines: Array<unknown> = [{ type: "session", at: 1, version: 1, id: "g", model: "m" }]
  for (const stopReason of beforeRuns) {
    lines.push({ role: "user", content: "earlier" })
    lines.push({ role: "assistant", content: [{ type: "text", text: "a" }], stopReason })
  }
  let call = 0
  runs.forEach((run, r) => {
    lines.push({ type: "run_start", at: 2, prompt: `prompt ${r + 1}` })
    lines.push({ role: "user", content: `prompt ${r + 1}` })
    if (run.compaction) {
      lines.push({ type: "compaction", at: 2, summarized: 1, kept: 0, usage: { input: 1, output: 1 } })
    }
    for (const stopReason of run.answers) {
      if (noise) lines.push({ type: "turn_start", at: 2, step: 1 }, { type: "future_record", at: 2 })
      const id = `c${call++}`
      lines.push({
        role: "assistant",
        content: [{ type: "toolCall", id, name: "bash", arguments: {} }],
        stopReason,
        usage: { input: 1, output: 1 }
      })
      lines.push({ role: "toolResult", toolCallId: id, toolName: "bash", content: [], isError: false })
    }
    if (run.ended) lines.push({ type: "run_end", at: 3, reason: "stop", steps: run.answers.length })
    if (run.afterEnd) lines.push({ role: "user", content: "steered after the end" })
  })
  for (const undo of undos) lines.push({ type: "undo", at: 4, runs: undo })
  return lines.map((line) => JSON.stringify(line)).join("\n") + "\n"
})

describe("the summary's reader (outlineSession) against core's whole reader", () => {
  it("the same steps, runs and first prompt as sessionHistoryOf on generated files", () => {
    fc.assert(
      fc.property(sessionFile, (text) => {
        const loaded = Effect.runSync(parseTranscript(text, "g.jsonl"))
        const history = sessionHistoryOf(loaded)
        const listed = summarize("g", Effect.runSync(outlineSession(text, "g.jsonl")))
        const steps = history.messages.filter((m) => m.role === "assistant" && ANSWERED.has(m.stopReason)).length
        assert.strictEqual(listed.steps, steps, text)
        assert.strictEqual(listed.runs, history.runs.length, text)
        assert.strictEqual(listed.firstPrompt, history.runs[0]?.start.prompt ?? "", text)
        assert.strictEqual(listed.unfinished, history.runs.at(-1)?.end === undefined && history.runs.length > 0)
      }),
      { numRuns: 300 }
    )
  })

  it("a torn last line is left out; a line that is not JSON, or not a message or record, names the line", () => {
    const head = `${JSON.stringify(header)}\n${JSON.stringify(start("p"))}\n`
    assert.strictEqual(Effect.runSync(outlineSession(`${head}{"role":"assi`, "f")).length, 2)
    for (
      const [text, error] of [
        [`${head}{nope\n`, "line 3 of f is not valid JSON"],
        [`${head}[1]\n`, "line 3 of f is not a JSON object"],
        [`${head}{"x":1}\n`, "line 3 of f is neither a message"],
        [`${head}{"role":"assistant","stopReason":"done"}\n`, "line 3 of f is not a valid message"]
      ] as const
    ) {
      const failure = Effect.runSync(Effect.flip(outlineSession(text, "f")))
      assert.include(failure.message, error)
    }
  })
})

/** A port on 127.0.0.1 that nothing listens on (bound, then closed). */
const closedPort = () =>
  new Promise<number>((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
  })

/** Runs the CLI to its end: its exit code, stdout, stderr. */
const cliRun = async (ws: string, args: ReadonlyArray<string>) => {
  const cli = startCli(args, { cwd: ws, env: testEnv(ws) })
  const { code } = await cli.exitedWithin(120_000)
  return { code, out: cli.output(), err: cli.stderr() }
}

/** The user prompts of the `index`-th request the server got. */
const promptsSent = (server: ScriptServer, index: number) =>
  (server.bodies[index]!.body["messages"] as Array<{ role: string; content: unknown }>)
    .filter((m) => m.role === "user")
    .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)))

const idOf = (file: string) => file.split("/").pop()!.replace(".jsonl", "")
/** The session file whose first run was `prompt` (ids sort by the second: two sessions of one second, either way). */
const sessionStarting = (ws: string, prompt: string): string => {
  const found = sessionFiles(ws).filter((file) =>
    jsonLines(file).find((line) => line["type"] === "run_start")?.["prompt"] === prompt
  )
  assert.strictEqual(found.length, 1, `one session starts with ${JSON.stringify(prompt)}`)
  return found[0]!
}

describe("agentloop chat --continue and agentloop sessions, end to end", () => {
  it(
    "after /clear, chat --continue opens the conversation, not the empty session /clear opened; sessions lists " +
      "only the conversation (--all both)",
    async ({ onTestFinished }) => {
      const ws = makeWorkspace()
      const server = await scriptServer([{ text: "Hello back." }, { text: "Continued." }])
      const clis: Array<Running> = []
      onTestFinished(() => {
        for (const cli of clis) if (cli.child.exitCode === null) cli.child.kill("SIGKILL")
      })
      const chat = (...flags: Array<string>) => {
        const cli = startCli(["chat", ...flags, ...providerFlags(server)], { cwd: ws, env: testEnv(ws), pty: true })
        clis.push(cli)
        return cli
      }
      try {
        const first = chat()
        await first.waitFor("/help for commands")
        first.write("first question\r")
        let at = await afterRun(first, "Hello back.", "/clear")
        await first.waitFor("new session", 90_000, at)
        first.write("/exit\r")
        assert.strictEqual((await first.exitedWithin(60_000)).code, 0, first.output())
        assert.strictEqual(sessionFiles(ws).length, 2, "/clear opened a second session")
        const conversation = sessionStarting(ws, "first question")
        const cleared = sessionFiles(ws).find((file) => file !== conversation)

        const next = chat("--continue")
        // at the prompt, the conversation so far is shown above it
        const screen = await next.waitForScreen((s) => s.all.filter((r) => r.length > 0).at(-1) === ">")
        const from = screen.all.indexOf("── the conversation so far ──")
        assert.isAtLeast(from, 0, screen.all.join("\n"))
        assert.deepStrictEqual(screen.all.slice(from + 1, from + 3), ["> first question", "assistant Hello back."])
        next.write("and then?\r")
        at = await afterRun(next, "Continued.", "/exit")
        assert.strictEqual((await next.exitedWithin(60_000)).code, 0, next.output())
        assert.deepStrictEqual(promptsSent(server, 1), ["first question", "and then?"])
        assert.deepStrictEqual(
          sessionFiles(ws),
          [conversation, cleared].sort(),
          "no new session; the first one went on"
        )
        assert.include(readFileSync(conversation!, "utf8"), "and then?")

        const listed = await cliRun(ws, ["sessions"])
        assert.strictEqual(listed.code, 0, listed.err)
        assert.match(
          listed.out,
          new RegExp(`^${idOf(conversation!)}  [^\\n]+  2 step\\(s\\)  stop +first question\\n$`)
        )
        assert.include(listed.err, "1 empty session(s) not shown")
        const all = await cliRun(ws, ["sessions", "--all"])
        assert.include(all.out, `${idOf(cleared!)}  `)
        assert.match(all.out, / 0 step\(s\)  no runs/)
        assert.strictEqual(all.err, "")
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it("a run that failed before any answer (its server's port closed) is neither listed nor continued", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([{ text: "Done." }, { text: "Going on." }])
    try {
      const real = await cliRun(ws, ["run", ...providerFlags(server), "the real task"])
      assert.strictEqual(real.code, 0, real.err)
      const port = await closedPort()
      const lost = await cliRun(ws, [
        "run",
        "--provider",
        "openai-compat",
        "--base-url",
        `http://127.0.0.1:${port}/v1`,
        "--model",
        "test-model",
        "the lost prompt"
      ])
      assert.strictEqual(lost.code, 1, lost.out + lost.err)
      const kept = sessionStarting(ws, "the real task")
      const failed = sessionStarting(ws, "the lost prompt")
      assert.isTrue(jsonLines(failed!).some((l) => l["type"] === "run_end" && l["reason"] === "error"))

      const listed = await cliRun(ws, ["sessions"])
      assert.include(listed.out, "the real task")
      assert.notInclude(listed.out, "the lost prompt")
      assert.include(listed.err, "1 empty session(s) not shown")

      const next = await cliRun(ws, ["run", "--continue", ...providerFlags(server), "go on"])
      assert.strictEqual(next.code, 0, next.err)
      assert.include(next.out, kept!.slice(ws.length + 1))
      assert.deepStrictEqual(promptsSent(server, 1), ["the real task", "go on"])
    } finally {
      await server.close()
    }
  }, 240_000)

  it(
    "undone prompts: sessions counts the steps undo left; a session with every prompt undone is empty and " +
      "--continue skips it",
    async () => {
      const ws = makeWorkspace()
      const server = await scriptServer((_body, index) => ({ text: `answer ${index + 1}` }))
      try {
        const run = (...args: Array<string>) => cliRun(ws, ["run", ...providerFlags(server), ...args])
        assert.strictEqual((await run("older task")).code, 0)
        assert.strictEqual((await run("one")).code, 0)
        assert.strictEqual((await run("--continue", "two")).code, 0)
        const older = sessionStarting(ws, "older task")
        const undone = sessionStarting(ws, "one")
        const line = (out: string, id: string) => out.split("\n").find((l) => l.startsWith(id)) ?? ""

        let listed = await cliRun(ws, ["sessions"])
        assert.match(line(listed.out, idOf(undone!)), /  2 step\(s\)  stop +one$/)
        assert.strictEqual((await cliRun(ws, ["undo"])).code, 0)
        listed = await cliRun(ws, ["sessions"])
        assert.match(line(listed.out, idOf(undone!)), /  1 step\(s\)  stop +one$/, listed.out)
        // sessions show keeps the undone prompt's number, marked
        const shown = await cliRun(ws, ["sessions", "show", idOf(undone!)])
        assert.match(shown.out, /\n {2}1 {2}stop +1 step\(s\) {2}one\n {2}2 {2}undone +1 step\(s\) {2}two\n/)

        assert.strictEqual((await cliRun(ws, ["undo"])).code, 0)
        listed = await cliRun(ws, ["sessions"])
        assert.strictEqual(line(listed.out, idOf(undone!)), "", listed.out)
        assert.include(listed.err, "1 empty session(s) not shown")
        const all = await cliRun(ws, ["sessions", "--all"])
        assert.match(line(all.out, idOf(undone!)), /  0 step\(s\)  undone +$/)

        const next = await run("--continue", "next")
        assert.strictEqual(next.code, 0, next.err)
        assert.include(next.out, older!.slice(ws.length + 1))
        assert.deepStrictEqual(promptsSent(server, server.bodies.length - 1), ["older task", "next"])
      } finally {
        await server.close()
      }
    },
    240_000
  )
})
