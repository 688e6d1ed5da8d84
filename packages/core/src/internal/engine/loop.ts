/**
 * The loop's engine: one model turn, one tool batch, and the run that ends with exactly one
 * `turn_end` whatever happens. Not part of the public API; `AgentLoop.ts` and `AgentRun.ts` are.
 *
 * The pure decision of what a turn means is `decideTurn` (Decision.ts); this module only carries
 * it out. A turn is streamed by `streamTurn` (turn.ts). A turn's calls run in `runBatch`
 * (batch.ts: which calls run together, in what order results are written), and each call takes
 * `toolCall`'s path (toolCall.ts: decide -> approve -> claim -> run -> answer, each a named step;
 * `runCall` is where the executor runs it).
 */
import { Cause, Context, Duration, Effect, Exit, Fiber, Queue, Schema, Tracer } from "effect"
import { decideTurn } from "../../Decision.ts"
import type { TurnDecision } from "../../Decision.ts"
import { Executor } from "../../Executor.ts"
import type { ExecutorShape } from "../../Executor.ts"
import { Message, toolCallsOf, UserMessage as UserMessageSchema } from "../../Message.ts"
import type { AssistantMessage, ToolCall, ToolResultMessage, Usage, UserMessage } from "../../Message.ts"
import { Model, ToolDefinition } from "../../Model.ts"
import type { ModelRequest } from "../../Model.ts"
import { DEFAULT_OUTPUT_RETRIES, isAcceptedAnswer, toOutputSchema } from "../../Output.ts"
import type { ApprovalAnswer } from "../../Policy.ts"
import { AgentRunResult, DEFAULT_MAX_STEPS, RunSettings } from "../../Run.ts"
import type { AgentLoopOptions, ContextTransform, TurnContext } from "../../Run.ts"
import { RunControl } from "../../RunControl.ts"
import type { RunControlShape } from "../../RunControl.ts"
import { memoryJournal, RunJournal } from "../../RunJournal.ts"
import type { RunJournalShape } from "../../RunJournal.ts"
import { ToolConcurrency, ToolTimeout } from "../../ToolExecution.ts"
import { AgentTrace } from "../../Tracing.ts"
import { pairingViolations, prepareTranscript, skippedResult } from "../../Transcript.ts"
import { addUsageInto, describeCause, positiveDuration, subAgentUsageOf } from "../rules/common.ts"
import type { UsageTotal } from "../rules/common.ts"
import { isMessageFast, isRunSettingsFast, isToolDefinitionsFast } from "../rules/guards.ts"
import { runBatch } from "./batch.ts"
import type { BatchSettings } from "./batch.ts"
import { makeAnswerState, nameTaken, overLimit, repairAfterText, replayAnswer, startTurn } from "./output.ts"
import type { AnswerState } from "./output.ts"
import { BoundaryRecord, TurnRecord } from "./records.ts"
import type { Ending } from "./records.ts"
import { changeAndEmit, RunningCalls, runsInline, snapshotRequest } from "./shortcuts.ts"
import type { Emit } from "./shortcuts.ts"
import { describeModel, runEndAttributes, runSpan, traceTurn } from "./spans.ts"
import { streamTurn } from "./turn.ts"
import type { TurnEnding } from "./turn.ts"

/** How the run ended, before it is turned into the result and the `turn_end` event. */
type Outcome = TurnEnding

/**
 * The run's mutable state. The transcript array never leaves the run: callers get copies.
 * `unanswered` holds the calls of the last appended assistant message until their results are
 * appended; whatever ends the run, `closeTranscript` answers them before `turn_end`.
 */
interface RunState {
  transcript: Array<Message>
  steps: number
  unanswered: ReadonlyArray<ToolCall>
  /** Usage summed over the turns that reported it; undefined while none has. */
  usage: UsageTotal | undefined
  /** The accepted final answer of a run with an `output` schema (set as the run ends `stop`). */
  output: { readonly value: unknown; readonly answer: unknown } | undefined
  /** How many steering and follow-up messages the run has taken from its control. */
  steeringTaken: number
  followUpsTaken: number
}

