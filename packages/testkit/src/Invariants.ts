/**
 * `checkInvariants`: every violation of the three invariants of SPEC §1 (and of the bookkeeping
 * around them) found in a run's result, its events and the requests the model saw, and in the runs
 * of its sub-agents: each child's transcript (in its result's `details`) and its events (in the
 * parent's `tool_progress` events, by path) are checked the same way, down the whole tree.
 *
 * @since 0.1.0
 */
import { isSubAgentEvent, pairingViolations, subAgentRunOf, toolCallsOf } from "@agentloop/core"
import type { AgentRunResult, AssistantMessage, LoopEvent, Message, ModelRequest, SubAgentRun } from "@agentloop/core"

/**
 * One broken rule: `1` the final message of a turn appended exactly once, `2` every call answered
 * exactly once in call order, `3` exactly one `turn_end`; `"consistency"` for the bookkeeping
 * that lets the three be checked (steps, events against transcript, the input kept).
 *
 * @since 0.1.0
 * @category models
 */
export interface InvariantViolation {
  readonly invariant: 1 | 2 | 3 | "consistency"
  readonly message: string
}

/**
 * What a run left behind. Give as much as you have: `events` is needed for invariant 3; `result`
 * and `requests` widen the checks.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunRecord {
  /** The messages the run was started with (to check they lead the transcript, unchanged). */
  readonly input?: ReadonlyArray<Message> | undefined
  readonly result?: AgentRunResult | undefined
  readonly events: ReadonlyArray<LoopEvent>
  readonly requests?: ReadonlyArray<ModelRequest> | undefined
}

/**
 * Every violation found; an empty array means the run, and every sub-agent run under it, kept its
 * invariants. A sub-agent's violations say which run they are in (`sub-agent researcher (call c1):`).
 *
 * @since 0.1.0
 * @category checks
 */
export const checkInvariants = (record: RunRecord): ReadonlyArray<InvariantViolation> => [
  ...checkRun(record),
  ...checkSubAgents(record.result?.messages, record.events)
]

/** One sub-agent run of the tree: where it is, what it kept, what it emitted. */
interface Child {
  readonly path: ReadonlyArray<string>
  readonly label: string
  readonly run: SubAgentRun
}

const samePath = (a: ReadonlyArray<string>, b: ReadonlyArray<{ readonly toolCallId: string }>): boolean =>
  a.length === b.length && a.every((id, i) => b[i]!.toolCallId === id)

/** The sub-agent runs whose transcripts are in `messages` (and theirs, down the tree). */
const childrenOf = (messages: ReadonlyArray<Message>, path: ReadonlyArray<string>, label: string): Array<Child> =>
  messages.flatMap((message) => {
    if (message.role !== "toolResult") return []
    const run = subAgentRunOf(message.details)
    if (run === undefined) return []
    const here = [...path, message.toolCallId]
    const name = `${label}sub-agent ${run.agent} (call ${message.toolCallId})`
    return [{ path: here, label: name, run }, ...childrenOf(run.messages, here, `${name} > `)]
  })

/**
 * The sub-agent runs of a run: their kept transcripts checked with their own events (those of the
 * parent's events whose path is theirs), and every run seen in the events found in a transcript.
 */
const checkSubAgents = (
  messages: ReadonlyArray<Message> | undefined,
  events: ReadonlyArray<LoopEvent>
): Array<InvariantViolation> => {
  const progress = events.flatMap((event) =>
    event.type === "tool_progress" && isSubAgentEvent(event.progress) &&
      event.progress.path[0]?.toolCallId === event.toolCallId ?
      [event.progress] :
      []
  )
  if (messages === undefined) return []
  const children = childrenOf(messages, [], "")
  const violations: Array<InvariantViolation> = []
  for (const child of children) {
    const own = progress.flatMap((p) => samePath(child.path, p.path) ? [p.event] : [])
    const { agent: _, output: __, ...result } = child.run
    for (
      const v of checkRun({ input: child.run.messages.slice(0, 1), result: result as AgentRunResult, events: own })
    ) {
      violations.push({ invariant: v.invariant, message: `${child.label}: ${v.message}` })
    }
  }
  const seen = new Set<string>()
  for (const p of progress) {
    const key = JSON.stringify(p.path.map((step) => step.toolCallId))
    if (seen.has(key)) continue
    seen.add(key)
    if (!children.some((child) => samePath(child.path, p.path))) {
      violations.push({
        invariant: "consistency",
        message: `the sub-agent run at ${key} emitted events but its transcript is in no result's details`
      })
    }
  }
  return violations
}

