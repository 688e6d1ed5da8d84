/**
 * Fault injection: generated runs with faults injected at random, each checked with
 * `checkInvariants` and a few checks of its own. Use it to soak the loop, or your own tools and
 * executor middleware, with thousands of runs where anything can go wrong.
 *
 * A run is described by a `FaultPlan`: plain, JSON-serializable data generated from a seed, so a
 * failing run can be printed, saved and replayed alone (`runFaultPlan(generateFaultPlan(seed))`).
 * The faults cover every way the loop's collaborators can misbehave:
 *
 * - tools: typed failures, defects, synchronous throws, self-interruption, progress reports,
 *   results that are malformed or answer another call, an executor returning something that is
 *   not an effect, tools that never end (until the run is stopped) or wait for their `signal`;
 * - the model: streams that fail, die, throw instead of returning a stream, end without `done`,
 *   never end, send a second `done` or events after it, malformed final messages, duplicate tool
 *   call ids, `toolUse` without calls, calls with `stop`/`length`/`error`/`aborted`;
 * - the input: dangling calls, partial and out-of-order results (repaired), orphan and duplicate
 *   results, results naming the wrong tool, invalid messages, duplicate call ids, bad options;
 * - the sink: emits that fail, die, throw or yield;
 * - stopping: an `AbortSignal` fired at a random event (or before the run), the run's fiber
 *   interrupted from outside (`Fiber.interrupt`) or a started run aborted (`startAgentLoop`);
 * - with `output: true`, some runs have an output schema and final answers that are valid,
 *   invalid, or given alongside other calls; with `subAgents: true`, some runs call a sub-agent
 *   whose own script is generated with the same faults (and sometimes an output schema), so aborts
 *   and hangs land inside children too.
 *
 * The loop runs in memory (`runAgentLoop`) unless `FaultSetup.engine` gives another engine: the same
 * plan then runs there (a durable loop, say), so two engines can be compared run by run
 * (`FaultRunReport.result`), with the plans every engine can stop (`withAbortStops`).
 *
 * Checks on every run: the three invariants and their bookkeeping (`checkInvariants`, for the
 * sub-agent runs too), no tool call executed twice, none executed from a turn that must not
 * execute, no more requests than `maxSteps`, none at all for a pre-aborted run or bad input, the
 * run ends, and a run with an output schema ends `stop` only with its accepted, decoded answer.
 *
 * @example
 * ```ts
 * const summary = yield* runFaultInjection({ runs: 1_000, seed: 42 })
 * assert.strictEqual(summary.violations, 0)
 * ```
 *
 * @since 0.1.0
 */
import {
  EventSink,
  Executor,
  FINAL_ANSWER_TOOL,
  isAcceptedAnswer,
  ModelError,
  runAgentLoop,
  startAgentLoop,
  subAgentRunOf,
  subAgentTool,
  ToolError,
  toolExecutorLayer
} from "@agentloop/core"
import type {
  AgentLoopOptions,
  AgentRunResult,
  AnyTool,
  LoopEvent,
  Message,
  Model,
  ModelEvent,
  ToolCall,
  ToolResultMessage
} from "@agentloop/core"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Option, References, Schema, Stream } from "effect"
import { fakeTool, probeTool } from "./FakeTools.ts"
import { checkInvariants } from "./Invariants.ts"
import { assistant, makeScriptedModel, toolCall, turn } from "./ScriptedModel.ts"
import type { ScriptedTurn } from "./ScriptedModel.ts"
import { user } from "./ScriptedRun.ts"

// -----------------------------------------------------------------------------
// Random numbers
// -----------------------------------------------------------------------------

/**
 * A small deterministic random source (mulberry32): the same seed gives the same sequence on every
 * platform.
 *
 * @since 0.1.0
 * @category models
 */
export interface FaultRandom {
  /** A float in [0, 1). */
  readonly next: () => number
  /** An integer in [min, max]. */
  readonly int: (min: number, max: number) => number
  /** True with probability `p`. */
  readonly chance: (p: number) => boolean
  /** One of `items`. */
  readonly pick: <A>(items: ReadonlyArray<A>) => A
}

/**
 * Makes a `FaultRandom` from a 32-bit seed.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeFaultRandom = (seed: number): FaultRandom => {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6D2B79F5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (min: number, max: number) => min + Math.floor(next() * (max - min + 1))
  return {
    next,
    int,
    chance: (p) => next() < p,
    pick: (items) => items[int(0, items.length - 1)]!
  }
}

/**
 * The seed of run `index` of a soak started with `seed` (each run can be replayed alone).
 *
 * @since 0.1.0
 * @category constructors
 */
export const faultSeed = (seed: number, index: number): number => {
  let h = (seed ^ Math.imul(index + 1, 0x9E3779B1)) >>> 0
  h = Math.imul(h ^ (h >>> 16), 0x85EBCA6B) >>> 0
  h = Math.imul(h ^ (h >>> 13), 0xC2B2AE35) >>> 0
  return (h ^ (h >>> 16)) >>> 0
}

// -----------------------------------------------------------------------------
// Plans
// -----------------------------------------------------------------------------

/**
 * What a tool call does. `user` calls one of your own tools (see `FaultTarget`) with generated
 * arguments; the others call the built-in fault tool:
 *
 * - `ok`, `fail` (a `ToolError`), `die` (a defect), `throw` (`execute` throws before returning an
 *   effect), `interrupt` (the tool interrupts itself), `progress` (reports progress, then answers);
 * - `badResult`, `wrongId`, `notEffect`, `executorThrows`: the executor breaks its contract
 *   (a malformed result, a result for another call, a value that is not an effect, a throw);
 * - `hang` (never ends) and `awaitSignal` (ends when its `AbortSignal` fires): both stop the run
 *   once they have started, so the run always ends.
 *
 * @since 0.1.0
 * @category models
 */