const addUsage = (state: RunState, usage: Usage | undefined) => {
  if (usage !== undefined) state.usage = addUsageInto(state.usage, usage)
}

/**
 * Appends results (in the order given) and marks the open turn answered. Synchronous: never split.
 * A sub-agent's result adds the usage of its run (and of its own sub-agents) to the run's.
 */
const appendResults = (state: RunState, results: ReadonlyArray<ToolResultMessage>) => {
  for (const result of results) {
    state.transcript.push(result)
    if (result.details !== undefined) addUsage(state, subAgentUsageOf(result.details))
  }
  state.unanswered = []
}

/**
 * Pairs the calls of the open turn, if any, with skipped results (reason `aborted`). Runs
 * uninterruptibly as the run ends, so an interruption that lands between appending an assistant
 * message and starting its batch still leaves every call answered.
 */
const closeTranscript = (state: RunState, emit: Emit): Effect.Effect<void> =>
  Effect.suspend(() => {
    const results = state.unanswered.map((call) => skippedResult(call, "aborted"))
    appendResults(state, results)
    return Effect.forEach(results, (result) => emit({ type: "tool_end", result }), { discard: true })
  })

// -----------------------------------------------------------------------------
// The run
// -----------------------------------------------------------------------------

const decodeDefinitions = Schema.decodeUnknownExit(Schema.Array(ToolDefinition))
const decodeSettings = Schema.decodeUnknownExit(RunSettings)

const checkDefinitions = (definitions: ReadonlyArray<ToolDefinition>): string | undefined => {
  if (!isToolDefinitionsFast(definitions)) {
    const exit = decodeDefinitions(definitions)
    if (Exit.isFailure(exit)) return `the executor's tool definitions are invalid: ${describeCause(exit.cause)}`
  }
  const names = new Set<string>()
  for (const definition of definitions) {
    if (names.has(definition.name)) return `the executor defines tool "${definition.name}" twice`
    names.add(definition.name)
  }
  return undefined
}

/** Appends user messages (`append`) and announces each, together (never split). */
const appendUserMessages = (
  emit: Emit,
  messages: ReadonlyArray<UserMessage>,
  kind: "steering" | "followUp" | "repair",
  append: () => void
) =>
  Effect.uninterruptible(Effect.suspend(() => {
    append()
    return Effect.forEach(messages, (message) => emit({ type: "user_message", message, kind }), { discard: true })
  }))

const decodeUserMessage = Schema.decodeUnknownExit(UserMessageSchema)

/** The first pushed message that is not a valid user message, as an error, if any. */
const checkPushed = (messages: ReadonlyArray<unknown>, kind: "steering" | "followUp"): string | undefined => {
  for (const message of messages) {
    const exit = decodeUserMessage(message)
    if (Exit.isFailure(exit)) {
      return `bad input: a ${kind === "steering" ? "steering" : "follow-up"} message is not a valid user message: ${
        describeCause(exit.cause)
      }`
    }
  }
  return undefined
}

/** Everything in a queue right now (nothing when there is no queue). */
const noMessages: ReadonlyArray<UserMessage> = []

const drain = (queue: Queue.Dequeue<UserMessage> | undefined): Effect.Effect<ReadonlyArray<UserMessage>> =>
  queue === undefined
    ? Effect.succeed([])
    : Effect.map(Queue.clear(queue), (items) => items as ReadonlyArray<UserMessage>)

/** The request's messages after `transformContext`, or why they cannot be sent. */
const shapeContext = (
  transform: ContextTransform,
  messages: ReadonlyArray<Message>,
  context: TurnContext
): Effect.Effect<
  { readonly ok: true; readonly messages: ReadonlyArray<Message> } | { readonly ok: false; readonly error: string }
