/**
 * `.agentloop` keeps itself out of git: every write through the confined layer (and the output
 * store) that goes into the workspace's `.agentloop` gives it a `.gitignore` ignoring everything
 * there, an older folder without one included, a user's own never replaced; on both walks.
 */
import { makeOutputStore, readTool, WorkspaceFiles } from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Scope } from "effect"
import { execFileSync } from "node:child_process"
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs"
import { afterAll } from "vitest"
import { setDescriptorPaths } from "../src/internal/confined.ts"
import type { Workspace } from "../src/Workspace.ts"
import { context, inWorkspace } from "./helpers.ts"

const ctx = context()

const git = (root: string, args: ReadonlyArray<string>): string =>
  execFileSync("git", args, {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" }
  })

/** What `git status` shows of the workspace, every untracked file named. */
const status = (root: string): string => git(root, ["status", "--porcelain", "--untracked-files=all"])

/** Each way our code makes (or writes into) `.agentloop`. */
const writers: ReadonlyArray<
  readonly [string, Effect.Effect<unknown, unknown, Workspace | Scope.Scope>]
> = [
  ["makeDirectory(.agentloop) (the project's config)", WorkspaceFiles.makeDirectory(".agentloop")],
  ["makeDirectory(.agentloop/durable)", WorkspaceFiles.makeDirectory(".agentloop/durable")],
  ["writeFile (a checkpoint)", WorkspaceFiles.writeFile(".agentloop/checkpoints/s1/blob", "saved\n")],
  ["createFile (a new session)", WorkspaceFiles.createFile(".agentloop/sessions/s1.jsonl", "")],
  ["openAppend (a session)", WorkspaceFiles.openAppend(".agentloop/sessions/s1.jsonl")],
  ["the output store (kept bash output)", Effect.flatMap(makeOutputStore, (store) => store.keep("bash", "out"))]
]

for (const walk of ["descriptor walk", "path walk"] as const) {
  describe(`.agentloop keeps itself out of git (${walk})`, () => {
    const run = <A, E>(f: (root: string) => Effect.Effect<A, E, Workspace | Scope.Scope>) =>
      Effect.sync(() => setDescriptorPaths(walk === "path walk" ? false : undefined)).pipe(
        Effect.andThen(inWorkspace((root) => Effect.scoped(f(root))))
      )
    afterAll(() => setDescriptorPaths(undefined))

    for (const [how, write] of writers) {
      it.effect(`${how}: git status shows nothing of .agentloop`, () =>
        run((root) =>
          Effect.gen(function*() {
            git(root, ["init", "-q"])
            writeFileSync(`${root}/app.ts`, "export {}\n")
            yield* write
            assert.isTrue(existsSync(`${root}/.agentloop`))
            assert.strictEqual(status(root), "?? app.ts\n")
            assert.include(readFileSync(`${root}/.agentloop/.gitignore`, "utf8").split("\n"), "*")
            assert.notInclude(readdirSync(`${root}/.agentloop`).join(" "), ".tmp", "no temporary file left")
          })
        ))
    }

    it.effect("an older .agentloop without a .gitignore gets one at the next write", () =>
      run((root) =>
        Effect.gen(function*() {
          git(root, ["init", "-q"])
          mkdirSync(`${root}/.agentloop/sessions`, { recursive: true })
          writeFileSync(`${root}/.agentloop/sessions/old.jsonl`, "{}\n")
          assert.strictEqual(status(root), "?? .agentloop/sessions/old.jsonl\n")
          yield* WorkspaceFiles.createFile(".agentloop/sessions/new.jsonl", "")
          assert.strictEqual(status(root), "")
        })
      ))

    it.effect("a user's own .agentloop/.gitignore is kept as it is", () =>
      run((root) =>
        Effect.gen(function*() {
          git(root, ["init", "-q"])
          mkdirSync(`${root}/.agentloop`)
          const own = "sessions/\n!config.json\n"
          writeFileSync(`${root}/.agentloop/.gitignore`, own)
          yield* WorkspaceFiles.makeDirectory(".agentloop")
          yield* WorkspaceFiles.writeFile(".agentloop/config.json", "{}\n")
          yield* WorkspaceFiles.createFile(".agentloop/sessions/s1.jsonl", "")
          assert.strictEqual(readFileSync(`${root}/.agentloop/.gitignore`, "utf8"), own)
          assert.strictEqual(status(root), "?? .agentloop/.gitignore\n?? .agentloop/config.json\n")
        })
      ))

    it.effect("a .gitignore planted as a link (to outside, dangling) is neither followed nor replaced", () =>
      run((root) =>
        Effect.gen(function*() {
          mkdirSync(`${root}/.agentloop`)
          const outside = `${root}/../outside-gitignore`
          symlinkSync(outside, `${root}/.agentloop/.gitignore`)
          yield* WorkspaceFiles.createFile(".agentloop/sessions/s1.jsonl", "")
          assert.isFalse(existsSync(outside), "nothing written outside the workspace")
          assert.isTrue(lstatSync(`${root}/.agentloop/.gitignore`).isSymbolicLink())
        })
      ))

    it.effect("reading .agentloop writes nothing; a folder named .agentloop deeper down is not ours", () =>
      run((root) =>
        Effect.gen(function*() {
          mkdirSync(`${root}/.agentloop`)
          writeFileSync(`${root}/.agentloop/config.json`, "{}\n")
          yield* readTool.execute({ path: ".agentloop/config.json" }, ctx)
          assert.isTrue(yield* WorkspaceFiles.exists(".agentloop/config.json"))
          assert.deepStrictEqual(readdirSync(`${root}/.agentloop`), ["config.json"])
          yield* WorkspaceFiles.writeFile("docs/.agentloop/notes.md", "# notes\n")
          assert.deepStrictEqual(readdirSync(`${root}/docs/.agentloop`), ["notes.md"])
        })
      ))
  })
}
