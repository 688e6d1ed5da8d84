/**
 * The timeline model of a session: its lines (messages and records, in file order) grouped into
 * runs, each run into turns (one model request and its answer), each turn's tool calls into
 * lanes with their times, approvals and outcome; plus the invariant checks a saved session can
 * still be held to. Pure: no I/O, so it is tested without a server or a browser.
 *
 * A plain transcript (core's JSONL, no records) is read too: each user message starts a run and
 * each assistant message is a turn, without times.
 *
 * @since 0.1.0
 */
import { addUsage, pairingViolations, subAgentRunOf, toolCallsOf } from "@agentloop/core"
import type {
  AssistantMessage,
  Message,
  RunReason,
  SessionHeader,
  ToolCall,
  ToolResultMessage,
  Usage
} from "@agentloop/core"
import type { SessionLine } from "./SessionFile.ts"

/**
 * How a tool call ended, as the viewer shows it.
 *
 * @since 0.1.0
 * @category models
 */
export type LaneStatus =
  | "ok"
  | "error"
  | "denied"
  | "skipped"
  | "interrupted"
  | "timedOut"
  | "running"
  | "unanswered"

/**
 * One tool call of a turn: its lane in the turn's timeline.
 *
 * @since 0.1.0
 * @category models
 */
export interface Lane {
  readonly toolCallId: string
  readonly name: string
  /** A one-line summary of the arguments (the command of `bash`, the path of a file tool). */
  readonly summary: string
  readonly arguments: Record<string, unknown>
  readonly startedAt: number | undefined
  readonly endedAt: number | undefined
  readonly status: LaneStatus
  readonly approval:
    | {
      readonly at: number
      /** When the question was asked (recorded by newer writers). */
      readonly askedAt: number | undefined
      readonly decision: "approved" | "denied" | "always"
      readonly by: string | undefined
      readonly reason: string | undefined
    }
    | undefined
  /** The text of the tool result (truncated for display by the page). */
  readonly resultText: string | undefined
  /** Why the call was skipped, from the result's `details.reason`. */
  readonly skipReason: string | undefined
  /** The run of the sub-agent this call started (from its result's `details.subAgent`), nested. */
  readonly subAgent: SubAgentView | undefined
}

/**
 * A sub-agent's run, shown under the call that started it: built from the child transcript kept
 * in the call's result (`details.subAgent`, core's `SubAgentRun`), its own calls' sub-agents nested
 * the same way. A child transcript has no records, so its turns and lanes carry no times.
 *
 * @since 0.1.0
 * @category models
 */
export interface SubAgentView {
  readonly agent: string
  /** The task it was given (its first user message). */
  readonly task: string
  readonly reason: RunReason
  readonly steps: number
  readonly error: string | undefined
  /** Its usage, its own sub-agents' included. */
  readonly usage: Usage | undefined
  /** Its typed answer, when it had an output schema. */
  readonly output: unknown
  readonly turns: ReadonlyArray<Turn>
  /** What its transcript breaks: pairing (core's `pairingViolations`), or steps that do not match its turns. */
  readonly violations: ReadonlyArray<{ readonly check: "pairing" | "one-end-per-run"; readonly message: string }>
}

/**
 * One model turn: the request (from `turn_start`), the assistant message and its tool calls.
 *
 * @since 0.1.0
 * @category models
 */
export interface Turn {
  readonly index: number
  readonly step: number | undefined
  readonly startedAt: number | undefined
  /** When the model's answer was in: the time of the record after the assistant message. */
  readonly answeredAt: number | undefined
  readonly endedAt: number | undefined
  readonly stopReason: AssistantMessage["stopReason"] | undefined
  readonly errorMessage: string | undefined
  readonly text: string
  readonly usage: Usage | undefined
  readonly model: string | undefined
  /** How many assistant messages this turn got (1 when the invariant holds). */
  readonly assistantMessages: number
  /** Whether a `turn_start` record opened this turn (false: an assistant message came without one). */
  readonly requested: boolean
  readonly lanes: ReadonlyArray<Lane>
  /** The largest number of this turn's calls that were running at the same time. */
  readonly maxParallel: number
}

/**
 * A compaction marker: from here on, requests used a summary of older turns.
 *
 * @since 0.1.0
 * @category models
 */