> =>
  Effect.map(Effect.exit(Effect.suspend(() => transform(messages, context))), (exit) => {
    if (Exit.isFailure(exit)) return { ok: false, error: `transformContext failed: ${describeCause(exit.cause)}` }
    const shaped = exit.value
    if (!Array.isArray(shaped)) {
      return { ok: false, error: "transformContext returned an invalid transcript: not an array" }
    }
    for (let i = 0; i < shaped.length; i++) {
      if (!isMessageFast(shaped[i])) {
        const decoded = decodeMessage(shaped[i])
        if (Exit.isFailure(decoded)) {
          return {
            ok: false,
            error: `transformContext returned an invalid transcript: messages[${i}]: ${describeCause(decoded.cause)}`
          }
        }
      }
    }
    const broken = pairingViolations(shaped)
    return broken.length === 0 ?
      { ok: true, messages: shaped } :
      {
        ok: false,
        error: `transformContext returned messages that split tool calls from their results: ${broken.join("; ")}`
      }
  })

const decodeMessage = Schema.decodeUnknownExit(Message)

/**
 * Whether a tracing backend is installed. Spans for turns and tool calls cost several
 * microseconds each; with effect's built-in tracer nobody can see them, so they are skipped (as
 * effect's own `Tracer.nativeTracer` documentation suggests).
 */
const tracingBackend = Effect.map(Tracer.Tracer, (tracer) => tracer !== Tracer.nativeTracer)

/** The control of a run that has none provided: its own options. */
const controlOf = (options: AgentLoopOptions): RunControlShape => {
  if (typeof options !== "object" || options === null) {
    return { signal: undefined, steering: undefined, followUps: undefined }
  }
  const { signal, steering, followUps } = options
  return {
    signal,
    steering: steering === undefined ? undefined : () => drain(steering),
    followUps: followUps === undefined ? undefined : () => drain(followUps)
  }
}

const endingOf = (outcome: TurnEnding): Ending =>
  outcome.error === undefined ?
    (outcome.errorReason === undefined
      ? { reason: outcome.reason }
      : { reason: outcome.reason, errorReason: outcome.errorReason }) :
    outcome.errorReason === undefined ?
    { reason: outcome.reason, error: outcome.error } :
    { reason: outcome.reason, error: outcome.error, errorReason: outcome.errorReason }

const noReplay = () => Effect.void

/**
 * The run, step by step. Each step goes through the journal (see RunJournal.ts): what a step
 * changes in the run's state it changes inside the step, together with the events that announce
 * it, and its `replayed` function makes the same change from the step's value when a journal
 * answers it from its record. Everything between steps is a pure function of the steps' values.
 */
