/**
 * Small pure pieces of the ground floor, shared by the vocabulary modules and the engine: how a
 * failure reads, durations and usage sums, the mark a callback sink carries.
 */
import { Cause, Duration, Inspectable, Option } from "effect"
import type { Context } from "effect"
import type { LoopEvent } from "../../LoopEvent.ts"
import type { Usage } from "../../Message.ts"

/** A tagged error without a message, in words: its tag and its fields (`NotFound {"path":"a"}`). */
const describeTagged = (u: object): string | undefined => {
  const tag = (u as { readonly _tag?: unknown })._tag
  if (typeof tag !== "string") return undefined
  const fields: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(u)) {
    if (key !== "_tag" && key !== "message" && key !== "stack" && key !== "name") fields[key] = value
  }
  if (Object.keys(fields).length === 0) return tag
  const text = Inspectable.toStringUnknown(fields, 0)
  return `${tag} ${text.length > 300 ? `${text.slice(0, 297)}...` : text}`
}

/** Readable text for a failure value: the message of an error, never its stack. */
export const describeFailure = (u: unknown): string => {
  if (typeof u === "object" && u !== null) {
    const message = (u as { readonly message?: unknown }).message
    if (typeof message === "string" && message.length > 0) return message
    return describeTagged(u) ?? (u instanceof Error ? u.name : Inspectable.toStringUnknown(u, 0))
  }
  return Inspectable.toStringUnknown(u, 0)
}

/** The failures and defects of a cause, as readable text. */
export const describeCause = (cause: Cause.Cause<unknown>): string => {
  const texts: Array<string> = []
  for (const reason of cause.reasons) {
    if (reason._tag === "Fail") texts.push(describeFailure(reason.error))
    else if (reason._tag === "Die") texts.push(describeFailure(reason.defect))
  }
  return texts.length > 0 ? texts.join("; ") : "interrupted"
}

/** `u` as a positive `Duration`, or `undefined` when it is not one (the run options' time limits). */
export const positiveDuration = (u: unknown): Duration.Duration | undefined => {
  const duration = Duration.fromInput(u as Duration.Input)
  return Option.isSome(duration) && Duration.isGreaterThan(duration.value, Duration.zero) ? duration.value : undefined
}

/** A usage total being summed: every count present, `cost` once one was reported. */
export interface UsageTotal {
  input: number
  output: number
  cacheRead: number
  cacheWrite: number
  cost?: number
}

/** Adds `usage` into `total` (in place; a new total when there is none yet), or leaves it as it is. */
export const addUsageInto = (total: UsageTotal | undefined, usage: Usage | undefined): UsageTotal | undefined => {
  if (usage === undefined) return total
  const sum = total ?? { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }
  sum.input += usage.input
  sum.output += usage.output
  sum.cacheRead += usage.cacheRead ?? 0
  sum.cacheWrite += usage.cacheWrite ?? 0
  if (usage.cost !== undefined) sum.cost = (sum.cost ?? 0) + usage.cost
  return sum
}

/**
 * The usage of the sub-agent run a tool result's `details` carry (`{ subAgent: { usage } }`, see
 * SubAgent.ts), to add to the parent run's usage; `undefined` for any other details.
 */
export const subAgentUsageOf = (details: unknown): Usage | undefined => {
  if (typeof details !== "object" || details === null) return undefined
  const run: unknown = (details as { readonly subAgent?: unknown }).subAgent
  if (typeof run !== "object" || run === null) return undefined
  const usage: unknown = (run as { readonly usage?: unknown }).usage
  if (typeof usage !== "object" || usage === null) return undefined
  const { input, output } = usage as { readonly input?: unknown; readonly output?: unknown }
  return typeof input === "number" && typeof output === "number" ? usage as Usage : undefined
}

/**
 * Set on the service of `callbackSinkLayer`: its callback and the context its effects run with, so
 * the loop's sink guard can call the callback itself (an event costs a function call instead of
 * two effects: the guard builds every event's effect right before running it, so calling the
 * callback then is the same).
 */
export const sinkCallback: unique symbol = Symbol.for("@agentloop/core/internal/sinkCallback")

/** What `sinkCallback` holds. */
export interface SinkCallback {
  readonly onEvent: (event: LoopEvent) => unknown
  readonly context: Context.Context<never>
}
