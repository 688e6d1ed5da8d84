/**
 * Property: whatever the model says, whatever the tools do, whenever the run is aborted or
 * interrupted, and whatever the step limit, the three invariants hold (checked by the testkit's
 * `checkInvariants`), nothing runs twice and nothing runs from a turn that must not execute.
 * Runs may have an output schema (final answers valid, invalid, or alongside other calls) and call
 * a sub-agent whose own script is generated too: the invariants then hold for every run of the tree
 * (`checkInvariants` checks the children it finds in the details), and a run ends `stop` with an
 * output schema only with its accepted answer.
 */
import {
  allow,
  ask,
  callbackSinkLayer,
  deny,
  FINAL_ANSWER_TOOL,
  isAcceptedAnswer,
  runAgentLoop,
  subAgentTool,
  ToolConcurrency,
  ToolError,
  toolExecutorLayer
} from "@agentloop/core"
import type { AgentRunResult, LoopEvent, Message, ToolCall, ToolPolicy, UserMessage } from "@agentloop/core"
import {
  assistant,
  checkInvariants,
  fakeTool,
  makeScriptedModel,
  probeTool,
  toolCall,
  turn,
  user
} from "@agentloop/testkit"
import type { ScriptedTurn } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Queue, Schema } from "effect"
import * as fc from "fast-check"

const outcomes = ["ok", "fail", "die", "throw", "interrupt", "badResult"] as const
type Outcome = typeof outcomes[number]

interface CallSpec {
  readonly outcome: Outcome
  readonly yields: number
}
type TurnSpec =
  | { readonly kind: "toolUse"; readonly calls: ReadonlyArray<CallSpec> }
  | { readonly kind: "text" | "toolUseNoCalls" | "failStream" | "dieStream" | "noDone" | "malformed" | "dupIds" }
  | { readonly kind: "stopCalls" | "length" | "error" | "aborted"; readonly calls: number }
  | { readonly kind: "answer" | "badAnswer" }
  | { readonly kind: "answerWithCalls"; readonly calls: ReadonlyArray<CallSpec> }
  | { readonly kind: "delegate"; readonly agents: number; readonly calls: ReadonlyArray<CallSpec> }

/** What a sub-agent's model may do (its script is shared by every call of it, in request order). */
type ChildTurnSpec =
  | { readonly kind: "toolUse"; readonly calls: ReadonlyArray<CallSpec> }
  | { readonly kind: "text" | "failStream" | "dieStream" | "answer" | "badAnswer" }

const callSpec = fc.record({ outcome: fc.constantFrom(...outcomes), yields: fc.nat({ max: 6 }) })
const turnSpec: fc.Arbitrary<TurnSpec> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("toolUse" as const),
      calls: fc.array(callSpec, { minLength: 1, maxLength: 5 })
    })
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom("text", "toolUseNoCalls", "failStream", "dieStream", "noDone", "malformed", "dupIds")
      .map((kind) => ({ kind }))
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constantFrom("stopCalls", "length", "error", "aborted"),
      calls: fc.nat({ max: 3 })
    })
  }
)
const childTurnSpec: fc.Arbitrary<ChildTurnSpec> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("toolUse" as const),
      calls: fc.array(callSpec, { minLength: 1, maxLength: 3 })
    })
  },
  {
    weight: 3,
    arbitrary: fc.constantFrom("text", "failStream", "dieStream", "answer", "badAnswer").map((kind) => ({ kind }))
  }
)
const outputTurnSpec: fc.Arbitrary<TurnSpec> = fc.oneof(
  fc.constantFrom("answer", "badAnswer").map((kind) => ({ kind })),
  fc.record({
    kind: fc.constant("answerWithCalls" as const),
    calls: fc.array(callSpec, { minLength: 1, maxLength: 2 })
  }),
  fc.record({
    kind: fc.constant("delegate" as const),
    agents: fc.integer({ min: 1, max: 3 }),
    calls: fc.array(callSpec, { maxLength: 2 })
  })
)
const caseSpec = fc.record({
  turns: fc.array(fc.oneof({ weight: 3, arbitrary: turnSpec }, { weight: 1, arbitrary: outputTurnSpec }), {
    minLength: 1,
    maxLength: 6
  }),
  // issue 16: a final-answer schema for the run, and a sub-agent with a script (and schema) of its own
  output: fc.boolean(),
  child: fc.record({ turns: fc.array(childTurnSpec, { maxLength: 8 }), output: fc.boolean() }),
  maxSteps: fc.integer({ min: 1, max: 7 }),
  stop: fc.oneof(
    fc.constant({ kind: "none" as const }),
    fc.record({ kind: fc.constant("abort" as const), atEvent: fc.nat({ max: 25 }) }),
    fc.record({ kind: fc.constant("interrupt" as const), atEvent: fc.nat({ max: 25 }) })
  ),
  danglingInput: fc.boolean(),
  // the control features (issue 5) must not weaken any invariant either
  control: fc.record({
    policy: fc.constantFrom("none", "denyFailing", "askApprove", "askDeny", "askNever"),
    exclusive: fc.boolean(),
    concurrency: fc.constantFrom<number | "unbounded">("unbounded", 1, 2),
    timeoutMs: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
    steerAt: fc.option(fc.nat({ max: 20 }), { nil: undefined }),
    followUp: fc.boolean()
  })
})
type CaseSpec = typeof caseSpec extends fc.Arbitrary<infer A> ? A : never