const drive = (
  options: AgentLoopOptions,
  state: RunState,
  model: typeof Model.Service,
  executor: ExecutorShape,
  emit: Emit,
  journal: RunJournalShape,
  control: RunControlShape
): Effect.Effect<Outcome> =>
  Effect.gen(function*() {
    const input = checkInput(options)
    if (!input.ok) return { reason: "error", error: input.error }
    state.transcript = input.transcript
    // a run with an output schema answers the final-answer tool itself, beside the executor's tools
    let answers: AnswerState | undefined
    if (options.output !== undefined) {
      const output = yield* Effect.exit(Effect.try({ try: () => toOutputSchema(options.output!), catch: (e) => e }))
      if (Exit.isFailure(output)) return { reason: "error", error: `bad input: output: ${describeCause(output.cause)}` }
      answers = makeAnswerState(output.value, options.outputRetries ?? DEFAULT_OUTPUT_RETRIES, executor)
    }
    const tools = answers === undefined ? executor : answers.executor
    // the definitions the executor offers; read once per turn (an executor may change them between
    // turns, e.g. an MCP server whose tools changed, never during a batch) and checked when new
    let definitions = tools.definitions
    const definitionError = (answers === undefined ? undefined : nameTaken(answers, definitions)) ??
      checkDefinitions(definitions)
    if (definitionError !== undefined) return { reason: "error", error: definitionError }

    const { systemPrompt, transformContext } = options
    const { signal } = control
    const maxSteps = options.maxSteps ?? DEFAULT_MAX_STEPS
    const batch: BatchSettings = {
      executor: tools,
      emit,
      signal,
      policy: options.policy,
      journal,
      remembered: new Map<string, ApprovalAnswer>(),
      definitions: new Map(definitions.map((d) => [d.name, d])),
      concurrency: yield* ToolConcurrency,
      defaultTimeout: yield* ToolTimeout,
      approvalTimeout: options.approvalTimeout === undefined
        ? undefined
        : Duration.fromInputUnsafe(options.approvalTimeout),
      traced: yield* tracingBackend,
      agent: yield* AgentTrace,
      finalAnswer: answers?.output.name,
      replayAnswer: answers === undefined ? undefined : (call) => replayAnswer(answers, call),
      policyError: undefined
    }
    // the calls and the decision of the last turn appended (by its step, or its replay)
    let calls: ReadonlyArray<ToolCall> = []
    let decision: TurnDecision = { _tag: "Finish", reason: "stop", error: undefined, skip: undefined }

    // -- the changes steps make (inside the step, or from its value when replayed) --------------
    const appendAssistant = (message: AssistantMessage, calls: ReadonlyArray<ToolCall>) => {
      state.transcript.push(message)
      state.unanswered = calls
      addUsage(state, message.usage)
    }
    const takeSteering = (messages: ReadonlyArray<UserMessage>) => {
      for (const message of messages) state.transcript.push(message)
      state.steeringTaken += messages.length
    }
    const replayTurn = (record: TurnRecord) =>
      Effect.sync(() => {
        takeSteering(record.steering)
        state.steps++
        addUsage(state, record.usage)
        if (record._tag === "Ended") {
          if (!record.requested) state.steps--
          return
        }
        calls = toolCallsOf(record.message)
        appendAssistant(record.message, calls)
        decision = decideTurn(record.message.stopReason, calls.length, record.message.errorMessage)
        const skip = decision._tag === "Finish" ? decision.skip : undefined
        if (skip !== undefined) appendResults(state, calls.map((call) => skippedResult(call, skip)))
      })
    const replayBoundary = (record: BoundaryRecord) =>
      Effect.sync(() => {
        switch (record._tag) {
          case "More":
            takeSteering(record.steering)
            for (const message of record.followUps) state.transcript.push(message)
            state.followUpsTaken += record.followUps.length
            return
          case "Repair":
            repairAfterText(answers!)
            state.transcript.push(record.message)
            return
          case "Over":
            repairAfterText(answers!)
            return
        }
      })

    // -- the steps --------------------------------------------------------------------------
    /** The safe boundary before a request, then the turn: `turn/<n>`. */
    const turnBody = function*(): Generator<Effect.Effect<unknown>, TurnRecord> {
      if (signal?.aborted) {
        return { _tag: "Ended", steering: noMessages, requested: false, ending: { reason: "aborted" } }
      }
      // the safe boundary: every call so far is answered, the next request is not built yet
      const steered = control.steering === undefined ? noMessages : yield* control.steering(state.steeringTaken)
      let steering: ReadonlyArray<UserMessage> = noMessages
      if (steered.length > 0) {
        const bad = checkPushed(steered, "steering")
        if (bad !== undefined) {
          return { _tag: "Ended", steering: noMessages, requested: false, ending: { reason: "error", error: bad } }
        }
        steering = steered as ReadonlyArray<UserMessage>
        yield* appendUserMessages(emit, steering, "steering", () => takeSteering(steering))
      }
      if (state.steps >= maxSteps) return { _tag: "Ended", steering, requested: false, ending: { reason: "maxSteps" } }
      const current = tools.definitions
      if (current !== definitions) {
        const changed = (answers === undefined ? undefined : nameTaken(answers, current)) ?? checkDefinitions(current)
        if (changed !== undefined) {
          return { _tag: "Ended", steering, requested: false, ending: { reason: "error", error: changed } }
        }
        definitions = current
        batch.definitions = new Map(current.map((d) => [d.name, d]))
      }
      let messages: ReadonlyArray<Message> | undefined
      // what shaping this request cost: counted in the run's usage now, and kept in the turn's record
      // so that a replayed journal counts it too (once)
      let spent: UsageTotal | undefined
      if (transformContext !== undefined) {
        const context: TurnContext = {
          model,
          systemPrompt,
          tools: definitions,
          step: state.steps + 1,
          addUsage: (usage) =>
            Effect.sync(() => {
              spent = addUsageInto(spent, usage)
              addUsage(state, usage)
            })
        }
        const shaped = yield* shapeContext(transformContext, state.transcript.slice(), context)
        if (!shaped.ok) {
          const ending: Ending = { reason: "error", error: shaped.error }
          return spent === undefined ?
            { _tag: "Ended", steering, requested: false, ending } :
            { _tag: "Ended", steering, requested: false, ending, usage: spent }
        }
        messages = shaped.messages
      }
      state.steps++
      const request: ModelRequest = messages !== undefined ?
        (systemPrompt === undefined
          ? { messages, tools: definitions }
          : { systemPrompt, messages, tools: definitions }) :
        snapshotRequest(state.transcript, definitions, systemPrompt)
      const streamed = streamTurn(model, request, emit, signal)
      const turn = yield* (batch.traced ? traceTurn(streamed, model, state.steps) : streamed)
      if (turn._tag === "Ended") {
        const ending = endingOf(turn.outcome)
        return spent === undefined ?
          { _tag: "Ended", steering, requested: true, ending } :
          { _tag: "Ended", steering, requested: true, ending, usage: spent }
      }
      const message = turn.message
      const turnCalls = toolCallsOf(message)
      // appending the message and announcing it happen together, or not at all
      yield* changeAndEmit(emit, () => {
        calls = turnCalls
        appendAssistant(message, turnCalls)
      }, { type: "assistant_message", message })
      decision = decideTurn(message.stopReason, turnCalls.length, message.errorMessage)
      const skip = decision._tag === "Finish" ? decision.skip : undefined
      if (skip !== undefined) {
        const skipped = turnCalls.map((call) => skippedResult(call, skip))
        // appended and announced together: an interruption between the two would leave results
        // with no `tool_end`
        yield* Effect.uninterruptible(Effect.suspend(() => {
          appendResults(state, skipped)
          return Effect.forEach(skipped, (result) => emit({ type: "tool_end", result }), { discard: true })
        }))
      }
      return spent === undefined
        ? { _tag: "Message", steering, message }
        : { _tag: "Message", steering, message, usage: spent }
    }
    const turnStep = () => Effect.gen(turnBody)
    // the in-memory journal's turns run inline, in this generator (see `memoryJournal`)
    const inline = runsInline(journal)

    /** What was pushed while the run would stop: it goes on with it (`More`), or with nothing (`None`). */
    const takeMore = Effect.gen(function*() {
      const steering = control.steering === undefined ? noMessages : yield* control.steering(state.steeringTaken)
      const followUps = control.followUps === undefined ? noMessages : yield* control.followUps(state.followUpsTaken)
      if (steering.length === 0 && followUps.length === 0) return undefined
      const more = [...steering, ...followUps]
      const bad = checkPushed(more, "followUp")
      if (bad !== undefined) return { _tag: "Bad", error: bad } satisfies BoundaryRecord
      const record = {
        _tag: "More",
        steering: steering as ReadonlyArray<UserMessage>,
        followUps: followUps as ReadonlyArray<UserMessage>
      } satisfies BoundaryRecord
      yield* appendUserMessages(emit, more as ReadonlyArray<UserMessage>, "followUp", () => {
        for (const message of more) state.transcript.push(message as UserMessage)
        state.steeringTaken += steering.length
        state.followUpsTaken += followUps.length
      })
      return record
    })

    /** The boundary of a turn that ended `stop`: `stop/<n>`. */
    const stopStep = (): Effect.Effect<BoundaryRecord> =>
      Effect.gen(function*() {
        // steering that came too late for this turn, then follow-ups, restart the run
        const more = yield* takeMore
        if (more !== undefined) return more
        if (answers === undefined) return { _tag: "None" }
        // a run with an output schema ends only with an accepted answer: ask for it, a bounded number of times
        const repair = repairAfterText(answers)
        if (repair === undefined) return { _tag: "Over" }
        yield* appendUserMessages(emit, [repair], "repair", () => state.transcript.push(repair))
        return { _tag: "Repair", message: repair }
      })

    /** The boundary after an accepted final answer: `answer/<n>`. */
    const answerStep = (): Effect.Effect<BoundaryRecord> =>
      Effect.gen(function*() {
        if (signal?.aborted) return { _tag: "Aborted" }
        return (yield* takeMore) ?? { _tag: "None" }
      })

    while (true) {
      const record = inline
        ? yield* turnBody()
        : yield* journal.step("turn", state.steps + 1, undefined, TurnRecord, turnStep, replayTurn)
      if (record._tag === "Ended") return record.ending
      if (decision._tag === "Finish") {
        if (decision.reason === "stop") {
          const boundary = yield* journal.step("stop", state.steps, undefined, BoundaryRecord, stopStep, replayBoundary)
          switch (boundary._tag) {
            case "More":
            case "Repair":
              continue
            case "Bad":
              return { reason: "error", error: boundary.error }
            case "Over":
              return { reason: "error", error: overLimit(answers!) }
          }
        }
        return { reason: decision.reason, error: decision.error }
      }
      if (answers !== undefined) startTurn(answers, calls)
      yield* runBatch(batch, state.steps, calls, (results) => appendResults(state, results))
      if (batch.policyError !== undefined) return { reason: "error", error: batch.policyError }
      if (answers !== undefined) {
        if (answers.accepted !== undefined) {
          // an accepted answer is the run's stop: as there, late steering and follow-ups restart it,
          // and the run then needs an answer again
          const boundary = yield* journal.step(
            "answer",
            state.steps,
            undefined,
            BoundaryRecord,
            answerStep,
            replayBoundary
          )
          if (boundary._tag === "Aborted") return { reason: "aborted" }
          if (boundary._tag === "Bad") return { reason: "error", error: boundary.error }
          if (boundary._tag === "More") {
            answers.accepted = undefined
            continue
          }
          state.output = answers.accepted
          return { reason: "stop" }
        }
        const over = overLimit(answers)
        if (over !== undefined) return { reason: "error", error: over }
      }
    }
  })