export interface Compaction {
  readonly at: number
  readonly beforeTurn: number
  readonly summarized: number | undefined
  readonly kept: number | undefined
  readonly summary: string | undefined
  /** The tokens spent writing the summary. */
  readonly usage: Usage | undefined
}

/**
 * A switch of model (`/model` in a chat): the turns from `beforeTurn` on ask it.
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelChange {
  readonly at: number
  readonly beforeTurn: number
  readonly model: string
}

/**
 * One run: a prompt, its turns, and how it ended (`end` is absent when the file has no
 * `run_end` for it: the process was killed, or the run is still going).
 *
 * @since 0.1.0
 * @category models
 */
export interface Run {
  readonly index: number
  readonly prompt: string
  readonly startedAt: number | undefined
  readonly turns: ReadonlyArray<Turn>
  readonly compactions: ReadonlyArray<Compaction>
  /** Model switches recorded while this run was the latest (a switch between runs comes after its turns). */
  readonly modelChanges: ReadonlyArray<ModelChange>
  /** How the run ended: its `run_end` (absent when the file has none). */
  readonly end:
    | {
      readonly at: number | undefined
      readonly reason: RunReason
      readonly steps: number | undefined
      readonly error: string | undefined
      readonly usage: Usage | undefined
    }
    | undefined
  /** How many `run_end` records the run has (1 when the invariant holds). */
  readonly runEnds: number
}

/**
 * One invariant check and what it found.
 *
 * @since 0.1.0
 * @category models
 */
export interface InvariantCheck {
  readonly id: "pairing" | "one-answer-per-turn" | "one-end-per-run" | "tool-timing"
  readonly title: string
  readonly violations: ReadonlyArray<string>
  /** Things worth knowing that break no invariant (a run cut short by a killed process). */
  readonly notes: ReadonlyArray<string>
}

/**
 * Token counts summed over a session or a run.
 *
 * @since 0.1.0
 * @category models
 */
export interface Totals {
  readonly runs: number
  readonly turns: number
  readonly toolCalls: number
  readonly toolErrors: number
  readonly input: number
  readonly output: number
  readonly cacheRead: number
  readonly cacheWrite: number
  /** US dollars; absent when no turn reported a cost. */
  readonly cost: number | undefined
}

/**
 * Everything the page shows about a session.
 *
 * @since 0.1.0
 * @category models
 */
export interface Timeline {
  readonly header: SessionHeader | undefined
  readonly runs: ReadonlyArray<Run>
  readonly totals: Totals
  readonly invariants: ReadonlyArray<InvariantCheck>
  /** Lines that could not be read (1-based line numbers). */
  readonly problems: ReadonlyArray<{ readonly line: number; readonly problem: string }>
  readonly startedAt: number | undefined
  readonly endedAt: number | undefined
}

/** The model is built in one pass, filling in each part as its lines arrive. */
type Mutable<T> = { -readonly [K in keyof T]: T[K] }
type LaneDraft = Mutable<Lane>
type TurnDraft = Mutable<Omit<Turn, "lanes">> & { readonly lanes: Array<LaneDraft> }

/** The lane of a call just proposed: nothing known yet but the call itself. */
const newLane = (call: ToolCall): LaneDraft => ({
  toolCallId: call.id,
  name: call.name,
  summary: summarize(call.name, call.arguments),
  arguments: call.arguments,
  startedAt: undefined,
  endedAt: undefined,
  status: "unanswered",
  approval: undefined,
  resultText: undefined,
  skipReason: undefined,
  subAgent: undefined
})
type RunDraft = Mutable<Omit<Run, "turns" | "compactions" | "modelChanges">> & {
  readonly turns: Array<TurnDraft>
  readonly compactions: Array<Compaction>
  readonly modelChanges: Array<ModelChange>
}

const textOf = (message: Message): string => {
  if (typeof message.content === "string") return message.content
  const parts: Array<string> = []
  for (const part of message.content) if (part.type === "text") parts.push(part.text)
  return parts.join("\n")
}