export type CallOutcome =
  | "ok"
  | "fail"
  | "die"
  | "throw"
  | "interrupt"
  | "progress"
  | "badResult"
  | "wrongId"
  | "notEffect"
  | "executorThrows"
  | "hang"
  | "awaitSignal"
  | "user"

/**
 * One planned tool call. `yields` is how many times the tool yields before it acts (so calls of a
 * batch finish in shuffled orders).
 *
 * @since 0.1.0
 * @category models
 */
export interface CallPlan {
  readonly id: string
  readonly tool: string
  readonly outcome: CallOutcome
  readonly yields: number
  /** The arguments of a `user` call. */
  readonly args?: Readonly<Record<string, unknown>> | undefined
}

/**
 * One planned model turn.
 *
 * @since 0.1.0
 * @category models
 */
export type TurnPlan =
  | { readonly kind: "toolUse"; readonly calls: ReadonlyArray<CallPlan>; readonly thinking: boolean }
  | { readonly kind: "text" }
  | { readonly kind: "streamed"; readonly pieces: number }
  | { readonly kind: "failStream"; readonly pieces: number }
  | { readonly kind: "dieStream"; readonly pieces: number }
  | { readonly kind: "throwStream" }
  | { readonly kind: "noDone"; readonly pieces: number }
  | { readonly kind: "hangStream"; readonly pieces: number }
  | { readonly kind: "malformed"; readonly variant: number }
  | { readonly kind: "duplicateIds"; readonly calls: number }
  | { readonly kind: "secondDone"; readonly calls: ReadonlyArray<CallPlan> }
  | { readonly kind: "afterDone" }
  | { readonly kind: "toolUseNoCalls" }
  | { readonly kind: "stopWithCalls" | "length" | "error" | "aborted"; readonly calls: number }
  | { readonly kind: "answer" | "badAnswer" }
  | { readonly kind: "answerWithCalls"; readonly calls: ReadonlyArray<CallPlan> }
  | { readonly kind: "delegate"; readonly agents: number; readonly calls: ReadonlyArray<CallPlan> }

/**
 * The sub-agent a run may call (`delegate` turns): its script, shared by all its calls in request
 * order (a call past its end meets an unscripted request, which ends that child `error`), and
 * whether it has an output schema.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChildPlan {
  readonly turns: ReadonlyArray<TurnPlan>
  readonly output: boolean
  readonly maxSteps: number
}

/**
 * The input transcript of a run (and whether its options are valid).
 *
 * @since 0.1.0
 * @category models
 */
export type InputPlan =
  | "clean"
  | "dangling"
  | "partial"
  | "orphan"
  | "duplicateResult"
  | "wrongToolName"
  | "invalidMessage"
  | "duplicateInputIds"
  | "notArray"
  | "badMaxSteps"

/**
 * How the run is stopped from outside: at the `atEvent`-th event the sink receives (0: before the
 * run starts), by its `AbortSignal`, by interrupting its fiber, or by `AgentRun.abort`.
 *
 * @since 0.1.0
 * @category models
 */
export type StopPlan =
  | { readonly kind: "none" }
  | { readonly kind: "abort" | "interrupt" | "runAbort"; readonly atEvent: number }

/**
 * How the sink misbehaves: on every `every`-th event it fails, dies, throws, or yields first.
 *
 * @since 0.1.0
 * @category models
 */
export type SinkPlan =
  | { readonly kind: "none" }
  | { readonly kind: "fail" | "die" | "throw" | "yield"; readonly every: number }

/**
 * One generated run.
 *
 * @since 0.1.0
 * @category models
 */
export interface FaultPlan {
  readonly seed: number
  readonly input: InputPlan
  readonly maxSteps: number
  readonly turns: ReadonlyArray<TurnPlan>
  readonly stop: StopPlan
  readonly sink: SinkPlan
  /** The run has an output schema (`{ n: number }`); a valid answer is `{ n: 1 }`. */
  readonly output?: boolean | undefined
  /** The sub-agent its `delegate` turns call. */
  readonly child?: ChildPlan | undefined
}

/**
 * One of your own tools for the generated scripts to call, with a generator of valid (or, on
 * purpose, invalid) arguments. It must need no services; wrap it otherwise.
 *
 * @since 0.1.0
 * @category models
 */
export interface FaultTarget {
  readonly tool: AnyTool
  readonly arguments: (random: FaultRandom) => Record<string, unknown>
}

/**
 * Knobs of the generator.
 *
 * @since 0.1.0
 * @category models
 */
export interface FaultPlanOptions {
  /** Most turns in a script (default 6). */
  readonly maxTurns?: number | undefined
  /** Most calls in one tool turn (default 5). */
  readonly maxCalls?: number | undefined
  /** Your own tools, called by some of the generated calls. */
  readonly targets?: ReadonlyArray<FaultTarget> | undefined
  /**
   * Also interrupt runs before their fiber has started (`atEvent: 0` for `interrupt` and
   * `runAbort`; default false). Such a run executes none of the loop: `runAgentLoop` emits no
   * `turn_end`, and `startAgentLoop`'s `result` never resolves after an immediate `abort` (a known
   * gap of agentloop 0.1.0), so these plans report violations until that is fixed.
   */
  readonly interruptBeforeStart?: boolean | undefined
  /** Give some runs an output schema and final-answer turns (default false). */
  readonly output?: boolean | undefined
  /** Give some runs a sub-agent with a generated script of its own, and turns that call it (default false). */
  readonly subAgents?: boolean | undefined
}

