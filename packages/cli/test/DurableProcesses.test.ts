import { assert, describe, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import {
  eventually,
  jsonLines,
  killAll,
  makeWorkspace,
  processesWith,
  providerFlags,
  scriptServer,
  sessionFiles,
  sleepingWith,
  startCli,
  testEnv,
  uniqueSleep
} from "./helpers/agent.ts"

/** Every byte the CLI keeps in the workspace's .agentloop folder (sessions, databases and their journals). */
const storedBytes = (ws: string): string => {
  const out: Array<string> = []
  for (const folder of [".agentloop/sessions", ".agentloop/durable"]) {
    for (const name of readdirSync(join(ws, folder))) out.push(readFileSync(join(ws, folder, name)).toString("latin1"))
  }
  return out.join("\n")
}

describe("agentloop --durable: processes and secrets", () => {
  for (const signal of ["SIGTERM", "SIGHUP"] as const) {
    it(
      `${signal} during a durable run's bash call: the call's processes end with the CLI; the run is kept and ` +
        `the same command resumes it`,
      async () => {
        const ws = makeWorkspace()
        const marker = uniqueSleep()
        const command =
          `echo attempt >> count.txt; if [ "$(wc -l < count.txt)" -lt 2 ]; then sleep ${marker}; fi; echo finished`
        const server = await scriptServer([
          { calls: [{ id: "b1", name: "bash", args: { command } }] },
          { text: "all done" }
        ])
        const args = ["run", "--durable", "--yes", ...providerFlags(server), "sleep then finish"]
        try {
          const first = startCli(args, { cwd: ws, env: testEnv(ws) })
          assert.isTrue(
            await eventually(() => sleepingWith(marker).length > 0, 90_000),
            first.output() + first.stderr()
          )
          first.child.kill(signal)
          const { code } = await first.exited
          assert.strictEqual(code, signal === "SIGTERM" ? 143 : 129, first.stderr())
          // (after SIGHUP the terminal is gone: nothing is written to it)
          if (signal === "SIGTERM") assert.include(first.stderr(), "is kept: run the same command again")
          // every chance to outlive the CLI: it would be seen within these 2 s
          await new Promise((r) => setTimeout(r, 2000))
          assert.deepStrictEqual(processesWith(marker), [], "no process of the call outlives the CLI")

          const second = startCli(args, { cwd: ws, env: testEnv(ws) })
          const again = await second.exited
          assert.strictEqual(again.code, 0, second.output() + second.stderr())
          assert.include(second.output(), "all done")
          assert.strictEqual(
            readFileSync(join(ws, "count.txt"), "utf8"),
            "attempt\nattempt\n",
            "the interrupted call ran again"
          )
          const [file] = sessionFiles(ws)
          assert.strictEqual(jsonLines(file!).filter((l) => l["type"] === "run_end").length, 1)
        } finally {
          killAll(marker)
          await server.close()
        }
      },
      240_000
    )
  }

  it(
    "the API key never reaches the database, its journal, the session file, the output, bash, nor agentloop runs",
    async () => {
      const ws = makeWorkspace()
      const key = "sk-live-7f3a9c0e5b2d4a6f8e1c3b5d7a9f0e2c"
      const server = await scriptServer([
        {
          calls: [{
            id: "b1",
            name: "bash",
            args: { command: "echo \"key=[$AGENTLOOP_TEST_KEY]\"; env | grep -c sk-live || true" }
          }]
        },
        { text: "shown" },
        { calls: [{ id: "b2", name: "bash", args: { command: "echo waiting" } }] },
        { text: "done" }
      ])
      const env = testEnv(ws, { AGENTLOOP_TEST_KEY: key })
      const flags = [...providerFlags(server), "--api-key-env", "AGENTLOOP_TEST_KEY"]
      try {
        // the first call is allowed by --yes in a first run; a second run waits for an approval (its state is in the
        // database)
        const first = startCli(["run", "--durable", "--yes", ...flags, "show the environment"], { cwd: ws, env })
        assert.strictEqual((await first.exited).code, 0, first.output() + first.stderr())
        assert.include(first.output(), "key=[]")
        const second = startCli(["run", "--durable", ...flags, "--continue", "again"], { cwd: ws, env })
        second.endInput()
        await second.waitFor(/agentloop approve (\S+) b2 y\|n/, 90_000)
        const runs = startCli(["runs"], { cwd: ws, env })
        await runs.exited
        assert.include(runs.output(), "waiting for approval: b2 (bash)")
        const runId = /agentloop approve (\S+) b2/.exec(second.output())![1]!
        const approve = startCli(["approve", runId, "b2", "y"], { cwd: ws, env })
        assert.strictEqual((await approve.exited).code, 0, approve.stderr())
        assert.strictEqual((await second.exited).code, 0, second.stderr())
        assert.strictEqual(server.bodies.length, 4)
        for (
          const [what, text] of [
            ["stored files", storedBytes(ws)],
            ["run output", first.output() + first.stderr() + second.output() + second.stderr()],
            ["runs", runs.output() + runs.stderr()],
            ["approve", approve.output() + approve.stderr()],
            ["model requests", JSON.stringify(server.bodies)]
          ] as const
        ) {
          assert.notInclude(text, key, what)
          assert.notInclude(text, key.slice(8, 24), `${what} (part of it)`)
        }
      } finally {
        await server.close()
      }
    },
    240_000
  )
})