/**
 * The run's input checked (SPEC §5): its transcript, repaired and ready, or the bad-input error the
 * run ends with. Every engine checks a run's input with this.
 */
export const checkInput = (
  options: AgentLoopOptions
): { readonly ok: true; readonly transcript: Array<Message> } | { readonly ok: false; readonly error: string } => {
  if (typeof options !== "object" || options === null) {
    return { ok: false, error: "bad input: options must be an object" }
  }
  if (!isRunSettingsFast(options)) {
    const settings = decodeSettings(options)
    if (Exit.isFailure(settings)) return { ok: false, error: `bad input: ${describeCause(settings.cause)}` }
  }
  if (!Array.isArray(options.messages)) return { ok: false, error: "bad input: messages must be an array" }
  const prepared = prepareTranscript(options.messages)
  if (!prepared.ok) return { ok: false, error: `bad input: ${prepared.error}` }
  const tail = tailError(prepared.value)
  return tail === undefined ? { ok: true, transcript: prepared.value } : { ok: false, error: tail }
}

/**
 * Why a transcript cannot be answered as it ends: with the model's answer, or with an accepted
 * final answer (the run that made it ended with it). `undefined` when it can.
 */
const tailError = (transcript: ReadonlyArray<Message>): string | undefined => {
  const last = transcript.at(-1)
  if (last?.role === "toolResult" && last.details !== undefined && !last.isError && isAcceptedAnswer(last.details)) {
    // the run that made it ended with its answer: as with the model's last word, there is nothing to answer
    return `bad input: the messages end with an accepted final answer (messages[${transcript.length - 1}], ` +
      `tool "${last.toolName}"): there is nothing to answer; append a user message to go on`
  }
  if (last?.role === "assistant") {
    // the model has had the last word: asking again would resend its answer as the prompt
    return `bad input: the messages end with the model's answer (messages[${transcript.length - 1}], ` +
      `stopReason "${last.stopReason}"): there is nothing to answer; append a user message to go on`
  }
  return undefined
}

