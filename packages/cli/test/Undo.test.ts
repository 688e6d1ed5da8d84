/**
 * `/undo`, `/rewind` and `agentloop undo` end to end, against a loopback model: after an edit and
 * after a write (in a pseudo-terminal), after a run that failed or was aborted in the middle of a
 * batch, and after `kill -9` of the CLI in the middle of a call (in memory and `--durable`). Each
 * test checks the files, the `undo` record, and what the next request sends (the undone prompts
 * are gone from it, every call still paired).
 */
import { pairingViolations, parseTranscript } from "@agentloop/core"
import type { Message } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import {
  afterRun,
  answer,
  eventually,
  jsonLines,
  killAll,
  makeWorkspace,
  processesWith,
  providerFlags,
  scriptServer,
  sessionFiles,
  sleepingWith,
  startCli,
  testEnv,
  uniqueSleep
} from "./helpers/agent.ts"
import type { ScriptServer } from "./helpers/agent.ts"

/** The user prompts of the `index`-th request the server got. */
const promptsSent = (server: ScriptServer, index: number) =>
  (server.bodies[index]!.body["messages"] as Array<{ role: string; content: unknown }>)
    .filter((m) => m.role === "user")
    .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)))

const messagesSent = (server: ScriptServer, index: number) =>
  server.bodies[index]!.body["messages"] as Array<{ role: string }>

/** Runs `agentloop undo …` to its end. */
const undoCli = async (ws: string, ...args: Array<string>) => {
  const cli = startCli(["undo", ...args], { cwd: ws, env: testEnv(ws) })
  const { code } = await cli.exitedWithin(90_000)
  return { code, out: cli.output(), err: cli.stderr() }
}

const read = (ws: string, path: string) => readFileSync(join(ws, path), "utf8")