/** The name of the sub-agent tool of generated runs. */
const SUB_AGENT = "helper"

/** The built-in tool every non-`user` call goes to. */
const FAULT_TOOL = "fault"

const builtinOutcomes: ReadonlyArray<CallOutcome> = [
  "ok",
  "ok",
  "ok",
  "fail",
  "die",
  "throw",
  "interrupt",
  "progress",
  "badResult",
  "wrongId",
  "notEffect",
  "executorThrows"
]

const MALFORMED_VARIANTS = 6

/**
 * Generates the plan of one run from its seed.
 *
 * @since 0.1.0
 * @category constructors
 */
export const generateFaultPlan = (seed: number, options: FaultPlanOptions = {}): FaultPlan => {
  const random = makeFaultRandom(seed)
  const maxTurns = options.maxTurns ?? 6
  const maxCalls = options.maxCalls ?? 5
  const targets = options.targets ?? []
  let hangs = false
  const callPlan = (turnIndex: number, k: number): CallPlan => {
    const id = `t${turnIndex}c${k}`
    const yields = random.int(0, 4)
    if (targets.length > 0 && random.chance(0.3)) {
      const target = random.pick(targets)
      return { id, tool: target.tool.name, outcome: "user", yields, args: target.arguments(random) }
    }
    const outcome: CallOutcome = random.chance(0.04) ? random.pick(["hang", "awaitSignal"] as const) : random.pick(
      builtinOutcomes
    )
    if (outcome === "hang" || outcome === "awaitSignal") hangs = true
    return { id, tool: FAULT_TOOL, outcome, yields }
  }
  const calls = (turnIndex: number) => Array.from({ length: random.int(1, maxCalls) }, (_, k) => callPlan(turnIndex, k))

  const turnPlan = (index: number): TurnPlan => {
    const r = random.next()
    if (r < 0.5) return { kind: "toolUse", calls: calls(index), thinking: random.chance(0.2) }
    if (r < 0.56) return { kind: "text" }
    if (r < 0.6) return { kind: "streamed", pieces: random.int(1, 5) }
    if (r < 0.64) return { kind: "failStream", pieces: random.int(0, 3) }
    if (r < 0.67) return { kind: "dieStream", pieces: random.int(0, 3) }
    if (r < 0.69) return { kind: "throwStream" }
    if (r < 0.72) return { kind: "noDone", pieces: random.int(0, 3) }
    if (r < 0.74) {
      hangs = true
      return { kind: "hangStream", pieces: random.int(0, 3) }
    }
    if (r < 0.78) return { kind: "malformed", variant: random.int(0, MALFORMED_VARIANTS - 1) }
    if (r < 0.81) return { kind: "duplicateIds", calls: random.int(2, 4) }
    if (r < 0.85) return { kind: "secondDone", calls: calls(index) }
    if (r < 0.87) return { kind: "afterDone" }
    if (r < 0.89) return { kind: "toolUseNoCalls" }
    return {
      kind: random.pick(["stopWithCalls", "length", "error", "aborted"] as const),
      calls: random.int(0, 3)
    }
  }
  const turns = Array.from({ length: random.int(1, maxTurns) }, (_, i) => turnPlan(i))
  // most scripts end with a text turn; the others run out (the next request is unscripted and its
  // stream dies) or stop on a fault
  if (random.chance(0.7)) turns.push({ kind: "text" })
  // final answers and sub-agents are drawn only when asked for, so the plans of a seed stay the same
  // without them; their calls get ids of their own (turn numbers from 100), unique in the run
  const answerTurns = (into: Array<TurnPlan>, first: number) => {
    for (let k = random.int(1, 2); k > 0; k--) {
      const r = random.next()
      const t: TurnPlan = r < 0.5 ?
        { kind: "answer" } :
        r < 0.8 ?
        { kind: "badAnswer" } :
        { kind: "answerWithCalls", calls: calls(first + k) }
      into.splice(random.int(0, into.length), 0, t)
    }
  }
  const output = options.output === true && random.chance(0.4)
  if (output) answerTurns(turns, 100)
  let child: ChildPlan | undefined
  if (options.subAgents === true && random.chance(0.4)) {
    const childTurns = Array.from({ length: random.int(1, 4) }, (_, i) => turnPlan(300 + i))
    const childOutput = options.output === true && random.chance(0.4)
    if (childOutput) answerTurns(childTurns, 400)
    else if (random.chance(0.7)) childTurns.push({ kind: "text" })
    child = { turns: childTurns, output: childOutput, maxSteps: random.int(1, childTurns.length + 1) }
    for (let k = random.int(1, 2); k > 0; k--) {
      const delegate: TurnPlan = {
        kind: "delegate",
        agents: random.int(1, 3),
        calls: random.chance(0.5) ? calls(200 + k) : []
      }
      turns.splice(random.int(0, turns.length), 0, delegate)
    }
  }

  const input: InputPlan = random.chance(0.7) ? "clean" : random.pick(
    [
      "dangling",
      "partial",
      "orphan",
      "duplicateResult",
      "wrongToolName",
      "invalidMessage",
      "duplicateInputIds",
      "notArray",
      "badMaxSteps"
    ] as const
  )

  // An `AbortSignal` may fire before the run starts (the loop sees it aborted at once); an outside
  // interruption comes at the first event or later: a fiber interrupted before it has started
  // runs none of the loop (see `FaultPlanOptions.interruptBeforeStart`).
  const r = random.next()
  const kind = random.pick(["abort", "interrupt", "runAbort"] as const)
  const earliest = kind === "abort" || options.interruptBeforeStart === true ? 0 : 1
  let stop: StopPlan = r < 0.55 ? { kind: "none" } : { kind, atEvent: random.int(earliest, 30) }
  // a run with something that never ends by itself must be stopped: the hanging part stops it
  // when it is reached (if the planned stop has not come first)
  if (hangs && stop.kind === "none") {
    stop = { kind: random.pick(["abort", "interrupt", "runAbort"] as const), atEvent: 1_000_000 }
  }

  const sink: SinkPlan = random.chance(0.8) ?
    { kind: "none" } :
    { kind: random.pick(["fail", "die", "throw", "yield"] as const), every: random.int(1, 4) }

  return {
    seed,
    input,
    maxSteps: random.int(1, turns.length + 2),
    turns,
    stop,
    sink,
    ...(output ? { output } : {}),
    ...(child === undefined ? {} : { child })
  }
}

