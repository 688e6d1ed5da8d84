import {
  EDIT_MAX_DIFF_CHARS,
  editTool,
  READ_MAX_BYTES,
  READ_MAX_LINE_LENGTH,
  READ_MAX_LINES,
  readTool,
  writeTool
} from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem } from "effect"
import { chownSync, statSync } from "node:fs"
import { context, details, failed, inWorkspace, text } from "./helpers.ts"

const ctx = context()

describe("read", () => {
  it.effect("numbers lines; offset and limit select a window and say how to read on", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString(`${root}/f.txt`, "one\ntwo\nthree\nfour\n")
        const all = yield* readTool.execute({ path: "f.txt" }, ctx)
        assert.strictEqual(text(all), "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour")
        const part = yield* readTool.execute({ path: "f.txt", offset: 2, limit: 2 }, ctx)
        assert.strictEqual(
          text(part),
          "     2\ttwo\n     3\tthree\n\n[Showing lines 2-3 of 4. Use offset=4 to read on.]"
        )
        assert.deepStrictEqual(details(part), {
          path: "f.txt",
          firstLine: 2,
          lastLine: 3,
          totalLines: 4,
          truncated: true
        })
        const past = yield* failed(readTool.execute({ path: "f.txt", offset: 9 }, ctx))
        assert.strictEqual(past.message, "offset 9 is past the end of f.txt, which has 4 lines")
      })
    ))

  it.effect(
    `cuts output at ${READ_MAX_LINES} lines or ${READ_MAX_BYTES} bytes, and long lines at ` +
      `${READ_MAX_LINE_LENGTH}`,
    () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          yield* fs.writeFileString(`${root}/many.txt`, Array.from({ length: 5000 }, (_, i) => `l${i + 1}`).join("\n"))
          const many = text(yield* readTool.execute({ path: "many.txt" }, ctx))
          assert.match(
            many,
            /\[Showing lines 1-2000 of 5000 \(read's limit: 2,000 lines per call\)\. Use offset=2001 to read on\.\]$/
          )
          yield* fs.writeFileString(`${root}/wide.txt`, Array.from({ length: 100 }, () => "x".repeat(1000)).join("\n"))
          const wide = yield* readTool.execute({ path: "wide.txt" }, ctx)
          assert.isAtMost(text(wide).length, READ_MAX_BYTES + 200)
          assert.match(text(wide), /Use offset=\d+ to read on/)
          yield* fs.writeFileString(`${root}/long.txt`, "y".repeat(READ_MAX_LINE_LENGTH + 50))
          assert.match(
            text(yield* readTool.execute({ path: "long.txt" }, ctx)),
            /\[\.\.\. line cut at 2000 characters\]/
          )
        })
      )
  )

  it.effect("refuses binary files, directories and missing files with clear errors", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFile(`${root}/bin.dat`, new Uint8Array([1, 2, 0, 3]))
        yield* fs.makeDirectory(`${root}/dir`)
        assert.strictEqual(
          (yield* failed(readTool.execute({ path: "bin.dat" }, ctx))).message,
          "bin.dat is a binary file (4 bytes); read only shows text files"
        )
        assert.match((yield* failed(readTool.execute({ path: "dir" }, ctx))).message, /dir is a directory/)
        assert.strictEqual(
          (yield* failed(readTool.execute({ path: "nope.txt" }, ctx))).message,
          "nope.txt: no such file or directory"
        )
      })
    ))

  it.effect("returns images as image content, after a note of their type and size", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        // a 2×1 PNG (a real one: images are recognised and checked by their content; see Images.test.ts)
        const png =
          "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAACXBIWXMAAAPoAAAD6AG1e1JrAAAAD0lEQVQImWMQWOAgsMABAAY3" +
          "AeFpUejRAAAAAElFTkSuQmCC"
        yield* fs.writeFile(`${root}/p.png`, Buffer.from(png, "base64"))
        const out = yield* readTool.execute({ path: "p.png" }, ctx)
        assert.deepStrictEqual(typeof out === "string" ? out : out.content, [
          { type: "text", text: "[Image p.png: image/png, 2×1 px, 93 B.]" },
          { type: "image", data: png, mimeType: "image/png" }
        ])
      })
    ))

  it.effect("refuses paths outside the workspace", () =>
    inWorkspace(() =>
      Effect.map(
        failed(readTool.execute({ path: "../x" }, ctx)),
        (e) => assert.match(e.message, /outside the workspace/)
      )
    ))
})

