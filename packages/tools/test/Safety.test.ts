import {
  EDIT_MAX_FILE_BYTES,
  editTool,
  READ_MAX_FILE_BYTES,
  READ_MAX_LINE_LENGTH,
  readTool,
  Workspace,
  WorkspaceFiles,
  workspaceLayer,
  writeTool
} from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Layer } from "effect"
import * as fc from "fast-check"
import { execFileSync } from "node:child_process"
import { linkSync, truncateSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { context, details, failed, inWorkspace, node, text } from "./helpers.ts"

const ctx = context()

/** Makes a character device like /dev/zero at `path` (needs root); false when not permitted. */
const makeZeroDevice = (path: string): boolean => {
  try {
    execFileSync("mknod", [path, "c", "1", "5"], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}

describe("only regular files", () => {
  it.effect(
    "a FIFO is refused at once by read, edit, write and WorkspaceFiles, and does not starve later reads",
    () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          execFileSync("mkfifo", [`${root}/pipe`])
          yield* fs.writeFileString(`${root}/ok.txt`, "fine\n")
          // more blocked opens than libuv has threads (4) would hang every later file operation
          const errors = yield* Effect.all(
            Array.from({ length: 6 }, () => failed(readTool.execute({ path: "pipe" }, ctx))),
            {
              concurrency: "unbounded"
            }
          )
          for (const e of errors) {
            assert.strictEqual(
              e.message,
              "pipe is a FIFO (named pipe), not a regular file; only regular files are read or written"
            )
          }
          assert.match(
            (yield* failed(editTool.execute({ path: "pipe", oldText: "a", newText: "b" }, ctx))).message,
            /FIFO/
          )
          assert.match((yield* failed(writeTool.execute({ path: "pipe", content: "x" }, ctx))).message, /FIFO/)
          const api = yield* Effect.flip(WorkspaceFiles.readFile("pipe"))
          assert.strictEqual(api.reason, "NotRegularFile")
          assert.strictEqual(text(yield* readTool.execute({ path: "ok.txt" }, ctx)), "     1\tfine")
          assert.strictEqual(yield* fs.readFileString(`${root}/ok.txt`), "fine\n")
        })
      ),
    3000
  )

  it.effect(
    "a character device (like /dev/zero) and a socket are refused at once, nothing read from them",
    () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          const isRoot = process.getuid?.() === 0
          assert.strictEqual(makeZeroDevice(`${root}/zero`), isRoot, "mknod works exactly when root")
          if (isRoot) {
            const error = yield* failed(readTool.execute({ path: "zero" }, ctx))
            assert.strictEqual(
              error.message,
              "zero is a character device, not a regular file; only regular files are read or written"
            )
            assert.match(
              (yield* failed(editTool.execute({ path: "zero", oldText: "\u0000", newText: "b" }, ctx))).message,
              /character device/
            )
          }
          const server = createServer()
          yield* Effect.callback<void>((resume) => void server.listen(`${root}/sock`, () => resume(Effect.void)))
          const error = yield* failed(readTool.execute({ path: "sock" }, ctx)).pipe(
            Effect.ensuring(Effect.sync(() => server.close()))
          )
          assert.strictEqual(
            error.message,
            "sock is a socket, not a regular file; only regular files are read or written"
          )
        })
      ),
    3000
  )

  it.effect(
    "sizes are checked on the opened file: a huge (sparse) file is refused by read and edit without reading it",
    () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          writeFileSync(`${root}/huge.txt`, "x")
          truncateSync(`${root}/huge.txt`, READ_MAX_FILE_BYTES + 1)
          assert.strictEqual(
            (yield* failed(readTool.execute({ path: "huge.txt" }, ctx))).message,
            `huge.txt is ${READ_MAX_FILE_BYTES + 1} bytes, over the limit of ${READ_MAX_FILE_BYTES} bytes`
          )
          assert.strictEqual(
            (yield* failed(editTool.execute({ path: "huge.txt", oldText: "x", newText: "y" }, ctx))).message,
            `huge.txt is ${READ_MAX_FILE_BYTES + 1} bytes, over the limit of ${EDIT_MAX_FILE_BYTES} bytes`
          )
          const api = yield* Effect.flip(WorkspaceFiles.readFile("huge.txt", 1000))
          assert.strictEqual(api.reason, "TooLarge")
        })
      ),
    3000
  )
})