const stopLabel = (stop: StopPlan): string =>
  stop.kind !== "none" && stop.atEvent === 0 ? `stop:${stop.kind}@start` : `stop:${stop.kind}`

const textDeltas = (n: number): Array<ModelEvent> =>
  Array.from({ length: n }, (_, i): ModelEvent => ({ type: "text_delta", delta: `p${i} ` }))

const okCall = (id: string): ToolCall => toolCall(id, FAULT_TOOL, { outcome: "ok", yields: 0 })

/**
 * Short labels of the faults a plan injects, for statistics.
 *
 * @since 0.1.0
 * @category getters
 */
export const faultsOf = (plan: FaultPlan): Array<string> => {
  const out: Array<string> = []
  if (plan.input !== "clean") out.push(`input:${plan.input}`)
  if (plan.stop.kind !== "none") out.push(stopLabel(plan.stop))
  if (plan.sink.kind !== "none") out.push(`sink:${plan.sink.kind}`)
  for (const t of plan.turns) out.push(...turnFaults(t))
  if (plan.child !== undefined) {
    for (const t of plan.child.turns) {
      out.push(...turnFaults(t).map((f) => `child ${f}`))
    }
  }
  return out
}

/** The faults of one planned turn, as `faultsOf` labels them. */
const turnFaults = (t: TurnPlan): Array<string> => {
  switch (t.kind) {
    case "toolUse":
    case "secondDone":
    case "answerWithCalls":
    case "delegate": {
      const out = t.calls.flatMap((c) => c.outcome === "ok" ? [] : [`tool:${c.outcome}`])
      if (t.kind === "secondDone") out.push("model:secondDone")
      if (t.kind === "answerWithCalls") out.push("output:answerWithCalls")
      if (t.kind === "delegate") out.push("subagent:call")
      return out
    }
    case "answer":
    case "badAnswer":
      return [`output:${t.kind}`]
    case "text":
    case "streamed":
      return []
    default:
      return [`model:${t.kind}`]
  }
}

// -----------------------------------------------------------------------------
// Running a plan
// -----------------------------------------------------------------------------

/**
 * What one run did and every violation found.
 *
 * @since 0.1.0
 * @category models
 */
export interface FaultRunReport {
  readonly seed: number
  readonly plan: FaultPlan
  /** The run's reason, or `interrupted` when its fiber was interrupted (no result). */
  readonly outcome: AgentRunResult["reason"] | "interrupted"
  readonly steps: number
  readonly events: number
  readonly requests: number
  readonly toolExecutions: number
  /** The faults the run actually met (`faultsOf` lists the planned ones, reached or not). */
  readonly exercised: ReadonlyArray<string>
  readonly violations: ReadonlyArray<string>
  /** The run's result (none when its fiber was interrupted, or it did not end). */
  readonly result?: AgentRunResult | undefined
}

/**
 * Your setup under test.
 *
 * @since 0.1.0
 * @category models
 */
export interface FaultSetup {
  /** Your tools, called by the plans' `user` calls (generate the plans with the same targets). */
  readonly targets?: ReadonlyArray<FaultTarget> | undefined
  /** Wraps the executor layer (for executor middleware under test). */
  readonly executor?: ((layer: Layer.Layer<Executor>) => Layer.Layer<Executor>) | undefined
  /** Longest a run may take before it counts as hung (default 10 seconds, real time). */
  readonly timeout?: Duration.Input | undefined
  /**
   * The engine that runs the loop (default: `runAgentLoop`, in memory). Another engine (a durable
   * one) gets the run's options and the layers of its model, executor and sink, and gives the
   * result. It is stopped through the options' `signal` only: run it with plans whose stops are
   * aborts (`withAbortStops`).
   */
  readonly engine?: FaultEngine | undefined
  /** More options for a plan's run (a `transformContext`, a `policy`...), made afresh for each run. */
  readonly options?: ((plan: FaultPlan) => Partial<AgentLoopOptions>) | undefined
}

/**
 * An engine the fault runner can run plans on (see `FaultSetup.engine`).
 *
 * @since 0.1.0
 * @category models
 */
export interface FaultEngine {
  readonly run: (
    options: AgentLoopOptions,
    layers: Layer.Layer<Model | Executor | EventSink>
  ) => Effect.Effect<AgentRunResult>
}

/**
 * The plan with each stop from outside made an abort at the same event (an interruption of the
 * run's fiber, or `AgentRun.abort`, is an abort by the signal): the plans every engine can run.
 *
 * @since 0.1.0
 * @category constructors
 */
