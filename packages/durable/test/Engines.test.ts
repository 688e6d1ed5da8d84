/**
 * The same scenarios on both engines: structured output, sub-agents, `transformContext`, the run's
 * timeout, policies that fail and the bad-input rules. Each runs on the in-memory loop and on the
 * durable loop (on `WorkflowEngine.layerMemory`, and on the embedded engine's SQLite file), with the
 * same assertions and the same results.
 */
import { allow, EventSink, Executor, runAgentLoop, toolExecutorLayer } from "@agentloop/core"
import type { AgentLoopOptions, AgentRunResult, AnyTool, LoopEvent, ToolResultMessage } from "@agentloop/core"
import {
  assistant,
  checkInvariants,
  echoTool,
  makeScriptedModel,
  scriptedSubAgent,
  sleepingTool,
  toolCall,
  turn,
  user
} from "@agentloop/testkit"
import type { ScriptedTurn } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Schema } from "effect"
import { TestClock } from "effect/testing"
import { durableEngine } from "./engine.ts"

type Engine = "memory" | "durable" | "embedded"
const engines: ReadonlyArray<Engine> = ["memory", "durable", "embedded"]

interface Ran {
  readonly result: AgentRunResult
  readonly events: ReadonlyArray<LoopEvent>
}

/** Runs `options` with a scripted model and `tools` on `engine`, and checks the invariants. */
const run = (
  engine: Engine,
  script: ReadonlyArray<ScriptedTurn>,
  tools: ReadonlyArray<AnyTool> | Layer.Layer<Executor>,
  options: AgentLoopOptions,
  started?: Deferred.Deferred<void>
) =>
  Effect.gen(function*() {
    const model = yield* makeScriptedModel(script)
    const events: Array<LoopEvent> = []
    const sink = Layer.succeed(
      EventSink,
      EventSink.of({
        emit: (event) =>
          Effect.sync(() => {
            events.push(event)
            if (event.type === "tool_start" && started !== undefined) Deferred.doneUnsafe(started, Exit.void)
          })
      })
    )
    const executor = Array.isArray(tools)
      ? toolExecutorLayer(tools) as Layer.Layer<Executor>
      : tools as Layer.Layer<Executor>
    const layers = Layer.mergeAll(model.layer, executor, sink)
    const result = engine === "memory" ?
      yield* Effect.provide(runAgentLoop(options), layers) :
      yield* durableEngine({}, engine === "embedded" ? "embedded" : "memory").run(options, layers)
    const input = Array.isArray(options.messages) && result.reason !== "error" ? options.messages : undefined
    assert.deepStrictEqual(checkInvariants({ input, result, events, requests: yield* model.requests }), [])
    return { result, events } satisfies Ran
  })

const results = (r: AgentRunResult) => r.messages.filter((m): m is ToolResultMessage => m.role === "toolResult")
const Answer = Schema.Struct({ n: Schema.Number })
const go = [user("go")]

