/**
 * Checkpoints (Checkpoints.ts) in process: the tools' real executor, wrapped, runs `write`, `edit`
 * and `bash` calls; what the checkpoints saved is then put back. The attacks: a link planted in
 * `.agentloop/checkpoints`, a file swapped for a link between the save and the restore, a saved
 * copy changed since; none gets a write outside the workspace.
 */
import { Executor } from "@agentloop/core"
import type { CheckpointRecord, ToolCall } from "@agentloop/core"
import { codingToolsLayer } from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer } from "effect"
import { execFileSync } from "node:child_process"
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync
} from "node:fs"
import { join } from "node:path"
import { CHECKPOINTS_FOLDER, makeCheckpoints, restoreCheckpoints, workspaceTree } from "../src/Checkpoints.ts"
import type { CheckpointOptions } from "../src/Checkpoints.ts"
import { makeWorkspace } from "./helpers/agent.ts"

const SESSION = "20261202-000000-test"

interface Harness {
  readonly records: Array<CheckpointRecord>
  readonly notices: Array<string>
  /** Runs a call through the wrapped executor; its result's text. */
  readonly call: (name: string, args: Record<string, unknown>) => Effect.Effect<string>
  readonly run: { n: number }
  readonly restore: () => ReturnType<typeof restoreCheckpoints>
}

let ids = 0
const harness = (root: string, options: Partial<CheckpointOptions> = {}) =>
  Effect.gen(function*() {
    const records: Array<CheckpointRecord> = []
    const notices: Array<string> = []
    const run = { n: 1 }
    const checkpoints = yield* makeCheckpoints({
      root,
      sessionId: () => SESSION,
      run: () => run.n,
      append: (r) => Effect.sync(() => void records.push(r)),
      notice: (t) => Effect.sync(() => void notices.push(t)),
      ...options
    })
    const context = yield* Layer.build(codingToolsLayer(root))
    const executor = checkpoints.wrap(Context.get(context, Executor))
    const call = (name: string, args: Record<string, unknown>) => {
      const toolCall: ToolCall = { type: "toolCall", id: `c${++ids}`, name, arguments: args }
      return executor.execute(toolCall, {
        signal: new AbortController().signal,
        reportProgress: () => Effect.void,
        toolCallId: toolCall.id,
        toolName: name
      }).pipe(
        Effect.map((r) => r.content.map((c) => (c.type === "text" ? c.text : "")).join("")),
        Effect.catch((e) => Effect.succeed(`error: ${e.message}`))
      )
    }
    return {
      records,
      notices,
      call,
      run,
      restore: () => restoreCheckpoints(root, SESSION, records)
    } satisfies Harness
  })

const read = (root: string, path: string) => readFileSync(join(root, path), "utf8")

