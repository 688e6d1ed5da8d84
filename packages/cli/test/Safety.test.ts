import { encodeTranscriptLine, pairingViolations, parseTranscript } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { createSession, listSessions, openSession, SESSIONS_FOLDER } from "../src/Sessions.ts"
import * as WorkspaceIO from "../src/WorkspaceIO.ts"
import { makeWorkspace, startCli, testEnv } from "./helpers/agent.ts"

const header = { cwd: "/x", provider: "openai-compat", model: "m", systemPrompt: "s" }

describe("the CLI writes only inside its workspace", () => {
  it.effect("a session folder that is a link out of the workspace is refused; nothing is written outside", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      const outside = makeWorkspace()
      symlinkSync(outside, join(ws, ".agentloop"))
      const error = yield* Effect.flip(Effect.scoped(createSession(ws, header)))
      assert.strictEqual(error._tag, "PersistenceError")
      assert.notInclude(error.message, "\n")
      assert.deepStrictEqual(readdirSync(outside), [], "nothing was created outside")
      const demoFile = yield* Effect.flip(WorkspaceIO.createFile(ws, ".agentloop/transcript.jsonl", "x"))
      assert.strictEqual(demoFile.reason, "Outside")
      const escape = yield* Effect.flip(WorkspaceIO.writeFile(ws, "../escape.txt", "x"))
      assert.strictEqual(escape.reason, "Outside")
      assert.deepStrictEqual(readdirSync(outside), [])
    }))

  it.effect("a file is never overwritten by createFile; a link at the target is not followed", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      const outside = makeWorkspace()
      writeFileSync(join(ws, "README.md"), "mine\n")
      const exists = yield* Effect.flip(WorkspaceIO.createFile(ws, "README.md", "theirs\n"))
      assert.strictEqual(exists.reason, "AlreadyExists")
      assert.strictEqual(readFileSync(join(ws, "README.md"), "utf8"), "mine\n")
      writeFileSync(join(outside, "secret"), "keep\n")
      symlinkSync(join(outside, "secret"), join(ws, "link.txt"))
      yield* Effect.flip(WorkspaceIO.writeFile(ws, "link.txt", "overwritten\n"))
      assert.strictEqual(readFileSync(join(outside, "secret"), "utf8"), "keep\n")
    }))

  it.effect("sessions: a torn last line is cut before appending; the list says how each session ended", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const log = yield* createSession(ws, header)
        yield* log.writer.append({ type: "run_start", at: 1, prompt: "fix the tests" })
        yield* log.writer.append({ role: "user", content: "fix the tests" })
        yield* log.writer.append({ role: "assistant", content: [{ type: "text", text: "fixed" }], stopReason: "stop" })
        yield* log.writer.append({ type: "run_end", at: 2, reason: "stop", steps: 1, usage: { input: 10, output: 2 } })
        yield* log.writer.append({ type: "run_start", at: 3, prompt: "and the docs" })
        return log
      }))
      const file = join(ws, SESSIONS_FOLDER, `${first.id}.jsonl`)
      writeFileSync(file, readFileSync(file, "utf8") + `{"role":"user","con`)
      const listed = yield* listSessions(ws)
      assert.deepStrictEqual(listed.map((s) => [s.id, s.firstPrompt, s.runs, s.steps, s.ended]), [
        [first.id, "fix the tests", 2, 1, "interrupted"]
      ])
      const reopened = yield* Effect.scoped(Effect.gen(function*() {
        const log = yield* openSession(ws, first.id)
        yield* log.writer.append({ role: "user", content: "again" })
        return log
      }))
      assert.isTrue(reopened.repairedTornLine)
      const lines = readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0)
      assert.strictEqual(lines[lines.length - 1], encodeTranscriptLine({ role: "user", content: "again" }).trim())
      for (const line of lines) JSON.parse(line)
    }))

  it("the demo refuses an empty --workspace and never overwrites a project's files without --force", async () => {
    const ws = makeWorkspace()
    mkdirSync(join(ws, "src"))
    writeFileSync(join(ws, "README.md"), "my project\n")
    const refused = startCli(["demo", "--workspace", ws], { cwd: ws, env: testEnv(ws) })
    const empty = startCli(["demo", "--workspace", ""], { cwd: ws, env: testEnv(ws) })
    const [a, b] = await Promise.all([refused.exited, empty.exited])
    assert.strictEqual(a.code, 1)
    assert.match(
      refused.stderr(),
      /^agentloop: .*README\.md already exists: the demo does not overwrite your files \(use --force/
    )
    assert.strictEqual(readFileSync(join(ws, "README.md"), "utf8"), "my project\n")
    assert.isFalse(existsSync(join(ws, "src", "math.js")), "the demo stopped before writing anything")
    assert.strictEqual(b.code, 1)
    assert.include(empty.stderr(), "--workspace is empty")
    assert.isFalse(existsSync(join(ws, ".agentloop")), "nothing ran")
  }, 120_000)

  it("the demo under a closed output pipe stops through its scopes and leaves a paired transcript", async () => {
    const ws = makeWorkspace()
    const dir = join(ws, "demo")
    const demo = startCli(["demo", "--workspace", dir], { cwd: ws, env: testEnv(ws) })
    await demo.waitFor("▶ read", 90_000)
    demo.child.stdout!.destroy()
    const { code } = await demo.exited
    assert.strictEqual(code, 0)
    const text = readFileSync(join(dir, ".agentloop", "transcript.jsonl"), "utf8")
    const loaded = Effect.runSync(parseTranscript(text))
    assert.deepStrictEqual(pairingViolations(loaded.messages), [])
    assert.strictEqual(loaded.tornLine, undefined)
    assert.strictEqual(loaded.repaired, 0, "calls cut off by the stop were answered in the file, not on load")
  }, 120_000)

  it(
    "agentloop sessions on a planted sessions folder: no escapes from file names or records, no file read " +
      "through a link",
    async () => {
      const ws = makeWorkspace()
      const outside = makeWorkspace()
      const folder = join(ws, ".agentloop", "sessions")
      mkdirSync(folder, { recursive: true })
      const line = (r: Record<string, unknown>) => `${JSON.stringify(r)}\n`
      writeFileSync(
        join(folder, "evil\u001b]52;c;ZXZpbA==\u0007name.jsonl"),
        line({ type: "session", version: 1, id: "x", at: 1, cwd: ws, provider: "p", model: "m", systemPrompt: "" }) +
          line({ type: "run_start", at: 2, prompt: "task\u001b[2J\u009b31m" }) +
          line({ role: "user", content: "task" }) +
          line({ role: "assistant", content: [{ type: "text", text: "done" }], stopReason: "stop" }) +
          line({ type: "run_end", at: 3, reason: "stop", steps: 1 })
      )
      // a session file that is a link to a file outside, whose first line names a secret
      writeFileSync(
        join(outside, "secret.jsonl"),
        line({
          type: "session",
          version: 1,
          id: "SECRET-0123456789",
          at: 4,
          cwd: "/",
          provider: "p",
          model: "m",
          systemPrompt: ""
        }) + line({ type: "run_start", at: 5, prompt: "SECRET-PROMPT" })
      )
      symlinkSync(join(outside, "secret.jsonl"), join(folder, "zzz-linked.jsonl"))
      const cli = startCli(["sessions"], { cwd: ws, env: testEnv(ws) })
      const { code } = await cli.exited
      assert.strictEqual(code, 0, cli.stderr())
      assert.notMatch(cli.output(), /[\u001b\u009b\u009d]/)
      assert.include(cli.output(), "evilname  ")
      assert.include(cli.output(), "stop  ")
      assert.notInclude(cli.output(), "SECRET-PROMPT", "the linked file was not read")
      assert.include(cli.output(), "zzz-linked  ?    0 step(s)  unreadable:")
    },
    60_000
  )
})