const calls = (turnIndex: number, n: number, name = "t"): Array<ToolCall> =>
  Array.from({ length: n }, (_, i) => toolCall(`t${turnIndex}c${i}`, name, { outcome: "ok", yields: 0 }))

/** The scripted turn for a spec, and the ids of the calls that may execute. */
const scripted = (spec: TurnSpec, index: number): { turn: ScriptedTurn; executable: Array<string> } => {
  switch (spec.kind) {
    case "toolUse": {
      const cs = spec.calls.map((c, i) => toolCall(`t${index}c${i}`, "t", { ...c }))
      return { turn: turn.toolCalls(cs), executable: cs.map((c) => c.id) }
    }
    case "text":
      return { turn: turn.text("fine"), executable: [] }
    case "toolUseNoCalls":
      return { turn: turn.message(assistant("toolUse", { text: "hm" })), executable: [] }
    case "failStream":
      return { turn: turn.failing("reset", ["part"]), executable: [] }
    case "dieStream":
      return { turn: turn.dying(new Error("boom")), executable: [] }
    case "noDone":
      return { turn: turn.events([{ type: "text_delta", delta: "x" }]), executable: [] }
    case "malformed":
      return {
        turn: turn.message({ role: "assistant", content: [{ type: "toolCall", id: "x", arguments: 1 }] }),
        executable: []
      }
    case "dupIds":
      return { turn: turn.toolCalls([toolCall(`t${index}d`, "t"), toolCall(`t${index}d`, "t")]), executable: [] }
    case "stopCalls":
      return { turn: turn.message(assistant("stop", { calls: calls(index, spec.calls) })), executable: [] }
    case "length":
      return { turn: turn.truncated(calls(index, spec.calls)), executable: [] }
    case "error":
      return { turn: turn.error("provider error", calls(index, spec.calls)), executable: [] }
    case "aborted":
      return { turn: turn.aborted(calls(index, spec.calls)), executable: [] }
    case "answer":
      return { turn: turn.finalAnswer(`t${index}f`, { n: 1 }), executable: [] }
    case "badAnswer":
      return { turn: turn.finalAnswer(`t${index}f`, { n: "one" }), executable: [] }
    case "answerWithCalls": {
      const cs = spec.calls.map((c, i) => toolCall(`t${index}c${i}`, "t", { ...c }))
      return {
        turn: turn.toolCalls([...cs, toolCall(`t${index}f`, FINAL_ANSWER_TOOL, { n: 1 })]),
        executable: cs.map((c) => c.id)
      }
    }
    case "delegate": {
      const cs = spec.calls.map((c, i) => toolCall(`t${index}c${i}`, "t", { ...c }))
      const agents = Array.from({ length: spec.agents }, (_, i) => toolCall(`t${index}s${i}`, "sub", { task: "go" }))
      return { turn: turn.toolCalls([...agents, ...cs]), executable: cs.map((c) => c.id) }
    }
  }
}