describe("/undo and /rewind in chat (in a pseudo-terminal)", () => {
  it(
    "/undo after a write puts the files back and takes the prompt out of the conversation; again after an edit",
    async () => {
      const ws = makeWorkspace()
      writeFileSync(join(ws, "a.txt"), "one\n")
      const server = await scriptServer([
        { calls: [{ id: "e1", name: "edit", args: { path: "a.txt", oldText: "one", newText: "two" } }] },
        { text: "edited" },
        { calls: [{ id: "w1", name: "write", args: { path: "src/new.txt", content: "new\n" } }] },
        { text: "written" },
        { text: "fresh start" }
      ])
      try {
        const cli = startCli(["chat", "--yes", ...providerFlags(server)], { cwd: ws, env: testEnv(ws), pty: true })
        let at = await answer(cli, "/help for commands", "edit a.txt")
        at = await afterRun(cli, "edited", "write a new file", at)
        at = await afterRun(cli, "written", "/undo", at)
        await cli.waitFor("removed src/new.txt", 90_000, at)
        assert.include(cli.output().slice(at), `undone: "write a new file"`)
        assert.include(cli.output().slice(at), "1 prompt(s) left")
        assert.isFalse(existsSync(join(ws, "src/new.txt")), "the written file is gone")
        assert.strictEqual(read(ws, "a.txt"), "two\n", "the earlier prompt's edit stays")
        at = await answer(cli, /1 prompt\(s\) left[\s\S]*> /, "/undo", at)
        await cli.waitFor("restored a.txt", 90_000, at)
        assert.strictEqual(read(ws, "a.txt"), "one\n", "the edit is undone")
        at = await answer(cli, /0 prompt\(s\) left[\s\S]*> /, "/undo", at)
        await cli.waitFor("nothing to undo", 90_000, at)
        at = await answer(cli, /nothing to undo[\s\S]*> /, "start again", at)
        await cli.waitFor("fresh start", 90_000, at)
        cli.write("/exit\r")
        assert.strictEqual((await cli.exitedWithin(90_000)).code, 0, cli.output())
        // the next request carries none of the undone prompts
        assert.deepStrictEqual(promptsSent(server, 4), ["start again"])
        assert.deepStrictEqual(messagesSent(server, 4).map((m) => m.role).filter((r) => r !== "system"), ["user"])
        // the file keeps the history: the checkpoints, then the undo records naming the runs
        const lines = jsonLines(sessionFiles(ws)[0]!)
        const checkpoints = lines.filter((l) => l["type"] === "checkpoint")
        assert.deepStrictEqual(checkpoints.map((c) => [c["run"], c["tool"], (c["file"] as { path: string }).path]), [
          [1, "edit", "a.txt"],
          [2, "write", "src/new.txt"]
        ])
        const undos = lines.filter((l) => l["type"] === "undo")
        assert.deepStrictEqual(undos.map((u) => [u["runs"], u["restored"], u["removed"]]), [
          [[2], undefined, ["src/new.txt"]],
          [[1], ["a.txt"], undefined]
        ])
        assert.strictEqual(lines.filter((l) => l["role"] === "user").length, 3, "every prompt stays in the file")
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it("/rewind lists the prompts and goes back to before one of them, undoing it and every later one", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([
      { calls: [{ id: "w1", name: "write", args: { path: "one.txt", content: "1\n" } }] },
      { text: "done one" },
      { calls: [{ id: "w2", name: "write", args: { path: "one.txt", content: "2\n" } }] },
      { text: "done two" },
      { calls: [{ id: "w3", name: "write", args: { path: "three.txt", content: "3\n" } }] },
      { text: "done three" },
      { text: "after the rewind" }
    ])
    try {
      const cli = startCli(["chat", "--yes", ...providerFlags(server)], { cwd: ws, env: testEnv(ws), pty: true })
      let at = await answer(cli, "/help for commands", "first prompt")
      at = await afterRun(cli, "done one", "second prompt\\", at)
      at = await answer(cli, "… ", "with a second line", at)
      at = await afterRun(cli, "done two", "third prompt", at)
      at = await afterRun(cli, "done three", "/rewind", at)
      await cli.waitFor("/rewind N goes back", 90_000, at)
      const list = cli.output().slice(at)
      assert.match(list, /1 {2}first prompt/)
      assert.match(list, /2 {2}second prompt\r?\n/, "the first line of each")
      assert.notInclude(list, "with a second line")
      assert.match(list, /3 {2}third prompt/)
      at = await answer(cli, "/rewind N goes back", "/rewind 2", at)
      await cli.waitFor("1 prompt(s) left", 90_000, at)
      assert.include(cli.output().slice(at), `undone: 2 prompts, from "second prompt"`)
      assert.strictEqual(read(ws, "one.txt"), "1\n", "prompt 2's write is undone")
      assert.isFalse(existsSync(join(ws, "three.txt")), "prompt 3's file is gone")
      at = await answer(cli, /1 prompt\(s\) left[\s\S]*> /, "/rewind 5", at)
      await cli.waitFor("there is no prompt 5: the session has 1", 90_000, at)
      at = await answer(cli, /there is no prompt 5[\s\S]*> /, "go on", at)
      await cli.waitFor("after the rewind", 90_000, at)
      cli.write("/exit\r")
      assert.strictEqual((await cli.exitedWithin(90_000)).code, 0, cli.output())
      assert.deepStrictEqual(promptsSent(server, 6), ["first prompt", "go on"])
    } finally {
      await server.close()
    }
  }, 240_000)

  it(
    "aborted in the middle of a batch (Ctrl-C while bash runs): /undo still puts back the write; bash outside git " +
      "is said not tracked",
    async () => {
      const ws = makeWorkspace()
      writeFileSync(join(ws, "a.txt"), "before\n")
      const sleep = uniqueSleep()
      const server = await scriptServer([
        {
          calls: [
            { id: "w1", name: "write", args: { path: "a.txt", content: "after\n" } },
            { id: "b1", name: "bash", args: { command: `sleep ${sleep}` } }
          ]
        },
        { text: "next" }
      ])
      try {
        const cli = startCli(["chat", "--yes", ...providerFlags(server)], { cwd: ws, env: testEnv(ws), pty: true })
        let at = await answer(cli, "/help for commands", "change and wait")
        await cli.waitFor("bash's changes are not tracked for /undo", 90_000, at)
        assert.isTrue(await eventually(() => processesWith(sleep).length > 0, 60_000), "the command started")
        assert.strictEqual(read(ws, "a.txt"), "after\n")
        at = cli.output().length
        cli.write("\u0003")
        await cli.waitFor("run ended: aborted", 90_000, at)
        at = await answer(cli, /usage:[\s\S]*> /, "/undo", at)
        await cli.waitFor("restored a.txt", 90_000, at)
        assert.include(cli.output().slice(at), "not tracked: bash: the workspace is not a git repository")
        assert.strictEqual(read(ws, "a.txt"), "before\n")
        at = await answer(cli, /prompt\(s\) left[\s\S]*> /, "hello", at)
        await cli.waitFor("next", 90_000, at)
        cli.write("/exit\r")
        assert.strictEqual((await cli.exitedWithin(90_000)).code, 0, cli.output())
        assert.deepStrictEqual(promptsSent(server, 1), ["hello"])
      } finally {
        killAll(sleep)
        await server.close()
      }
    },
    240_000
  )
})

const loadFile = (file: string) => Effect.runSync(parseTranscript(readFileSync(file, "utf8"), file))

describe("agentloop undo (from the shell)", () => {
  it("after a run that failed: the files come back, and --continue goes on without it", async () => {
    const ws = makeWorkspace()
    writeFileSync(join(ws, "a.txt"), "one\n")
    const server = await scriptServer([
      { calls: [{ id: "e1", name: "edit", args: { path: "a.txt", oldText: "one", newText: "two" } }] },
      { status: 400, error: "the scripted server refuses this request" },
      { text: "continued" }
    ])
    try {
      const first = startCli(["run", "--yes", ...providerFlags(server), "edit then fail"], {
        cwd: ws,
        env: testEnv(ws)
      })
      assert.strictEqual((await first.exitedWithin(90_000)).code, 1, first.output() + first.stderr())
      assert.strictEqual(read(ws, "a.txt"), "two\n")
      const listed = await undoCli(ws, "--list")
      assert.match(listed.out, /1 {2}edit then fail/)
      const undone = await undoCli(ws)
      assert.strictEqual(undone.code, 0, undone.err)
      assert.include(undone.out, `undone: "edit then fail"`)
      assert.include(undone.out, "restored a.txt")
      assert.strictEqual(read(ws, "a.txt"), "one\n")
      const again = await undoCli(ws)
      assert.strictEqual(again.code, 2)
      assert.include(again.err, "nothing to undo")
      const next = startCli(["run", "--yes", "--continue", ...providerFlags(server), "go on"], {
        cwd: ws,
        env: testEnv(ws)
      })
      assert.strictEqual((await next.exitedWithin(90_000)).code, 0, next.output() + next.stderr())
      assert.deepStrictEqual(promptsSent(server, 2), ["go on"])
    } finally {
      await server.close()
    }
  }, 240_000)

  it(
    "after kill -9 in the middle of a batch: the checkpoints written before the changes put the files back",
    async () => {
      const ws = makeWorkspace()
      writeFileSync(join(ws, "a.txt"), "one\n")
      const sleep = uniqueSleep()
      const server = await scriptServer([
        {
          calls: [
            { id: "e1", name: "edit", args: { path: "a.txt", oldText: "one", newText: "two" } },
            { id: "w1", name: "write", args: { path: "made.txt", content: "made\n" } },
            { id: "b1", name: "bash", args: { command: `sleep ${sleep}` } }
          ]
        },
        { text: "continued" }
      ])
      try {
        const first = startCli(["run", "--yes", ...providerFlags(server), "change, then hang"], {
          cwd: ws,
          env: testEnv(ws)
        })
        assert.isTrue(await eventually(() => processesWith(sleep).length > 0, 90_000), first.output())
        first.child.kill("SIGKILL")
        await first.exited
        killAll(sleep)
        assert.strictEqual(read(ws, "a.txt"), "two\n")
        assert.isTrue(existsSync(join(ws, "made.txt")))
        const undone = await undoCli(ws)
        assert.strictEqual(undone.code, 0, undone.err)
        assert.include(undone.out, "restored a.txt")
        assert.include(undone.out, "removed made.txt")
        assert.strictEqual(read(ws, "a.txt"), "one\n")
        assert.isFalse(existsSync(join(ws, "made.txt")))
        const file = sessionFiles(ws)[0]!
        assert.deepStrictEqual(pairingViolations(loadFile(file).messages), [])
        const next = startCli(["run", "--yes", "--continue", ...providerFlags(server), "go on"], {
          cwd: ws,
          env: testEnv(ws)
        })
        assert.strictEqual((await next.exitedWithin(90_000)).code, 0, next.output() + next.stderr())
        assert.deepStrictEqual(promptsSent(server, 1), ["go on"])
      } finally {
        killAll(sleep)
        await server.close()
      }
    },
    240_000
  )

  it(
    "--durable, killed with kill -9 mid-call in a git repository: undo waits for the run to end; once resumed " +
      "(chat --durable --continue), /undo puts back the edit and bash's files",
    async () => {
      const ws = makeWorkspace()
      const git = (...args: Array<string>) => execFileSync("git", args, { cwd: ws, encoding: "utf8" })
      git("init", "-q")
      // (the tests' XDG_STATE_HOME, where chat keeps its prompt history, is in the workspace: ignored here)
      writeFileSync(join(ws, ".gitignore"), ".agentloop/\n.no-user-state/\n")
      writeFileSync(join(ws, "a.txt"), "one\n")
      const marker = uniqueSleep()
      // the first attempt of the bash call sleeps (and is killed), the second one finishes
      const command =
        `echo attempt >> count.txt; if [ "$(wc -l < count.txt)" -lt 2 ]; then sleep ${marker}; fi; echo finished`
      const server = await scriptServer([
        {
          calls: [
            { id: "e1", name: "edit", args: { path: "a.txt", oldText: "one", newText: "two" } },
            { id: "b1", name: "bash", args: { command } }
          ]
        },
        { text: "all done" }
      ])
      try {
        const first = startCli(["run", "--durable", "--yes", ...providerFlags(server), "edit and count"], {
          cwd: ws,
          env: testEnv(ws)
        })
        assert.isTrue(await eventually(() => sleepingWith(marker).length > 0, 90_000), first.output())
        first.child.kill("SIGKILL")
        await first.exited
        killAll(marker)
        assert.strictEqual(read(ws, "a.txt"), "two\n")
        const refused = await undoCli(ws)
        assert.strictEqual(refused.code, 2)
        assert.include(refused.err, "is a durable run that has not ended: resume it first")
        assert.strictEqual(read(ws, "a.txt"), "two\n", "nothing was undone")

        const cli = startCli(["chat", "--durable", "--continue", "--yes", ...providerFlags(server)], {
          cwd: ws,
          env: testEnv(ws),
          pty: true
        })
        await cli.waitFor("all done", 90_000)
        assert.strictEqual(read(ws, "count.txt"), "attempt\nattempt\n", "the interrupted call ran again")
        const at = await answer(cli, /all done[\s\S]*usage:[\s\S]*> /, "/undo")
        await cli.waitFor("prompt(s) left", 90_000, at)
        const shown = cli.output().slice(at)
        assert.include(shown, "restored a.txt")
        assert.include(shown, "removed count.txt")
        assert.strictEqual(read(ws, "a.txt"), "one\n")
        assert.isFalse(existsSync(join(ws, "count.txt")), "bash's file is gone (the git tree before it)")
        cli.write("/exit\r")
        assert.strictEqual((await cli.exitedWithin(90_000)).code, 0, cli.output())
        // the first process's checkpoints count, not the resumed call's (taken after the kill)
        const lines = jsonLines(sessionFiles(ws)[0]!)
        assert.isAtLeast(lines.filter((l) => l["type"] === "checkpoint").length, 2)
        const messages = loadFile(sessionFiles(ws)[0]!).messages as Array<Message>
        assert.deepStrictEqual(pairingViolations(messages), [])
        assert.strictEqual(git("status", "--porcelain"), "?? .gitignore\n?? a.txt\n")
      } finally {
        killAll(marker)
        await server.close()
      }
    },
    240_000
  )

  it(
    "--durable: a run after an undo, killed and resumed, resumes from the history without the undone prompt",
    async () => {
      const ws = makeWorkspace()
      const marker = uniqueSleep()
      const command =
        `echo attempt >> count.txt; if [ "$(wc -l < count.txt)" -lt 2 ]; then sleep ${marker}; fi; echo finished`
      const server = await scriptServer([
        { calls: [{ id: "w1", name: "write", args: { path: "one.txt", content: "1\n" } }] },
        { text: "done one" },
        { calls: [{ id: "b1", name: "bash", args: { command } }] },
        { text: "all done" }
      ])
      const run = (...args: Array<string>) =>
        startCli(["run", "--durable", "--yes", ...providerFlags(server), ...args], { cwd: ws, env: testEnv(ws) })
      try {
        const one = run("one")
        assert.strictEqual((await one.exitedWithin(90_000)).code, 0, one.output() + one.stderr())
        assert.strictEqual((await undoCli(ws)).code, 0)
        assert.isFalse(existsSync(join(ws, "one.txt")))
        const two = run("--continue", "two")
        assert.isTrue(await eventually(() => sleepingWith(marker).length > 0, 90_000), two.output())
        two.child.kill("SIGKILL")
        await two.exited
        killAll(marker)
        // the same command again resumes the run
        const again = run("two")
        assert.strictEqual((await again.exitedWithin(90_000)).code, 0, again.output() + again.stderr())
        assert.include(again.output(), "↻ resuming the durable run")
        assert.deepStrictEqual(promptsSent(server, 3), ["two"])
        // the file, rebuilt from the journal, holds the resumed run's messages after its prompt
        const file = sessionFiles(ws)[0]!
        const loaded = loadFile(file)
        assert.deepStrictEqual(pairingViolations(loaded.messages), [])
        const texts = loaded.messages.filter((m) => m.role === "assistant").map((m) => JSON.stringify(m.content))
        assert.isTrue(texts.some((t) => t.includes("all done")), texts.join("\n"))
      } finally {
        killAll(marker)
        await server.close()
      }
    },
    240_000
  )
})
