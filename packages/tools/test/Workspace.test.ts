import { Workspace, workspaceLayer } from "@agentloop/tools"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, FileSystem, Layer } from "effect"
import { inWorkspace } from "./helpers.ts"

const refused = (path: string) => Effect.flatMap(Workspace, (w) => Effect.flip(w.resolve(path)))

describe("workspace confinement", () => {
  it.effect("paths inside resolve to canonical absolute paths", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const w = yield* Workspace
        assert.strictEqual(yield* w.resolve("a/b.txt"), `${root}/a/b.txt`)
        assert.strictEqual(yield* w.resolve("./a/../c.txt"), `${root}/c.txt`)
        assert.strictEqual(yield* w.resolve(`${root}/x`), `${root}/x`)
        assert.strictEqual(yield* w.resolve("."), root)
        assert.strictEqual(w.display(`${root}/a/b.txt`), "a/b.txt")
      })
    ))

  it.effect(".. escapes are refused", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const error = yield* refused("../outside.txt")
        assert.strictEqual(error._tag, "ToolError")
        assert.match(error.message, /Path "\.\.\/outside\.txt" is outside the workspace \(it climbs out with \.\.\)/)
        assert.match((yield* refused("a/../../x")).message, /outside the workspace/)
      })
    ))

  it.effect("absolute paths outside the root are refused", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const error = yield* refused("/etc/passwd")
        assert.match(error.message, /Path "\/etc\/passwd" is outside the workspace \(absolute path\)/)
      })
    ))

  it.effect("a symlink that leads outside is refused, also through a linked folder and when dangling", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString(`${root}/../secret.txt`, "secret")
        yield* fs.symlink(`${root}/../secret.txt`, `${root}/link.txt`)
        yield* fs.symlink(`${root}/..`, `${root}/up`)
        yield* fs.symlink(`${root}/../not-there.txt`, `${root}/dangling.txt`)
        assert.match((yield* refused("link.txt")).message, /symbolic link link\.txt points outside/)
        assert.match((yield* refused("up/secret.txt")).message, /symbolic link up points outside/)
        assert.match((yield* refused("dangling.txt")).message, /symbolic link dangling\.txt points outside/)
      })
    ))

  it.effect("a symlink that stays inside is followed", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.makeDirectory(`${root}/real`)
        yield* fs.symlink(`${root}/real`, `${root}/alias`)
        yield* fs.symlink("real/f.txt", `${root}/rel-link`)
        const w = yield* Workspace
        assert.strictEqual(yield* w.resolve("alias/f.txt"), `${root}/real/f.txt`)
        assert.strictEqual(yield* w.resolve("rel-link"), `${root}/real/f.txt`)
      })
    ))

  it.effect("a symlink loop is refused, not followed forever", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.symlink(`${root}/b`, `${root}/a`)
        yield* fs.symlink(`${root}/a`, `${root}/b`)
        assert.match((yield* refused("a")).message, /too many symbolic links/)
      })
    ))

  it.effect("an empty path is refused", () =>
    inWorkspace(() => Effect.map(refused(""), (e) => assert.strictEqual(e.message, "Path is empty"))))

  it.effect("an empty root is refused, not taken as the current folder", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Effect.scoped(Layer.build(workspaceLayer(""))))
      assert.isTrue(Exit.isFailure(exit))
      assert.include(
        String(Cause.squash(Exit.isFailure(exit) ? exit.cause : Cause.empty)),
        "the workspace root is empty"
      )
    }).pipe(Effect.provide(NodeServices.layer)))
})
