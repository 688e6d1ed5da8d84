import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, FileSystem } from "effect"
import { TestClock } from "effect/testing"
import { readFileSync } from "node:fs"
import { BASH_OUTPUT_HEAD, BASH_OUTPUT_TAIL, bashTool } from "@agentloop/tools"
import { context, details, inWorkspace, text } from "./helpers.ts"

/** Whether a process is still running (a zombie counts as gone: it runs nothing). */
const alive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z"
  } catch {
    return false
  }
}

/** A context whose progress is recorded, with a Deferred that completes when `marker` is printed. */
const watching = (marker: string) =>
  Effect.sync(() => {
    const seen: Array<unknown> = []
    const ready = Deferred.makeUnsafe<void>()
    const ctx = context({
      reportProgress: (p) =>
        Effect.sync(() => {
          seen.push(p)
          const chunk = (p as { text?: string }).text
          if (chunk?.includes(marker)) Deferred.doneUnsafe(ready, Exit.void)
        })
    })
    return { seen, ready, ctx }
  })

// Starts a background process (recording its pid) and a foreground one, prints "ready", waits.
const twoSleepers = "sleep 300 & echo $! > bg.pid; sleep 300 & echo $! >> bg.pid; echo ready; wait"

const pidsIn = (root: string) =>
  Effect.map(Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(`${root}/bg.pid`)), (s) =>
    s.trim().split("\n").map(Number))

describe("bash", () => {
  it.effect("runs in the workspace root and returns the output with exit code 0", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const out = yield* bashTool.execute({ command: "pwd; echo hi" }, context())
        assert.strictEqual(text(out), `${root}\nhi\n`)
        assert.deepStrictEqual(details(out), { command: "pwd; echo hi", exitCode: 0, signal: null, timedOut: false, truncated: false })
        assert.isFalse(typeof out !== "string" && out.isError === true)
      })
    ))

  it.effect("a non-zero exit is an error result with the code in details", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const out = yield* bashTool.execute({ command: "echo failing >&2; exit 3" }, context())
        assert.strictEqual(text(out), "failing\n\n[Command exited with code 3.]")
        assert.strictEqual(details(out)["exitCode"], 3)
        assert.isTrue(typeof out !== "string" && out.isError === true)
      })
    ))

  it.effect("a process killed by a signal reports the signal", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const out = yield* bashTool.execute({ command: "kill -KILL $$" }, context())
        assert.strictEqual(details(out)["signal"], "SIGKILL")
        assert.match(text(out), /killed by signal SIGKILL/)
      })
    ))

  it.effect("stdout and stderr stream as progress while the command runs", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const { seen, ctx } = yield* watching("never")
        yield* bashTool.execute({ command: "echo out; echo err >&2" }, ctx)
        assert.sameDeepMembers(seen, [{ stream: "stdout", text: "out\n" }, { stream: "stderr", text: "err\n" }])
      })
    ))

  it.effect(`output is cut to its first ${BASH_OUTPUT_HEAD} and last ${BASH_OUTPUT_TAIL} characters`, () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const out = yield* bashTool.execute({ command: "seq 1 100000; echo THE-END" }, context())
        const t = text(out)
        assert.isTrue(details(out)["truncated"])
        assert.isAtMost(t.length, BASH_OUTPUT_HEAD + BASH_OUTPUT_TAIL + 100)
        assert.isTrue(t.startsWith("1\n2\n3\n"))
        assert.isTrue(t.endsWith("100000\nTHE-END\n"))
        assert.match(t, /\[\.\.\. \d+ characters omitted \.\.\.\]/)
      })
    ))

  it.effect("timeout (TestClock) kills the whole process group: no process survives", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const { ready, ctx } = yield* watching("ready")
        const fiber = yield* bashTool.execute({ command: twoSleepers, timeout: 5 }, ctx).pipe(Effect.forkChild)
        yield* Deferred.await(ready)
        const pids = yield* pidsIn(root)
        assert.isTrue(pids.every(alive), "the background processes are running")
        yield* TestClock.adjust("5 seconds")
        const out = yield* Fiber.join(fiber)
        assert.isTrue(details(out)["timedOut"])
        assert.match(text(out), /ready\n\n\[Command timed out after 5 s; its process group was killed\.\]/)
        assert.deepStrictEqual(pids.filter(alive), [], "no orphan survives")
      })
    ))

  it.effect("interruption (abort) kills the whole process group too", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const { ready, ctx } = yield* watching("ready")
        const fiber = yield* bashTool.execute({ command: twoSleepers }, ctx).pipe(Effect.forkChild)
        yield* Deferred.await(ready)
        const pids = yield* pidsIn(root)
        yield* Fiber.interrupt(fiber)
        assert.deepStrictEqual(pids.filter(alive), [])
      })
    ))

  it.effect("an empty command is refused", () =>
    inWorkspace(() =>
      Effect.map(Effect.flip(bashTool.execute({ command: "  " }, context())), (e) => assert.strictEqual(e.message, "command is empty"))
    ))
})
