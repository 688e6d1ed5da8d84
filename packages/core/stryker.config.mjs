// Mutation testing of packages/core/src with the core tests: `npm run mutation` (from the root or
// from this package). Not part of CI: a full run takes the better part of an hour on two cores.
// Reruns are incremental (only mutants in changed code, or covered by changed tests, run again).
// Run one file: `npm run mutation -- --mutate src/Decision.ts`.
// Reports and the incremental file go to reports/mutation/ (AGENTLOOP_MUTATION_DIR overrides it).
const out = process.env.AGENTLOOP_MUTATION_DIR ?? "reports/mutation"

/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  testRunner: "vitest",
  vitest: { configFile: "vitest.mutation.config.ts", related: false },
  plugins: ["@stryker-mutator/vitest-runner"],
  mutate: ["src/**/*.ts"],
  coverageAnalysis: "perTest",
  // two test processes: the machine this was set up on has two cores, shared
  concurrency: 2,
  timeoutMS: 20000,
  // a static mutant (in code run when a module loads, e.g. a constant table) needs every test run
  // in a fresh environment: about a minute each here. AGENTLOOP_MUTATION_STATIC=1 includes them.
  ignoreStatic: process.env.AGENTLOOP_MUTATION_STATIC !== "1",
  incremental: true,
  incrementalFile: `${out}/stryker-incremental.json`,
  // AGENTLOOP_MUTATION_EVENTS=1 also records each mutant's result as it is tested (in events/)
  reporters: ["clear-text", "progress-append-only", "html", "json"].concat(
    process.env.AGENTLOOP_MUTATION_EVENTS === "1" ? ["event-recorder"] : []
  ),
  eventReporter: { baseDir: `${out}/events` },
  htmlReporter: { fileName: `${out}/index.html` },
  jsonReporter: { fileName: `${out}/report.json` },
  clearTextReporter: { allowColor: false, logTests: false, maxTestsToLog: 0 },
  tempDirName: ".stryker-tmp",
  cleanTempDir: "always",
  ignorePatterns: ["dist", "reports", "*.tsbuildinfo"]
}