const git = (root: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd: root, encoding: "utf8", env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null" } })

describe("checkpoints: saved before a call changes files, put back on undo", () => {
  it.effect("an edit and a write that creates a file: undoing restores the one and removes the other", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      writeFileSync(join(ws, "a.txt"), "one\n")
      chmodSync(join(ws, "a.txt"), 0o640)
      const h = yield* harness(ws)
      assert.include(yield* h.call("edit", { path: "a.txt", oldText: "one", newText: "two" }), "Edited a.txt")
      assert.include(yield* h.call("edit", { path: "a.txt", oldText: "two", newText: "three" }), "Edited a.txt")
      assert.include(yield* h.call("write", { path: "src/new.txt", content: "new\n" }), "Created src/new.txt")
      yield* h.call("read", { path: "a.txt" })
      // once per run and file: the run's first change counts; read-only tools save nothing
      assert.deepStrictEqual(h.records.map((r) => [r.run, r.tool, r.file?.path, r.file?.absent]), [
        [1, "edit", "a.txt", undefined],
        [1, "write", "src/new.txt", true]
      ])
      const blob = h.records[0]!.file!.blob!
      assert.strictEqual(readFileSync(join(ws, CHECKPOINTS_FOLDER, SESSION, blob), "utf8"), "one\n")
      chmodSync(join(ws, "a.txt"), 0o777)
      const done = yield* h.restore()
      assert.deepStrictEqual(done, { restored: ["a.txt"], removed: ["src/new.txt"], failed: [], notTracked: [] })
      assert.strictEqual(read(ws, "a.txt"), "one\n")
      assert.strictEqual(statSync(join(ws, "a.txt")).mode & 0o777, 0o640, "the mode is put back too")
      assert.isFalse(existsSync(join(ws, "src/new.txt")))
    }))

  it.effect("a new run saves again; two calls writing one file at once save it once, before either runs", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      writeFileSync(join(ws, "a.txt"), "one\n")
      const h = yield* harness(ws)
      yield* Effect.all([
        h.call("write", { path: "a.txt", content: "first\n" }),
        h.call("write", { path: "a.txt", content: "second\n" })
      ], { concurrency: "unbounded" })
      assert.strictEqual(h.records.length, 1)
      assert.strictEqual(
        readFileSync(join(ws, CHECKPOINTS_FOLDER, SESSION, h.records[0]!.file!.blob!), "utf8"),
        "one\n",
        "saved before either write"
      )
      h.run.n = 2
      const changed = read(ws, "a.txt")
      yield* h.call("write", { path: "a.txt", content: "third\n" })
      assert.deepStrictEqual(h.records.map((r) => r.run), [1, 2])
      assert.strictEqual(
        readFileSync(join(ws, CHECKPOINTS_FOLDER, SESSION, h.records[1]!.file!.blob!), "utf8"),
        changed
      )
      // both runs undone: the earliest checkpoint counts
      yield* h.restore()
      assert.strictEqual(read(ws, "a.txt"), "one\n")
    }))

  it.effect("a call begins its checkpoint only once the one going on is recorded (one lock)", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      writeFileSync(join(ws, "a.txt"), "one\n")
      const log: Array<string> = []
      const entered = yield* Deferred.make<void>()
      const open = yield* Deferred.make<void>()
      // how many checkpoints have begun (each asks for the run's number first)
      let begun = 0
      const checkpoints = yield* makeCheckpoints({
        root: ws,
        sessionId: () => SESSION,
        run: () => {
          begun++
          return 1
        },
        // the first record's write is slow: the gate holds it
        append: (r) =>
          Effect.gen(function*() {
            yield* Deferred.succeed(entered, undefined)
            yield* Deferred.await(open)
            log.push(`record ${r.toolCallId}`)
          }),
        notice: () => Effect.void
      })
      const inner = Executor.of({
        definitions: [{ name: "write", description: "", parameters: { type: "object", properties: {} } }],
        execute: (call) =>
          Effect.sync(() => {
            log.push(`run ${call.id}`)
            return { role: "toolResult", toolCallId: call.id, toolName: call.name, content: [], isError: false }
          })
      })
      const executor = checkpoints.wrap(inner)
      const call = (id: string) =>
        executor.execute({ type: "toolCall", id, name: "write", arguments: { path: "a.txt", content: id } }, {
          signal: new AbortController().signal,
          reportProgress: () => Effect.void,
          toolCallId: id,
          toolName: "write"
        })
      const first = yield* Effect.forkChild(call("w1"))
      yield* Deferred.await(entered)
      const second = yield* Effect.forkChild(call("w2"))
      // (w2 would begin its checkpoint now if nothing held it)
      for (let i = 0; i < 20; i++) yield* Effect.yieldNow
      assert.strictEqual(begun, 1, "w2 waits for w1's checkpoint to be recorded")
      assert.deepStrictEqual(log, [])
      yield* Deferred.succeed(open, undefined)
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      assert.strictEqual(log[0], "record w1")
      assert.sameMembers(log, ["record w1", "run w1", "run w2"])
    }))

  it.effect("size bounds: a file over the limit, and past the session's cap, is recorded as not saved", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      writeFileSync(join(ws, "big.bin"), "x".repeat(100))
      writeFileSync(join(ws, "b.txt"), "y".repeat(40))
      writeFileSync(join(ws, "c.txt"), "z".repeat(40))
      const h = yield* harness(ws, { fileLimit: 50, sessionLimit: 60 })
      yield* h.call("write", { path: "big.bin", content: "small" })
      yield* h.call("write", { path: "b.txt", content: "b" })
      yield* h.call("write", { path: "c.txt", content: "c" })
      assert.deepStrictEqual(h.records.map((r) => [r.file?.path, r.file?.blob !== undefined, r.file?.skipped]), [
        ["big.bin", false, "it is larger than 50 bytes"],
        ["b.txt", true, undefined],
        ["c.txt", false, "the session's checkpoints reached their limit of 60 bytes"]
      ])
      assert.strictEqual(h.notices.length, 2, "each file not saved is said on screen")
      assert.match(h.notices[0]!, /big\.bin is not saved for \/undo/)
      const done = yield* h.restore()
      assert.deepStrictEqual(done.restored, ["b.txt"])
      assert.deepStrictEqual(done.failed.map((f) => f.path), ["big.bin", "c.txt"])
      assert.strictEqual(read(ws, "big.bin"), "small", "left as it is")
    }))

  it.effect("bash outside a git repository and another tool: recorded and said as not tracked", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      const h = yield* harness(ws)
      yield* h.call("bash", { command: "echo hi > made.txt" })
      yield* h.call("bash", { command: "true" })
      assert.deepStrictEqual(h.records.map((r) => [r.tool, r.notTracked]), [
        ["bash", "bash: the workspace is not a git repository"]
      ])
      assert.deepStrictEqual(h.notices, [
        "⚠ bash's changes are not tracked for /undo: the workspace is not a git repository"
      ])
      const done = yield* h.restore()
      assert.deepStrictEqual(done.notTracked, ["bash: the workspace is not a git repository"])
      assert.isTrue(existsSync(join(ws, "made.txt")))
    }))
})

