import { pairingViolations, parseTranscript } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import {
  eventually,
  makeWorkspace,
  processesWith,
  providerFlags,
  scriptServer,
  sessionFiles,
  startCli,
  testEnv,
  uniqueSleep
} from "./helpers/agent.ts"
import type { Running, Screen } from "./helpers/agent.ts"

const SIZE = { cols: 110, rows: 40 }

/** `startCli` for one test: a test that fails midway leaves no CLI behind (its terminal closes: SIGHUP). */
const starter = (onTestFinished: (f: () => void) => void) => (...args: Parameters<typeof startCli>): Running => {
  const cli = startCli(...args)
  onTestFinished(() => {
    if (cli.child.exitCode === null) cli.child.kill("SIGKILL")
  })
  return cli
}
const ALT_ENTER = "\u001b\r"
const ESC = "\u001b"

/** Types `line` and Enter once the screen shows the prompt (`> ` alone on the last row written). */
const prompt = async (cli: Running, line: string) => {
  await cli.waitForScreen(isAtPrompt)
  cli.write(`${line}\r`)
}
const isAtPrompt = (s: Screen) => s.all.filter((r) => r.length > 0).at(-1) === ">"
/** The rows that start with `start`. */
const rowsStarting = (s: Screen, start: string) => s.all.filter((r) => r.startsWith(start))
/** The messages of the `n`-th request the server was sent. */
const sent = (server: { bodies: Array<{ body: Record<string, unknown> }> }, n: number) =>
  server.bodies[n]!.body["messages"] as Array<{ role: string; content: unknown }>

