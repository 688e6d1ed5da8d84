/**
 * The official MCP conformance suite's server scenarios against agentloop's own server
 * (`serveMcpHttp`, in this process, on loopback) serving the scenarios' tools as an agentloop
 * `Executor` (`conformance/serverTools.ts`): for each scenario the suite's CLI connects as a
 * client, makes its requests and checks the answers.
 *
 * Both suites run, as for the client scenarios (`Conformance.test.ts`): of the newest alpha only
 * the scenarios the SDK 1.x speaks (a tag other than protocol 2026-07-28).
 *
 * `conformance/expected-server-failures.json` lists, per suite version, the scenarios that fail on
 * purpose, each with its reason: what this server deliberately does not offer (resources, prompts,
 * completions, logging, requests from a tool to the client, content agentloop's results do not
 * have). A scenario that fails and is not listed fails this test; so does a listed one that passes
 * and a listed name the suite does not have.
 */
import { Executor } from "@agentloop/core"
import { serveMcpHttp } from "@agentloop/mcp"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { ChildProcess, ChildProcessSpawner } from "effect/process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { conformanceExecutor } from "./conformance/serverTools.ts"
import { cliOf, parseList, slots, suites, versionOf } from "./conformance/suites.ts"
import { node } from "./helpers.ts"

const expectedFile = fileURLToPath(new URL("./conformance/expected-server-failures.json", import.meta.url))
const expected = JSON.parse(readFileSync(expectedFile, "utf8")) as Record<string, Record<string, string>>

/** The checks that did not succeed, from the result directory the CLI wrote. */
const summarize = (dir: string, output: string): string => {
  const file = existsSync(dir) ?
    readdirSync(dir, { recursive: true, encoding: "utf8" }).find((f) => f.endsWith("checks.json")) :
    undefined
  if (file === undefined) return `(no results written) ${output.slice(-1500)}`
  const checks = JSON.parse(readFileSync(join(dir, file), "utf8")) as Array<
    { readonly id: string; readonly status: string; readonly description: string; readonly errorMessage?: string }
  >
  return checks.filter((c) => c.status !== "SUCCESS" && c.status !== "INFO")
    .map((c) => `${c.status} ${c.id}: ${c.errorMessage ?? c.description}`).join("\n    ")
}

const runScenario = (cli: string, url: string, scenario: string, out: string) =>
  Effect.gen(function*() {
    const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
    const dir = join(out, scenario)
    const handle = ChildProcess.make(node, [cli, "server", "--url", url, "--scenario", scenario, "-o", dir], {
      extendEnv: true
    })
    const code = yield* spawner.exitCode(handle)
    return { scenario, passed: code === 0, summary: code === 0 ? "" : summarize(dir, "") }
  }).pipe(slots.withPermits(1))

describe("MCP conformance suite (server scenarios)", () => {
  for (const suite of suites) {
    const version = versionOf(suite.pkg)
    it.effect(`${suite.pkg} ${version}`, () =>
      Effect.gen(function*() {
        const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
        const cli = cliOf(suite.pkg)
        const listed = parseList(yield* spawner.string(ChildProcess.make(node, [cli, "list"])), "Server scenarios")
        assert.isAbove(listed.length, 0, "the suite lists server scenarios")
        const run = listed.filter((s) => suite.speaks(s.tags)).map((s) => s.name)
        const failing = expected[version] ?? {}
        const unknown = Object.keys(failing).filter((name) => !run.includes(name))
        assert.deepStrictEqual(unknown, [], `expected-server-failures.json names scenarios ${version} does not run`)
        for (const [name, reason] of Object.entries(failing)) {
          assert.isAbove(reason.trim().length, 10, `the expected failure of ${name} says why`)
        }

        const { url } = yield* Effect.provideService(serveMcpHttp(), Executor, conformanceExecutor)
        const out = mkdtempSync(join(tmpdir(), "agentloop-conformance-server-"))
        const outcomes = yield* Effect.forEach(run, (scenario) => runScenario(cli, url, scenario, out), {
          concurrency: "unbounded"
        }).pipe(Effect.ensuring(Effect.sync(() => rmSync(out, { recursive: true, force: true }))))

        const unexpected = outcomes.filter((o) => !o.passed && !(o.scenario in failing))
        const stale = outcomes.filter((o) => o.passed && o.scenario in failing).map((o) => o.scenario)
        assert.strictEqual(
          unexpected.map((o) => `${o.scenario}\n    ${o.summary}`).join("\n"),
          "",
          "scenarios that fail and are not expected to"
        )
        assert.deepStrictEqual(stale, [], "expected to fail but passed: remove them from expected-server-failures.json")
      }).pipe(Effect.provide(NodeServices.layer)), 300_000)
  }
})