describe("links", () => {
  it.effect(
    "a symbolic link bomb fails fast on the link budget instead of taking exponential time",
    () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          yield* fs.symlink(".", `${root}/l0`)
          for (let i = 1; i <= 24; i++) yield* fs.symlink(`l${i - 1}/l${i - 1}`, `${root}/l${i}`)
          const error = yield* failed(readTool.execute({ path: "l24/x" }, ctx))
          assert.strictEqual(error.message, `Path "l24/x" goes through too many symbolic links (over 40)`)
          assert.strictEqual((yield* Effect.flip(WorkspaceFiles.writeFile("l24/x", "y"))).reason, "TooManyLinks")
        })
      ),
    2000
  )

  it.effect(
    "a file with a second hard link (maybe outside) is neither read nor edited; write replaces the link " +
      "only",
    () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          yield* fs.writeFileString(`${root}/../secret.txt`, "SECRET\n")
          linkSync(`${root}/../secret.txt`, `${root}/linked.txt`)
          const read = yield* failed(readTool.execute({ path: "linked.txt" }, ctx))
          assert.match(read.message, /^linked\.txt has 2 hard links; one of them could be outside the workspace/)
          assert.notInclude(read.message, "SECRET")
          assert.match(
            (yield* failed(editTool.execute({ path: "linked.txt", oldText: "SECRET", newText: "x" }, ctx))).message,
            /hard links/
          )
          yield* writeTool.execute({ path: "linked.txt", content: "mine\n" }, ctx)
          assert.strictEqual(
            yield* fs.readFileString(`${root}/../secret.txt`),
            "SECRET\n",
            "the other link keeps its content"
          )
          assert.strictEqual(yield* fs.readFileString(`${root}/linked.txt`), "mine\n")
        })
      )
  )

  it.effect("absolute links elsewhere are refused (/etc/passwd, a sibling folder, the root's parent)", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const parent = root.slice(0, root.lastIndexOf("/"))
        yield* fs.makeDirectory(`${parent}/sibling`)
        yield* fs.writeFileString(`${parent}/sibling/s.txt`, "SECRET")
        yield* fs.symlink("/etc/passwd", `${root}/passwd`)
        yield* fs.symlink(`${parent}/sibling`, `${root}/sib`)
        yield* fs.symlink(parent, `${root}/parent`)
        yield* fs.symlink(`${root}x`, `${root}/prefix`) // shares the root's spelling as a prefix, but is not inside
        for (const path of ["passwd", "sib/s.txt", "parent/sibling/s.txt", "prefix/a"]) {
          const link = path.split("/")[0]!
          assert.match(
            (yield* failed(readTool.execute({ path }, ctx))).message,
            new RegExp(`symbolic link ${link} points outside`)
          )
          assert.strictEqual((yield* Effect.flip(WorkspaceFiles.writeFile(path, "x"))).reason, "Outside")
        }
        assert.strictEqual(yield* fs.readFileString(`${parent}/sibling/s.txt`), "SECRET")
      })
    ))

  it.effect("a name that starts with two dots (..config/x) is inside, not an escape", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* writeTool.execute({ path: "..config/x", content: "c" }, ctx)
        assert.strictEqual(yield* fs.readFileString(`${root}/..config/x`), "c")
        assert.strictEqual(text(yield* readTool.execute({ path: "..config/x" }, ctx)), "     1\tc")
        const w = yield* Workspace
        assert.strictEqual(yield* w.resolve("..x"), `${root}/..x`)
      })
    ))

  it.effect("confinement of any relative path: it resolves inside the root, or is refused as outside (property)", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.makeDirectory(`${root}/a/b`, { recursive: true })
        yield* fs.symlink("a/b", `${root}/ab`)
        yield* fs.symlink("..", `${root}/a/up`)
        yield* fs.symlink("../..", `${root}/a/b/up2`)
        const w = yield* Workspace
        const segment = fc.constantFrom("a", "b", "ab", "up", "up2", "..", ".", "..config", "x", "")
        yield* Effect.promise(() =>
          fc.assert(fc.asyncProperty(fc.array(segment, { minLength: 1, maxLength: 7 }), async (segments) => {
            const input = segments.join("/")
            if (input.length === 0) return
            const result = await Effect.runPromise(Effect.result(w.resolve(input)))
            if (result._tag === "Success") {
              assert.isTrue(
                result.success === root || result.success.startsWith(`${root}/`),
                `${input} -> ${result.success}`
              )
              assert.notInclude(result.success.slice(root.length), "/../")
            } else {
              assert.match(result.failure.message, /outside the workspace|no such file|not a directory/, input)
            }
          })).then(() => undefined)
        )
      })
    ))
})

