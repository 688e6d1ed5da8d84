import { editTool, readTool } from "@agentloop/tools"
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs"
import { context, failed } from "./helpers.ts"

const ctx = context()

/**
 * Look-alike twins of typed names that are links out of the workspace, to a file and to a
 * folder, absolute and relative: read and edit refuse them as any such link, read nothing and
 * write nothing outside. Run on each walk (Paths.lenient.test.ts, PathWalk.lenient.test.ts).
 */
export const lenientAttacks = (root: string) =>
  Effect.gen(function*() {
    const outside = `${root}/../outside`
    mkdirSync(outside)
    writeFileSync(`${outside}/secret.txt`, "SECRET")
    // lenient twins of a typed name that are links out of the workspace: refused like any such link
    symlinkSync(`${outside}/secret.txt`, `${root}/a\u00A0b.txt`)
    symlinkSync(outside, `${root}/d\u202Fx`)
    symlinkSync("../outside/secret.txt", `${root}/rel\u2019s`)
    for (const path of ["a b.txt", "d x/secret.txt", "rel's"]) {
      const error = yield* failed(readTool.execute({ path }, ctx))
      assert.match(error.message, /points outside/, path)
      assert.notInclude(error.message, "SECRET")
      const edit = yield* failed(editTool.execute({ path, oldText: "SECRET", newText: "pwned" }, ctx))
      assert.match(edit.message, /points outside/, path)
    }
    // `..` is never looked up leniently (it is taken lexically first), nor is a name from outside
    assert.match(
      (yield* failed(readTool.execute({ path: "../outside/secret.txt" }, ctx))).message,
      /outside the workspace/
    )
    assert.match(
      (yield* failed(readTool.execute({ path: "\u2024\u2024/outside/secret.txt" }, ctx))).message,
      /no such file/
    )
    assert.strictEqual(readFileSync(`${outside}/secret.txt`, "utf8"), "SECRET")
    assert.deepStrictEqual(readdirSync(outside), ["secret.txt"])
  })
