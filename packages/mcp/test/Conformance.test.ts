/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
 * devDependencies) against this package: for every client scenario of a suite, the suite starts
 * its mock server (and mock authorization server), runs our adapter (`conformance/client.ts`, a
 * program using `mcpToolsLayer` as a user would) with the server's URL, and checks the traffic.
 *
 * Two suites: the stable release, and the newest alpha (installed as `mcp-conformance-next`), of
 * which only the scenarios the SDK's client can speak run: those of protocol 2026-07-28 alone
 * need a protocol version @modelcontextprotocol/sdk 1.x does not speak yet.
 *
 * `conformance/expected-failures.json` lists, per suite version, the scenarios that fail on
 * purpose, each with its reason. A scenario that fails and is not listed fails this test; so does
 * a listed one that passes (the entry is stale) and a listed name the suite does not have.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { ChildProcess, ChildProcessSpawner } from "effect/process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { cliOf, parseList, slots, suites, versionOf } from "./conformance/suites.ts"
import { node } from "./helpers.ts"

const adapter = fileURLToPath(new URL("./conformance/client.ts", import.meta.url))
const expectedFile = fileURLToPath(new URL("./conformance/expected-failures.json", import.meta.url))
const expected = JSON.parse(readFileSync(expectedFile, "utf8")) as Record<string, Record<string, string>>

interface Outcome {
  readonly scenario: string
  readonly passed: boolean
  readonly summary: string
}

/** What went wrong in one scenario, from the result directory the CLI wrote. */
const summarize = (dir: string): string => {
  // <dir>/<scenario>-<time>/, or <dir>/auth/<scenario>-<time>/ for `auth/…`
  const run = existsSync(dir) ?
    readdirSync(dir, { recursive: true, encoding: "utf8" }).find((f) => f.endsWith("checks.json")) :
    undefined
  if (run === undefined) return "(no results written)"
  const read = (file: string) => {
    const path = join(dir, run.replace(/checks\.json$/, file))
    return existsSync(path) ? readFileSync(path, "utf8") : ""
  }
  const checks = JSON.parse(read("checks.json") || "[]") as Array<
    { readonly id: string; readonly status: string; readonly description: string; readonly errorMessage?: string }
  >
  const bad = checks.filter((c) => c.status === "FAILURE" || c.status === "WARNING")
    .map((c) => `${c.status} ${c.id}: ${c.errorMessage ?? c.description}`)
  return [
    ...bad,
    `client stdout: ${read("stdout.txt").slice(-600)}`,
    `client stderr: ${read("stderr.txt").slice(-1500)}`
  ]
    .join("\n    ")
}

const runScenario = (cli: string, scenario: string, out: string) =>
  Effect.gen(function*() {
    const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
    const dir = join(out, scenario.replaceAll("/", "_"))
    const code = yield* spawner.exitCode(
      ChildProcess.make(node, [
        cli,
        "client",
        "--command",
        `${node} --disable-warning=ExperimentalWarning ${adapter}`,
        "--scenario",
        scenario,
        "--output-dir",
        dir
      ], { extendEnv: true })
    )
    const passed = code === 0
    return { scenario, passed, summary: passed ? "" : summarize(dir) } satisfies Outcome
  }).pipe(slots.withPermits(1))

describe("MCP conformance suite (client scenarios)", () => {
  for (const suite of suites) {
    const version = versionOf(suite.pkg)
    it.effect(`${suite.pkg} ${version}`, () =>
      Effect.gen(function*() {
        const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
        const cli = cliOf(suite.pkg)
        const listed = parseList(yield* spawner.string(ChildProcess.make(node, [cli, "list"])), "Client scenarios")
        assert.isAbove(listed.length, 0, "the suite lists client scenarios")
        const run = listed.filter((s) => suite.speaks(s.tags)).map((s) => s.name)
        const failing = expected[version] ?? {}
        const unknown = Object.keys(failing).filter((name) => !run.includes(name))
        assert.deepStrictEqual(unknown, [], `expected-failures.json names scenarios ${version} does not run`)
        for (const [name, reason] of Object.entries(failing)) {
          assert.isAbove(reason.trim().length, 10, `the expected failure of ${name} says why`)
        }

        const out = mkdtempSync(join(tmpdir(), "agentloop-conformance-"))
        const outcomes = yield* Effect.forEach(run, (scenario) => runScenario(cli, scenario, out), {
          concurrency: "unbounded"
        }).pipe(Effect.ensuring(Effect.sync(() => rmSync(out, { recursive: true, force: true }))))

        const unexpected = outcomes.filter((o) => !o.passed && !(o.scenario in failing))
        const stale = outcomes.filter((o) => o.passed && o.scenario in failing).map((o) => o.scenario)
        assert.strictEqual(
          unexpected.map((o) => `${o.scenario}\n    ${o.summary}`).join("\n"),
          "",
          "scenarios that fail and are not expected to"
        )
        assert.deepStrictEqual(stale, [], "expected to fail but passed: remove them from expected-failures.json")
      }).pipe(Effect.provide(NodeServices.layer)), 300_000)
  }
})
