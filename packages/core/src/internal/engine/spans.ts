/**
 * The spans of a traced run, in one place: their names, kinds and attributes (OpenTelemetry's GenAI
 * conventions beside agentloop's own; see Tracing.ts for the list). The engine calls these only when
 * a tracing backend is installed.
 */
import { Effect } from "effect"
import type { AssistantMessage, ToolCall, ToolResultMessage, Usage } from "../../Message.ts"
import type { Model, ModelDescription } from "../../Model.ts"
import type { ApprovalOutcome } from "../../RunJournal.ts"
import type { AgentTraceInfo } from "../../Tracing.ts"
import type { UsageTotal } from "../rules/common.ts"
import type { TurnOutcome } from "./turn.ts"

type Attributes = Record<string, unknown>

/** What the model says it is; nothing when it does not say, or its `describe` throws. */
export const describeModel = (model: typeof Model.Service): ModelDescription | undefined => {
  try {
    const description = model.describe?.()
    return typeof description?.provider === "string" && typeof description.model === "string"
      ? description
      : undefined
  } catch {
    return undefined
  }
}

const modelAttributes = (model: ModelDescription | undefined): Attributes =>
  model === undefined ? {} : { "gen_ai.provider.name": model.provider, "gen_ai.request.model": model.model }

/**
 * Usage as the conventions count it: `gen_ai.usage.input_tokens` includes the tokens read from and
 * written to the provider's cache (agentloop's `input` does not), the cache parts also on their own.
 */
const usageAttributes = (usage: Usage | UsageTotal): Attributes => ({
  "gen_ai.usage.input_tokens": usage.input + (usage.cacheRead ?? 0) + (usage.cacheWrite ?? 0),
  "gen_ai.usage.output_tokens": usage.output,
  ...(usage.cacheRead === undefined ? {} : { "gen_ai.usage.cache_read.input_tokens": usage.cacheRead }),
  ...(usage.cacheWrite === undefined ? {} : { "gen_ai.usage.cache_creation.input_tokens": usage.cacheWrite })
})

/** A stop reason as the conventions' finish reasons spell it (`toolUse` is OpenAI's `tool_calls`). */
const finishReason = (stopReason: AssistantMessage["stopReason"]): string =>
  stopReason === "toolUse" ? "tool_calls" : stopReason

/** The run's span, `invoke_agent {agent}`: its name and its attributes at the start. */
export const runSpan = (agent: AgentTraceInfo, model: ModelDescription | undefined) =>
  ({
    name: agent.name === undefined ? "invoke_agent" : `invoke_agent ${agent.name}`,
    options: {
      kind: "internal",
      attributes: {
        "agentloop.span": "agentloop.run",
        "gen_ai.operation.name": "invoke_agent",
        ...(agent.name === undefined ? {} : { "gen_ai.agent.name": agent.name }),
        ...(agent.conversationId === undefined ? {} : { "gen_ai.conversation.id": agent.conversationId }),
        ...modelAttributes(model)
      }
    }
  }) as const

/** The run's attributes at its end: how it ended, its steps and usage. */
export const runEndAttributes = (
  outcome: { readonly reason: string; readonly errorReason?: string | undefined },
  steps: number,
  usage: UsageTotal | undefined
): Attributes => ({
  "agentloop.reason": outcome.reason,
  "agentloop.steps": steps,
  ...(outcome.reason === "error" ? { "error.type": outcome.errorReason ?? "_OTHER" } : {}),
  ...(usage === undefined ? {} : {
    "agentloop.usage.input": usage.input,
    "agentloop.usage.output": usage.output,
    ...usageAttributes(usage)
  })
})