export const withAbortStops = (plan: FaultPlan): FaultPlan =>
  plan.stop.kind === "interrupt" || plan.stop.kind === "runAbort" ?
    { ...plan, stop: { kind: "abort", atEvent: plan.stop.atEvent } } :
    plan

const textPieces = (n: number): Array<string> => Array.from({ length: n }, (_, i) => `p${i} `)

const callOf = (c: CallPlan): ToolCall =>
  toolCall(c.id, c.tool, c.outcome === "user" ? { ...c.args } : { outcome: c.outcome, yields: c.yields })

const malformedMessage = (variant: number): unknown => {
  switch (variant) {
    case 0:
      return { role: "assistant", content: [{ type: "toolCall", id: "x", arguments: 1 }] }
    case 1:
      return { role: "assistant", content: [{ type: "text", text: "no stop reason" }] }
    case 2:
      return { role: "assistant", content: [toolCall("", "fault")], stopReason: "toolUse" }
    case 3:
      return { role: "assistant", content: "not an array", stopReason: "stop" }
    case 4:
      return { role: "user", content: "a user message as the final message" }
    default:
      return null
  }
}

/** Runs the planned stop (once), whoever reaches it first: the sink or a hanging part. */
interface Stopper {
  readonly fire: () => void
  readonly fired: () => boolean
}

interface Built {
  readonly turns: Array<ScriptedTurn>
  /** Ids of calls that may execute (turns whose calls the loop runs). */
  readonly executable: Set<string>
}

const buildScript = (planned: ReadonlyArray<TurnPlan>, stopper: Stopper): Built => {
  const executable = new Set<string>()
  const thenStop = <A>(stream: Stream.Stream<A, ModelError>): Stream.Stream<A, ModelError> =>
    Stream.concat(stream, Stream.fromEffectDrain(Effect.sync(stopper.fire)))
  const turns = planned.map((t, index): ScriptedTurn => {
    switch (t.kind) {
      case "answer":
        return turn.finalAnswer(`t${index}f`, { n: 1 })
      case "badAnswer":
        return turn.finalAnswer(`t${index}f`, { n: "one" })
      case "answerWithCalls":
      case "delegate": {
        const calls = t.calls.map(callOf)
        for (const c of calls) executable.add(c.id)
        const extra = t.kind === "answerWithCalls" ?
          [toolCall(`t${index}f`, FINAL_ANSWER_TOOL, { n: 1 })] :
          Array.from({ length: t.agents }, (_, k) => toolCall(`t${index}a${k}`, SUB_AGENT, { task: `task ${k}` }))
        return turn.toolCalls([...extra, ...calls])
      }
      case "toolUse": {
        const calls = t.calls.map(callOf)
        for (const c of calls) executable.add(c.id)
        const message = assistant("toolUse", { calls, ...(t.thinking ? { thinking: "hm" } : {}) })
        const events: Array<ModelEvent> = []
        if (t.thinking) events.push({ type: "thinking_delta", delta: "hm" })
        // deltas of parallel calls interleave
        for (const c of calls) events.push({ type: "toolcall_delta", id: c.id, name: c.name, delta: "{" })
        for (const c of calls) events.push({ type: "toolcall_delta", id: c.id, delta: "}" })
        events.push({ type: "done", message })
        return turn.events(events)
      }
      case "text":
        return turn.text(`answer ${index}`)
      case "streamed":
        return turn.streamed(textPieces(t.pieces))
      case "failStream":
        return turn.failing("connection reset", textPieces(t.pieces))
      case "dieStream":
        return turn.dying(new Error("stream crashed"), textPieces(t.pieces))
      case "throwStream":
        return turn.throwing(new Error("Model.stream threw"))
      case "noDone":
        return turn.events(textDeltas(t.pieces))
      case "hangStream":
        return turn.custom(() =>
          Stream.concat(
            thenStop(Stream.fromIterable(textDeltas(t.pieces))),
            Stream.never
          )
        )
      case "malformed":
        return turn.message(malformedMessage(t.variant))
      case "duplicateIds":
        return turn.toolCalls(Array.from({ length: t.calls }, () => okCall(`t${index}dup`)))
      case "secondDone": {
        const calls = t.calls.map(callOf)
        for (const c of calls) executable.add(c.id)
        const first = assistant("toolUse", { calls })
        const second = assistant("stop", { text: "a second done, ignored" })
        return turn.events([{ type: "done", message: first }, { type: "done", message: second }])
      }
      case "afterDone":
        return turn.events([
          { type: "text_delta", delta: "end" },
          { type: "done", message: assistant("stop", { text: "end" }) },
          { type: "text_delta", delta: "after the end" },
          { type: "toolcall_delta", id: "late", delta: "{}" }
        ])
      case "toolUseNoCalls":
        return turn.message(assistant("toolUse", { text: "nothing to call" }))
      case "stopWithCalls":
      case "length":
      case "error":
      case "aborted": {
        const calls = Array.from({ length: t.calls }, (_, k) => okCall(`t${index}s${k}`))
        return t.kind === "stopWithCalls" ?
          turn.message(assistant("stop", { calls })) :
          t.kind === "length" ?
          turn.truncated(calls) :
          t.kind === "error" ?
          turn.error("provider error", calls) :
          turn.aborted(calls)
      }
    }
  })
  return { turns, executable }
}

