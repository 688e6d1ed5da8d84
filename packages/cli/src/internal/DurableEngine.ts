/**
 * The durable engine (`--durable`): the runs of a session run on `@agentloop/durable`'s embedded
 * engine, in the session's own database; this process is its runner while it lives. It is core's
 * loop on a durable journal, given the same `transformContext` (compaction, then `turn_start`) as
 * an in-memory run. Events come from the engine's activities, at least once: repeats are dropped
 * by their key. A run resumed after its process died is brought in line with its journal when it
 * ends (see Durable.ts).
 *
 * Calls that change things wait for an answer: from this terminal (when there is one: the same
 * question as an in-memory run's, approvals/Question.ts) or from `agentloop approve` in another;
 * the journal keeps the first.
 */
import { ask as askDecision, Executor, Model } from "@agentloop/core"
import type { SessionRecord, ToolCall, ToolPolicy, ToolResultMessage } from "@agentloop/core"
import {
  abortRun,
  approve,
  awaitRun,
  DurableEventSink,
  durableRunnerLayer,
  embeddedEngineLayer,
  eventKey,
  followUp,
  startRun,
  steer
} from "@agentloop/durable"
import type { DurableEvent, DurableStore } from "@agentloop/durable"
import { Clock, Context, Deferred, Effect, Exit, Fiber, Layer, Option, Queue, Ref, Scope, Semaphore } from "effect"
import type { Duration } from "effect"
import type { WorkflowEngine } from "effect/workflow"
import { denialFromElsewhere, denialRecord, deniedTextOf, wasDenied } from "../approvals/Denial.ts"
import { gateCall } from "../approvals/Gate.ts"
import type { ApprovalRecord, Permissions } from "../approvals/Gate.ts"
import { denyOnTimeout, makeTerminalQuestion, showCall } from "../approvals/Question.ts"
import { CliError } from "../CliError.ts"
import { prepareDatabase, reconcileSession, runIdOf } from "../Durable.ts"
import type { Renderer } from "../Renderer.ts"
import { RunEngine, withTurnStarts } from "../RunEngine.ts"
import type { ContextTransform, RunEvent } from "../RunEngine.ts"
import { stripControl } from "../Sanitize.ts"
import type { Style } from "../Style.ts"
import type { Controller, LineInput } from "../Terminal.ts"

/** What the durable engine needs of the command that runs it. */
export interface DurableEngineOptions {
  readonly root: string
  /** The session the runs belong to (one database a session: `/clear` starts another). */
  readonly session: {
    readonly id: () => string
    readonly file: () => string
    /** Reads the session file again, after it was rewritten. */
    readonly reopen: Effect.Effect<void, CliError>
    readonly append: (record: SessionRecord) => Effect.Effect<void>
  }
  readonly stop: Controller
  /** The session's permission mode and rules (the same gate as the in-memory engine's). */
  readonly permissions: Permissions
  readonly approvalTimeout: Duration.Duration | undefined
  readonly transformContext: ContextTransform
  readonly record: (approval: ApprovalRecord) => Effect.Effect<void>
  readonly renderer: Renderer
  readonly input: LineInput
  readonly style: Style
  readonly report: (message: string) => void
}

/** The run this process follows: its events go to its consumer. */
interface Followed {
  readonly runId: string
  readonly inputLength: number
  readonly emit: (event: RunEvent) => Effect.Effect<void>
  readonly seen: Set<string>
}

/** A call of the followed run waiting for an answer. */
interface Waiting {
  readonly call: ToolCall
  readonly askedAt: number
  answeredHere: boolean
  question: Fiber.Fiber<void> | undefined
}

/** The durable runner of the current session. */
interface Runner {
  readonly sessionId: string
  readonly scope: Scope.Closeable
  readonly context: Context.Context<WorkflowEngine.WorkflowEngine | DurableStore>
}

/**
 * The durable engine, on the layer's `Model` and `Executor`; its runners live in the layer's scope.
 */
