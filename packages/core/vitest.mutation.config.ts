/**
 * The core tests, for mutation testing (`npm run mutation`, see stryker.config.mjs): Stryker runs
 * them in a sandbox copy of this package, so `@agentloop/core` must resolve to the sandbox's
 * `src` (where the mutants are) and not, through the workspace link, to the original. The testkit
 * and the examples import `@agentloop/core` too, and get the same copy; the examples are found
 * in the repository (a test imports them by a relative path that leaves the package).
 */
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"
import { BaseSequencer } from "vitest/node"
import type { TestSpecification } from "vitest/node"

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url))

/** The repository's root (above the sandbox too): the first directory up with `examples/`. */
const repositoryRoot = (from: string): string => {
  const parent = dirname(from)
  return existsSync(join(from, "examples")) || parent === from ? from : repositoryRoot(parent)
}
const examples = join(repositoryRoot(here(".")), "examples")
const conditions = ["agentloop-source"]

/**
 * The slow files (random searches, a child process) run last: a mutant is usually killed by a
 * fast test first, and Stryker stops at the first failure.
 */
const slow = ["Loop.property", "Guards", "Arguments", "Persistence"]
const rank = (spec: TestSpecification) => slow.findIndex((name) => spec.moduleId.endsWith(`/test/${name}.test.ts`))
class FastFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    return [...files].sort((a, b) => rank(a) - rank(b) || (a.moduleId < b.moduleId ? -1 : 1))
  }
}

export default defineConfig({
  resolve: {
    alias: [
      { find: /^@agentloop\/core$/, replacement: here("./src/index.ts") },
      { find: /^@agentloop\/core\/(.*)$/, replacement: here("./src/$1.ts") },
      { find: /^(\.\.\/)+examples\/(.*)$/, replacement: `${examples}/$2` }
    ],
    conditions
  },
  ssr: { resolve: { conditions } },
  test: {
    root: here("."),
    include: ["test/**/*.test.ts"],
    // one test at a time: Stryker attributes coverage to the running test
    sequence: { concurrent: false, sequencer: FastFirst },
    // a third of the property test's default 600 cases: it runs for every mutant it covers
    env: { AGENTLOOP_PROPERTY_RUNS: "200" },
    // instrumented code on a busy machine is slow; a mutant that hangs a test is caught by Stryker's own timeout
    testTimeout: 30_000,
    // mutated sources have the same paths as the originals in every sandbox: never reuse a transform
    fsModuleCache: false,
    // the test files share one module graph per worker (imports are most of the run time)
    isolate: false
  }
})
