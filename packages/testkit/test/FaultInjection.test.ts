/**
 * The fault injector: a few hundred generated runs with faults keep every invariant (the soak,
 * `npm run soak`, does 10,000), the plans are reproducible from their seed, every kind of fault is
 * injected, your own tools can be soaked, and a run that never ends is reported.
 */
import { defineTool, Executor } from "@agentloop/core"
import {
  faultSeed,
  faultsOf,
  generateFaultPlan,
  makeFaultRandom,
  runFaultInjection,
  runFaultPlan
} from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"

const SEED = 2024

describe("fault injection", () => {
  it.effect("300 generated runs with faults injected at random keep every invariant", () =>
    Effect.gen(function*() {
      const summary = yield* runFaultInjection({ runs: 300, seed: SEED })
      assert.deepStrictEqual(
        summary.failures.map((f) => ({ seed: f.seed, violations: f.violations })),
        []
      )
      assert.strictEqual(summary.violations, 0)
      assert.strictEqual(summary.runs, 300)
      // the runs end every way a run can end
      for (const outcome of ["stop", "error", "aborted", "maxSteps", "interrupted"]) {
        assert.isAbove(summary.outcomes[outcome] ?? 0, 0, `no run ended ${outcome}`)
      }
      assert.isAbove(summary.toolExecutions, 100)
      // and the faults were met, not only planned: every tool misbehaviour ran, every stop fired
      const met = Object.keys(summary.faults)
      for (
        const fault of [
          "tool:fail",
          "tool:die",
          "tool:throw",
          "tool:interrupt",
          "tool:badResult",
          "tool:wrongId",
          "tool:notEffect",
          "tool:executorThrows",
          "tool:hang",
          "tool:awaitSignal",
          "model:failStream",
          "model:dieStream",
          "model:hangStream",
          "model:secondDone",
          "stop:abort",
          "stop:interrupt",
          "stop:runAbort",
          "sink:fail",
          "sink:throw"
        ]
      ) assert.include(met, fault)
    }))

  it.effect("runs with output schemas and sub-agents keep every invariant, down the tree of runs", () =>
    Effect.gen(function*() {
      const summary = yield* runFaultInjection({ runs: 400, seed: SEED, output: true, subAgents: true })
      assert.deepStrictEqual(summary.failures.map((f) => ({ seed: f.seed, violations: f.violations })), [])
      // met, not only planned: answers accepted, rejected and given alongside calls; sub-agents that
      // answered, failed, and were stopped with their parent
      const met = Object.keys(summary.faults)
      for (
        const fault of [
          "output:answer",
          "output:badAnswer",
          "output:answerWithCalls",
          "output:accepted",
          "subagent:call",
          "subagent:stop",
          "subagent:error",
          "subagent:aborted"
        ]
      ) assert.include(met, fault)
      // the option is off by default: the plans of a seed are the same as without it
      const plain = generateFaultPlan(faultSeed(SEED, 3))
      assert.isUndefined(plain.output)
      assert.isUndefined(plain.child)
    }))

  it("plans with output and sub-agents inject their faults in the children too", () => {
    const seen = new Set<string>()
    for (let i = 0; i < 300; i++) {
      for (const f of faultsOf(generateFaultPlan(faultSeed(SEED, i), { output: true, subAgents: true }))) seen.add(f)
    }
    for (const f of ["child tool:hang", "child model:failStream", "child output:badAnswer", "subagent:call"]) {
      assert.isTrue(seen.has(f), f)
    }
  })

  it("injects every kind of fault", () => {
    const seen = new Set<string>()
    for (let i = 0; i < 300; i++) for (const f of faultsOf(generateFaultPlan(faultSeed(SEED, i)))) seen.add(f)
    const expected = [
      "tool:fail",
      "tool:die",
      "tool:throw",
      "tool:interrupt",
      "tool:progress",
      "tool:badResult",
      "tool:wrongId",
      "tool:notEffect",
      "tool:executorThrows",
      "tool:hang",
      "tool:awaitSignal",
      "model:failStream",
      "model:dieStream",
      "model:throwStream",
      "model:noDone",
      "model:hangStream",
      "model:malformed",
      "model:duplicateIds",
      "model:secondDone",
      "model:afterDone",
      "model:toolUseNoCalls",
      "model:stopWithCalls",
      "model:length",
      "model:error",
      "model:aborted",
      "input:dangling",
      "input:partial",
      "input:orphan",
      "input:duplicateResult",
      "input:wrongToolName",
      "input:invalidMessage",
      "input:duplicateInputIds",
      "input:notArray",
      "input:badMaxSteps",
      "sink:fail",
      "sink:die",
      "sink:throw",
      "sink:yield",
      "stop:abort",
      "stop:abort@start",
      "stop:interrupt",
      "stop:runAbort"
    ]
    assert.deepStrictEqual(expected.filter((f) => !seen.has(f)), [])
  })

  it("plans are plain data, reproducible from their seed", () => {
    const plan = generateFaultPlan(12345)
    assert.deepStrictEqual(generateFaultPlan(12345), plan)
    assert.deepStrictEqual(JSON.parse(JSON.stringify(plan)), plan)
    assert.notDeepEqual(generateFaultPlan(12346), plan)
    const a = makeFaultRandom(7)
    const b = makeFaultRandom(7)
    const xs = Array.from({ length: 5 }, () => a.next())
    assert.deepStrictEqual(Array.from({ length: 5 }, () => b.next()), xs)
    for (const x of xs) assert.isTrue(x >= 0 && x < 1)
  })

  it.effect("a run replayed alone from its plan does the same", () =>
    Effect.gen(function*() {
      const reports: Array<{ seed: number; outcome: string; events: number; requests: number }> = []
      yield* runFaultInjection({
        runs: 40,
        seed: SEED,
        onRun: (_, r) => Effect.sync(() => void reports.push(r))
      })
      for (const r of reports) {
        const again = yield* runFaultPlan(generateFaultPlan(r.seed))
        assert.deepStrictEqual(
          { seed: again.seed, outcome: again.outcome, events: again.events, requests: again.requests },
          { seed: r.seed, outcome: r.outcome, events: r.events, requests: r.requests }
        )
      }
    }))

  it.effect("soaks your own tools: generated calls reach them, checked like the built-in ones", () =>
    Effect.gen(function*() {
      let calls = 0
      const add = defineTool({
        name: "add",
        description: "adds",
        parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
        execute: ({ a, b }) =>
          Effect.sync(() => {
            calls++
            return String(a + b)
          })
      })
      const summary = yield* runFaultInjection({
        runs: 150,
        seed: SEED,
        // valid arguments mostly, invalid now and then (the executor answers those with an error)
        targets: [{
          tool: add,
          arguments: (random) => random.chance(0.8) ? { a: random.int(0, 9), b: random.int(0, 9) } : { a: "x" }
        }]
      })
      assert.strictEqual(summary.violations, 0)
      assert.isAbove(calls, 0)
    }))

  it.live("reports a run that never ends", () =>
    Effect.gen(function*() {
      // executor middleware under test that loses calls: they never answer
      const losing = (layer: Layer.Layer<Executor>) =>
        Layer.effect(
          Executor,
          Effect.map(Executor, (inner) => Executor.of({ definitions: inner.definitions, execute: () => Effect.never }))
        ).pipe(Layer.provide(layer))
      const summary = yield* runFaultInjection({ runs: 30, seed: SEED, executor: losing, timeout: "20 millis" })
      assert.isAbove(summary.failedRuns, 0)
      assert.isTrue(
        summary.failures.some((f) => f.violations.includes("the run did not end (timed out)")),
        JSON.stringify(summary.failures.map((f) => f.violations))
      )
    }), 20_000)
})