describe("files come out as they went in", () => {
  it.effect("edit refuses a file that is not valid UTF-8 and leaves every byte as it was", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const bytes = new Uint8Array([
          ...new TextEncoder().encode("caf"),
          0xe9,
          0x0a,
          ...new TextEncoder().encode("x = 1\n")
        ])
        yield* fs.writeFile(`${root}/latin1.txt`, bytes)
        const error = yield* failed(editTool.execute({ path: "latin1.txt", oldText: "x = 1", newText: "x = 2" }, ctx))
        assert.match(error.message, /^latin1\.txt is not valid UTF-8; edit would change bytes it does not touch/)
        assert.deepStrictEqual(yield* fs.readFile(`${root}/latin1.txt`), bytes)
      })
    ))

  it.effect("edit keeps a UTF-8 BOM and CRLF line endings (matching a model's \\n against the file's \\r\\n)", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString(`${root}/w.cs`, "\uFEFFclass A {\r\n  int x = 1;\r\n  int y = 2;\r\n}\r\n")
        const out = yield* editTool.execute({
          path: "w.cs",
          oldText: "int x = 1;\n  int y = 2;",
          newText: "int x = 10;\n  int y = 20;"
        }, ctx)
        assert.match(text(out), /CRLF line endings/)
        const after = yield* fs.readFile(`${root}/w.cs`)
        assert.deepStrictEqual(Array.from(after.subarray(0, 3)), [0xef, 0xbb, 0xbf], "the BOM is kept")
        assert.strictEqual(
          new TextDecoder("utf-8", { ignoreBOM: true }).decode(after),
          "\uFEFFclass A {\r\n  int x = 10;\r\n  int y = 20;\r\n}\r\n"
        )
      })
    ))

  it.effect("edit changes only the replaced text: every other byte is kept (property)", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const chunk = fc.string({ unit: "binary", maxLength: 40 }).map((s) => s.replaceAll("@@", ""))
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(fc.boolean(), chunk, chunk, chunk, async (bom, head, tail, replacement) => {
              const before = `${bom ? "\uFEFF" : ""}${head}@@OLD@@${tail}`.replaceAll("\u0000", "")
              if (
                before.includes("\uFFFD") || replacement.includes("@@OLD@@") ||
                /[\uD800-\uDFFF]/.test(before + replacement)
              ) return
              const bytes = new TextEncoder().encode(before)
              writeFileSync(`${root}/p.txt`, bytes)
              await Effect.runPromise(
                editTool.execute(
                  { path: "p.txt", oldText: "@@OLD@@", newText: replacement.replaceAll("\u0000", "") },
                  ctx
                ).pipe(
                  Effect.provide(Layer.provide(workspaceLayer(root), node))
                )
              )
              const expected = new TextEncoder().encode(
                before.replace("@@OLD@@", () => replacement.replaceAll("\u0000", ""))
              )
              assert.deepStrictEqual(new Uint8Array(await Effect.runPromise(fs.readFile(`${root}/p.txt`))), expected)
            }),
            { numRuns: 60 }
          )
        )
      })
    ))

  it.effect("overlapping occurrences count: aba occurs twice in ababa", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString(`${root}/o.txt`, "ababa")
        const error = yield* failed(editTool.execute({ path: "o.txt", oldText: "aba", newText: "X" }, ctx))
        assert.match(error.message, /^oldText occurs 2 times in o\.txt/)
        assert.strictEqual(yield* fs.readFileString(`${root}/o.txt`), "ababa")
      })
    ))

  it.effect(
    "replaceAll on every other line of 64k lines (replacement and diff) finishes well within a few seconds",
    () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          yield* fs.writeFileString(`${root}/big.txt`, "let value = 1\nkeep\n".repeat(32_000))
          const out = yield* editTool.execute(
            { path: "big.txt", oldText: "value", newText: "v", replaceAll: true },
            ctx
          )
          assert.strictEqual(details(out)["replacements"], 32_000)
          assert.strictEqual(yield* fs.readFileString(`${root}/big.txt`), "let v = 1\nkeep\n".repeat(32_000))
        })
      ),
    4000
  )

  it.effect("read never cuts a surrogate pair at the line limit", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString(`${root}/emoji.txt`, `${"a".repeat(READ_MAX_LINE_LENGTH - 1)}😀tail`)
        const shown = text(yield* readTool.execute({ path: "emoji.txt" }, ctx))
        assert.isFalse(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/.test(shown), "no lone high surrogate")
        assert.include(
          shown,
          `${"a".repeat(READ_MAX_LINE_LENGTH - 1)} [... line cut at ${READ_MAX_LINE_LENGTH} characters]`
        )
      })
    ))

  it.effect("a file of 0xFF bytes is not text", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFile(`${root}/ff.bin`, new Uint8Array(64).fill(0xff))
        const error = yield* failed(readTool.execute({ path: "ff.bin" }, ctx))
        assert.strictEqual(
          error.message,
          "ff.bin is not valid UTF-8 text (64 bytes; binary, or another encoding); use bash (file, iconv, xxd) " +
            "to look at it"
        )
      })
    ))
})