describe("write", () => {
  it.effect("creates parent folders, reports bytes, replaces existing files", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const created = yield* writeTool.execute({ path: "a/b/c.txt", content: "héllo" }, ctx)
        assert.strictEqual(text(created), "Created a/b/c.txt (6 bytes).")
        assert.strictEqual(yield* fs.readFileString(`${root}/a/b/c.txt`), "héllo")
        const replaced = yield* writeTool.execute({ path: "a/b/c.txt", content: "bye" }, ctx)
        assert.strictEqual(text(replaced), "Replaced a/b/c.txt (3 bytes).")
        assert.deepStrictEqual(yield* fs.readDirectory(`${root}/a/b`), ["c.txt"], "no temporary file left")
      })
    ))

  it.effect("refuses directories and paths outside the workspace, touching nothing", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.makeDirectory(`${root}/d`)
        assert.strictEqual(
          (yield* failed(writeTool.execute({ path: "d", content: "x" }, ctx))).message,
          "d is a directory"
        )
        assert.match(
          (yield* failed(writeTool.execute({ path: "../escape.txt", content: "x" }, ctx))).message,
          /outside/
        )
        assert.isFalse(yield* fs.exists(`${root}/../escape.txt`))
      })
    ))

  it.effect("a temporary file left by a crashed write is removed by the next write of that file", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString(`${root}/keep.txt`, "old content")
        yield* fs.writeFileString(`${root}/.keep.txt.agentloop-0123456789abcdef.tmp`, "half of a new con")
        yield* fs.writeFileString(`${root}/.other.txt.agentloop-0123456789abcdef.tmp`, "not ours to remove")
        yield* writeTool.execute({ path: "keep.txt", content: "new content" }, ctx)
        assert.strictEqual(yield* fs.readFileString(`${root}/keep.txt`), "new content")
        assert.sameMembers(yield* fs.readDirectory(root), ["keep.txt", ".other.txt.agentloop-0123456789abcdef.tmp"])
      })
    ))

  it.effect("temporary names are unpredictable: links planted at the old names lead nowhere", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString(`${root}/../victim.txt`, "victim")
        yield* fs.writeFileString(`${root}/keep.txt`, "old")
        // the names the previous implementation used: .<name>.agentloop-<pid>-<counter>.tmp
        for (let n = 1; n <= 300; n++) {
          yield* fs.symlink(`${root}/../victim.txt`, `${root}/.keep.txt.agentloop-${process.pid}-${n}.tmp`)
        }
        for (let n = 0; n < 5; n++) {
          yield* writeTool.execute({ path: "keep.txt", content: `new ${n}` }, ctx)
        }
        yield* editTool.execute({ path: "keep.txt", oldText: "new 4", newText: "edited" }, ctx)
        assert.strictEqual(yield* fs.readFileString(`${root}/../victim.txt`), "victim")
        assert.strictEqual((yield* fs.stat(`${root}/keep.txt`)).type, "File")
        assert.strictEqual(yield* fs.readFileString(`${root}/keep.txt`), "edited")
      })
    ))

  it.effect("keeps the mode (and owner) of the file it replaces", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString(`${root}/run.sh`, "echo hi\n")
        yield* fs.chmod(`${root}/run.sh`, 0o755)
        yield* fs.writeFileString(`${root}/key.pem`, "secret\n")
        yield* fs.chmod(`${root}/key.pem`, 0o600)
        yield* writeTool.execute({ path: "run.sh", content: "echo bye\n" }, ctx)
        yield* editTool.execute({ path: "key.pem", oldText: "secret", newText: "other" }, ctx)
        assert.strictEqual((yield* fs.stat(`${root}/run.sh`)).mode & 0o777, 0o755)
        assert.strictEqual((yield* fs.stat(`${root}/key.pem`)).mode & 0o777, 0o600)
        yield* editTool.execute({ path: "run.sh", oldText: "bye", newText: "again" }, ctx)
        assert.strictEqual((yield* fs.stat(`${root}/run.sh`)).mode & 0o777, 0o755)
        if (process.getuid?.() === 0) {
          // only root may give a file to someone else; then the owner must survive a rewrite too
          chownSync(`${root}/run.sh`, 65534, 65534)
          yield* writeTool.execute({ path: "run.sh", content: "echo owned\n" }, ctx)
          const stat = statSync(`${root}/run.sh`)
          assert.deepStrictEqual([stat.uid, stat.gid, stat.mode & 0o777], [65534, 65534, 0o755])
        }
      })
    ))

  it.effect("a path ending in / names a directory: write refuses it and creates nothing", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const error = yield* failed(writeTool.execute({ path: "newdir/", content: "x" }, ctx))
        assert.match(error.message, /^newdir\/ names a directory/)
        assert.deepStrictEqual(yield* fs.readDirectory(root), [])
      })
    ))
})