/** A sub-agent's scripted turn (its call ids need not be unique across its runs: each run is its own). */
const childScripted = (spec: ChildTurnSpec, index: number): ScriptedTurn => {
  switch (spec.kind) {
    case "toolUse":
      return turn.toolCalls(spec.calls.map((c, i) => toolCall(`s${index}c${i}`, "t", { ...c })))
    case "text":
      return turn.text("child text")
    case "failStream":
      return turn.failing("child reset")
    case "dieStream":
      return turn.dying(new Error("child boom"))
    case "answer":
      return turn.finalAnswer(`s${index}f`, { n: 2 })
    case "badAnswer":
      return turn.finalAnswer(`s${index}f`, { n: "two" })
  }
}

const Answer = Schema.Struct({ n: Schema.Number })

const behaviour = (args: Record<string, unknown>): Effect.Effect<string, ToolError> => {
  const outcome = args["outcome"] as Outcome
  const yields = Effect.repeat(Effect.yieldNow, { times: Number(args["yields"] ?? 0) })
  const then: Effect.Effect<string, ToolError> = Effect.suspend(() => {
    switch (outcome) {
      case "ok":
        return Effect.succeed("ok")
      case "fail":
        return Effect.fail(new ToolError({ message: "failed" }))
      case "die":
        return Effect.die(new Error("died"))
      case "throw":
        throw new Error("thrown")
      case "interrupt":
        return Effect.interrupt
      case "badResult":
        return Effect.succeed(undefined as unknown as string)
    }
  })
  return Effect.andThen(yields, then)
}

const runCase = (spec: CaseSpec) =>
  Effect.gen(function*() {
    const script = spec.turns.map(scripted)
    const executable = new Set(script.flatMap((s) => s.executable))
    const model = yield* makeScriptedModel(script.map((s) => s.turn))
    const { control } = spec
    const base = fakeTool("t", (args) => behaviour(args))
    const probe = probeTool({
      ...base,
      definition: {
        ...base.definition,
        ...(control.exclusive ? { exclusive: true } : {}),
        // a limit in milliseconds of real time never fires here: the tools only yield
        ...(control.timeoutMs === undefined ? {} : { timeoutMs: control.timeoutMs * 60_000 })
      }
    })
    const childModel = yield* makeScriptedModel(spec.child.turns.map(childScripted))
    const sub = subAgentTool({
      name: "sub",
      description: "a generated sub-agent",
      tools: [fakeTool("t", (args) => behaviour(args))],
      model: childModel.layer,
      maxSteps: 4,
      ...(spec.child.output ? { output: Answer } : {})
    })
    const steering = yield* Queue.unbounded<UserMessage>()
    const followUps = yield* Queue.unbounded<UserMessage>()
    if (control.followUp) yield* Queue.offer(followUps, { role: "user", content: "one more thing" })
    const policy: ToolPolicy | undefined = control.policy === "none" ?
      undefined :
      control.policy === "denyFailing" ?
      (call) => call.arguments["outcome"] === "fail" ? deny("no failures allowed") : allow :
      () => ask
    const controller = new AbortController()
    const trigger = yield* Deferred.make<void>()
    const asked = yield* Deferred.make<void>()
    const events: Array<LoopEvent> = []
    const sink = callbackSinkLayer((event) => {
      events.push(event)
      if (event.type === "approval_request") {
        if (control.policy === "askNever") Deferred.doneUnsafe(asked, Exit.void)
        else Deferred.doneUnsafe(event.answer, Exit.succeed({ approved: control.policy === "askApprove" }))
      }
      if (control.steerAt !== undefined && events.length === control.steerAt) {
        Queue.offerUnsafe(steering, { role: "user", content: "steer" })
      }
      if (spec.stop.kind !== "none" && events.length === spec.stop.atEvent) {
        if (spec.stop.kind === "abort") controller.abort()
        else Deferred.doneUnsafe(trigger, Exit.void)
      }
    })
    if (spec.stop.kind === "abort" && spec.stop.atEvent === 0) controller.abort()
    const input: Array<Message> = [user("go")]
    if (spec.danglingInput) input.push(assistant("toolUse", { calls: [toolCall("old1", "t"), toolCall("old2", "t")] }))
    const fiber = yield* runAgentLoop({
      messages: input,
      maxSteps: spec.maxSteps,
      signal: controller.signal,
      steering,
      followUps,
      ...(policy === undefined ? {} : { policy }),
      ...(spec.output ? { output: Answer } : {})
    }).pipe(
      Effect.provide(Layer.mergeAll(model.layer, sink, toolExecutorLayer([probe.tool, sub]))),
      Effect.provideService(ToolConcurrency, control.concurrency),
      Effect.forkChild
    )
    let result: AgentRunResult | undefined
    if (control.policy === "askNever") {
      // nobody answers: the run waits on the approval; interrupting it must still pair every call
      yield* Effect.raceFirst(Effect.asVoid(Fiber.await(fiber)), Deferred.await(asked))
      const exit = yield* Fiber.interrupt(fiber).pipe(Effect.andThen(Fiber.await(fiber)))
      if (Exit.isSuccess(exit)) result = exit.value
    } else if (spec.stop.kind === "interrupt") {
      yield* Effect.raceFirst(Deferred.await(trigger), Effect.asVoid(Fiber.await(fiber)))
      const exit = yield* Fiber.interrupt(fiber).pipe(Effect.andThen(Fiber.await(fiber)))
      if (Exit.isSuccess(exit)) result = exit.value
    } else {
      result = yield* Fiber.join(fiber)
    }
    const requests = yield* model.requests
    const violations = checkInvariants({ input, result, events, requests }).map((v) => `[${v.invariant}] ${v.message}`)
    const executed = yield* probe.executedIds
    if (new Set(executed).size !== executed.length) violations.push(`a call executed twice: ${executed.join(",")}`)
    for (const id of executed) if (!executable.has(id)) violations.push(`call ${id} executed from a non-executing turn`)
    if (control.policy === "askDeny" || control.policy === "askNever") {
      if (executed.length > 0) violations.push(`denied or unanswered calls executed: ${executed.join(",")}`)
    }
    if (requests.length > spec.maxSteps) violations.push(`${requests.length} requests for maxSteps ${spec.maxSteps}`)
    if (spec.stop.kind === "abort" && spec.stop.atEvent === 0 && requests.length > 0) {
      violations.push("pre-aborted run called the model")
    }
    if (result !== undefined && result.messages.length < input.length) {
      violations.push("the transcript lost input messages")
    }
    if (result !== undefined) {
      const last = result.messages.at(-1)
      const answered = last?.role === "toolResult" && !last.isError && isAcceptedAnswer(last.details)
      if (spec.output && result.reason === "stop") {
        if (!answered) violations.push("a run with an output schema ended stop without an accepted answer last")
        if (JSON.stringify(result.output) !== JSON.stringify({ n: 1 })) {
          violations.push("stop without the decoded answer")
        }
        const asked = result.messages.findLast((m) => m.role === "assistant")
        if (asked?.role === "assistant" && asked.content.filter((c) => c.type === "toolCall").length !== 1) {
          violations.push("an answer given alongside other calls was accepted")
        }
      }
      if ((!spec.output || result.reason !== "stop") && "output" in result) {
        violations.push("output given without a stop")
      }
      if (!spec.output && answered) violations.push("an answer was accepted in a run without an output schema")
    }
    return violations
  })

