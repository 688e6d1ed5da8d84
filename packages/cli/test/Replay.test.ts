/**
 * `agentloop replay` as a process, on a session recorded by the CLI itself (a loopback model, the
 * real coding tools, a deny rule): it replays the same offline in a fresh copy of git HEAD (exit 0),
 * and fails naming the run, the step, the call and the difference when a file the session read
 * changed, or a recorded result was edited (exit 1). Bad input is exit 2.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { makeWorkspace, providerFlags, scriptServer, sessionFiles, startCli, testEnv } from "./helpers/agent.ts"

const git = (ws: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd: ws, stdio: "ignore" })

/** A git project with `notes.txt` committed and a deny rule, and a session recorded in it. */
const recordSession = async () => {
  const ws = makeWorkspace()
  writeFileSync(join(ws, "notes.txt"), "hello notes\n")
  mkdirSync(join(ws, ".agentloop"))
  writeFileSync(join(ws, ".agentloop", "config.json"), JSON.stringify({ permissions: { deny: ["bash(rm *)"] } }))
  writeFileSync(join(ws, ".gitignore"), ".agentloop/\n")
  git(ws, "init", "-q")
  git(ws, "add", ".")
  git(ws, "commit", "-qm", "start")
  const server = await scriptServer([
    { calls: [{ id: "w1", name: "write", args: { path: "a.txt", content: "one\n" } }] },
    { calls: [{ id: "r1", name: "read", args: { path: "a.txt" } }] },
    {
      calls: [
        { id: "b1", name: "bash", args: { command: "cat notes.txt" } },
        { id: "d1", name: "bash", args: { command: "rm notes.txt" } }
      ]
    },
    { text: "done" }
  ])
  try {
    const cli = startCli(["run", "--yes", ...providerFlags(server), "write, read, cat"], { cwd: ws, env: testEnv(ws) })
    assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.stderr())
  } finally {
    await server.close()
  }
  const file = sessionFiles(ws)[0]!
  const id = file.split("/").pop()!.replace(".jsonl", "")
  return { ws, file, id }
}

const replay = async (ws: string, ...args: Array<string>) => {
  const cli = startCli(["replay", ...args], { cwd: ws, env: testEnv(ws) })
  const { code } = await cli.exitedWithin(120_000)
  return { code, out: cli.output(), err: cli.stderr() }
}

describe("agentloop replay", () => {
  it(
    "replays a recorded session offline: the same (0); a changed file the session read, an edited result (1)",
    async () => {
      const { file, id, ws } = await recordSession()
      const recorded = readFileSync(file, "utf8")
      assert.include(recorded, "Tool call was not executed because it was denied: denied by the permission rule")
      assert.strictEqual(readFileSync(join(ws, "notes.txt"), "utf8"), "hello notes\n", "the rm was denied")

      const same = await replay(ws, id)
      assert.strictEqual(same.code, 0, same.out + same.err)
      assert.include(same.out, "replaying in a fresh copy of git HEAD")
      assert.include(same.out, "⊘ bash rm notes.txt", "the denied call is denied again")
      assert.include(same.out, "replayed 1 run(s), 4 step(s), 3 tool call(s): the same as the recording")
      assert.strictEqual(readFileSync(join(ws, "notes.txt"), "utf8"), "hello notes\n")
      assert.strictEqual(readFileSync(file, "utf8"), recorded, "the session file is only read")

      // an uncommitted change is not in the copy of HEAD; --workspace DIR replays in DIR as it is
      writeFileSync(join(ws, "notes.txt"), "changed notes\n")
      assert.strictEqual((await replay(ws, id)).code, 0)
      // (the session's a.txt would make the write differ too: "Replaced", not "Created")
      rmSync(join(ws, "a.txt"))
      const live = await replay(ws, id, "--workspace", ws)
      assert.strictEqual(live.code, 1, live.out + live.err)
      assert.include(
        live.err,
        `agentloop replay: diverged: run 1, step 4: the result of call "b1" (bash) differs from the recorded one: ` +
          `recorded "hello notes\\n", replayed "changed notes\\n"`
      )

      // committed: the copy of HEAD has it too
      git(ws, "commit", "-qam", "change the notes")
      const changed = await replay(ws, id)
      assert.strictEqual(changed.code, 1, changed.out + changed.err)
      assert.include(changed.err, `run 1, step 4: the result of call "b1" (bash) differs`)

      // a copy of the session with the read's recorded result edited, replayed by path
      git(ws, "checkout", "-q", "HEAD~1")
      const edited = join(ws, "edited.jsonl")
      const editedText = recorded.replace(`"text":"     1\\tone"`, `"text":"     1\\tONE"`)
      assert.notStrictEqual(editedText, recorded)
      writeFileSync(edited, editedText)
      const editedRun = await replay(ws, edited)
      assert.strictEqual(editedRun.code, 1, editedRun.out + editedRun.err)
      assert.include(editedRun.err, `run 1, step 3: the result of call "r1" (read) differs from the recorded one`)
    },
    300_000
  )

  it("outside a git repository it replays in a copy of the folder without .agentloop/", async () => {
    const ws = makeWorkspace()
    writeFileSync(join(ws, "notes.txt"), "plain notes\n")
    const server = await scriptServer([
      { calls: [{ id: "b1", name: "bash", args: { command: "cat notes.txt; ls" } }] },
      { text: "done" }
    ])
    try {
      const cli = startCli(["run", "--yes", ...providerFlags(server), "cat"], { cwd: ws, env: testEnv(ws) })
      assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.stderr())
    } finally {
      await server.close()
    }
    const id = sessionFiles(ws)[0]!.split("/").pop()!.replace(".jsonl", "")
    const same = await replay(ws, id)
    assert.strictEqual(same.code, 0, same.out + same.err)
    assert.include(same.out, "(not a git repository), without .agentloop/")
    writeFileSync(join(ws, "notes.txt"), "other notes\n")
    const changed = await replay(ws, id)
    assert.strictEqual(changed.code, 1, changed.out + changed.err)
    assert.include(changed.err, `recorded "plain notes\\nnotes.txt\\n", replayed "other notes\\nnotes.txt\\n"`)
  }, 240_000)

  it("bad input: an unknown session, an invalid file: one line, exit 2", async () => {
    const ws = makeWorkspace()
    mkdirSync(join(ws, ".agentloop", "sessions"), { recursive: true })
    writeFileSync(join(ws, ".agentloop", "sessions", "broken.jsonl"), `{"type":"session","at":1}\n{not json\n{}\n`)
    writeFileSync(join(ws, ".agentloop", "sessions", "empty.jsonl"), `{"type":"session","at":1}\n`)
    const cases: Array<[Array<string>, string]> = [
      [["nope"], `no session "nope"`],
      [["broken"], "line 2 is not valid JSON"],
      [["empty"], "has no run to replay"],
      [["/etc/passwd"], "is outside the workspace"]
    ]
    for (const [args, expected] of cases) {
      const result = await replay(ws, ...args)
      assert.strictEqual(result.code, 2, `${args.join(" ")}: ${result.out}${result.err}`)
      assert.notInclude(result.err.trim(), "\n")
      assert.include(result.err, expected)
    }
  }, 120_000)
})
