import { grepTool, SEARCH_TIME_LIMIT_MS } from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { readdirSync } from "node:fs"
import { context, inWorkspace, text } from "./helpers.ts"
import { plant } from "./searchHelpers.ts"

/** The threads of this process (the regex worker is one): this file's tests run one at a time. */
const threads = () => new Set(readdirSync("/proc/self/task"))

/** A grep of a pattern that backtracks without end on one of the files, and a gate its progress opens. */
const stuckGrep = (root: string) =>
  Effect.gen(function*() {
    plant(root, { "a.txt": "fine\n", "b.txt": `${"a".repeat(40)}!\n` })
    const matching = yield* Deferred.make<void>()
    const ctx = context({ reportProgress: () => Effect.asVoid(Deferred.succeed(matching, undefined)) })
    const before = threads()
    const fiber = yield* grepTool.execute({ pattern: "^(a+)+$" }, ctx).pipe(Effect.forkChild)
    yield* Deferred.await(matching)
    const worker = [...threads()].filter((t) => !before.has(t))
    assert.isAtLeast(worker.length, 1, "the match runs in a thread of its own")
    return { fiber, worker }
  })

const gone = (worker: ReadonlyArray<string>) => {
  const now = threads()
  assert.deepStrictEqual(worker.filter((t) => now.has(t)), [], "the worker thread was terminated")
}

describe("a regular expression that backtracks without end", { concurrent: false }, () => {
  it.effect(`is stopped at the time limit (${SEARCH_TIME_LIMIT_MS / 1000} s, TestClock), its worker terminated`, () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const { fiber, worker } = yield* stuckGrep(root)
        yield* TestClock.adjust(SEARCH_TIME_LIMIT_MS - 1)
        assert.isUndefined(fiber.pollUnsafe(), "still searching before the limit")
        yield* TestClock.adjust(1)
        const out = yield* Fiber.join(fiber)
        assert.strictEqual(
          text(out),
          "No matches for ^(a+)+$ in . (2 files searched).\n\n[The search stopped after 30 s: the results are " +
            "incomplete. Narrow path or glob, or simplify the pattern.]"
        )
        gone(worker)
      })
    ))

  it.effect("is stopped when the call is interrupted (an abort, the loop's timeout), its worker terminated", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const { fiber, worker } = yield* stuckGrep(root)
        yield* Fiber.interrupt(fiber)
        assert.isTrue(Exit.hasInterrupts(yield* Fiber.await(fiber)))
        gone(worker)
      })
    ))
})
