import { editTool, readTool, WorkspaceFiles, writeTool } from "@agentloop/tools"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, FileSystem } from "effect"
import { execFileSync } from "node:child_process"
import { descriptorPaths, setDescriptorPaths } from "../src/internal/confined.ts"
import { context, failed, inWorkspace, text } from "./helpers.ts"

const ctx = context()

// The walk used where /proc/self/fd is missing (macOS, the BSDs): components opened by path with
// O_NOFOLLOW. It is not race-free (see the README), but every static check must hold.
describe("the path-based walk (systems without /proc/self/fd)", () => {
  beforeAll(() => setDescriptorPaths(false))
  afterAll(() => setDescriptorPaths(undefined))

  it.effect("reads, writes and edits inside; follows links inside; refuses links outside, FIFOs and hard links", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        assert.isFalse(descriptorPaths())
        const fs = yield* FileSystem.FileSystem
        yield* writeTool.execute({ path: "a/b.txt", content: "one\r\ntwo\r\n" }, ctx)
        yield* editTool.execute({ path: "a/b.txt", oldText: "one\ntwo", newText: "1\n2" }, ctx)
        assert.strictEqual(yield* fs.readFileString(`${root}/a/b.txt`), "1\r\n2\r\n")
        yield* fs.symlink("a", `${root}/alias`)
        assert.strictEqual(text(yield* readTool.execute({ path: "alias/b.txt" }, ctx)), "     1\t1\r\n     2\t2\r")
        yield* fs.writeFileString(`${root}/../secret.txt`, "SECRET")
        yield* fs.symlink(`${root}/..`, `${root}/up`)
        yield* fs.symlink("../../secret.txt", `${root}/a/rel`)
        assert.match(
          (yield* failed(readTool.execute({ path: "up/secret.txt" }, ctx))).message,
          /symbolic link up points outside/
        )
        assert.match(
          (yield* failed(readTool.execute({ path: "a/rel" }, ctx))).message,
          /symbolic link a\/rel points outside/
        )
        assert.match((yield* failed(writeTool.execute({ path: "up/x", content: "x" }, ctx))).message, /points outside/)
        assert.strictEqual((yield* Effect.flip(WorkspaceFiles.writeFile("a/rel", "x"))).reason, "Outside")
        execFileSync("mkfifo", [`${root}/pipe`])
        assert.match((yield* failed(readTool.execute({ path: "pipe" }, ctx))).message, /FIFO/)
        yield* fs.link(`${root}/../secret.txt`, `${root}/hard`)
        assert.match((yield* failed(readTool.execute({ path: "hard" }, ctx))).message, /hard links/)
        assert.strictEqual(yield* fs.readFileString(`${root}/../secret.txt`), "SECRET")
        assert.deepStrictEqual((yield* fs.readDirectory(`${root}/a`)).sort(), ["b.txt", "rel"])
      })
    ))
})