const inputOf = (plan: FaultPlan): { messages: unknown; valid: boolean; kept: Array<Message> } => {
  const go = user("go")
  const old = assistant("toolUse", { calls: [toolCall("old1", FAULT_TOOL), toolCall("old2", FAULT_TOOL)] })
  const result = (id: string, name = FAULT_TOOL): ToolResultMessage => ({
    role: "toolResult",
    toolCallId: id,
    toolName: name,
    content: [{ type: "text", text: `result of ${id}` }],
    isError: false
  })
  switch (plan.input) {
    case "clean":
    case "badMaxSteps":
      return { messages: [go], valid: plan.input === "clean", kept: [go] }
    case "dangling":
      return { messages: [go, old], valid: true, kept: [go, old] }
    case "partial":
      return { messages: [go, old, result("old2")], valid: true, kept: [go, old] }
    case "orphan":
      return { messages: [go, result("nobody")], valid: false, kept: [] }
    case "duplicateResult":
      return { messages: [go, old, result("old1"), result("old1")], valid: false, kept: [] }
    case "wrongToolName":
      return { messages: [go, old, result("old1", "other")], valid: false, kept: [] }
    case "invalidMessage":
      return { messages: [go, { role: "robot", content: 42 }], valid: false, kept: [] }
    case "duplicateInputIds":
      return {
        messages: [go, assistant("toolUse", { calls: [toolCall("same", FAULT_TOOL), toolCall("same", FAULT_TOOL)] })],
        valid: false,
        kept: []
      }
    case "notArray":
      return { messages: "not an array", valid: false, kept: [] }
  }
}

const faultBehaviour = (
  args: Readonly<Record<string, unknown>>,
  context: { readonly signal: AbortSignal; readonly reportProgress: (p: unknown) => Effect.Effect<void> },
  stopper: Stopper
): Effect.Effect<string, ToolError> => {
  const outcome = args["outcome"] as CallOutcome
  if (outcome === "throw") throw new Error("the tool threw")
  const act: Effect.Effect<string, ToolError> = Effect.suspend(() => {
    switch (outcome) {
      case "fail":
        return Effect.fail(new ToolError({ message: "the tool failed" }))
      case "die":
        return Effect.die(new Error("the tool died"))
      case "interrupt":
        return Effect.interrupt
      case "progress":
        return Effect.as(
          Effect.forEach([1, 2, 3], (p) => context.reportProgress({ step: p }), { discard: true }),
          "done"
        )
      case "hang":
        return Effect.andThen(Effect.sync(stopper.fire), Effect.never)
      case "awaitSignal":
        return Effect.andThen(
          Effect.sync(stopper.fire),
          Effect.callback<string>((resume) => {
            const signal = context.signal
            if (signal.aborted) return resume(Effect.succeed("aborted"))
            const onAbort = () => resume(Effect.succeed("aborted"))
            signal.addEventListener("abort", onAbort, { once: true })
            return Effect.sync(() => signal.removeEventListener("abort", onAbort))
          })
        )
      default:
        return Effect.succeed("ok")
    }
  })
  return Effect.andThen(Effect.repeat(Effect.yieldNow, { times: Number(args["yields"] ?? 0) }), act)
}

/** The executor breaking its contract on purpose, around the real one; `handled` records those calls. */
const contractBreaking = (layer: Layer.Layer<Executor>, handled: Array<string>): Layer.Layer<Executor> =>
  Layer.effect(
    Executor,
    Effect.map(Executor, (inner) =>
      Executor.of({
        definitions: inner.definitions,
        execute: (call, context) => {
          const outcome = call.name === FAULT_TOOL ? call.arguments["outcome"] : undefined
          if (
            outcome === "badResult" || outcome === "wrongId" || outcome === "notEffect" ||
            outcome === "executorThrows"
          ) handled.push(call.id)
          switch (outcome) {
            case "badResult":
              return Effect.succeed({ role: "toolResult", toolCallId: call.id } as unknown as ToolResultMessage)
            case "wrongId":
              return Effect.succeed({
                role: "toolResult",
                toolCallId: `${call.id}-other`,
                toolName: call.name,
                content: [],
                isError: false
              })
            case "notEffect":
              return { not: "an effect" } as unknown as Effect.Effect<ToolResultMessage, ToolError>
            case "executorThrows":
              throw new Error("the executor threw")
            default:
              return inner.execute(call, context)
          }
        }
      }))
  ).pipe(Layer.provide(layer))

/** The output schema of generated runs that have one. */
const FaultAnswer = Schema.Struct({ n: Schema.Number })

const isInterruptedOnly = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) && exit.cause.reasons.length > 0 && exit.cause.reasons.every((r) => r._tag === "Interrupt")

/**
 * Runs one plan and checks it. Never fails: everything found is in `violations`.
 *
 * @since 0.1.0
 * @category runs
 */
