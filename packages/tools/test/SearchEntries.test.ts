import { findTool, SEARCH_MAX_ENTRIES } from "@agentloop/tools"
import { assert, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdirSync, writeFileSync } from "node:fs"
import { context, details, inWorkspace, text } from "./helpers.ts"
import { plant } from "./searchHelpers.ts"

const ctx = context()

// in a file of its own: making a hundred thousand files keeps its thread busy for seconds
it.effect(
  `a walk stops after ${SEARCH_MAX_ENTRIES} entries and says so`,
  () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        mkdirSync(`${root}/many`)
        for (let i = 0; i <= SEARCH_MAX_ENTRIES; i++) writeFileSync(`${root}/many/${i}`, "")
        plant(root, { "a.txt": "" })
        const result = yield* findTool.execute({ pattern: "*.txt" }, ctx)
        assert.strictEqual(
          text(result),
          `a.txt\n\n[The walk stopped after ${SEARCH_MAX_ENTRIES} entries: the results are incomplete. Narrow path ` +
            "(or the glob).]"
        )
        assert.strictEqual(details(result)["stopped"], "entries")
      })
    ),
  120_000
)