const checkRun = (record: RunRecord): ReadonlyArray<InvariantViolation> => {
  const violations: Array<InvariantViolation> = []
  const add = (invariant: InvariantViolation["invariant"], message: string) => violations.push({ invariant, message })
  const { events, requests, result, input } = record

  // Invariant 3: exactly one turn_end, the last event, agreeing with the result.
  const turnEnds = events.filter((e) => e.type === "turn_end")
  if (turnEnds.length !== 1) add(3, `expected exactly one turn_end event, found ${turnEnds.length}`)
  const last = events[events.length - 1]
  if (turnEnds.length > 0 && last?.type !== "turn_end") add(3, "events were emitted after turn_end")
  const turnEnd = turnEnds[0]
  if (turnEnd !== undefined && turnEnd.type === "turn_end" && result !== undefined) {
    if (turnEnd.reason !== result.reason) {
      add(3, `turn_end says reason "${turnEnd.reason}", the result says "${result.reason}"`)
    }
    if (turnEnd.steps !== result.steps) add(3, `turn_end says ${turnEnd.steps} steps, the result says ${result.steps}`)
    if (turnEnd.error !== result.error) add(3, "turn_end and the result carry different errors")
  }

  // Invariant 1: each turn's final message appended exactly once; nothing invented.
  const assistantEvents = events.flatMap((e) => e.type === "assistant_message" ? [e.message] : [])
  if (result !== undefined) {
    const inputSet = new Set<Message>(input ?? [])
    for (const message of assistantEvents) {
      const count = result.messages.filter((m) => m === message).length
      if (count !== 1) add(1, `an assistant message of the run appears ${count} times in the transcript`)
    }
    const emitted = new Set<AssistantMessage>(assistantEvents)
    for (const message of result.messages) {
      if (message.role === "assistant" && !inputSet.has(message) && !emitted.has(message)) {
        add(1, "the transcript holds an assistant message that no assistant_message event announced")
      }
    }
  }
  for (const [i, request] of (requests ?? []).entries()) {
    const seen = new Set<Message>()
    for (const message of request.messages) {
      if (message.role === "assistant" && seen.has(message)) add(1, `request #${i + 1} repeats an assistant message`)
      seen.add(message)
    }
  }

  // Invariant 2: pairing in every request and in the returned transcript; events agree.
  if (result !== undefined) {
    for (const v of pairingViolations(result.messages)) add(2, `result transcript: ${v}`)
  }
  for (const [i, request] of (requests ?? []).entries()) {
    for (const v of pairingViolations(request.messages)) add(2, `request #${i + 1}: ${v}`)
  }
  const open = new Map<string, number>()
  const ended = new Map<string, number>()
  for (const event of events) {
    if (event.type === "tool_start") open.set(event.call.id, (open.get(event.call.id) ?? 0) + 1)
    if (event.type === "tool_end") ended.set(event.result.toolCallId, (ended.get(event.result.toolCallId) ?? 0) + 1)
  }
  for (const [id, n] of open) {
    if ((ended.get(id) ?? 0) < n) add(2, `tool call "${id}" started but has no tool_end event`)
  }
  const callsOfRun = new Map<string, number>()
  for (const message of assistantEvents) {
    for (const call of toolCallsOf(message)) callsOfRun.set(call.id, (callsOfRun.get(call.id) ?? 0) + 1)
  }
  for (const [id, n] of ended) {
    const made = callsOfRun.get(id) ?? 0
    if (n !== made) add(2, `tool call "${id}" has ${n} tool_end event(s) for ${made} call(s)`)
  }
  for (const [id, n] of callsOfRun) {
    if (!ended.has(id)) add(2, `tool call "${id}" (made ${n} time(s)) has no tool_end event`)
  }

  // Consistency.
  if (result !== undefined) {
    if (requests !== undefined && requests.length !== result.steps) {
      add("consistency", `the result counts ${result.steps} steps, the model saw ${requests.length} requests`)
    }
    if (result.reason === "error" && (result.error === undefined || result.error.length === 0)) {
      add("consistency", "the run ended with reason error but gives no error message")
    }
    if (input !== undefined && result.messages.length > 0) {
      const kept = input.filter((m) => m.role !== "toolResult")
      const leading = result.messages.filter((m) => m.role !== "toolResult").slice(0, kept.length)
      if (kept.some((m, i) => leading[i] !== m)) add("consistency", "the transcript does not begin with the input")
    }
  }
  return violations
}
