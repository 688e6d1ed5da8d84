import { findTool, grepTool, SEARCH_NAME_MATCH_TIME_LIMIT_MS } from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdirSync, writeFileSync } from "node:fs"
import { context, details, inWorkspace, text } from "./helpers.ts"
import { plant } from "./searchHelpers.ts"

const ctx = context()

// in a file of their own: each of these blocks its thread for a second or more, by design
describe("names that match slowly stop the walk instead of hanging it", () => {
  it.effect(".gitignore rules crafted to backtrack on deep paths", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const deep = Array.from({ length: 60 }, () => "a").join("/")
        plant(root, {
          ".gitignore": "**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/b\n",
          [`${deep}/c.txt`]: "inside\n",
          "z.txt": "inside\n"
        })
        const found = yield* findTool.execute({ pattern: "*.txt" }, ctx)
        assert.match(
          text(found),
          new RegExp(
            `\\[Matching the names in (a/)+a took over ${SEARCH_NAME_MATCH_TIME_LIMIT_MS / 1000} s \\(a \\.gitignore ` +
              "rule or the glob is too complex to match quickly\\): the walk stopped there and the results " +
              "are incomplete\\.\\]"
          )
        )
        assert.strictEqual(details(found)["stopped"], "slow")
        // a folder named in path is checked against the rules above it, under the same guard
        assert.strictEqual(
          text(yield* grepTool.execute({ pattern: "inside", path: deep }, ctx)),
          `No matches for inside in ${deep} (0 files searched).\n\n[Matching the names in ${deep.slice(0, -2)} took ` +
            "over 1 s (a .gitignore rule or the glob is too complex to match quickly): the walk stopped there " +
            "and the results are incomplete.]"
        )
      })
    ), 60_000)

  it.effect("a glob crafted to backtrack on long names", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        mkdirSync(`${root}/names`)
        writeFileSync(`${root}/names/${"a".repeat(40)}`, "")
        const found = text(yield* findTool.execute({ pattern: "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b" }, ctx))
        assert.match(found, /^No paths match .* in \.\.\n\n\[Matching the names in names took over 1 s/)
      })
    ), 60_000)
})
