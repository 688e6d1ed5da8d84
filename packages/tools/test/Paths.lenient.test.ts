import { editTool, readTool, Workspace, WorkspaceFiles, writeTool } from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { context, details, failed, inWorkspace, text } from "./helpers.ts"
import { lenientAttacks } from "./lenientAttacks.ts"

const ctx = context()

describe("read: a path that does not exist is matched leniently inside the workspace", () => {
  it.effect("macOS screenshot names: U+202F before AM, typed with a space (pi's scenario)", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        writeFileSync(`${root}/Screenshot 2024-01-01 at 10.00.00\u202FAM.txt`, "the screen\n")
        const out = yield* readTool.execute({ path: "Screenshot 2024-01-01 at 10.00.00 AM.txt" }, ctx)
        assert.strictEqual(
          text(out),
          "[\"Screenshot 2024-01-01 at 10.00.00 AM.txt\" does not exist; used \"Screenshot 2024-01-01 at " +
            "10.00.00\\u202FAM.txt\", the only name that matches it: U+202F (narrow no-break space) where the path " +
            "has a space.]     1\tthe screen"
        )
        assert.strictEqual(details(out)["path"], "Screenshot 2024-01-01 at 10.00.00\u202FAM.txt")
        assert.strictEqual(details(out)["requestedPath"], "Screenshot 2024-01-01 at 10.00.00 AM.txt")
      })
    ))

  it.effect("NFD on disk, NFC typed (and the other way); curly apostrophes; NBSP in a directory's name", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        writeFileSync(`${root}/cafe\u0301.txt`, "nfd\n")
        writeFileSync(`${root}/r\u00E9sum\u00E9.txt`, "nfc\n")
        writeFileSync(`${root}/Capture d\u2019\u00E9cran.txt`, "french\n")
        mkdirSync(`${root}/My\u00A0Docs`)
        writeFileSync(`${root}/My\u00A0Docs/notes.txt`, "notes\n")
        const nfd = yield* readTool.execute({ path: "caf\u00E9.txt" }, ctx)
        assert.include(text(nfd), "decomposed letters (NFD) where the path has composed ones (NFC).]     1\tnfd")
        const nfc = yield* readTool.execute({ path: "re\u0301sume\u0301.txt" }, ctx)
        assert.include(text(nfc), "composed letters (NFC) where the path has decomposed ones (NFD).]     1\tnfc")
        const apostrophe = yield* readTool.execute({ path: "Capture d'\u00E9cran.txt" }, ctx)
        assert.include(
          text(apostrophe),
          "used \"Capture d\\u2019\u00E9cran.txt\", the only name that matches it: U+2019 (right single quotation " +
            "mark (curly apostrophe)) where the path has `'`.]     1\tfrench"
        )
        const directory = yield* readTool.execute({ path: "My Docs/notes.txt" }, ctx)
        assert.include(text(directory), "used \"My\\u00A0Docs/notes.txt\"")
        assert.include(text(directory), "     1\tnotes")
      })
    ))

  it.effect("an exact name always wins, and several lenient matches are refused, naming them", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        writeFileSync(`${root}/a b.txt`, "plain\n")
        writeFileSync(`${root}/a\u00A0b.txt`, "nbsp\n")
        assert.strictEqual(text(yield* readTool.execute({ path: "a b.txt" }, ctx)), "     1\tplain")
        writeFileSync(`${root}/x\u00A0y.txt`, "one\n")
        writeFileSync(`${root}/x\u202Fy.txt`, "two\n")
        const error = yield* failed(readTool.execute({ path: "x y.txt" }, ctx))
        assert.strictEqual(
          error.message,
          "x y.txt: no such file or directory; 2 names differ from it only in spaces, quotes or Unicode form " +
            `(${["\"x\\u00A0y.txt\"", "\"x\\u202Fy.txt\""].sort().join(", ")}): give the one you mean`
        )
      })
    ))

  it.effect("edit finds the file leniently too, and says so; write and WorkspaceFiles stay exact", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        writeFileSync(`${root}/it\u2019s.md`, "old\n")
        const out = yield* editTool.execute({ path: "it's.md", oldText: "old", newText: "new" }, ctx)
        assert.match(
          text(out),
          /^\["it's\.md" does not exist; used "it\\u2019s\.md", .*\]\nEdited it\u2019s\.md \(1 replacement\)/
        )
        assert.strictEqual(readFileSync(`${root}/it\u2019s.md`, "utf8"), "new\n")
        yield* writeTool.execute({ path: "it's.md", content: "separate\n" }, ctx)
        assert.strictEqual(readFileSync(`${root}/it's.md`, "utf8"), "separate\n", "write creates the name it is given")
        assert.strictEqual(readFileSync(`${root}/it\u2019s.md`, "utf8"), "new\n")
        writeFileSync(`${root}/n\u00A0b`, "x")
        assert.strictEqual((yield* Effect.flip(WorkspaceFiles.readFile("n b"))).reason, "NotFound")
        assert.isFalse(yield* WorkspaceFiles.exists("n b"))
        const w = yield* Workspace
        assert.strictEqual(yield* w.resolve("n b"), `${root}/n b`, "resolve names the path as given")
      })
    ))

  it.effect("a name with no lenient match is still \"no such file\", as before", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        writeFileSync(`${root}/other.txt`, "x")
        assert.strictEqual(
          (yield* failed(readTool.execute({ path: "dir/none.txt" }, ctx))).message,
          "dir/none.txt: no such file or directory"
        )
        assert.strictEqual(
          (yield* failed(readTool.execute({ path: "none.txt" }, ctx))).message,
          "none.txt: no such file or directory"
        )
      })
    ))
})

