/**
 * Attacks on the confinement of grep, find and ls that need no race: registered by
 * SearchSafety.test.ts (the descriptor walk of Linux) and SearchPathWalk.test.ts (the path walk of
 * systems without /proc/self/fd), which must both hold them.
 */
import { findTool, grepTool, lsTool } from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { linkSync, mkdirSync, writeFileSync } from "node:fs"
import { context, failed, inWorkspace, text } from "./helpers.ts"
import { plant } from "./searchHelpers.ts"

const ctx = context()

/** A folder beside the workspace holding secrets: their names and contents all say SECRET. */
export const plantOutside = (root: string): string => {
  const outside = `${root}/../outside`
  mkdirSync(`${outside}/SECRET-DIR`, { recursive: true })
  writeFileSync(`${outside}/SECRET-NAME.txt`, "SECRET-CONTENT\n")
  writeFileSync(`${outside}/SECRET-DIR/x.txt`, "SECRET-CONTENT\n")
  writeFileSync(`${outside}/rules`, "*.ts\n*.md\n")
  return outside
}

/** Every output of grep, find and ls over the whole workspace, with and without ignored files. */
const everything = Effect.gen(function*() {
  const outputs: Array<string> = []
  for (const includeIgnored of [false, true]) {
    outputs.push(text(yield* grepTool.execute({ pattern: "SECR[E]T|inside", includeIgnored }, ctx)))
    outputs.push(text(yield* grepTool.execute({ pattern: "SECR[E]T", output: "files", includeIgnored }, ctx)))
    outputs.push(text(yield* findTool.execute({ pattern: "**", includeIgnored }, ctx)))
    outputs.push(text(yield* lsTool.execute({ includeIgnored }, ctx)))
  }
  return outputs
})