for (const engine of engines) {
  describe(`on the ${engine} engine`, () => {
    it.effect("structured output: a rejected answer is retried; the accepted one is decoded", () =>
      Effect.gen(function*() {
        const { result } = yield* run(
          engine,
          [
            turn.finalAnswer("a1", { n: "one" }),
            turn.finalAnswer("a2", { n: 1 })
          ],
          [],
          { messages: go, output: Answer }
        )
        assert.strictEqual(result.reason, "stop")
        assert.deepStrictEqual(result.output, { n: 1 })
        assert.deepStrictEqual(results(result).map((r) => r.details), [
          { finalAnswer: true, rejected: "invalid", attempt: 1 },
          { finalAnswer: true }
        ])
      }))

    it.effect("structured output: a turn without an answer is asked again, until the retries run out", () =>
      Effect.gen(function*() {
        const { result } = yield* run(engine, [turn.text("no"), turn.text("still no")], [], {
          messages: go,
          output: Answer,
          outputRetries: 1
        })
        assert.strictEqual(result.reason, "error")
        assert.match(result.error!, /no valid final answer after 2 attempt/)
        assert.deepStrictEqual(result.messages.filter((m) => m.role === "user").length, 2)
      }))

    it.effect("sub-agents: the parent's usage includes its sub-agent's", () =>
      Effect.gen(function*() {
        const usage = (input: number, output: number) => ({ input, output })
        const child = yield* scriptedSubAgent({
          name: "child",
          script: [turn.message(assistant("stop", { text: "child", usage: usage(10, 20) }))]
        })
        const { result } = yield* run(
          engine,
          [
            turn.message(
              assistant("toolUse", { calls: [toolCall("c1", "child", { task: "x" })], usage: usage(100, 200) })
            ),
            turn.message(assistant("stop", { text: "done", usage: usage(100, 200) }))
          ],
          [child.tool],
          { messages: go }
        )
        assert.strictEqual(result.reason, "stop")
        assert.deepStrictEqual(result.usage, { input: 210, output: 420, cacheRead: 0, cacheWrite: 0 })
      }))

    it.effect("transformContext shapes each request; its failure ends the run error", () =>
      Effect.gen(function*() {
        let seen = 0
        const { result } = yield* run(engine, [turn.toolCalls([toolCall("a", "echo")]), turn.text("never")], [
          echoTool("echo")
        ], {
          messages: go,
          transformContext: (messages) =>
            ++seen === 2 ? Effect.die(new Error("compactor broke")) : Effect.succeed(messages)
        })
        assert.strictEqual(result.reason, "error")
        assert.match(result.error!, /transformContext failed: compactor broke/)
        assert.strictEqual(result.steps, 1)
      }))

    it.effect("a policy that fails answers its call unexecuted and ends the run error", () =>
      Effect.gen(function*() {
        const { result } = yield* run(engine, [
          turn.toolCalls([toolCall("a", "echo"), toolCall("b", "echo")]),
          turn.text("x")
        ], [
          echoTool("echo")
        ], { messages: go, policy: (call) => call.id === "b" ? Effect.die(new Error("policy broke")) : allow })
        assert.strictEqual(result.reason, "error")
        assert.match(result.error!, /the run's policy failed on call "b" \(echo\): policy broke/)
        assert.deepStrictEqual(results(result).map((r) => r.isError), [false, true])
      }))

    it.effect("the run's timeout stops a running call, which is answered interrupted", () =>
      Effect.gen(function*() {
        const started = Deferred.makeUnsafe<void>()
        const fiber = yield* run(
          engine,
          [turn.toolCalls([toolCall("s", "slow")]), turn.text("never")],
          [
            sleepingTool("slow", "1 hour")
          ],
          { messages: go, timeout: "1 minute" },
          started
        ).pipe(Effect.forkChild)
        yield* Deferred.await(started)
        yield* TestClock.adjust("1 minute")
        const { result } = yield* Fiber.join(fiber)
        assert.strictEqual(result.reason, "aborted")
        assert.strictEqual(result.error, "run timed out after 1m")
        assert.deepStrictEqual(results(result)[0]!.details, { interrupted: true })
      }))

    it.effect("bad input: a transcript that ends with the model's answer, a tool defined twice", () =>
      Effect.gen(function*() {
        const tail = yield* run(engine, [], [], { messages: [user("go"), assistant("stop", { text: "done" })] })
        assert.strictEqual(tail.result.reason, "error")
        assert.match(tail.result.error!, /^bad input: the messages end with the model's answer/)
        assert.strictEqual(tail.events.filter((e) => e.type === "turn_end").length, 1)
        const echo = { name: "echo", description: "echoes", parameters: { type: "object", properties: {} } } as const
        const twiceExecutor = Layer.succeed(
          Executor,
          Executor.of({ definitions: [echo, echo], execute: () => Effect.die("never") })
        )
        const twice = yield* run(engine, [turn.text("x")], twiceExecutor, { messages: go })
        assert.strictEqual(twice.result.reason, "error")
        assert.match(twice.result.error!, /defines tool "echo" twice/)
      }))
  })
}
