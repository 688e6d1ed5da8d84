import { editTool, WorkspaceFiles, writeTool } from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem } from "effect"
import { context, failed, inWorkspace } from "./helpers.ts"

const ctx = context()

describe("WorkspaceFiles (the confined layer for the CLI's own files)", () => {
  it.effect("writeFile creates parents and replaces atomically; createFile refuses to overwrite", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* WorkspaceFiles.writeFile("demo/app.js", "one\n")
        yield* WorkspaceFiles.writeFile("demo/app.js", "two\n")
        assert.strictEqual(yield* fs.readFileString(`${root}/demo/app.js`), "two\n")
        const exists = yield* Effect.flip(WorkspaceFiles.createFile("demo/app.js", "three\n"))
        assert.strictEqual(exists.reason, "AlreadyExists")
        assert.strictEqual(exists.message, "demo/app.js already exists")
        assert.strictEqual(yield* fs.readFileString(`${root}/demo/app.js`), "two\n")
        yield* WorkspaceFiles.createFile("demo/new.js", new TextEncoder().encode("new\n"))
        assert.strictEqual(yield* WorkspaceFiles.readFileString("demo/new.js"), "new\n")
        assert.sameMembers(yield* fs.readDirectory(`${root}/demo`), ["app.js", "new.js"], "no temporary file left")
      })
    ))

  it.effect("openAppend appends whole lines to a file it creates, and reads back", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* Effect.scoped(Effect.gen(function*() {
          const log = yield* WorkspaceFiles.openAppend(".agentloop/sessions/s1.jsonl")
          assert.strictEqual(log.path, ".agentloop/sessions/s1.jsonl")
          yield* log.append("{\"n\":1}\n")
          yield* log.append(new TextEncoder().encode("{\"n\":2}\n"))
          // flushed line by line: another reader sees it before the file is closed
          assert.strictEqual(yield* fs.readFileString(`${root}/.agentloop/sessions/s1.jsonl`), "{\"n\":1}\n{\"n\":2}\n")
        }))
        yield* Effect.scoped(
          Effect.flatMap(WorkspaceFiles.openAppend(".agentloop/sessions/s1.jsonl"), (log) => log.append("{\"n\":3}\n"))
        )
        assert.strictEqual(
          yield* WorkspaceFiles.readFileString(".agentloop/sessions/s1.jsonl"),
          "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n"
        )
      })
    ))

  it.effect("links planted to outside (a .agentloop folder, a demo file) are refused and nothing outside changes", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const outside = `${root}/../outside`
        yield* fs.makeDirectory(outside)
        yield* fs.writeFileString(`${outside}/README.md`, "the user's own file\n")
        yield* fs.symlink(outside, `${root}/.agentloop`)
        yield* fs.symlink(`${outside}/README.md`, `${root}/README.md`)
        const append = yield* Effect.flip(Effect.scoped(WorkspaceFiles.openAppend(".agentloop/sessions/s.jsonl")))
        assert.strictEqual(append.reason, "Outside")
        assert.match(append.message, /the symbolic link \.agentloop points outside/)
        assert.strictEqual((yield* Effect.flip(WorkspaceFiles.writeFile("README.md", "demo\n"))).reason, "Outside")
        assert.strictEqual((yield* Effect.flip(WorkspaceFiles.createFile(".agentloop/x", "x"))).reason, "Outside")
        assert.strictEqual((yield* Effect.flip(WorkspaceFiles.makeDirectory(".agentloop/sessions"))).reason, "Outside")
        assert.strictEqual((yield* Effect.flip(WorkspaceFiles.readFile("README.md"))).reason, "Outside")
        assert.strictEqual((yield* Effect.flip(WorkspaceFiles.exists("README.md"))).reason, "Outside")
        assert.match(
          (yield* failed(writeTool.execute({ path: "README.md", content: "x" }, ctx))).message,
          /points outside/
        )
        assert.match(
          (yield* failed(editTool.execute({ path: "README.md", oldText: "user", newText: "x" }, ctx))).message,
          /points outside/
        )
        assert.deepStrictEqual(yield* fs.readDirectory(outside), ["README.md"])
        assert.strictEqual(yield* fs.readFileString(`${outside}/README.md`), "the user's own file\n")
        assert.strictEqual((yield* fs.lstat(`${root}/README.md`)).type, "SymbolicLink", "the link itself is left alone")
      })
    ))

  it.effect("makeDirectory and exists; paths outside fail rather than answer", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* WorkspaceFiles.makeDirectory("a/b/c")
        yield* WorkspaceFiles.makeDirectory("a/b/c")
        assert.strictEqual((yield* fs.stat(`${root}/a/b/c`)).type, "Directory")
        assert.isTrue(yield* WorkspaceFiles.exists("a/b"))
        assert.isFalse(yield* WorkspaceFiles.exists("a/nope"))
        assert.isFalse(yield* WorkspaceFiles.exists("nope/deeper"))
        assert.strictEqual((yield* Effect.flip(WorkspaceFiles.exists("../x"))).reason, "Outside")
        assert.strictEqual((yield* Effect.flip(WorkspaceFiles.writeFile("a/b", "x"))).reason, "IsDirectory")
        assert.strictEqual((yield* Effect.flip(WorkspaceFiles.readFileString("a"))).reason, "IsDirectory")
        assert.strictEqual((yield* Effect.flip(WorkspaceFiles.writeFile("", "x"))).reason, "InvalidPath")
      })
    ))

  it.effect("removeFile removes a file, or a link itself (never what it points to); refuses folders and outside", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const outside = `${root}/../outside-remove`
        yield* fs.makeDirectory(outside)
        yield* fs.writeFileString(`${outside}/keep.txt`, "the user's own file\n")
        yield* WorkspaceFiles.writeFile("a/new.txt", "new\n")
        assert.isTrue(yield* WorkspaceFiles.removeFile("a/new.txt"))
        assert.isFalse(yield* WorkspaceFiles.exists("a/new.txt"))
        assert.isFalse(yield* WorkspaceFiles.removeFile("a/new.txt"), "nothing there: nothing removed")
        assert.isFalse(yield* WorkspaceFiles.removeFile("nope/deeper.txt"), "no folder: nothing removed")
        yield* fs.symlink(`${outside}/keep.txt`, `${root}/a/link.txt`)
        assert.isTrue(yield* WorkspaceFiles.removeFile("a/link.txt"))
        assert.strictEqual(yield* fs.readFileString(`${outside}/keep.txt`), "the user's own file\n")
        assert.strictEqual((yield* Effect.flip(WorkspaceFiles.removeFile("a"))).reason, "IsDirectory")
        assert.strictEqual(
          (yield* Effect.flip(WorkspaceFiles.removeFile("../outside-remove/keep.txt"))).reason,
          "Outside"
        )
        yield* fs.symlink(outside, `${root}/out`)
        assert.strictEqual((yield* Effect.flip(WorkspaceFiles.removeFile("out/keep.txt"))).reason, "Outside")
        assert.deepStrictEqual(yield* fs.readDirectory(outside), ["keep.txt"])
      })
    ))

  it.effect("writeFile with followLinks false refuses a link in the last component; mode sets the bits", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* WorkspaceFiles.writeFile("target.txt", "target\n")
        yield* fs.symlink(`${root}/target.txt`, `${root}/link.txt`)
        const refused = yield* Effect.flip(WorkspaceFiles.writeFile("link.txt", "x", { followLinks: false }))
        assert.strictEqual(refused.reason, "NotRegularFile")
        assert.strictEqual(yield* fs.readFileString(`${root}/target.txt`), "target\n")
        yield* WorkspaceFiles.writeFile("run.sh", "echo\n", { mode: 0o755 })
        assert.strictEqual((yield* fs.stat(`${root}/run.sh`)).mode & 0o777, 0o755)
        yield* WorkspaceFiles.writeFile("run.sh", "echo 2\n", { mode: 0o640, followLinks: false })
        assert.strictEqual((yield* fs.stat(`${root}/run.sh`)).mode & 0o777, 0o640)
      })
    ))

  it.effect("readFileInfo says where a file is (links inside followed) and its mode; resolvePath too", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* WorkspaceFiles.writeFile("src/real.txt", "real\n", { mode: 0o600 })
        yield* fs.symlink(`${root}/src/real.txt`, `${root}/alias.txt`)
        const info = yield* WorkspaceFiles.readFileInfo("alias.txt")
        assert.deepStrictEqual([info.path, new TextDecoder().decode(info.bytes), info.mode], [
          "src/real.txt",
          "real\n",
          0o600
        ])
        assert.strictEqual(yield* WorkspaceFiles.resolvePath("alias.txt"), "src/real.txt")
        assert.strictEqual(yield* WorkspaceFiles.resolvePath("src/new/file.txt"), "src/new/file.txt")
        assert.strictEqual(
          (yield* Effect.flip(WorkspaceFiles.readFileInfo("src/real.txt", { maxBytes: 2 }))).reason,
          "TooLarge"
        )
        assert.strictEqual((yield* Effect.flip(WorkspaceFiles.readFileInfo("missing.txt"))).reason, "NotFound")
      })
    ))
})