interface Deadline {
  readonly limit: Duration.Duration
  readonly controller: AbortController
  /** The deadline passed before any abort by the caller: the run is reported as timed out. */
  timedOut: boolean
}

/** The run's `timeout`, when it has a valid one (an invalid one is bad input, reported by `drive`). */
const deadlineOf = (options: AgentLoopOptions): Deadline | undefined => {
  const timeout = typeof options === "object" && options !== null ? options.timeout : undefined
  if (timeout === undefined) return undefined
  const limit = positiveDuration(timeout)
  return limit === undefined ? undefined : { limit, controller: new AbortController(), timedOut: false }
}

/**
 * Runs `drive` with a signal that also fires when the deadline passes (on the `Clock`, so tests
 * drive it with `TestClock`; measured from the run's first start, as the journal knows it): the
 * run then stops exactly as an abort stops it, at the same safe points, and keeps its paired
 * transcript.
 */
const withDeadline = <A, R>(
  deadline: Deadline,
  control: RunControlShape,
  journal: RunJournalShape,
  drive: (bounded: RunControlShape) => Effect.Effect<A, never, R>
): Effect.Effect<A, never, R> =>
  Effect.flatMap(journal.timeLeft(deadline.limit), (left) => {
    const signal = control.signal === undefined ?
      deadline.controller.signal :
      AbortSignal.any([control.signal, deadline.controller.signal])
    const timer = Effect.andThen(
      Effect.sleep(left),
      Effect.sync(() => {
        // whichever stopped the run first names it: a caller's abort that came first stays the caller's
        deadline.timedOut = control.signal?.aborted !== true
        deadline.controller.abort()
      })
    )
    return Effect.flatMap(
      Effect.forkChild(timer),
      (fiber) => Effect.ensuring(drive({ ...control, signal }), Fiber.interrupt(fiber))
    )
  })