describe("agentloop chat: output you can see (in a pseudo-terminal)", () => {
  it(
    "bash shows its last lines with the true count and a note that the model got it cut; an edit shows its " +
      "diff; /last prints the whole output, in $PAGER when it is longer than the screen",
    async ({ onTestFinished }) => {
      const start = starter(onTestFinished)
      const ws = makeWorkspace()
      const server = await scriptServer([
        { calls: [{ id: "c1", name: "bash", args: { command: "seq 1 300000" } }] },
        { text: "counted." },
        { calls: [{ id: "c2", name: "bash", args: { command: "echo one > b.txt" } }] },
        { calls: [{ id: "c3", name: "edit", args: { path: "b.txt", oldText: "one", newText: "two" } }] },
        { text: "edited." }
      ])
      try {
        // the pager: keeps what it is given and says so
        const env = testEnv(ws, { PAGER: `cat > ${join(ws, "paged.txt")}; echo PAGER-DONE` })
        const cli = start(["chat", "--yes", ...providerFlags(server)], { cwd: ws, env, pty: true, size: SIZE })
        await prompt(cli, "count to 300000")
        let screen = await cli.waitForScreen((s) => s.all.includes("assistant counted.") && isAtPrompt(s))
        const [done] = rowsStarting(screen, "✓ bash seq 1 300000")
        assert.match(done!, /exit 0 · 300,000 lines, 1\.9 MB · the model saw it cut to its start and end$/)
        const at = screen.all.indexOf(done!)
        assert.deepStrictEqual(screen.all.slice(at + 1, at + 7), [
          "  … 299,995 earlier lines (/last shows all)",
          "  │ 299996",
          "  │ 299997",
          "  │ 299998",
          "  │ 299999",
          "  │ 300000"
        ])
        // the whole output, from the file bash kept it in, through the pager
        await prompt(cli, "/last")
        await cli.waitForScreen((s) => s.all.includes("PAGER-DONE") && isAtPrompt(s))
        const paged = readFileSync(join(ws, "paged.txt"), "utf8").split("\n")
        assert.match(paged[0]!, /✓ bash seq 1 300000 .*exit 0 · 300,000 lines/)
        assert.deepStrictEqual(paged.slice(1), [...Array.from({ length: 300000 }, (_, i) => String(i + 1)), ""])
        await prompt(cli, "make b.txt and edit it")
        screen = await cli.waitForScreen((s) => s.all.includes("assistant edited.") && isAtPrompt(s))
        assert.match(rowsStarting(screen, "✓ bash echo one > b.txt")[0]!, /exit 0 · no output$/)
        const [edited] = rowsStarting(screen, "✓ edit b.txt")
        const diffAt = screen.all.indexOf(edited!)
        assert.deepStrictEqual(screen.all.slice(diffAt + 1, diffAt + 3), ["    -one", "    +two"])
        // a short output fits the screen: printed under the prompt
        await prompt(cli, "/last")
        screen = await cli.waitForScreen((s) => s.all.filter((r) => r === "> /last").length === 2 && isAtPrompt(s))
        const shown = screen.all.slice(screen.all.lastIndexOf("> /last") + 1)
        assert.match(shown[0]!, /^✓ edit b\.txt {2}Edited b\.txt \(1 replacement\)\.$/)
        assert.include(shown, "-one")
        assert.include(shown, "+two")
        assert.notInclude(readFileSync(join(ws, "paged.txt"), "utf8"), "+two", "no pager for a few lines")
        cli.write("/exit\r")
        assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it("--continue and --resume first show the conversation so far: prompts, answers, one line per call", async ({
    onTestFinished
  }) => {
    const start = starter(onTestFinished)
    const ws = makeWorkspace()
    const server = await scriptServer([
      { text: "Counting.", calls: [{ id: "c1", name: "bash", args: { command: "seq 1 3" } }] },
      { text: "It printed 1 to 3." },
      { text: "more" }
    ])
    try {
      const env = testEnv(ws)
      const first = start(["run", "--yes", ...providerFlags(server), "count to three"], { cwd: ws, env })
      assert.strictEqual((await first.exitedWithin(120_000)).code, 0, first.stderr())
      const id = sessionFiles(ws)[0]!.split("/").pop()!.replace(".jsonl", "")
      for (const flags of [["--continue"], ["--resume", id]]) {
        const cli = start(["chat", ...flags, ...providerFlags(server)], { cwd: ws, env, pty: true, size: SIZE })
        const screen = await cli.waitForScreen(isAtPrompt)
        const from = screen.all.indexOf("── the conversation so far ──")
        assert.isAtLeast(from, 0, screen.all.join("\n"))
        assert.deepStrictEqual(screen.all.slice(from + 1, from + 6), [
          "> count to three",
          "assistant Counting.",
          "✓ bash seq 1 3  exit 0 · 3 lines, 6 bytes",
          "assistant It printed 1 to 3.",
          "──"
        ])
        cli.write("/exit\r")
        assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())
      }
      // a new session shows no history
      const fresh = start(["chat", ...providerFlags(server)], { cwd: ws, env, pty: true, size: SIZE })
      const screen = await fresh.waitForScreen(isAtPrompt)
      assert.notInclude(screen.all, "── the conversation so far ──")
      fresh.write("/exit\r")
      assert.strictEqual((await fresh.exitedWithin(60_000)).code, 0, fresh.output())
    } finally {
      await server.close()
    }
  }, 240_000)

  it(
    "text typed while a run works waits on its own line below the output, never inside the streaming answer; " +
      "Enter sends it as steering (after the batch's results), Alt+Enter as a follow-up (after the run)",
    async ({ onTestFinished }) => {
      const start = starter(onTestFinished)
      const ws = makeWorkspace()
      let release: () => void = () => {}
      const answerHeld = new Promise<void>((resolve) => (release = resolve))
      const server = await scriptServer([
        // the answer starts streaming, then waits for the test
        { text: "Working on it", hold: answerHeld, calls: [{ id: "c1", name: "bash", args: { command: "echo ran" } }] },
        { text: "steered." },
        { text: "followed up." }
      ])
      try {
        const cli = start(["chat", "--yes", ...providerFlags(server)], {
          cwd: ws,
          env: testEnv(ws),
          pty: true,
          size: SIZE
        })
        await prompt(cli, "start")
        await cli.waitForScreen((s) => s.all.includes("assistant Working on it"))
        cli.write("also fix b")
        let screen = await cli.waitForScreen((s) => s.all.includes("» also fix b"))
        const answerRow = screen.all.indexOf("assistant Working on it")
        assert.isAbove(screen.all.indexOf("» also fix b"), answerRow, "below the answer")
        assert.deepStrictEqual(screen.all.filter((r) => r.includes("also fix b")), ["» also fix b"])
        cli.write("\r")
        await cli.waitForScreen((s) => s.all.includes("⇢ steering, at the next safe point: also fix b"))
        cli.write(`then summarise${ALT_ENTER}`)
        await cli.waitForScreen((s) => s.all.includes("⇢ follow-up, after the run: then summarise"))
        // the answer goes on where it was, the footer below it
        release()
        screen = await cli.waitForScreen((s) => s.all.includes("assistant followed up.") && isAtPrompt(s))
        const rows = screen.all.filter((r) => r.length > 0)
        const order = [
          "assistant Working on it",
          "▶ bash echo ran",
          "steering also fix b",
          "assistant steered.",
          "follow-up then summarise",
          "assistant followed up."
        ].map((r) => rows.indexOf(r))
        assert.deepStrictEqual(order, [...order].sort((a, b) => a - b), rows.join("\n"))
        assert.notInclude(order, -1, rows.join("\n"))
        assert.isFalse(rows.some((r) => r.startsWith("»") || r.startsWith("⇢")), "the footer is gone")
        cli.write("/exit\r")
        assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())
        // steering joined after the call's result, before the next request; the follow-up only once the run stopped
        const second = sent(server, 1)
        assert.deepStrictEqual(second.slice(-2).map((m) => m.role), ["tool", "user"])
        assert.strictEqual(second.at(-1)!.content, "also fix b")
        assert.notInclude(JSON.stringify(second), "then summarise")
        const third = sent(server, 2)
        assert.deepStrictEqual(third.slice(-3).map((m) => [m.role, m.content]), [
          ["user", "also fix b"],
          ["assistant", "steered."],
          ["user", "then summarise"]
        ])
        const [file] = sessionFiles(ws)
        const loaded = Effect.runSync(parseTranscript(readFileSync(file!, "utf8"), file!))
        assert.deepStrictEqual(pairingViolations(loaded.messages), [])
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it(
    "Esc aborts the run as Ctrl-C does: the call is killed and paired, the prompt comes back; typed text stays",
    async ({ onTestFinished }) => {
      const start = starter(onTestFinished)
      const ws = makeWorkspace()
      const sleep = uniqueSleep()
      const server = await scriptServer([
        { calls: [{ id: "c1", name: "bash", args: { command: `sleep ${sleep}` } }] },
        { text: "after" }
      ])
      try {
        const cli = start(["chat", "--yes", ...providerFlags(server)], {
          cwd: ws,
          env: testEnv(ws),
          pty: true,
          size: SIZE
        })
        await prompt(cli, "sleep")
        await cli.waitForScreen((s) => s.all.includes(`▶ bash sleep ${sleep}`))
        assert.isTrue(await eventually(() => processesWith(sleep).length > 0, 60_000), "the command started")
        cli.write("a draft")
        await cli.waitForScreen((s) => s.all.includes("» a draft"))
        cli.write(ESC)
        const screen = await cli.waitForScreen((s) => s.all.some((r) => r.startsWith("■ run ended: aborted")))
        assert.include(screen.all, "esc: aborting the run")
        // the prompt is back with the text typed meanwhile
        await cli.waitForScreen((s) => s.all.filter((r) => r.length > 0).at(-1) === "> a draft")
        assert.isTrue(await eventually(() => processesWith(sleep).length === 0, 10_000), "the command is gone")
        assert.strictEqual(cli.child.exitCode, null, "Esc does not exit")
        cli.write("\u0015/exit\r")
        assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())
        assert.strictEqual(server.bodies.length, 1, "no request after the abort")
        const [file] = sessionFiles(ws)
        const loaded = Effect.runSync(parseTranscript(readFileSync(file!, "utf8"), file!))
        assert.deepStrictEqual(pairingViolations(loaded.messages), [])
        assert.strictEqual(loaded.repaired, 0, "the interrupted call's result was written, not made up on load")
        const result = loaded.messages.at(-1)!
        assert.strictEqual(result.role === "toolResult" && result.toolCallId, "c1")
        assert.isTrue(result.role === "toolResult" && result.isError)
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it("Esc while an answer streams: the note starts on a line of its own, the answer's line stays whole", async ({
    onTestFinished
  }) => {
    const start = starter(onTestFinished)
    const ws = makeWorkspace()
    // the rest of the answer never comes
    const server = await scriptServer([{ text: "Half an answer", hold: new Promise(() => {}) }])
    try {
      const cli = start(["chat", "--yes", ...providerFlags(server)], {
        cwd: ws,
        env: testEnv(ws),
        pty: true,
        size: SIZE
      })
      await prompt(cli, "go")
      await cli.waitForScreen((s) => s.all.includes("assistant Half an answer"))
      cli.write(ESC)
      const screen = await cli.waitForScreen((s) => s.all.some((r) => r.startsWith("■ run ended: aborted")))
      const rows = screen.all.filter((r) => r.length > 0)
      const answerAt = rows.indexOf("assistant Half an answer")
      assert.isAtLeast(answerAt, 0, rows.join("\n"))
      assert.strictEqual(rows[answerAt + 1], "esc: aborting the run", rows.join("\n"))
      cli.write("/exit\r")
      assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())
    } finally {
      await server.close()
    }
  }, 240_000)

  it("/last after an interrupted bash shows what the command had printed, and the interruption once", async ({
    onTestFinished
  }) => {
    const start = starter(onTestFinished)
    const ws = makeWorkspace()
    const sleep = uniqueSleep()
    const command = `echo first line; echo second line; sleep ${sleep}`
    const server = await scriptServer([{ calls: [{ id: "c1", name: "bash", args: { command } }] }])
    try {
      const cli = start(["chat", "--yes", ...providerFlags(server)], {
        cwd: ws,
        env: testEnv(ws),
        pty: true,
        size: SIZE
      })
      await prompt(cli, "run it")
      // its last line is on the status line while it runs
      await cli.waitForScreen((s) => s.all.some((r) => r.startsWith("⠋ bash") || r.includes("s second line")))
      assert.isTrue(await eventually(() => processesWith(sleep).length > 0, 60_000), "the command started")
      cli.write(ESC)
      await cli.waitForScreen((s) => s.all.some((r) => r.startsWith("■ run ended: aborted")) && isAtPrompt(s))
      await prompt(cli, "/last")
      const screen = await cli.waitForScreen((s) => s.all.includes("> /last") && isAtPrompt(s))
      const shown = screen.all.slice(screen.all.indexOf("> /last") + 1).filter((r) => r.length > 0 && r !== ">")
      assert.match(shown[0]!, /^✗ bash echo first line; echo second line; sleep .* {2}Tool call was interrupted/)
      assert.strictEqual(shown.filter((r) => r.includes("interrupted before it finished")).length, 1, shown.join("\n"))
      assert.deepStrictEqual(shown.slice(-2), ["first line", "second line"], shown.join("\n"))
      assert.include(shown, "  (what it printed before it was interrupted)", shown.join("\n"))
      cli.write("/exit\r")
      assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())
    } finally {
      await server.close()
    }
  }, 240_000)

  it("steering typed while a text answer streams joins after the answer and is shown as steering", async ({
    onTestFinished
  }) => {
    const start = starter(onTestFinished)
    const ws = makeWorkspace()
    let release: () => void = () => {}
    const answerHeld = new Promise<void>((resolve) => (release = resolve))
    const server = await scriptServer([{ text: "An answer", hold: answerHeld }, { text: "steered." }])
    try {
      const cli = start(["chat", "--yes", ...providerFlags(server)], {
        cwd: ws,
        env: testEnv(ws),
        pty: true,
        size: SIZE
      })
      await prompt(cli, "question")
      await cli.waitForScreen((s) => s.all.includes("assistant An answer"))
      cli.write("also this\r")
      await cli.waitForScreen((s) => s.all.includes("⇢ steering, at the next safe point: also this"))
      release()
      const screen = await cli.waitForScreen((s) => s.all.includes("assistant steered.") && isAtPrompt(s))
      const rows = screen.all.filter((r) => r.length > 0)
      const order = ["assistant An answer", "steering also this", "assistant steered."].map((r) => rows.indexOf(r))
      assert.notInclude(order, -1, rows.join("\n"))
      assert.deepStrictEqual(order, [...order].sort((a, b) => a - b), rows.join("\n"))
      assert.isFalse(rows.some((r) => r.startsWith("follow-up")), rows.join("\n"))
      // it joined after the answer, as the run went on
      assert.deepStrictEqual(sent(server, 1).slice(-2).map((m) => [m.role, m.content]), [
        ["assistant", "An answer"],
        ["user", "also this"]
      ])
      cli.write("/exit\r")
      assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())
    } finally {
      await server.close()
    }
  }, 240_000)
})