export const runFaultPlan = (plan: FaultPlan, setup: FaultSetup = {}): Effect.Effect<FaultRunReport> =>
  Effect.gen(function*() {
    const violations: Array<string> = []
    const controller = new AbortController()
    const trigger = yield* Deferred.make<void>()
    let stopped = false
    const stopper: Stopper = {
      fired: () => stopped,
      fire: () => {
        if (stopped || plan.stop.kind === "none") return
        stopped = true
        if (plan.stop.kind === "abort") controller.abort()
        else Deferred.doneUnsafe(trigger, Exit.void)
      }
    }
    const built = buildScript(plan.turns, stopper)
    const model = yield* makeScriptedModel(built.turns)
    // the sub-agent: its own script and fault tool (its call ids repeat across its runs: not probed)
    const child = plan.child
    const childModel = child === undefined
      ? undefined
      : yield* makeScriptedModel(buildScript(child.turns, stopper).turns)
    const subAgents: Array<AnyTool> = child === undefined || childModel === undefined ? [] : [
      subAgentTool({
        name: SUB_AGENT,
        description: "a generated sub-agent",
        tools: [
          fakeTool(FAULT_TOOL, (args, context) => faultBehaviour(args, context, stopper), "a tool that misbehaves")
        ],
        model: childModel.layer,
        maxSteps: child.maxSteps,
        ...(child.output ? { output: FaultAnswer } : {})
      })
    ]
    const probe = probeTool(
      fakeTool(
        FAULT_TOOL,
        (args, context) => faultBehaviour(args, context, stopper),
        "a tool that misbehaves on demand"
      )
    )
    const targets = (setup.targets ?? []).map((t) => probeTool(t.tool))
    const tools: Array<AnyTool> = [probe.tool, ...targets.map((t) => t.tool), ...subAgents]
    const handled: Array<string> = []
    const baseExecutor = contractBreaking(toolExecutorLayer(tools) as Layer.Layer<Executor>, handled)
    const executor = setup.executor === undefined ? baseExecutor : setup.executor(baseExecutor)

    const events: Array<LoopEvent> = []
    const sinkPlan = plan.sink
    const sink = Layer.succeed(
      EventSink,
      EventSink.of({
        emit: (event) => {
          events.push(event)
          const n = events.length
          if (plan.stop.kind !== "none" && n === plan.stop.atEvent) stopper.fire()
          if (sinkPlan.kind === "none" || n % sinkPlan.every !== 0) return Effect.void
          switch (sinkPlan.kind) {
            case "fail":
              return Effect.fail(new Error("the sink failed")) as unknown as Effect.Effect<void>
            case "die":
              return Effect.die(new Error("the sink died"))
            case "throw":
              throw new Error("the sink threw")
            case "yield":
              return Effect.yieldNow
          }
        }
      })
    )

    const input = inputOf(plan)
    const options = {
      messages: input.messages,
      maxSteps: plan.input === "badMaxSteps" ? 0 : plan.maxSteps,
      signal: controller.signal,
      ...(plan.output === true ? { output: FaultAnswer } : {}),
      ...setup.options?.(plan)
    } as unknown as AgentLoopOptions
    if (plan.stop.kind !== "none" && plan.stop.atEvent === 0) stopper.fire()

    const layers = Layer.mergeAll(model.layer, executor, sink)
    let result: AgentRunResult | undefined
    let interrupted = false
    const engine = setup.engine
    if (engine !== undefined && (plan.stop.kind === "interrupt" || plan.stop.kind === "runAbort")) {
      violations.push(`an engine's run is stopped by its signal only, not by "${plan.stop.kind}" (use withAbortStops)`)
    }
    const run: Effect.Effect<void> = engine !== undefined ?
      Effect.map(engine.run(options, layers), (r) => {
        result = r
      }) :
      plan.stop.kind === "runAbort" ?
      Effect.scoped(Effect.gen(function*() {
        const started = yield* startAgentLoop(options)
        yield* Effect.raceFirst(Deferred.await(trigger), Effect.asVoid(started.result))
        yield* started.abort
        result = yield* started.result
      })).pipe(Effect.provide(layers)) :
      Effect.gen(function*() {
        const fiber = yield* Effect.forkChild(Effect.provide(runAgentLoop(options), layers))
        if (plan.stop.kind === "interrupt") {
          yield* Effect.raceFirst(Deferred.await(trigger), Effect.asVoid(Fiber.await(fiber)))
          const exit = yield* Effect.andThen(Fiber.interrupt(fiber), Fiber.await(fiber))
          if (Exit.isSuccess(exit)) result = exit.value
          else if (isInterruptedOnly(exit)) interrupted = true
          else violations.push(`the run's fiber failed: ${String(exit.cause)}`)
        } else {
          result = yield* Fiber.join(fiber)
        }
      })
    const ended = yield* Effect.timeoutOption(run, setup.timeout ?? Duration.seconds(10)).pipe(
      Effect.provideService(References.MinimumLogLevel, "None")
    )
    if (Option.isNone(ended)) violations.push("the run did not end (timed out)")

    const requests = yield* model.requests
    const inputMessages = input.valid ? input.kept : undefined
    for (const v of checkInvariants({ input: inputMessages, result, events, requests })) {
      violations.push(`[${v.invariant}] ${v.message}`)
    }
    if (result === undefined && !interrupted && Option.isSome(ended)) violations.push("the run gave no result")
    if (interrupted && plan.stop.kind !== "interrupt") violations.push("the run was interrupted without being asked to")

    const executed = [...(yield* probe.executedIds), ...handled]
    for (const t of targets) executed.push(...(yield* t.executedIds))
    if (new Set(executed).size !== executed.length) violations.push(`a call executed twice: ${executed.join(",")}`)
    for (const id of executed) {
      if (!built.executable.has(id)) violations.push(`call ${id} executed from a turn that must not execute`)
    }
    if (plan.input !== "badMaxSteps" && requests.length > plan.maxSteps) {
      violations.push(`${requests.length} requests for maxSteps ${plan.maxSteps}`)
    }
    if (plan.stop.kind === "abort" && plan.stop.atEvent === 0 && requests.length > 0) {
      violations.push("a run aborted before it started called the model")
    }
    if (!input.valid || plan.input === "badMaxSteps") {
      if (requests.length > 0) violations.push("a run with bad input called the model")
      if (result !== undefined && result.reason !== "error") violations.push(`bad input ended "${result.reason}"`)
    }
    if (result !== undefined && input.valid && result.messages.length < input.kept.length) {
      violations.push("the transcript lost input messages")
    }
    if (result !== undefined) {
      const last = result.messages.at(-1)
      const answered = last?.role === "toolResult" && !last.isError && isAcceptedAnswer(last.details)
      if (plan.output === true && result.reason === "stop") {
        if (!answered) violations.push("a run with an output schema ended stop without its accepted answer last")
        if (JSON.stringify(result.output) !== JSON.stringify({ n: 1 })) {
          violations.push("a stop without the decoded answer")
        }
      }
      if ((plan.output !== true || result.reason !== "stop") && "output" in result) {
        violations.push(
          `an output in a run that ended ${result.reason}${plan.output === true ? "" : " without an output schema"}`
        )
      }
    }
    // the faults the run met: its input, the stop if it fired, the sink fault if an event hit it,
    // the model turns it requested and the tool calls that ran
    const exercised: Array<string> = []
    if (plan.input !== "clean") exercised.push(`input:${plan.input}`)
    if (stopper.fired()) {
      exercised.push(stopLabel(plan.stop))
    }
    if (plan.sink.kind !== "none" && events.length >= plan.sink.every) exercised.push(`sink:${plan.sink.kind}`)
    const outcomeOf = new Map<string, CallOutcome>()
    plan.turns.forEach((t, index) => {
      if (index >= requests.length) return
      if ("calls" in t && typeof t.calls !== "number") { for (const c of t.calls) outcomeOf.set(c.id, c.outcome) }
      exercised.push(...turnFaults(t).filter((f) => !f.startsWith("tool:")))
    })
    for (const message of result?.messages ?? []) {
      const childRun = message.role === "toolResult" ? subAgentRunOf(message.details) : undefined
      if (childRun !== undefined) exercised.push(`subagent:${childRun.reason}`)
    }
    if (result?.reason === "stop" && plan.output === true) exercised.push("output:accepted")
    if (requests.length > plan.turns.length) exercised.push("model:unscripted")
    for (const id of executed) {
      const outcome = outcomeOf.get(id)
      if (outcome !== undefined && outcome !== "ok") exercised.push(`tool:${outcome}`)
    }
    return {
      seed: plan.seed,
      plan,
      exercised,
      outcome: result?.reason ?? "interrupted",
      steps: result?.steps ?? requests.length,
      events: events.length,
      requests: requests.length,
      toolExecutions: executed.length,
      violations,
      result
    }
  })

