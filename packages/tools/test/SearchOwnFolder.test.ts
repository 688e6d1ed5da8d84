/**
 * `grep`, `find` and `ls` leave agentloop's own folder (`.agentloop`: sessions, checkpoints, kept
 * output) out by default and say so, so a search never feeds on earlier searches; `includeIgnored`
 * brings it back, and a path inside it is searched as named.
 */
import { findTool, grepTool, lsTool } from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { context, inWorkspace, text } from "./helpers.ts"
import { plant } from "./searchHelpers.ts"

const ctx = context()

const grep = (args: Parameters<typeof grepTool.execute>[0]) => Effect.map(grepTool.execute(args, ctx), text)
const find = (args: Parameters<typeof findTool.execute>[0]) => Effect.map(findTool.execute(args, ctx), text)
const ls = (args: Parameters<typeof lsTool.execute>[0]) => Effect.map(lsTool.execute(args, ctx), text)

/** A project after a run: a hit in its code and copies of it in the session and kept output. */
const project = {
  "src/app.ts": "// TODO: cache\n",
  ".agentloop/.gitignore": "# Written by agentloop\n*\n",
  ".agentloop/sessions/s1.jsonl": "{\"text\":\"src/app.ts:1:// TODO: cache\"}\n",
  ".agentloop/output/1-0badc0de/bash-1.txt": "TODO: cache\n"
}

const leftOut = "[.agentloop left out (agentloop's own sessions and kept output); includeIgnored=true or " +
  "path=.agentloop includes it.]"

describe("search tools and .agentloop", () => {
  it.effect("grep finds only the project's hit by default and says .agentloop was left out", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, project)
        assert.strictEqual(yield* grep({ pattern: "TODO" }), `src/app.ts:1:// TODO: cache\n\n${leftOut}`)
        assert.strictEqual(
          yield* grep({ pattern: "TODO", includeIgnored: true }),
          ".agentloop/output/1-0badc0de/bash-1.txt:1:TODO: cache\n" +
            ".agentloop/sessions/s1.jsonl:1:{\"text\":\"src/app.ts:1:// TODO: cache\"}\n" +
            "src/app.ts:1:// TODO: cache"
        )
      })
    ))

  it.effect("a path inside .agentloop is searched, its .gitignore of * notwithstanding", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        // a root .gitignore that ignores .agentloop too (as many projects' do) changes nothing either
        plant(root, { ...project, ".gitignore": ".agentloop/\n" })
        assert.strictEqual(
          yield* grep({ pattern: "TODO", path: ".agentloop/sessions", output: "files" }),
          ".agentloop/sessions/s1.jsonl\n\n" +
            "[.agentloop/sessions is left out by default (agentloop's own files); walked as it was named.]"
        )
        assert.strictEqual(
          yield* grep({ pattern: "TODO", path: ".agentloop", output: "files" }),
          ".agentloop/output/1-0badc0de/bash-1.txt\n.agentloop/sessions/s1.jsonl\n\n" +
            "[.agentloop is left out by default (agentloop's own files); walked as it was named.]"
        )
        assert.strictEqual(
          yield* grep({ pattern: "TODO", path: ".agentloop/sessions/s1.jsonl", output: "files" }),
          ".agentloop/sessions/s1.jsonl"
        )
      })
    ))

  it.effect("find and ls leave it out the same way, and list it with includeIgnored or as path", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, project)
        assert.strictEqual(yield* find({ pattern: "**" }), `src/\nsrc/app.ts\n\n${leftOut}`)
        assert.strictEqual(
          yield* find({ pattern: "**", type: "file", includeIgnored: true }),
          ".agentloop/.gitignore\n.agentloop/output/1-0badc0de/bash-1.txt\n.agentloop/sessions/s1.jsonl\nsrc/app.ts"
        )
        assert.strictEqual(
          yield* find({ pattern: "*.jsonl", path: ".agentloop" }),
          ".agentloop/sessions/s1.jsonl\n\n" +
            "[.agentloop is left out by default (agentloop's own files); walked as it was named.]"
        )
        assert.strictEqual(yield* ls({}), `src/\n\n${leftOut}`)
        assert.strictEqual(yield* ls({ includeIgnored: true }), ".agentloop/\nsrc/")
        assert.strictEqual(
          yield* ls({ path: ".agentloop" }),
          ".gitignore\noutput/\nsessions/\n\n" +
            "[.agentloop is left out by default (agentloop's own files); walked as it was named.]"
        )
      })
    ))

  it.effect("every .agentloop folder is left out (a nested project's too), a file of that name is not", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, { ...project, "pkg/.agentloop/sessions/s2.jsonl": "TODO\n", "docs/.agentloop": "TODO\n" })
        assert.strictEqual(
          yield* grep({ pattern: "TODO", output: "files" }),
          "docs/.agentloop\nsrc/app.ts\n\n" +
            "[2 .agentloop folders left out (agentloop's own sessions and kept output): .agentloop, pkg/.agentloop; " +
            "includeIgnored=true, or one of them as path, includes them.]"
        )
      })
    ))
})