/**
 * Cases per run: 600 by default; set AGENTLOOP_PROPERTY_RUNS for a longer search. A failure prints
 * its seed and path: AGENTLOOP_PROPERTY_SEED and AGENTLOOP_PROPERTY_PATH replay it.
 */
const numRuns = Number(process.env["AGENTLOOP_PROPERTY_RUNS"] ?? 600)
const replay: { readonly seed?: number; readonly path?: string } =
  process.env["AGENTLOOP_PROPERTY_SEED"] === undefined ? {} : {
    seed: Number(process.env["AGENTLOOP_PROPERTY_SEED"]),
    ...(process.env["AGENTLOOP_PROPERTY_PATH"] === undefined ? {} : { path: process.env["AGENTLOOP_PROPERTY_PATH"] })
  }

describe("property: invariants hold for generated scripts", () => {
  it(
    `holds for ${numRuns} random scripts, tool outcomes, completion orders, abort points and step limits`,
    async () => {
      let cases = 0
      await fc.assert(
        fc.asyncProperty(caseSpec, async (spec) => {
          cases++
          const violations = await Effect.runPromise(runCase(spec))
          assert.deepStrictEqual(violations, [])
        }),
        { numRuns, ...replay }
      )
      if (replay.seed === undefined) assert.isAtLeast(cases, numRuns)
    },
    600_000
  )
})