const summarize = (name: string, args: Record<string, unknown>): string => {
  const pick = (key: string) => typeof args[key] === "string" ? args[key] : undefined
  const first = pick("command") ?? pick("path") ?? pick("file_path") ?? pick("query") ?? pick("url")
  if (first !== undefined) return first.split("\n")[0]!
  const json = JSON.stringify(args)
  return json === "{}" ? name : json
}

const detailsOf = (result: ToolResultMessage): Record<string, unknown> =>
  typeof result.details === "object" && result.details !== null ? result.details as Record<string, unknown> : {}

const statusOfResult = (result: ToolResultMessage): { status: LaneStatus; skipReason: string | undefined } => {
  const details = detailsOf(result)
  const reason = typeof details.reason === "string" ? details.reason : undefined
  if (!result.isError) return { status: "ok", skipReason: undefined }
  if (details.skipped === true) {
    if (reason === "denied") return { status: "denied", skipReason: reason }
    if (reason === "interrupted" || reason === "aborted") return { status: "interrupted", skipReason: reason }
    return { status: "skipped", skipReason: reason }
  }
  if (details.interrupted === true) return { status: "interrupted", skipReason: undefined }
  if (details.timedOut === true) return { status: "timedOut", skipReason: undefined }
  return { status: "error", skipReason: undefined }
}

/** The largest number of intervals open at once (an interval ending when another starts does not overlap it). */
const maxOverlap = (lanes: ReadonlyArray<Lane>): number => {
  const points: Array<readonly [number, number]> = []
  for (const lane of lanes) {
    if (lane.startedAt === undefined) continue
    points.push([lane.startedAt, 1], [lane.endedAt ?? lane.startedAt, -1])
  }
  points.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  let open = 0
  let max = 0
  for (const [, delta] of points) {
    open += delta
    max = Math.max(max, open)
  }
  return max
}

/** Sub-agents nested deeper than this are not expanded (a transcript is data: it may be anything). */
const MAX_SUB_AGENT_DEPTH = 16

/** The nested run of the sub-agent a call started, from its result's details. */
const subAgentViewOf = (result: ToolResultMessage, depth: number): SubAgentView | undefined => {
  const child = subAgentRunOf(result.details)
  if (child === undefined || depth > MAX_SUB_AGENT_DEPTH) return undefined
  const turns: Array<TurnDraft> = []
  const lanes = new Map<string, LaneDraft>()
  let task = ""
  for (const message of child.messages) {
    if (message.role === "user") {
      if (task === "") task = textOf(message)
      continue
    }
    if (message.role === "assistant") {
      const next: TurnDraft = {
        index: turns.length + 1,
        step: turns.length + 1,
        startedAt: undefined,
        answeredAt: undefined,
        endedAt: undefined,
        stopReason: message.stopReason,
        errorMessage: message.errorMessage,
        text: textOf(message),
        usage: message.usage,
        model: message.model,
        assistantMessages: 1,
        requested: true,
        lanes: [],
        maxParallel: 0
      }
      for (const call of toolCallsOf(message)) {
        const lane = newLane(call)
        next.lanes.push(lane)
        lanes.set(call.id, lane)
      }
      turns.push(next)
      continue
    }
    const lane = lanes.get(message.toolCallId)
    if (lane === undefined) continue
    const { skipReason, status } = statusOfResult(message)
    lane.status = status
    lane.skipReason = skipReason
    lane.resultText = textOf(message)
    lane.subAgent = subAgentViewOf(message, depth + 1)
  }
  const violations = [
    ...pairingViolations(child.messages).map((message) => ({ check: "pairing" as const, message })),
    ...(child.steps === turns.length ? [] : [{
      check: "one-end-per-run" as const,
      message: `its result says ${child.steps} step(s), its transcript has ${turns.length} turn(s)`
    }])
  ]
  return {
    agent: child.agent,
    task,
    reason: child.reason,
    steps: child.steps,
    error: child.error,
    usage: child.usage,
    output: child.output,
    turns,
    violations
  }
}

/** The sub-agent runs under a list of lanes, depth first, with where they are (for messages). */
const subAgentsOf = (
  lanes: ReadonlyArray<Lane>,
  where: string
): Array<{ readonly where: string; readonly view: SubAgentView }> =>
  lanes.flatMap((lane) => {
    if (lane.subAgent === undefined) return []
    const here = `${where}sub-agent ${lane.subAgent.agent} (call ${lane.toolCallId})`
    return [
      { where: here, view: lane.subAgent },
      ...lane.subAgent.turns.flatMap((t) => subAgentsOf(t.lanes, `${here} > `))
    ]
  })