export const describeStaticAttacks = (walk: string) =>
  describe(`grep, find and ls never reveal anything outside the workspace (${walk})`, () => {
    it.effect("links to outside (relative, absolute, to a file, up through ..) are listed, never followed", () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          const outside = plantOutside(root)
          plant(root, {
            "out": { link: "../outside" },
            "abs": { link: outside },
            "file.txt": { link: "../outside/SECRET-NAME.txt" },
            "sub/up": { link: "../.." },
            "sub/real.txt": "inside\n",
            "in": { link: "sub" }
          })
          for (const output of yield* everything) assert.notInclude(output, "SECRET")
          assert.strictEqual(
            text(yield* findTool.execute({ pattern: "**" }, ctx)),
            "abs@\nfile.txt@\nin@\nout@\nsub/\nsub/real.txt\nsub/up@"
          )
          assert.strictEqual(
            text(yield* grepTool.execute({ pattern: "SECR[E]T|inside" }, ctx)),
            "sub/real.txt:1:inside\n\n[5 symbolic links not followed.]"
          )
          assert.strictEqual(
            text(yield* lsTool.execute({}, ctx)),
            "abs@ -> (outside the workspace)\nfile.txt@ -> (outside the workspace)\nin@ -> sub\n" +
              "out@ -> (outside the workspace)\nsub/"
          )
          assert.strictEqual(
            text(yield* lsTool.execute({ path: "in" }, ctx)),
            "real.txt\nup@ -> (outside the workspace)"
          )
          for (const path of ["out", "abs", "sub/up", "file.txt", "in/up"]) {
            const messages = [
              (yield* failed(grepTool.execute({ pattern: "SECR[E]T", path }, ctx))).message,
              (yield* failed(findTool.execute({ pattern: "*", path }, ctx))).message,
              (yield* failed(lsTool.execute({ path }, ctx))).message
            ]
            for (const message of messages) {
              assert.match(message, /is outside the workspace \(the symbolic link .* points outside\)/, path)
              assert.notInclude(message, "SECRET")
            }
          }
        })
      ))

    it.effect("a .gitignore planted to include paths outside (negations with .., absolute) includes nothing", () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          plantOutside(root)
          plant(root, {
            ".gitignore": "!../outside\n!../outside/**\n!/../outside/*\n!../../*\n!**\n!/etc/passwd\n!*\n../*\n",
            "sub/.gitignore": "!../../outside/**\n!../../../**\n",
            "sub/a.txt": "inside\n",
            "out": { link: "../outside" }
          })
          for (const output of yield* everything) assert.notInclude(output, "SECRET")
          assert.strictEqual(
            text(yield* findTool.execute({ pattern: "**" }, ctx)),
            ".gitignore\nout@\nsub/\nsub/.gitignore\nsub/a.txt"
          )
        })
      ))

    it.effect("a .gitignore that is a link, or a hard link to a file outside, is not applied", () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          const outside = plantOutside(root)
          plant(root, { "a.ts": "", "b.md": "", "sub/c.ts": "", "sub/.gitignore": { link: "../../outside/rules" } })
          linkSync(`${outside}/rules`, `${root}/.gitignore`)
          assert.strictEqual(
            text(yield* findTool.execute({ pattern: "**" }, ctx)),
            ".gitignore\na.ts\nb.md\nsub/\nsub/.gitignore@\nsub/c.ts\n\n" +
              "[1 .gitignore file not applied (over the size limit, several hard links, or unreadable): .gitignore.]"
          )
          // above a named folder too: the rules of the root are read on the way down to sub
          assert.strictEqual(
            text(yield* findTool.execute({ pattern: "*", path: "sub" }, ctx)),
            "sub/.gitignore@\nsub/c.ts"
          )
        })
      ))

    it.effect("a file hard-linked to a file outside is not searched", () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          const outside = plantOutside(root)
          linkSync(`${outside}/SECRET-NAME.txt`, `${root}/hard.txt`)
          plant(root, { "soft.txt": "inside\n" })
          assert.strictEqual(
            text(yield* grepTool.execute({ pattern: "SECR[E]T|inside" }, ctx)),
            "soft.txt:1:inside\n\n[1 file with several hard links not searched (one could be a name of a file " +
              "outside the workspace): hard.txt.]"
          )
          assert.match(
            (yield* failed(grepTool.execute({ pattern: "SECR[E]T", path: "hard.txt" }, ctx))).message,
            /^hard\.txt has 2 hard links; one of them could be outside the workspace/
          )
        })
      ))

    it.effect(".. and absolute paths are refused in path, in globs and in find's pattern", () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          const outside = plantOutside(root)
          for (const path of ["..", "../outside", "sub/../../outside", outside, "/etc"]) {
            for (
              const message of [
                (yield* failed(grepTool.execute({ pattern: "SECR[E]T", path }, ctx))).message,
                (yield* failed(findTool.execute({ pattern: "*", path }, ctx))).message,
                (yield* failed(lsTool.execute({ path }, ctx))).message
              ]
            ) assert.match(message, /is outside the workspace \((absolute path|it climbs out with \.\.)\)/, path)
          }
          for (const glob of ["../*", "../outside/**", "/etc/*", `${outside}/*`, "a/../../*", "**/..", ".."]) {
            const message = `reaches outside the folder searched (an absolute path or ..); a glob matches paths ` +
              "inside the folder: choose the folder with path"
            assert.strictEqual(
              (yield* failed(findTool.execute({ pattern: glob }, ctx))).message,
              `pattern "${glob}" ${message}`
            )
            assert.strictEqual(
              (yield* failed(grepTool.execute({ pattern: "x", glob }, ctx))).message,
              `glob "${glob}" ${message}`
            )
          }
          // a name that merely starts with two dots is a name
          plant(root, { "..config/x.txt": "inside\n" })
          assert.strictEqual(text(yield* findTool.execute({ pattern: "..config/*" }, ctx)), "..config/x.txt")
        })
      ))

    it.effect(
      "FIFOs are listed but never opened: no call blocks, also on a FIFO named .gitignore",
      () =>
        inWorkspace((root) =>
          Effect.gen(function*() {
            execFileSync("mkfifo", [`${root}/pipe`, `${root}/.gitignore`])
            plant(root, { "a.txt": "x\n" })
            assert.strictEqual(text(yield* grepTool.execute({ pattern: "x" }, ctx)), "a.txt:1:x")
            assert.strictEqual(text(yield* findTool.execute({ pattern: "*" }, ctx)), ".gitignore\na.txt\npipe")
            assert.strictEqual(text(yield* lsTool.execute({}, ctx)), ".gitignore\na.txt\npipe")
            assert.match(
              (yield* failed(grepTool.execute({ pattern: "x", path: "pipe" }, ctx))).message,
              /pipe is a FIFO \(named pipe\), not a regular file/
            )
          })
        ),
      5000
    )
  })