export const durableEngine = (options: DurableEngineOptions): Layer.Layer<RunEngine, never, Model | Executor> =>
  Layer.effect(
    RunEngine,
    Effect.gen(function*() {
      const { renderer, style, input, stop, permissions, session } = options
      const scope = yield* Effect.scope
      const services = yield* Effect.context<Model | Executor>()
      const followed = yield* Ref.make<Followed | undefined>(undefined)
      const runner = yield* Ref.make<Runner | undefined>(undefined)

      // compaction for every run; a `turn_start` for the followed one's requests
      const transformContext: ContextTransform = (messages, context) =>
        Effect.flatMap(Ref.get(followed), (run) =>
          run === undefined ?
            options.transformContext(messages, context) :
            withTurnStarts(options.transformContext, run.inputLength, run.emit)(messages, context))

      const policy: ToolPolicy = (call, definition) =>
        Effect.map(
          gateCall(permissions, call, definition, options.record),
          (gate) => (gate._tag === "decided" ? gate.decision : askDecision)
        )

      // (built once, whoever needs it first: a run, or an answer typed while a resumed run starts)
      const runnerLock = yield* Semaphore.make(1)
      const ensureRunner: Effect.Effect<Runner, CliError> = runnerLock.withPermits(1)(Effect.gen(function*() {
        const current = yield* Ref.get(runner)
        if (current !== undefined && current.sessionId === session.id()) return current
        if (current !== undefined) {
          yield* Scope.close(current.scope, Exit.void)
          yield* Ref.set(runner, undefined)
        }
        const sessionId = session.id()
        const file = yield* prepareDatabase(options.root, sessionId).pipe(
          Effect.mapError((e) => new CliError(e.message))
        )
        const runnerScope = yield* Scope.fork(scope)
        const layer = durableRunnerLayer({
          policy,
          approvalTimeout: options.approvalTimeout,
          transformContext
        }).pipe(
          Layer.provideMerge(embeddedEngineLayer({ filename: file })),
          Layer.provide(Layer.mergeAll(
            Layer.succeedContext(services),
            Layer.succeed(DurableEventSink, { emit: onDurableEvent })
          ))
        )
        const context = yield* Layer.buildWithScope(layer, runnerScope).pipe(
          Effect.mapError((e) => new CliError(`durable runs: ${e.message}`))
        )
        const built = { sessionId, scope: runnerScope, context }
        yield* Ref.set(runner, built)
        return built
      }))

      // -- approvals: the terminal's question, or an answer from another terminal ---------------
      const waiting = new Map<string, Waiting>()
      const ask = yield* makeTerminalQuestion({
        permissions,
        read: (prompt) => renderer.hold(input.read(prompt, { history: false })),
        print: (text) => renderer.line(text),
        record: options.record,
        style
      })

      /** One question on the terminal for a waiting call (one at a time); its answer goes to the run. */
      const question = (runId: string, w: Waiting) =>
        Effect.gen(function*() {
          const { call } = w
          // (the gate again, with any definition: read-only tools never ask)
          const answer = yield* ask(call, { name: call.name, description: "", parameters: {} }, {
            askedAt: w.askedAt,
            notes: [
              style.dim(
                `  (or from another terminal: agentloop approve ${runId} ${stripControl(call.id)} y|n [reason])`
              )
            ]
          })
          // no answer possible here: the call waits for one from another terminal
          if (answer._tag === "Unanswered") return
          const { decision } = answer
          w.answeredHere = true
          const r = yield* ensureRunner
          // a whole tool allowed: the run remembers it too (journaled), for its later calls after a
          // restart; a bash command's rule stays the session's (a restart asks again)
          yield* Effect.provideContext(
            approve(
              runId,
              call.id,
              decision._tag === "Deny" ?
                { approved: false, reason: decision.reason } :
                { approved: true, ...(answer.always ? { always: true } : {}) }
            ),
            r.context
          )
        }).pipe(Effect.catch((e: CliError) => Effect.sync(() => options.report(e.message))))

      /** A call of the followed run waits for approval (a new request, or one found in the session on resuming). */
      const awaitApproval = (runId: string, call: ToolCall, askedAt: number) =>
        Effect.gen(function*() {
          const w: Waiting = { call, askedAt, answeredHere: false, question: undefined }
          waiting.set(call.id, w)
          if (input.interactive) {
            w.question = yield* Effect.forkIn(question(runId, w), scope)
            return
          }
          yield* showCall((text) => renderer.line(text), style, call, [
            `  waiting for an answer: agentloop approve ${runId} ${stripControl(call.id)} y|n [reason]`
          ])
        })

      /** A waiting call started or got its result: stop asking; record an answer given elsewhere. */
      const settle = (callId: string, result: ToolResultMessage | undefined) =>
        Effect.gen(function*() {
          const w = waiting.get(callId)
          if (w === undefined) return
          waiting.delete(callId)
          if (w.answeredHere) return
          if (w.question !== undefined) yield* Fiber.interrupt(w.question)
          const asked = { toolCallId: callId, name: w.call.name, askedAt: w.askedAt }
          if (result === undefined) {
            yield* options.record({ ...asked, decision: "approved", by: "remote" })
            yield* renderer.line(style.dim(`  ${w.call.name} ${stripControl(callId)}: approved from another terminal`))
            return
          }
          if (!wasDenied(result)) return
          const denial = denialFromElsewhere(deniedTextOf(result), options.approvalTimeout)
          if (denial.by === "timeout") {
            // --approval-timeout: the run answered it denied when the time was up
            yield* denyOnTimeout(
              { print: (text) => renderer.line(text), record: options.record, style },
              asked,
              denial.timeout
            )
            return
          }
          yield* options.record(denialRecord(asked, denial))
          yield* renderer.line(style.dim(`  ${w.call.name} ${stripControl(callId)}: denied from another terminal`))
        })

      function onDurableEvent(de: DurableEvent): Effect.Effect<void> {
        return Effect.flatMap(Ref.get(followed), (run) => {
          if (run === undefined || de.runId !== run.runId) return Effect.void
          const key = eventKey(de)
          if (key !== undefined) {
            if (run.seen.has(key)) return Effect.void
            run.seen.add(key)
          }
          const event = de.event
          return Effect.gen(function*() {
            if (event.type === "approval_request") {
              yield* session.append({
                type: "approval_request",
                at: yield* Clock.currentTimeMillis,
                runId: run.runId,
                toolCallId: event.call.id,
                name: event.call.name
              })
              return yield* awaitApproval(run.runId, event.call, yield* Clock.currentTimeMillis)
            }
            if (event.type === "tool_start") yield* settle(event.call.id, undefined)
            if (event.type === "tool_end") yield* settle(event.result.toolCallId, event.result)
            yield* run.emit(event)
          })
        })
      }

      return RunEngine.of({
        runIdOf,
        run: (request, emit) =>
          Effect.gen(function*() {
            const runId = request.runId
            if (runId === undefined) return yield* Effect.die(new Error("a durable run needs its id (runIdOf)"))
            const inputLength = request.messages.length
            yield* Ref.set(followed, { runId, inputLength, emit, seen: new Set<string>() })
            if (request.resumed === undefined) {
              yield* renderer.line(style.dim(`durable run ${runId}`))
            } else {
              for (const w of request.resumed.waiting) yield* awaitApproval(runId, w.call, w.askedAt)
            }
            const r = yield* ensureRunner
            // Ctrl-C aborts the run at its next safe boundary; leaving (a second Ctrl-C, SIGTERM,
            // SIGHUP) keeps it for the next time
            stop.setRun(
              Effect.suspend(() =>
                stop.exitRequested() ? Effect.void : Effect.provideContext(abortRun(runId), r.context)
              )
            )
            // messages typed while it works go to the run's inbox in its store, where its steps read them
            const { inbox } = request
            const forward = inbox === undefined ? undefined : yield* Effect.forkIn(
              Effect.all([
                Effect.forever(Effect.flatMap(Queue.take(inbox.steering), (m) => steer(runId, m))),
                Effect.forever(Effect.flatMap(Queue.take(inbox.followUps), (m) => followUp(runId, m)))
              ], { concurrency: 2, discard: true }).pipe(
                Effect.provideContext(r.context),
                Effect.catch((e) => Effect.sync(() => options.report(`durable run ${runId}: ${e.message}`)))
              ),
              scope
            )
            // the answer's schema travels with the run as JSON Schema (a resumed run has it already)
            const output = request.output === undefined ?
              {} :
              { output: { jsonSchema: request.output.jsonSchema, name: request.output.name } }
            const outcome = yield* startRun({
              runId,
              messages: request.messages,
              systemPrompt: request.systemPrompt,
              maxSteps: request.maxSteps,
              ...output
            }).pipe(
              Effect.andThen(awaitRun(runId, { interval: "50 millis" })),
              Effect.provideContext(r.context),
              Effect.mapError((e) => new CliError(`durable run ${runId}: ${e.message}`)),
              Effect.map(Option.some),
              Effect.raceFirst(Effect.as(Deferred.await(stop.exit), Option.none()))
            )
            stop.setRun(undefined)
            if (forward !== undefined) yield* Fiber.interrupt(forward)
            yield* Ref.set(followed, undefined)
            if (Option.isNone(outcome)) {
              options.report(
                `the durable run ${runId} is kept: run the same command again to resume it (agentloop runs shows it)`
              )
              return undefined
            }
            const result = outcome.value
            // a run taken over from an earlier process may have records written twice: always rebuilt
            const rewritten = yield* reconcileSession(
              options.root,
              session.file(),
              runId,
              result.messages.slice(inputLength),
              request.resumed !== undefined
            ).pipe(Effect.mapError((e) => new CliError(e.message)))
            if (rewritten) yield* session.reopen
            return result
          })
      })
    })
  )