describe("checkpoints of bash in a git repository", () => {
  it.effect(
    "the worktree's files before the run's first bash call come back (tracked and untracked, not ignored); the " +
      "user's index, HEAD and stash are untouched",
    () =>
      Effect.gen(function*() {
        const ws = makeWorkspace()
        git(ws, "init", "-q")
        git(ws, "config", "user.email", "t@example.com")
        git(ws, "config", "user.name", "t")
        writeFileSync(join(ws, ".gitignore"), "*.log\n.agentloop/\n")
        writeFileSync(join(ws, "tracked.txt"), "tracked\n")
        writeFileSync(join(ws, "run.sh"), "echo\n")
        chmodSync(join(ws, "run.sh"), 0o755)
        git(ws, "add", ".gitignore", "tracked.txt", "run.sh")
        git(ws, "commit", "-qm", "first")
        writeFileSync(join(ws, "tracked.txt"), "changed by the user, not staged\n")
        writeFileSync(join(ws, "untracked.txt"), "untracked\n")
        writeFileSync(join(ws, "debug.log"), "ignored\n")
        // agentloop's own folder, ignored here, is never part of a checkpoint
        mkdirSync(join(ws, ".agentloop/sessions"), { recursive: true })
        writeFileSync(join(ws, ".agentloop/sessions/s.jsonl"), "{}\n")
        const index = readFileSync(join(ws, ".git/index"))
        const head = git(ws, "rev-parse", "HEAD")
        const status = git(ws, "status", "--porcelain")
        const h = yield* harness(ws)
        yield* h.call("bash", {
          command: "echo bash > tracked.txt; rm untracked.txt run.sh; echo new > made.txt; echo more >> debug.log; " +
            "echo more >> .agentloop/sessions/s.jsonl"
        })
        assert.deepStrictEqual(h.records.map((r) => [r.tree !== undefined, r.after !== undefined]), [
          [true, false],
          [false, true]
        ], "the tree before the run's first bash call, and after the call")
        assert.match(h.records[0]!.tree ?? "", /^[0-9a-f]{40}$/)
        // what the user makes after the run is none of the run's changes
        writeFileSync(join(ws, "later.txt"), "the user's, after the run\n")
        const done = yield* h.restore()
        assert.strictEqual(read(ws, "later.txt"), "the user's, after the run\n")
        assert.deepStrictEqual(done.restored, ["run.sh", "tracked.txt", "untracked.txt"])
        assert.deepStrictEqual(done.removed, ["made.txt"])
        assert.strictEqual(read(ws, "tracked.txt"), "changed by the user, not staged\n")
        assert.strictEqual(read(ws, "untracked.txt"), "untracked\n")
        assert.strictEqual(statSync(join(ws, "run.sh")).mode & 0o777, 0o755)
        assert.isFalse(existsSync(join(ws, "made.txt")))
        assert.strictEqual(read(ws, "debug.log"), "ignored\nmore\n", "ignored files are not tracked")
        assert.strictEqual(read(ws, ".agentloop/sessions/s.jsonl"), "{}\nmore\n")
        assert.isTrue(readFileSync(join(ws, ".git/index")).equals(index), "the user's index is untouched")
        assert.strictEqual(git(ws, "rev-parse", "HEAD"), head)
        assert.strictEqual(git(ws, "stash", "list"), "")
        assert.strictEqual(status, " M tracked.txt\n?? untracked.txt\n")
        assert.strictEqual(git(ws, "status", "--porcelain"), " M tracked.txt\n?? later.txt\n?? untracked.txt\n")
      })
  )

  it.effect("a workspace in a subfolder of a repository: only its own files, paths relative to it", () =>
    Effect.gen(function*() {
      const repo = makeWorkspace()
      git(repo, "init", "-q")
      mkdirSync(join(repo, "app"))
      writeFileSync(join(repo, "outside.txt"), "outside\n")
      writeFileSync(join(repo, "app/in.txt"), "in\n")
      const ws = join(repo, "app")
      const h = yield* harness(ws)
      yield* h.call("bash", { command: "echo changed > in.txt; echo changed > ../outside.txt" })
      const done = yield* h.restore()
      assert.deepStrictEqual(done.restored, ["in.txt"])
      assert.strictEqual(read(ws, "in.txt"), "in\n")
      assert.strictEqual(read(repo, "outside.txt"), "changed\n", "outside the workspace: not touched")
      assert.isUndefined(yield* workspaceTree(makeWorkspace()), "not a repository")
    }))
})