// -----------------------------------------------------------------------------
// Many runs
// -----------------------------------------------------------------------------

/**
 * Options of `runFaultInjection`.
 *
 * @since 0.1.0
 * @category models
 */
export interface FaultInjectionOptions extends FaultPlanOptions, FaultSetup {
  readonly runs: number
  /** Seed of the whole soak (default 1); run `i` uses `faultSeed(seed, i)`. */
  readonly seed?: number | undefined
  /** Called after each run (progress, custom checks, memory sampling). */
  readonly onRun?: ((index: number, report: FaultRunReport) => Effect.Effect<void>) | undefined
  /** How many failing runs to keep in the summary (default 20). */
  readonly keepFailures?: number | undefined
}

/**
 * What a soak found.
 *
 * @since 0.1.0
 * @category models
 */
export interface FaultInjectionSummary {
  readonly runs: number
  readonly seed: number
  /** Violations found across all runs (0 when every run kept its invariants). */
  readonly violations: number
  /** Runs with at least one violation. */
  readonly failedRuns: number
  /** The first failing runs (replay one with `runFaultPlan(report.plan)`). */
  readonly failures: ReadonlyArray<FaultRunReport>
  /** How runs ended. */
  readonly outcomes: Readonly<Record<string, number>>
  /** How often each fault was met by a run (see `FaultRunReport.exercised`). */
  readonly faults: Readonly<Record<string, number>>
  /** How often each fault was planned (reached or not). */
  readonly planned: Readonly<Record<string, number>>
  readonly events: number
  readonly requests: number
  readonly toolExecutions: number
}

/**
 * Runs `runs` generated plans, one after the other, and sums up.
 *
 * @since 0.1.0
 * @category runs
 */
export const runFaultInjection = (options: FaultInjectionOptions): Effect.Effect<FaultInjectionSummary> =>
  Effect.gen(function*() {
    const seed = options.seed ?? 1
    const keep = options.keepFailures ?? 20
    const outcomes: Record<string, number> = {}
    const faults: Record<string, number> = {}
    const planned: Record<string, number> = {}
    const failures: Array<FaultRunReport> = []
    let violations = 0
    let failedRuns = 0
    let events = 0
    let requests = 0
    let toolExecutions = 0
    for (let i = 0; i < options.runs; i++) {
      const plan = generateFaultPlan(faultSeed(seed, i), options)
      const report = yield* runFaultPlan(plan, options)
      outcomes[report.outcome] = (outcomes[report.outcome] ?? 0) + 1
      for (const f of faultsOf(plan)) planned[f] = (planned[f] ?? 0) + 1
      for (const f of report.exercised) faults[f] = (faults[f] ?? 0) + 1
      events += report.events
      requests += report.requests
      toolExecutions += report.toolExecutions
      if (report.violations.length > 0) {
        violations += report.violations.length
        failedRuns++
        if (failures.length < keep) failures.push(report)
      }
      if (options.onRun !== undefined) yield* options.onRun(i, report)
    }
    return {
      runs: options.runs,
      seed,
      violations,
      failedRuns,
      failures,
      outcomes,
      faults,
      planned,
      events,
      requests,
      toolExecutions
    }
  })