/**
 * Builds the timeline of a session from its lines, in file order.
 *
 * @since 0.1.0
 * @category constructors
 */
export const buildTimeline = (lines: ReadonlyArray<SessionLine>): Timeline => {
  let header: SessionHeader | undefined
  const runs: Array<RunDraft> = []
  const messages: Array<Message> = []
  const problems: Array<{ line: number; problem: string }> = []
  const timingViolations: Array<string> = []
  const lanesById = new Map<string, LaneDraft>()
  const ended = new Set<string>()
  let run: RunDraft | undefined
  let turn: TurnDraft | undefined
  /** A turn whose answer is in but whose `answeredAt` waits for the next timed record. */
  let awaitingAnswerTime: TurnDraft | undefined
  let firstAt: number | undefined
  let lastAt: number | undefined

  const startRun = (at: number | undefined, prompt: string): RunDraft => {
    const next: RunDraft = {
      index: runs.length + 1,
      prompt,
      startedAt: at,
      turns: [],
      compactions: [],
      modelChanges: [],
      end: undefined,
      runEnds: 0
    }
    runs.push(next)
    run = next
    turn = undefined
    return next
  }
  const currentRun = (): RunDraft => run ?? startRun(undefined, "")
  const startTurn = (at: number | undefined, step: number | undefined, requested: boolean): TurnDraft => {
    const owner = currentRun()
    const next: TurnDraft = {
      index: owner.turns.length + 1,
      step,
      startedAt: at,
      answeredAt: undefined,
      endedAt: undefined,
      stopReason: undefined,
      errorMessage: undefined,
      text: "",
      usage: undefined,
      model: undefined,
      assistantMessages: 0,
      requested,
      lanes: [],
      maxParallel: 0
    }
    owner.turns.push(next)
    turn = next
    return next
  }
  const laneFor = (toolCallId: string, line: number, what: string): LaneDraft | undefined => {
    const lane = lanesById.get(toolCallId)
    if (lane === undefined) timingViolations.push(`line ${line}: ${what} for unknown tool call "${toolCallId}"`)
    return lane
  }

  for (const entry of lines) {
    if (entry._tag === "Problem") {
      problems.push({ line: entry.line, problem: entry.problem })
      continue
    }
    if (entry._tag === "Record") {
      const record = entry.record
      firstAt = firstAt === undefined ? record.at : Math.min(firstAt, record.at)
      lastAt = lastAt === undefined ? record.at : Math.max(lastAt, record.at)
      // The assistant message is written the moment the answer is complete, and the next record
      // follows at once, unless it is an approval a person took time over: then its `askedAt`.
      if (awaitingAnswerTime !== undefined && record.type !== "session") {
        awaitingAnswerTime.answeredAt = record.type === "approval" && record.askedAt !== undefined ?
          Math.min(record.askedAt, record.at) :
          record.at
        awaitingAnswerTime = undefined
      }
      switch (record.type) {
        case "session":
          header = record
          break
        case "run_start":
          startRun(record.at, record.prompt ?? "")
          break
        case "turn_start":
          startTurn(record.at, record.step, true)
          break
        case "tool_start": {
          const lane = laneFor(record.toolCallId, entry.line, "tool_start")
          if (lane !== undefined) {
            if (lane.startedAt !== undefined) {
              timingViolations.push(`line ${entry.line}: tool call "${record.toolCallId}" started twice`)
            }
            lane.startedAt = record.at
            if (lane.status === "unanswered") lane.status = "running"
          }
          break
        }
        case "tool_end": {
          const lane = laneFor(record.toolCallId, entry.line, "tool_end")
          if (lane !== undefined) {
            if (ended.has(record.toolCallId)) {
              timingViolations.push(`line ${entry.line}: tool call "${record.toolCallId}" ended twice`)
            }
            ended.add(record.toolCallId)
            lane.endedAt = record.at
          }
          break
        }
        case "approval": {
          const lane = laneFor(record.toolCallId, entry.line, "approval")
          if (lane !== undefined) {
            lane.approval = {
              at: record.at,
              askedAt: record.askedAt,
              decision: record.decision,
              by: record.by,
              reason: record.reason
            }
          }
          break
        }
        case "compaction": {
          const owner = currentRun()
          owner.compactions.push({
            at: record.at,
            beforeTurn: owner.turns.length + 1,
            summarized: record.summarized,
            kept: record.kept,
            summary: record.summary === undefined ? undefined : textOf(record.summary),
            usage: record.usage
          })
          break
        }
        case "model": {
          const owner = currentRun()
          owner.modelChanges.push({ at: record.at, beforeTurn: owner.turns.length + 1, model: record.model })
          break
        }
        case "run_end": {
          const owner = currentRun()
          owner.runEnds++
          if (owner.end === undefined) {
            owner.end = {
              at: record.at,
              reason: record.reason,
              steps: record.steps,
              error: record.error,
              usage: record.usage
            }
          }
          turn = undefined
          break
        }
      }
      continue
    }

    const message = entry.message
    messages.push(message)
    switch (message.role) {
      case "user": {
        // A run_start carries the prompt and the user message follows it; without records,
        // each user message starts a run.
        const owner = run
        if (owner !== undefined && owner.turns.length === 0 && owner.end === undefined) {
          if (owner.prompt === "") owner.prompt = textOf(message)
        } else {
          startRun(message.timestamp, textOf(message))
        }
        break
      }
      case "assistant": {
        const current = turn !== undefined && turn.assistantMessages === 0
          ? turn
          : startTurn(undefined, undefined, false)
        current.assistantMessages++
        current.stopReason = message.stopReason
        current.errorMessage = message.errorMessage
        current.text = textOf(message)
        current.usage = message.usage
        current.model = message.model
        // (A message's `timestamp` is when its request started, not when the answer came.)
        awaitingAnswerTime = current
        for (const call of toolCallsOf(message)) {
          const lane = newLane(call)
          current.lanes.push(lane)
          lanesById.set(call.id, lane)
        }
        break
      }
      case "toolResult": {
        const lane = lanesById.get(message.toolCallId)
        if (lane !== undefined) {
          const { skipReason, status } = statusOfResult(message)
          lane.status = status
          lane.skipReason = skipReason
          lane.resultText = textOf(message)
          lane.subAgent = subAgentViewOf(message, 1)
        }
        break
      }
    }
  }

  // Finish each turn: when it ended and how many calls overlapped.
  for (const owner of runs) {
    owner.turns.forEach((t, i) => {
      const next = owner.turns[i + 1]
      const laneEnds = t.lanes.flatMap((lane) => lane.endedAt === undefined ? [] : [lane.endedAt])
      const candidates = [t.answeredAt, ...laneEnds].filter((x): x is number => x !== undefined)
      t.endedAt = candidates.length > 0 ? Math.max(...candidates) : next?.startedAt ?? owner.end?.at
      t.maxParallel = maxOverlap(t.lanes)
    })
  }

  let usage: Usage | undefined
  let turns = 0
  let toolCalls = 0
  let toolErrors = 0
  for (const owner of runs) {
    for (const compaction of owner.compactions) usage = addUsage(usage, compaction.usage)
    for (const t of owner.turns) {
      turns++
      usage = addUsage(usage, t.usage)
      for (const lane of t.lanes) {
        toolCalls++
        if (lane.status !== "ok") toolErrors++
        // a sub-agent's usage (its own sub-agents' included) is not in the parent's turns
        usage = addUsage(usage, lane.subAgent?.usage)
      }
    }
  }

  return {
    header,
    runs,
    totals: {
      runs: runs.length,
      turns,
      toolCalls,
      toolErrors,
      input: usage?.input ?? 0,
      output: usage?.output ?? 0,
      cacheRead: usage?.cacheRead ?? 0,
      cacheWrite: usage?.cacheWrite ?? 0,
      cost: usage?.cost
    },
    invariants: checkSession(runs, messages, timingViolations, lines),
    problems,
    startedAt: header?.at ?? firstAt,
    endedAt: lastAt
  }
}

