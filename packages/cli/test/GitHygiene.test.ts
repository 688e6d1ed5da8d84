/**
 * Nothing of agentloop's in the user's project by accident: after real runs in a git repository,
 * `git status` shows what the model changed and nothing of `.agentloop` (sessions, checkpoints,
 * kept output), an older `.agentloop` without a `.gitignore` gets one, a user's own is kept, and
 * the model's grep no longer finds its own session beside the real hit.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { lastToolResult, makeWorkspace, providerFlags, scriptServer, startCli, testEnv } from "./helpers/agent.ts"

const git = (root: string, ...args: Array<string>): string =>
  execFileSync("git", args, {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" }
  })

/** What `git status` shows, every untracked file named. */
const status = (root: string): string => git(root, "status", "--porcelain", "--untracked-files=all")

/** A git repository with one committed file holding the one real TODO. */
const repository = (): string => {
  const ws = makeWorkspace()
  git(ws, "init", "-q")
  git(ws, "config", "user.email", "t@example.com")
  git(ws, "config", "user.name", "t")
  writeFileSync(join(ws, "app.ts"), "// TODO: cache this\n")
  git(ws, "add", "app.ts")
  git(ws, "commit", "-qm", "first")
  return ws
}

/**
 * One `agentloop run` whose model changes the committed file (a checkpoint keeps the old one), runs
 * bash with an output long enough to be kept whole (the output store), then greps for TODO;
 * returns what grep answered.
 */
const run = async (ws: string): Promise<string> => {
  const server = await scriptServer([
    { calls: [{ id: "c1", name: "write", args: { path: "app.ts", content: "// TODO: cache this\nexport {}\n" } }] },
    { calls: [{ id: "c2", name: "bash", args: { command: "seq 1 20000; echo TODO in the output" } }] },
    { calls: [{ id: "c3", name: "grep", args: { pattern: "TODO" } }] },
    { text: "done" }
  ])
  try {
    const cli = startCli(["run", "--yes", ...providerFlags(server), "find the TODO"], { cwd: ws, env: testEnv(ws) })
    const { code } = await cli.exited
    assert.strictEqual(code, 0, cli.output() + cli.stderr())
    return lastToolResult(server.bodies[3]!.body)
  } finally {
    await server.close()
  }
}

/** Runs `f` in a fresh repository, removed afterwards. */
const inRepository = async (f: (ws: string) => Promise<void>): Promise<void> => {
  const ws = repository()
  try {
    await f(ws)
  } finally {
    rmSync(ws, { recursive: true, force: true })
  }
}

describe("agentloop leaves nothing of its own in a git repository", () => {
  it(
    "after a run, git status shows the model's change and nothing of .agentloop; grep finds only the real TODO",
    () =>
      inRepository(async (ws) => {
        const grep = await run(ws)
        assert.includeMembers(readdirSync(join(ws, ".agentloop")), ["sessions", "checkpoints", "output", ".gitignore"])
        assert.strictEqual(status(ws), " M app.ts\n")
        assert.include(grep, "app.ts:1:// TODO: cache this")
        assert.notInclude(grep, ".agentloop/", "neither the session (which holds the task) nor the kept output")
        assert.include(grep, "[.agentloop left out")
      }),
    60_000
  )

  it("an older .agentloop without a .gitignore gets one at the next run", () =>
    inRepository(async (ws) => {
      mkdirSync(join(ws, ".agentloop", "sessions"), { recursive: true })
      writeFileSync(join(ws, ".agentloop", "sessions", "older.jsonl"), "")
      assert.strictEqual(status(ws), "?? .agentloop/sessions/older.jsonl\n")
      await run(ws)
      assert.strictEqual(status(ws), " M app.ts\n")
      assert.isTrue(existsSync(join(ws, ".agentloop", ".gitignore")))
    }), 60_000)

  it("a user's own .agentloop/.gitignore is kept as it is", () =>
    inRepository(async (ws) => {
      mkdirSync(join(ws, ".agentloop"))
      const own = "# ours: commit the config, nothing else\n*\n!.gitignore\n!config.json\n"
      writeFileSync(join(ws, ".agentloop", ".gitignore"), own)
      await run(ws)
      assert.strictEqual(readFileSync(join(ws, ".agentloop", ".gitignore"), "utf8"), own)
      assert.strictEqual(status(ws), " M app.ts\n?? .agentloop/.gitignore\n")
    }), 60_000)
})