describe("lenient paths keep every confinement rule", () => {
  it.effect("links behind lenient names lead nowhere outside (read and edit)", () => inWorkspace(lenientAttacks))
})

/**
 * A separate process that, until killed, swaps the lenient twin of a name between a regular
 * file, a link to a file outside, nothing, and two twins at once; and a directory's twin between a
 * directory and a link to one outside. It prints how many rounds it did every 200.
 */
const swapperScript = `
const fs = require("fs")
const [root, outside] = process.argv.slice(1)
const file = root + "/x\\u202Fy.txt", other = root + "/x\\u00A0y.txt", dir = root + "/d\\u202Fx"
let n = 0
for (;;) {
  try { fs.writeFileSync(file + ".t", "inside"); fs.renameSync(file + ".t", file) } catch {}
  try { fs.symlinkSync(outside + "/secret.txt", file + ".l"); fs.renameSync(file + ".l", file) } catch {}
  try { fs.unlinkSync(file) } catch {}
  try { fs.writeFileSync(file, "inside"); fs.writeFileSync(other, "inside"); fs.unlinkSync(other) } catch {}
  try { fs.symlinkSync(outside, dir + ".l"); fs.renameSync(dir + ".l", dir) } catch {}
  try { fs.unlinkSync(dir); fs.mkdirSync(dir); fs.writeFileSync(dir + "/secret.txt", "inside") } catch {}
  try { fs.rmSync(dir, { recursive: true, force: true }) } catch {}
  if (++n % 200 === 0) fs.writeSync(1, n + "\\n")
}
`

const startSwapper = (root: string, outside: string, atLeast: number) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly rounds: () => number; readonly pid: number }>((resume) => {
      const child = spawn(process.execPath, ["-e", swapperScript, root, outside], {
        stdio: ["ignore", "pipe", "inherit"]
      })
      let rounds = 0
      let started = false
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        rounds = Number(chunk.trim().split("\n").pop())
        if (!started && rounds >= atLeast) {
          started = true
          resume(Effect.succeed({ rounds: () => rounds, pid: child.pid! }))
        }
      })
    }),
    ({ pid }) => Effect.sync(() => process.kill(pid, "SIGKILL"))
  )

describe("lenient paths under a racing process", () => {
  it.effect(
    "a twin swapped for a link outside, removed and doubled while read and edit look it up: nothing outside " +
      "is read or written, and every call ends",
    () =>
      inWorkspace((root) =>
        Effect.scoped(Effect.gen(function*() {
          const outside = `${root}/../outside`
          mkdirSync(outside)
          writeFileSync(`${outside}/secret.txt`, "SECRET")
          const swapper = yield* startSwapper(root, outside, 200)
          const before = swapper.rounds()
          const attempt = <A, R>(effect: Effect.Effect<A, unknown, R>) =>
            Effect.match(effect, { onFailure: () => undefined, onSuccess: (a) => a })
          const seen = new Set<string>()
          let ok = 0
          for (let i = 0; i < 20_000 && (i < 200 || swapper.rounds() - before < 400 || ok < 10); i++) {
            for (const path of ["x y.txt", "d x/secret.txt"]) {
              const read = yield* attempt(readTool.execute({ path }, ctx))
              if (read !== undefined) {
                ok++
                seen.add(text(read).replace(/^\[.*\]/, ""))
              }
            }
            yield* attempt(editTool.execute({ path: "x y.txt", oldText: "SECRET", newText: "pwned" }, ctx))
            if (i % 20 === 0) yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
          }
          assert.isAtLeast(swapper.rounds() - before, 400, "the swapper raced the lookups hundreds of times")
          assert.isAtLeast(ok, 10, "reads succeeded between swaps")
          for (const s of seen) {
            // the swapper's file as written, or caught between its creation and its write
            assert.isTrue(s === "     1\tinside" || /^(x|d)\u202F?.* is empty\.$/u.test(s), s)
            assert.notInclude(s, "SECRET", "nothing outside was read")
          }
          assert.strictEqual(readFileSync(`${outside}/secret.txt`, "utf8"), "SECRET", "nothing outside was written")
          assert.deepStrictEqual(readdirSync(outside), ["secret.txt"])
          assert.isFalse(existsSync(`${outside}/pwned`))
        }))
      ),
    120_000
  )
})