describe("the session's start, for agentloop replay", () => {
  it.effect(
    "its first call, a read-only one too, saves the workspace as a git tree (uncommitted and untracked files, " +
      "not ignored ones); once a session; not for a resumed session that had calls; undoing ignores it",
    () =>
      Effect.gen(function*() {
        const ws = makeWorkspace()
        git(ws, "init", "-q")
        git(ws, "config", "user.email", "t@example.com")
        git(ws, "config", "user.name", "t")
        writeFileSync(join(ws, ".gitignore"), "node_modules/\n.agentloop/\n")
        writeFileSync(join(ws, "a.txt"), "committed\n")
        git(ws, "add", ".")
        git(ws, "commit", "-qm", "first")
        writeFileSync(join(ws, "a.txt"), "uncommitted\n")
        writeFileSync(join(ws, "b.txt"), "untracked\n")
        mkdirSync(join(ws, "node_modules"))
        writeFileSync(join(ws, "node_modules", "dep.js"), "ignored\n")
        const session = { id: SESSION }
        const h = yield* harness(ws, { sessionId: () => session.id, replayStart: true })
        assert.strictEqual(yield* h.call("read", { path: "a.txt" }), "     1\tuncommitted")
        yield* h.call("write", { path: "a.txt", content: "written\n" })
        h.run.n = 2
        yield* h.call("bash", { command: "echo more >> b.txt" })
        const starts = () => h.records.filter((r) => r.start !== undefined)
        assert.deepStrictEqual(starts().map((r) => [r.run, r.tool]), [[1, "read"]])
        const tree = starts()[0]!.start!
        assert.deepStrictEqual(git(ws, "ls-tree", "-r", "--name-only", tree).split("\n").filter(Boolean), [
          ".gitignore",
          "a.txt",
          "b.txt"
        ])
        assert.strictEqual(git(ws, "cat-file", "blob", `${tree}:a.txt`), "uncommitted\n")
        // undoing the session's runs puts back what they changed, not the start
        writeFileSync(join(ws, "c.txt"), "the user's, after the runs\n")
        const done = yield* h.restore()
        assert.deepStrictEqual([done.restored, done.removed], [["a.txt", "b.txt"], []])
        assert.strictEqual(read(ws, "c.txt"), "the user's, after the runs\n")
        // a session begun later in the process (/clear) saves its own
        session.id = "s2"
        yield* h.call("read", { path: "b.txt" })
        assert.deepStrictEqual(starts().map((r) => r.start === tree), [true, false])
        // a resumed session that had calls saves none, nor does a checkpointing that was not asked to
        for (const replayStart of [false, undefined]) {
          const resumed = yield* harness(ws, { replayStart })
          yield* resumed.call("read", { path: "a.txt" })
          yield* resumed.call("bash", { command: "true" })
          assert.deepStrictEqual(resumed.records.filter((r) => r.start !== undefined), [])
        }
      })
  )
})