/**
 * Runs the loop with an already guarded `emit`, hands the result to `onResult` (also when the run
 * is interrupted from outside, before the interruption goes on) and returns it. With a tracing
 * backend installed, the whole run is the span `invoke_agent` (agentloop's `agentloop.run`); each
 * turn is a `chat` span, each call an `execute_tool` span (see spans.ts and Tracing.ts). Without
 * one, no span is made: effect's built-in tracer shows them to nobody, and a span costs more than a
 * short run (a stack trace captured when it is made, and every failure inside it annotated with its
 * frame, down to the end of each model stream).
 *
 * The run's steps go through the `RunJournal` and its abort, steering and follow-ups come from the
 * `RunControl` (by default: in memory, from `options`).
 */
export const runLoop = (
  options: AgentLoopOptions,
  emit: Emit,
  onResult: (result: AgentRunResult) => Effect.Effect<void>
): Effect.Effect<AgentRunResult, never, Model | Executor> =>
  Effect.withFiber((fiber) => {
    const traced = fiber.getRef(Tracer.Tracer) !== Tracer.nativeTracer
    const run = runTraced(options, emit, onResult, traced, fiber.getRef(RunJournal), fiber.getRef(RunControl))
    if (!traced) return run
    const model = Context.getOption(fiber.context, Model)
    const span = runSpan(fiber.getRef(AgentTrace), model._tag === "Some" ? describeModel(model.value) : undefined)
    return Effect.withSpan(run, span.name, span.options)
  })