/**
 * A session file keeps each batch's results in the order the calls finished (parallel calls end in
 * any order); the transcript has them in call order, as `loadTranscript` puts them. The results
 * right after an assistant message are put in the order of its calls (results for no call of it
 * last, in file order) before the pairing check.
 */
const inCallOrder = (messages: ReadonlyArray<Message>): Array<Message> => {
  const out: Array<Message> = []
  let i = 0
  while (i < messages.length) {
    const message = messages[i]!
    out.push(message)
    i++
    if (message.role !== "assistant") continue
    const calls = toolCallsOf(message)
    const order = new Map(calls.map((call, k) => [call.id, k]))
    const block: Array<ToolResultMessage> = []
    while (i < messages.length && messages[i]!.role === "toolResult") block.push(messages[i++] as ToolResultMessage)
    block.sort((a, b) => (order.get(a.toolCallId) ?? calls.length) - (order.get(b.toolCallId) ?? calls.length))
    out.push(...block)
  }
  return out
}

const checkSession = (
  runs: ReadonlyArray<Run>,
  messages: ReadonlyArray<Message>,
  timingViolations: ReadonlyArray<string>,
  lines: ReadonlyArray<SessionLine>
): Array<InvariantCheck> => {
  const hasRecords = lines.some((line) => line._tag === "Record")
  const timing = [...timingViolations]
  const oneAnswer: Array<string> = []
  const oneEnd: Array<string> = []
  const endNotes: Array<string> = []
  const childPairing: Array<string> = []
  for (const owner of runs) {
    for (const t of owner.turns) {
      for (const { view, where } of subAgentsOf(t.lanes, `run ${owner.index}, turn ${t.index}: `)) {
        for (const v of view.violations) (v.check === "pairing" ? childPairing : oneEnd).push(`${where}: ${v.message}`)
      }
      if (!hasRecords) continue
      // A call that ran has a tool_start; one that never ran (denied, skipped) has only its tool_end.
      for (const lane of t.lanes) {
        if (
          lane.startedAt === undefined &&
          (lane.status === "ok" || lane.status === "error" || lane.status === "timedOut")
        ) {
          timing.push(
            `run ${owner.index}, turn ${t.index}: tool call "${lane.toolCallId}" has a result but no tool_start`
          )
        }
      }
      if (!t.requested) {
        oneAnswer.push(`run ${owner.index}, turn ${t.index}: an assistant message without a request (turn_start)`)
      }
      // A request whose stream failed or was aborted has no final message, and ends its run.
      const last = t === owner.turns[owner.turns.length - 1]
      const endedWithoutAnswer = owner.end === undefined || owner.end.reason === "error" ||
        owner.end.reason === "aborted"
      if (t.assistantMessages === 0 && !(last && endedWithoutAnswer)) {
        oneAnswer.push(`run ${owner.index}, turn ${t.index}: a request with no assistant message`)
      }
    }
    if (!hasRecords) continue
    if (owner.runEnds > 1) oneEnd.push(`run ${owner.index}: ${owner.runEnds} run_end records`)
    if (owner.runEnds === 0) {
      endNotes.push(
        owner === runs[runs.length - 1] ?
          `run ${owner.index} has no run_end yet: it is still going, or its process was killed` :
          `run ${owner.index} has no run_end: its process was killed before the run could end`
      )
    }
    if (owner.end?.steps !== undefined && owner.end.steps !== owner.turns.length) {
      oneEnd.push(
        `run ${owner.index}: run_end says ${owner.end.steps} step(s), the file has ${owner.turns.length} turn(s)`
      )
    }
  }
  return [
    {
      id: "pairing",
      title: "Every tool call has exactly one result, right after its message",
      violations: [...pairingViolations(inCallOrder(messages)), ...childPairing],
      notes: []
    },
    {
      id: "one-answer-per-turn",
      title: "Each model request got exactly one final assistant message",
      violations: oneAnswer,
      notes: []
    },
    {
      id: "one-end-per-run",
      title: "Each run ended exactly once",
      violations: oneEnd,
      notes: endNotes
    },
    {
      id: "tool-timing",
      title: "Tool timings match the calls (at most one start and one end each)",
      violations: timing,
      notes: []
    }
  ]
}