/** Turn `step` as the span `chat {model}`, with what its outcome says at its end. */
export const traceTurn = (
  turn: Effect.Effect<TurnOutcome>,
  model: typeof Model.Service,
  step: number
): Effect.Effect<TurnOutcome> => {
  const described = describeModel(model)
  return turn.pipe(
    Effect.tap((outcome) => Effect.annotateCurrentSpan(turnEndAttributes(outcome))),
    Effect.withSpan(described === undefined ? "chat" : `chat ${described.model}`, {
      kind: "client",
      attributes: {
        "agentloop.span": "agentloop.turn",
        "agentloop.step": step,
        "gen_ai.operation.name": "chat",
        ...modelAttributes(described)
      }
    })
  )
}

const turnEndAttributes = (outcome: TurnOutcome): Attributes => {
  if (outcome._tag === "Ended") {
    const { errorReason, reason } = outcome.outcome
    return { "agentloop.reason": reason, ...(reason === "error" ? { "error.type": errorReason ?? "_OTHER" } : {}) }
  }
  const { message } = outcome
  return {
    "agentloop.stop_reason": message.stopReason,
    "gen_ai.response.finish_reasons": [finishReason(message.stopReason)],
    ...(message.model === undefined ? {} : { "gen_ai.response.model": message.model }),
    ...(message.usage === undefined ? {} : usageAttributes(message.usage))
  }
}

/**
 * Why a result is an error, as a short class (`error.type`): a skipped call's reason (`denied`,
 * `aborted`, ...), `timeout`, `interrupted`, `failed` (the tool failed), `defect` (it crashed),
 * `_OTHER` for an error result the tool gave itself.
 */
const errorTypeOf = (result: ToolResultMessage): string => {
  const details = result.details
  if (typeof details !== "object" || details === null) return "_OTHER"
  const d = details as Record<string, unknown>
  if (d["skipped"] === true && typeof d["reason"] === "string") return d["reason"]
  if (d["timedOut"] === true) return "timeout"
  if (d["interrupted"] === true) return "interrupted"
  if (d["defect"] === true) return "defect"
  if (d["failed"] === true) return "failed"
  return "_OTHER"
}

/**
 * Call `call` as the span `execute_tool {tool}`; `result` reads its result once `answered` ends (a call
 * stopped from outside ends its span interrupted, before the batch answers it).
 */
export const traceCall = (
  call: ToolCall,
  agent: AgentTraceInfo,
  answered: Effect.Effect<unknown>,
  result: () => ToolResultMessage | undefined
): Effect.Effect<unknown> =>
  answered.pipe(
    Effect.tap(() => {
      const answer = result()
      if (answer === undefined) return Effect.void
      return Effect.annotateCurrentSpan(
        answer.isError ?
          { "agentloop.tool.outcome": "error", "error.type": errorTypeOf(answer) } :
          { "agentloop.tool.outcome": "ok" }
      )
    }),
    Effect.withSpan(`execute_tool ${call.name}`, {
      kind: "internal",
      attributes: {
        "agentloop.span": "agentloop.tool",
        "agentloop.tool.name": call.name,
        "agentloop.tool.call_id": call.id,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
        ...(agent.name === undefined ? {} : { "gen_ai.agent.name": agent.name })
      }
    })
  )

/** The wait for the answer to call `call`'s approval request, as the span `agentloop.approval`. */
export const traceApproval = (call: ToolCall, asked: Effect.Effect<ApprovalOutcome>): Effect.Effect<ApprovalOutcome> =>
  asked.pipe(
    Effect.tap((outcome) =>
      Effect.annotateCurrentSpan(
        outcome._tag === "Aborted" ?
          { "agentloop.approval.outcome": "aborted" } :
          {
            "agentloop.approval.outcome": outcome.answer.approved ? "approved" : "denied",
            "agentloop.approval.always": outcome.answer.always === true
          }
      )
    ),
    Effect.withSpan("agentloop.approval", {
      kind: "internal",
      attributes: {
        "agentloop.span": "agentloop.approval",
        "agentloop.tool.name": call.name,
        "agentloop.tool.call_id": call.id
      }
    })
  )