const runTraced = (
  options: AgentLoopOptions,
  emit: Emit,
  onResult: (result: AgentRunResult) => Effect.Effect<void>,
  traced: boolean,
  journal: RunJournalShape,
  given: RunControlShape | undefined
): Effect.Effect<AgentRunResult, never, Model | Executor> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const model = yield* Model
      const executor = yield* Executor
      const state: RunState = {
        transcript: [],
        steps: 0,
        unanswered: [],
        usage: undefined,
        output: undefined,
        steeringTaken: 0,
        followUpsTaken: 0
      }
      const control = given ?? controlOf(options)
      const deadline = deadlineOf(options)
      const driven = deadline === undefined ?
        drive(options, state, model, executor, emit, journal, control) :
        withDeadline(deadline, control, journal, (bounded) =>
          drive(options, state, model, executor, emit, journal, bounded))
      // a run inside a tool call (a sub-agent) does not inherit its caller's batch (see runBatch),
      // journal or control
      const own = journal === memoryJournal && given === undefined ?
        driven :
        Effect.provideService(Effect.provideService(driven, RunJournal, memoryJournal), RunControl, undefined)
      const exit = yield* Effect.exit(restore(Effect.withFiber((fiber) =>
        fiber.getRef(RunningCalls) === undefined ? own : Effect.provideService(own, RunningCalls, undefined)
      )))
      // with a journal that replays, an interruption is its engine suspending the run: it goes on
      // when it is replayed, and ends then
      if (journal.replays && Exit.isFailure(exit) && Cause.hasInterrupts(exit.cause)) {
        return yield* Effect.failCause(exit.cause)
      }
      const end = () =>
        Effect.gen(function*() {
          yield* closeTranscript(state, emit)
          const outcome: Outcome = Exit.isSuccess(exit) ?
            (exit.value.reason === "aborted" && deadline?.timedOut === true ?
              { reason: "aborted", error: `run timed out after ${Duration.format(deadline.limit)}` } :
              exit.value) :
            Cause.hasInterruptsOnly(exit.cause) ?
            { reason: "aborted" } :
            { reason: "error", error: `agentloop internal error: ${describeCause(exit.cause)}` }
          const error = outcome.error === undefined ? {} : { error: outcome.error }
          const result: AgentRunResult = {
            // an exact-size copy: the transcript array has spare capacity from appending, which a
            // caller holding the result (a long session) would keep for as long as it keeps it
            messages: state.transcript.slice(),
            steps: state.steps,
            reason: outcome.reason,
            ...error,
            ...(outcome.errorReason === undefined ? {} : { errorReason: outcome.errorReason }),
            ...(state.usage === undefined ? {} : { usage: state.usage }),
            // (recorded in its JSON form, the model's: what a journal can store; decoded below)
            ...(state.output === undefined || outcome.reason !== "stop" ? {} : { output: state.output.answer })
          }
          if (traced) {
            yield* Effect.annotateCurrentSpan(runEndAttributes(outcome, state.steps, state.usage))
          }
          yield* emit({ type: "turn_end", reason: outcome.reason, steps: state.steps, ...error })
          return result
        })
      const recorded = yield* journal.step("end", state.steps, undefined, AgentRunResult, end, noReplay)
      // the accepted answer decoded (a replayed run decoded it again as its steps replayed)
      const result = state.output === undefined || recorded.reason !== "stop" ?
        recorded :
        { ...recorded, output: state.output.value }
      yield* onResult(result)
      if (Exit.isFailure(exit) && Cause.hasInterrupts(exit.cause)) {
        return yield* Effect.failCause(exit.cause)
      }
      return result
    })
  )