describe("checkpoints under attack: nothing is written outside the workspace", () => {
  it.effect("a link planted as .agentloop/checkpoints (or its session folder) leading out: nothing saved there", () =>
    Effect.gen(function*() {
      for (const planted of [CHECKPOINTS_FOLDER, `${CHECKPOINTS_FOLDER}/${SESSION}`]) {
        const ws = makeWorkspace()
        const outside = makeWorkspace()
        writeFileSync(join(ws, "a.txt"), "secret content\n")
        mkdirSync(join(ws, planted, ".."), { recursive: true })
        symlinkSync(outside, join(ws, planted))
        const h = yield* harness(ws)
        assert.include(yield* h.call("write", { path: "a.txt", content: "new\n" }), "Replaced a.txt")
        assert.deepStrictEqual(readdirSync(outside), [], `nothing written through ${planted}`)
        assert.match(h.records[0]!.file!.skipped ?? "", /cannot save it: .*outside/)
        assert.match(h.notices[0]!, /a\.txt is not saved for \/undo/)
        const done = yield* h.restore()
        assert.deepStrictEqual(done.failed.map((f) => f.path), ["a.txt"])
        assert.deepStrictEqual(readdirSync(outside), [])
      }
    }))

  it.effect("a file swapped for a link out between the save and the undo: the link is not written through", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      const outside = makeWorkspace()
      writeFileSync(join(outside, "target"), "the user's file outside\n")
      writeFileSync(join(ws, "a.txt"), "one\n")
      const h = yield* harness(ws)
      yield* h.call("edit", { path: "a.txt", oldText: "one", newText: "two" })
      yield* h.call("write", { path: "created.txt", content: "new\n" })
      // the attacker's swap: the edited file and the created one become links out
      unlinkSync(join(ws, "a.txt"))
      symlinkSync(join(outside, "target"), join(ws, "a.txt"))
      unlinkSync(join(ws, "created.txt"))
      symlinkSync(join(outside, "target"), join(ws, "created.txt"))
      // and one inside: restoring through it would change another file of the workspace
      writeFileSync(join(ws, "other.txt"), "other\n")
      writeFileSync(join(ws, "b.txt"), "bee\n")
      yield* h.call("write", { path: "b.txt", content: "changed\n" })
      unlinkSync(join(ws, "b.txt"))
      symlinkSync(join(ws, "other.txt"), join(ws, "b.txt"))
      const done = yield* h.restore()
      assert.strictEqual(readFileSync(join(outside, "target"), "utf8"), "the user's file outside\n")
      assert.strictEqual(read(ws, "other.txt"), "other\n", "not written through the link inside either")
      assert.deepStrictEqual(done.failed.map((f) => f.path), ["a.txt", "b.txt"])
      assert.match(done.failed[1]!.reason, /symbolic link|not a regular file/)
      assert.match(done.failed[0]!.reason, /symbolic link|not a regular file/)
      // the created file is undone by removing what is there: the link itself, not its target
      assert.deepStrictEqual(done.removed, ["created.txt"])
      assert.isFalse(existsSync(join(ws, "created.txt")))
      assert.isTrue(existsSync(join(outside, "target")))
    }))

  it.effect("a folder on the way swapped for a link out: the restore is refused", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      const outside = makeWorkspace()
      mkdirSync(join(ws, "src"))
      writeFileSync(join(ws, "src/a.txt"), "one\n")
      const h = yield* harness(ws)
      yield* h.call("write", { path: "src/a.txt", content: "two\n" })
      rmSync(join(ws, "src"), { recursive: true })
      symlinkSync(outside, join(ws, "src"))
      const done = yield* h.restore()
      assert.deepStrictEqual(done.failed.map((f) => f.path), ["src/a.txt"])
      assert.deepStrictEqual(readdirSync(outside), [])
    }))

  it.effect("a saved copy changed since (or swapped for a link) is not put back", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      const outside = makeWorkspace()
      writeFileSync(join(outside, "evil"), "evil\n")
      writeFileSync(join(ws, "a.txt"), "one\n")
      writeFileSync(join(ws, "b.txt"), "bee\n")
      const h = yield* harness(ws)
      yield* h.call("write", { path: "a.txt", content: "two\n" })
      yield* h.call("write", { path: "b.txt", content: "two\n" })
      const [a, b] = h.records.map((r) => join(ws, CHECKPOINTS_FOLDER, SESSION, r.file!.blob!))
      writeFileSync(a!, "planted\n")
      unlinkSync(b!)
      symlinkSync(join(outside, "evil"), b!)
      const done = yield* h.restore()
      assert.deepStrictEqual(done.restored, [])
      assert.deepStrictEqual(done.failed.map((f) => f.path), ["a.txt", "b.txt"])
      assert.match(done.failed[0]!.reason, /was changed since/)
      assert.strictEqual(read(ws, "a.txt"), "two\n")
      assert.strictEqual(read(ws, "b.txt"), "two\n")
    }))
})
