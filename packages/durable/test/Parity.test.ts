/**
 * Parity: one loop, on any engine. Each generated fault plan (testkit's fault injection: faulty
 * models, tools, inputs, sinks, aborts, output schemas, sub-agents) runs on the in-memory loop and
 * on the durable loop (on `WorkflowEngine.layerMemory`, and on the embedded engine's SQLite file),
 * some with a `transformContext` and a policy; all keep every invariant, and their transcripts,
 * reasons, steps, errors, outputs and usage are the same.
 *
 * `PARITY_RUNS` sets the number of plans on the memory engine (default 2,000), `PARITY_EMBEDDED_RUNS`
 * on the embedded engine (default 1,000: each run there makes a database file of its own).
 */
import { allow, deny } from "@agentloop/core"
import type { AgentLoopOptions, AgentRunResult, Message } from "@agentloop/core"
import { faultSeed, generateFaultPlan, runFaultPlan, withAbortStops } from "@agentloop/testkit"
import type { FaultPlan } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { durableEngine } from "./engine.ts"
import type { Journal } from "./engine.ts"

const RUNS: Record<Journal, number> = {
  memory: Number(process.env["PARITY_RUNS"] ?? 2_000),
  embedded: Number(process.env["PARITY_EMBEDDED_RUNS"] ?? 1_000)
}

/**
 * The options some plans also run with, the same on both engines: a `transformContext` that keeps
 * the last messages of long transcripts and fails on one request of some runs, and a policy that
 * denies some calls and fails on others (its failure ends the run `error`).
 */
const moreOptions = (plan: FaultPlan): Partial<AgentLoopOptions> => {
  const options: { -readonly [K in keyof AgentLoopOptions]?: AgentLoopOptions[K] } = {}
  if (plan.seed % 3 === 0) {
    let requests = 0
    const failOn = plan.seed % 5 === 0 ? 1 + (plan.seed % 3) : -1
    options.transformContext = (messages) =>
      ++requests === failOn ?
        Effect.fail(new Error(`compaction failed on request ${requests}`)) as never :
        Effect.succeed(messages.length > 6 ? messages.slice(pairedCut(messages)) : messages)
  }
  if (plan.seed % 7 === 0) {
    options.policy = (call) =>
      call.id.endsWith("c1")
        ? deny("not this one")
        : call.id.endsWith("c3")
        ? Effect.die(new Error("policy broke"))
        : allow
  }
  return options
}

/** Where a transcript can be cut without splitting a call from its results: at its last user message. */
const pairedCut = (messages: ReadonlyArray<Message>): number => {
  for (let i = messages.length - 1; i > 0; i--) if (messages[i]!.role === "user") return i
  return 0
}
const SEED = 0x5eed

/** What must be the same on both engines. */
const outcomeOf = (result: AgentRunResult | undefined) =>
  result === undefined ? "no result" : JSON.stringify({
    messages: result.messages,
    reason: result.reason,
    steps: result.steps,
    error: result.error,
    output: result.output,
    usage: result.usage
  })

describe("the in-memory and the durable loop", () => {
  for (const journal of ["memory", "embedded"] as const) {
    it.effect(
      `give the same runs over ${RUNS[journal]} generated fault plans (durable on the ${journal} engine)`,
      () =>
        Effect.gen(function*() {
          const engine = durableEngine({}, journal)
          const mismatches: Array<string> = []
          let violations = 0
          const only = process.env["PARITY_SEED"]
          for (let i = 0; i < (only === undefined ? RUNS[journal] : 1); i++) {
            const seed = only === undefined ? faultSeed(SEED, i) : Number(only)
            const plan = withAbortStops(generateFaultPlan(seed, { output: true, subAgents: true }))
            const memory = yield* runFaultPlan(plan, { options: moreOptions })
            const durable = yield* runFaultPlan(plan, { engine, options: moreOptions })
            violations += memory.violations.length + durable.violations.length
            if (durable.violations.length > 0 && mismatches.length < 5) {
              mismatches.push(`plan ${plan.seed}: durable violations ${durable.violations.join("; ")}`)
            }
            const a = outcomeOf(memory.result)
            const b = outcomeOf(durable.result)
            if (a !== b && mismatches.length < 5) {
              mismatches.push(`plan ${plan.seed} (${JSON.stringify(plan)}):\n  memory  ${a}\n  durable ${b}`)
            }
          }
          assert.deepStrictEqual(mismatches, [])
          assert.strictEqual(violations, 0)
        }),
      { timeout: 600_000 }
    )
  }
})