describe("edit", () => {
  it.effect("replaces text that occurs exactly once and reports a diff", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString(`${root}/m.js`, "const a = 1\nconst b = 2\nconst c = 3\n")
        const out = yield* editTool.execute({ path: "m.js", oldText: "const b = 2", newText: "const b = 20" }, ctx)
        assert.strictEqual(yield* fs.readFileString(`${root}/m.js`), "const a = 1\nconst b = 20\nconst c = 3\n")
        assert.strictEqual(
          text(out),
          "Edited m.js (1 replacement).\n@@ -1,3 +1,3 @@\n const a = 1\n-const b = 2\n+const b = 20\n const c = 3\n"
        )
        assert.strictEqual(details(out)["replacements"], 1)
      })
    ))

  it.effect("not found and found N times are distinct errors, and the file is untouched", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const original = "x = 1\nx = 1\n"
        yield* fs.writeFileString(`${root}/f.py`, original)
        const missing = yield* failed(editTool.execute({ path: "f.py", oldText: "y = 1", newText: "y = 2" }, ctx))
        assert.match(missing.message, /^oldText was not found in f\.py/)
        const twice = yield* failed(editTool.execute({ path: "f.py", oldText: "x = 1", newText: "x = 2" }, ctx))
        assert.match(twice.message, /^oldText occurs 2 times in f\.py/)
        assert.strictEqual(yield* fs.readFileString(`${root}/f.py`), original)
      })
    ))

  it.effect("replaceAll replaces every occurrence", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString(`${root}/f.py`, "x = 1\nx = 1\n")
        const out = yield* editTool.execute(
          { path: "f.py", oldText: "x = 1", newText: "x = $&2", replaceAll: true },
          ctx
        )
        assert.strictEqual(
          yield* fs.readFileString(`${root}/f.py`),
          "x = $&2\nx = $&2\n",
          "replacement text is literal"
        )
        assert.strictEqual(details(out)["replacements"], 2)
      })
    ))

  it.effect("a replacement text with $ patterns is inserted literally", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString(`${root}/s.sh`, "echo A\n")
        yield* editTool.execute({ path: "s.sh", oldText: "A", newText: "$1 $& $$" }, ctx)
        assert.strictEqual(yield* fs.readFileString(`${root}/s.sh`), "echo $1 $& $$\n")
      })
    ))

  it.effect("refuses an empty oldText, a no-op edit, binary and missing files", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString(`${root}/t.txt`, "abc")
        yield* fs.writeFile(`${root}/b.bin`, new Uint8Array([0, 1]))
        assert.match(
          (yield* failed(editTool.execute({ path: "t.txt", oldText: "", newText: "x" }, ctx))).message,
          /oldText is empty/
        )
        assert.match(
          (yield* failed(editTool.execute({ path: "t.txt", oldText: "a", newText: "a" }, ctx))).message,
          /the same/
        )
        assert.match(
          (yield* failed(editTool.execute({ path: "b.bin", oldText: "a", newText: "b" }, ctx))).message,
          /binary/
        )
        assert.match(
          (yield* failed(editTool.execute({ path: "no.txt", oldText: "a", newText: "b" }, ctx))).message,
          /no such file/
        )
      })
    ))

  it.effect(`a large diff is cut to about ${EDIT_MAX_DIFF_CHARS} characters`, () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const big = Array.from({ length: 2000 }, (_, i) => `line ${i}`).join("\n")
        yield* fs.writeFileString(`${root}/big.txt`, `START\n${big}\nEND`)
        const out = yield* editTool.execute({ path: "big.txt", oldText: big, newText: big.toUpperCase() }, ctx)
        assert.isAtMost(text(out).length, EDIT_MAX_DIFF_CHARS + 200)
        assert.match(text(out), /characters \(\d+ lines\) omitted/)
      })
    ))
})
