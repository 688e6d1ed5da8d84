import { findTool, grepTool, lsTool } from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { context, inWorkspace, text } from "./helpers.ts"
import { describeStaticAttacks, plantOutside } from "./searchAttacks.ts"
import { plant } from "./searchHelpers.ts"

const ctx = context()

describeStaticAttacks("descriptor walk")

/**
 * A separate process that, until killed, renames the folder `dir` away, puts a symbolic link to
 * `outside` in its place, then puts the folder back; it prints how many rounds it did, every 200.
 */
const folderSwapper = `
const fs = require("fs")
const [dir, outside] = process.argv.slice(1)
for (let n = 1; ; n++) {
  try { fs.renameSync(dir, dir + ".away"); fs.symlinkSync(outside, dir) } catch {}
  try { fs.unlinkSync(dir) } catch {}
  try { fs.renameSync(dir + ".away", dir) } catch {}
  if (n % 200 === 0) fs.writeSync(1, n + "\\n")
}
`

const startFolderSwapper = (dir: string, outside: string) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly rounds: () => number; readonly pid: number }>((resume) => {
      const child = spawn(process.execPath, ["-e", folderSwapper, dir, outside], {
        stdio: ["ignore", "pipe", "inherit"]
      })
      let rounds = 0
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        const first = rounds === 0
        rounds = Number(chunk.trim().split("\n").pop())
        if (first) resume(Effect.succeed({ rounds: () => rounds, pid: child.pid! }))
      })
    }),
    ({ pid }) => Effect.sync(() => process.kill(pid, "SIGKILL"))
  )

describe("grep, find and ls under a racing process that swaps a folder for a link to outside", () => {
  it.effect(
    "nothing outside is listed or read over thousands of swaps, and the folder is walked between them",
    () =>
      inWorkspace((root) =>
        Effect.scoped(Effect.gen(function*() {
          const outside = plantOutside(root)
          plant(root, { "d/inside.txt": "inside\n", "d/deeper/more.txt": "inside\n", "top.txt": "inside\n" })
          const swapper = yield* startFolderSwapper(`${root}/d`, outside)
          const before = swapper.rounds()
          const outputs: Array<string> = []
          let walkedInto = 0
          for (let i = 0; i < 3000 && (i < 30 || walkedInto < 10 || swapper.rounds() - before < 1000); i++) {
            const calls = [
              grepTool.execute({ pattern: "SECR[E]T|inside" }, ctx),
              grepTool.execute({ pattern: "SECR[E]T|inside", path: "d" }, ctx),
              findTool.execute({ pattern: "**" }, ctx),
              findTool.execute({ pattern: "*", path: "d" }, ctx),
              lsTool.execute({ path: "d" }, ctx),
              lsTool.execute({}, ctx)
            ]
            for (const call of calls) {
              const result = yield* Effect.result(call)
              const output = result._tag === "Success" ? text(result.success) : String(result.failure)
              outputs.push(output)
              if (output.includes("d/inside.txt")) walkedInto++
            }
            // one turn of the event loop, so the swapper's reports are read
            yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
          }
          assert.isAtLeast(swapper.rounds() - before, 1000, "the swapper raced the tools a thousand times")
          assert.isAtLeast(walkedInto, 10, "the folder was walked between swaps")
          for (const output of outputs) assert.notInclude(output, "SECRET")
        }))
      ),
    180_000
  )
})
