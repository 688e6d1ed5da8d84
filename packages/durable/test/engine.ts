/**
 * The durable loop as a `FaultEngine`: each run on a fresh journal (`WorkflowEngine.layerMemory` and
 * the memory store, or the embedded engine on a SQLite file of its own), with the run's model and
 * executor on its runner and its events forwarded to the run's sink. The options' `signal` becomes
 * the durable abort (fired before the start: `abortRun` first; fired later: at once, in this
 * process, as `abortRun` does), its steering and follow-up queues are forwarded to the store
 * (`steer`, `followUp`), what is code (an effect `Schema` output, a policy, `transformContext`) goes
 * to the runner, and the result's output is decoded again with its schema (`decodeOutput`: it
 * crossed the journal as JSON). A run refused at its start answers as an in-memory run with bad
 * input ends: `error`, no steps, an empty transcript.
 */
import { EventSink, Executor, Model } from "@agentloop/core"
import type { AgentLoopOptions, AgentRunResult, Message, UserMessage } from "@agentloop/core"
import type { FaultEngine } from "@agentloop/testkit"
import { Context, Effect, Exit, Layer, Queue } from "effect"
import { WorkflowEngine } from "effect/workflow"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  abortRun,
  decodeOutput,
  DurableEventSink,
  durableRunnerLayer,
  embeddedEngineLayer,
  followUp,
  memoryStoreLayer,
  runDurable,
  steer
} from "../src/index.ts"
import type { DurableRunnerConfig } from "../src/index.ts"
import { abortLocally } from "../src/internal/aborts.ts"

let runs = 0

/**
 * Where the durable runs are kept: effect's in-memory engine and store, or the embedded engine on
 * a SQLite file of the run's own (removed after it).
 */
export type Journal = "memory" | "embedded"

const journalLayer = (journal: Journal) =>
  journal === "memory" ?
    Layer.merge(WorkflowEngine.layerMemory, memoryStoreLayer) :
    Layer.unwrap(Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "agentloop-durable-engine-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      return Layer.orDie(embeddedEngineLayer({ filename: join(dir, "runs.db") }))
    }))

export const durableEngine = (config: DurableRunnerConfig = {}, journal: Journal = "memory"): FaultEngine => ({
  run: (options: AgentLoopOptions, layers: Layer.Layer<Model | Executor | EventSink>) =>
    Effect.scoped(Effect.gen(function*() {
      const runId = `parity-${++runs}`
      const base = yield* Layer.build(layers)
      const inner = Context.get(base, EventSink)
      // the messages the run's input and events hold: the result's copies (they crossed the
      // journal) are mapped back onto them, so the identity checks of the invariants apply
      const seen: Array<unknown> = Array.isArray(options.messages) ? [...options.messages] : []
      const sink = EventSink.of({
        emit: (event) => {
          if (event.type === "assistant_message" || event.type === "user_message") seen.push(event.message)
          if (event.type === "tool_end") seen.push(event.result)
          return inner.emit(event)
        }
      })
      // what is code goes to the runner
      const { followUps, output, policy, signal, steering, transformContext, ...rest } = options as
        & AgentLoopOptions
        & Record<string, unknown>
      const runner = durableRunnerLayer({
        ...config,
        ...(output === undefined ? {} : { output }),
        ...(policy === undefined ? {} : { policy }),
        ...(transformContext === undefined ? {} : { transformContext })
      }).pipe(
        Layer.provideMerge(journalLayer(journal)),
        Layer.provide(Layer.mergeAll(
          Layer.succeed(Model, Context.get(base, Model)),
          Layer.succeed(Executor, Context.get(base, Executor)),
          Layer.succeed(DurableEventSink, { emit: (event) => sink.emit(event.event) })
        ))
      )
      const context = yield* Layer.build(runner)
      if (signal?.aborted === true) yield* Effect.provide(abortRun(runId), context)
      // steering and follow-ups offered to the run's queues go to the store (those there now first)
      const forward = (queue: Queue.Dequeue<UserMessage> | undefined, push: typeof steer) =>
        queue === undefined ? Effect.void : Effect.gen(function*() {
          for (const message of yield* Queue.clear(queue)) yield* Effect.provide(push(runId, message), context)
          yield* Effect.forkScoped(
            Effect.forever(Effect.flatMap(Queue.take(queue), (m) => Effect.provide(push(runId, m), context)))
          )
        })
      yield* Effect.orDie(forward(steering, steer))
      yield* Effect.orDie(forward(followUps, followUp))
      const onAbort = () => abortLocally(runId)
      signal?.addEventListener("abort", onAbort, { once: true })
      yield* Effect.addFinalizer(() => Effect.sync(() => signal?.removeEventListener("abort", onAbort)))
      const exit = yield* Effect.exit(
        runDurable({ ...rest, runId, messages: rest.messages as ReadonlyArray<Message> }).pipe(
          Effect.provide(context),
          Effect.provideService(DurableEventSink, { emit: (event) => sink.emit(event.event) })
        )
      )
      if (Exit.isSuccess(exit)) {
        // the result crossed the journal as JSON: its output is decoded again, as a client does
        const decoded = output === undefined ? exit.value : yield* Effect.orDie(decodeOutput(exit.value, output))
        return canonical(decoded, seen)
      }
      const failure = exit.cause.reasons.find((r) => r._tag === "Fail")
      if (failure !== undefined && failure._tag === "Fail") {
        return { messages: [], steps: 0, reason: "error", error: failure.error.message } satisfies AgentRunResult
      }
      return yield* Effect.die(exit.cause)
    }))
})

/** `result` with each message replaced by the first unused one of `seen` with the same JSON. */
const canonical = (result: AgentRunResult, seen: ReadonlyArray<unknown>): AgentRunResult => {
  const used = new Set<unknown>()
  const texts = seen.map((m) => JSON.stringify(m))
  const messages = result.messages.map((message) => {
    const text = JSON.stringify(message)
    const index = texts.findIndex((t, i) => t === text && !used.has(seen[i]))
    if (index === -1) return message
    used.add(seen[index])
    return seen[index] as Message
  })
  return { ...result, messages }
}
