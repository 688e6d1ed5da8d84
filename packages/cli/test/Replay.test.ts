/**
 * `agentloop replay` as a process, on sessions recorded by the CLI itself (a loopback model, the
 * real coding tools, a deny rule): it replays the same offline in a fresh copy of the workspace as
 * the session's first call found it, uncommitted and untracked files included, with the session's
 * folder and the replay's standing for each other in absolute paths (exit 0); a session without
 * that start replays in git HEAD and says so; it fails naming the run, the step, the call and the
 * difference when a file the session read changed, or a recorded result was edited (exit 1). Bad
 * input is exit 2. `replayPaths` on its own: real paths, trailing slashes, whole folders only.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { replayPaths } from "../src/ReplayCommand.ts"
import {
  jsonLines,
  makeWorkspace,
  providerFlags,
  scriptServer,
  sessionFiles,
  startCli,
  testEnv
} from "./helpers/agent.ts"

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
      assert.include(same.out, "as the session's first call found it, from its start (git tree ")
      assert.include(same.out, "⊘ bash rm notes.txt", "the denied call is denied again")
      assert.include(same.out, "replayed 1 run(s), 4 step(s), 3 tool call(s): the same as the recording")
      assert.strictEqual(readFileSync(join(ws, "notes.txt"), "utf8"), "hello notes\n")
      assert.strictEqual(readFileSync(file, "utf8"), recorded, "the session file is only read")

      // a change since the session is not in the copy of its start; --workspace DIR replays in DIR as it is
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

      // committed: the session's start still has the old notes; a session without its start (an earlier
      // agentloop's) replays in git HEAD, which has the change, and says so
      git(ws, "commit", "-qam", "change the notes")
      assert.strictEqual((await replay(ws, id)).code, 0)
      const withoutStart = join(ws, "without-start.jsonl")
      const lines = recorded.split("\n").filter((line) => !line.includes(`"start":`))
      assert.strictEqual(lines.length, recorded.split("\n").length - 1, "the session has one start")
      writeFileSync(withoutStart, lines.join("\n"))
      const changed = await replay(ws, withoutStart)
      assert.strictEqual(changed.code, 1, changed.out + changed.err)
      assert.include(changed.out, "without .agentloop/ and uncommitted changes, as the session saved no start")
      assert.include(changed.err, `run 1, step 4: the result of call "b1" (bash) differs`)
      // a start that is not a git object's name (a hand-made file) is not given to git: HEAD, and why
      const forged = join(ws, "forged.jsonl")
      writeFileSync(forged, recorded.replace(/"start":"[0-9a-f]+"/, `"start":"--output=${ws}/forged.tar"`))
      const forgedRun = await replay(ws, forged)
      assert.match(
        forgedRun.out,
        /git HEAD \(\w+\) .*, as its start \(git tree --output=.*\) is not the name of a git tree/
      )
      assert.isFalse(existsSync(join(ws, "forged.tar:")) || existsSync(join(ws, "forged.tar")))

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

  it(
    "replays a session begun with uncommitted changes whose test prints absolute paths: the same (0)",
    async () => {
      const ws = makeWorkspace()
      writeFileSync(join(ws, ".gitignore"), ".agentloop/\n.no-user-*/\nnode_modules/\n")
      writeFileSync(join(ws, "lib.js"), "exports.add = (a, b) => a + b\n")
      // prints where it runs (a trailing slash too), a stack trace naming it, and a count
      writeFileSync(
        join(ws, "test.js"),
        [
          `const { add } = require("./lib.js")`,
          `const cases = require("./cases.json")`,
          `console.log(__filename, __dirname + "/")`,
          `let pass = 0, fail = 0`,
          `for (const [a, b, sum] of cases) {`,
          `  if (add(a, b) === sum) pass++`,
          `  else { fail++; console.log(new Error("add(" + a + ", " + b + ") is not " + sum).stack.split("\\n")[1]) }`,
          `}`,
          `console.log("# pass " + pass + (fail > 0 ? " / # fail " + fail : ""))`,
          ``
        ].join("\n")
      )
      git(ws, "init", "-q")
      git(ws, "add", ".")
      git(ws, "commit", "-qm", "start")
      // uncommitted when the session begins: a modified tracked file and a new untracked one
      writeFileSync(join(ws, "lib.js"), "exports.add = (a, b) => a - b // uncommitted\n")
      writeFileSync(join(ws, "cases.json"), "[[1, 0, 1], [2, 2, 4]]\n")
      // ignored, so not in the replay's copy (a call reading it would differ)
      mkdirSync(join(ws, "node_modules"))
      writeFileSync(join(ws, "node_modules", "big.js"), "// not copied\n")
      const server = await scriptServer([
        { calls: [{ id: "t1", name: "bash", args: { command: "node test.js; pwd" } }] },
        { calls: [{ id: "r1", name: "read", args: { path: join(ws, "cases.json") } }] },
        {
          calls: [{
            id: "e1",
            name: "edit",
            args: { path: `${ws}/lib.js`, oldText: "a - b // uncommitted", newText: "a + b // fixed" }
          }]
        },
        { calls: [{ id: "t2", name: "bash", args: { command: `cd ${ws}/ && node ${ws}/test.js` } }] },
        { text: "fixed" }
      ])
      try {
        const cli = startCli(["run", "--yes", ...providerFlags(server), "fix the test"], {
          cwd: ws,
          env: testEnv(ws)
        })
        assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.stderr())
      } finally {
        await server.close()
      }
      const file = sessionFiles(ws)[0]!
      const results = jsonLines(file).filter((line) => line["role"] === "toolResult").map((line) =>
        (line["content"] as Array<{ readonly text: string }>).map((part) => part.text).join("")
      )
      // what was recorded depends on the uncommitted change and names the folder
      assert.include(results[0]!, `${ws}/test.js ${ws}/\n`)
      assert.include(results[0]!, `(${ws}/test.js:`)
      assert.include(results[0]!, `# pass 1 / # fail 1\n${ws}\n`)
      assert.include(results[3]!, "# pass 2\n")
      // the session's start is saved once, on its first call
      const starts = jsonLines(file).filter((line) => line["type"] === "checkpoint" && "start" in line)
      assert.deepStrictEqual(starts.map((line) => [line["run"], line["toolCallId"], line["tool"]]), [[1, "t1", "bash"]])

      // the live workspace moved on since: the replay starts from the session's start all the same
      git(ws, "add", ".")
      git(ws, "commit", "-qm", "fixed")
      writeFileSync(join(ws, "cases.json"), "[]\n")
      const id = file.split("/").pop()!.replace(".jsonl", "")
      const same = await replay(ws, id)
      assert.strictEqual(same.code, 0, same.out + same.err)
      assert.include(same.out, "uncommitted and untracked files included, ignored files (node_modules/...)")
      assert.include(same.out, "replayed 1 run(s), 5 step(s), 4 tool call(s): the same as the recording")
      assert.strictEqual(readFileSync(join(ws, "lib.js"), "utf8"), "exports.add = (a, b) => a + b // fixed\n")
      assert.strictEqual(readFileSync(join(ws, "cases.json"), "utf8"), "[]\n", "the live workspace is not touched")
    },
    300_000
  )

  it("replayPaths: the session's folder and the replay's stand for each other, whole folders only", () => {
    const base = realpathSync(mkdtempSync(join(tmpdir(), "agentloop-replay-paths-")))
    try {
      const real = join(base, "proj")
      mkdirSync(real)
      const link = join(base, "link")
      symlinkSync(real, link)
      const replayDir = join(base, "replay")
      mkdirSync(replayDir)
      // the session ran in `link/` (as its header may say, with a trailing slash): its real path is the same folder
      const paths = replayPaths([`${link}/`], [replayDir])
      assert.deepStrictEqual(
        paths.toReplay({ path: `${link}/a.js`, command: `cat ${real}/b.js ${real}-old/c.js ${base}/x${real}`, n: 1 }),
        { path: `${replayDir}/a.js`, command: `cat ${replayDir}/b.js ${real}-old/c.js ${base}/x${real}`, n: 1 }
      )
      assert.deepStrictEqual(paths.toReplay({ list: [[`file://${link}`]] }), { list: [[`file://${replayDir}`]] })
      assert.strictEqual(
        paths.toRecorded(`at f (${replayDir}/t.js:1:2)\n${replayDir}/\n${replayDir}\n${replayDir}2/x "${replayDir}"`),
        `at f (${link}/t.js:1:2)\n${link}/\n${link}\n${replayDir}2/x "${link}"`
      )
      // the replay's folder through a link is the same folder too
      const replayLink = join(base, "replay-link")
      symlinkSync(replayDir, replayLink)
      assert.strictEqual(replayPaths([real], [replayLink]).toRecorded(`${replayDir}/t.js`), `${real}/t.js`)
      // nothing to map: as it is
      assert.strictEqual(replayPaths([real], [real]).toRecorded(`${real}/t.js`), `${real}/t.js`)
      assert.deepStrictEqual(replayPaths(["/"], [replayDir]).toReplay({ path: "/etc/x" }), { path: "/etc/x" })
    } finally {
      rmSync(base, { recursive: true, force: true })
    }
  })

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
