/**
 * Soak: many concurrent durable runs over 3 runner processes on PostgreSQL while a runner is
 * killed with SIGKILL every few seconds (and a new one started). Exits 1 unless every run ended
 * `stop`, `checkInvariants` found nothing in any run, and no call ran again after its result was
 * journaled (each execution is logged with an id its result carries; the journal's stored reply
 * names the execution it holds and when it was written; see `analyze` in lib.ts).
 *
 *   npm run soak -w @agentloop/durable                  # 200 runs, a kill every 8 s
 *   SOAK_SHORT=1 npm run soak -w @agentloop/durable     # 30 runs, 2 kills (CI)
 *
 * Settings: SOAK_RUNS, SOAK_STEPS (5 turns: 4 with a call), SOAK_CALL_MS (500: how long a call takes),
 * SOAK_KILL_EVERY_MS, SOAK_KILLS (most kills),
 * AGENTLOOP_TIMINGS=fast (lock timings: balancedTimings by default), AGENTLOOP_SHARDS (shards per group:
 * 30 by default). PostgreSQL: the one AGENTLOOP_PG_* name, or a throwaway one from
 * scripts/postgres.ts, stopped at the end.
 */
import { Effect } from "effect"
import { analyze, dropDatabase, postgres, runCluster } from "./lib.ts"

const short = process.env["SOAK_SHORT"] === "1"
const runs = Number(process.env["SOAK_RUNS"] ?? (short ? 30 : 200))
const steps = Number(process.env["SOAK_STEPS"] ?? 5)
const callMs = Number(process.env["SOAK_CALL_MS"] ?? 500)
const killEveryMs = Number(process.env["SOAK_KILL_EVERY_MS"] ?? (short ? 4000 : 8000))
const maxKills = Number(process.env["SOAK_KILLS"] ?? (short ? 2 : 1000))
const timings = process.env["AGENTLOOP_TIMINGS"] === "fast" ? "fast" : "balanced"

const pg = postgres()
const program = Effect.gen(function*() {
  const run = yield* runCluster({
    pg,
    runs,
    steps,
    callMs,
    killEveryMs,
    maxKills,
    timeoutMs: short ? 150_000 : 15 * 60_000,
    timings
  })
  const a = analyze(pg, run)
  const failures = [
    ...(run.completed ? [] : [`the client did not see every run end within the time limit (logs in ${run.dir})`]),
    ...(a.runsEnded === runs ? [] : [`${runs - a.runsEnded} of ${runs} runs did not end`]),
    ...(a.notStop === 0 ? [] : [`${a.notStop} runs did not end "stop"`]),
    ...(a.violations === 0 ? [] : [`${a.violations} invariant violations`]),
    ...(a.rerunAfterJournaled === 0
      ? []
      : [`${a.rerunAfterJournaled} calls ran again after their result was journaled`]),
    ...(a.journalMismatches === 0 ? [] : [`${a.journalMismatches} journaled results name no logged execution`]),
    ...(run.kills > 0 || killEveryMs === 0 ? [] : ["no runner was killed: the run ended before the first kill"])
  ]
  console.log(
    `soak: ${runs} runs x ${steps} steps (calls of ${callMs} ms) on 3 runner processes (PostgreSQL ${
      pg.origin === "started" ? "started here" : "from AGENTLOOP_PG_*"
    }, ${timings}Timings), ` +
      (killEveryMs > 0 ?
        `a runner killed with SIGKILL every ${
          killEveryMs / 1000
        } s: ${run.kills} kills, ${run.interrupted} calls running on the runners killed` :
        "no kills")
  )
  console.log(
    `  ${a.runsEnded}/${runs} runs ended in ${(run.elapsedMs / 1000).toFixed(1)} s (${a.notStop} not "stop"); ` +
      `invariant violations: ${a.violations}`
  )
  console.log(
    `  ${a.calls} calls, ${a.executions} executions; ran again: ${a.rerunAfterJournaled} after their result was ` +
      `journaled, ` +
      `${a.rerunInFlightAtKill} in flight (or finished, not journaled) when their runner was killed, ` +
      `${a.rerunUnjournaledNoKill} not journaled with no kill`
  )
  for (const example of a.examples) console.log(`  ${example}`)
  if (failures.length > 0) {
    console.log(`FAILED: ${failures.join("; ")} (logs in ${run.dir})`)
    return false
  }
  dropDatabase(pg, run.database)
  console.log("soak passed")
  return true
})

Effect.runPromise(program).then(
  (ok) => {
    pg.stop()
    process.exit(ok ? 0 : 1)
  },
  (error) => {
    console.error(error)
    pg.stop()
    process.exit(1)
  }
)
