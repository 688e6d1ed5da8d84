/**
 * Policies and approvals: what stands between the model and side effects.
 *
 * A `ToolPolicy` is consulted before each call runs and answers `allow`, `deny` (with a reason)
 * or `ask`. A denied call is answered with a skipped result (`details: { skipped: true, reason:
 * "denied" }`) and the rest of the batch still runs. `ask` emits an `approval_request` event
 * carrying a `Deferred` that the caller completes with an `ApprovalAnswer`; the call waits for it
 * (other calls of the batch go on), and an abort while it waits pairs it like any other aborted
 * call. An answer with `always: true` is remembered for that tool for the rest of the run.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type { ToolCall } from "./Message.ts"
import type { ToolDefinition } from "./Model.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type PolicyDecision =
  | { readonly _tag: "Allow" }
  | { readonly _tag: "Deny"; readonly reason: string }
  | { readonly _tag: "Ask" }

/**
 * @since 0.1.0
 * @category constructors
 */
export const allow: PolicyDecision = { _tag: "Allow" }

/**
 * @since 0.1.0
 * @category constructors
 */
export const deny = (reason: string): PolicyDecision => ({ _tag: "Deny", reason })

/**
 * @since 0.1.0
 * @category constructors
 */
export const ask: PolicyDecision = { _tag: "Ask" }

/**
 * Decides what happens to one call before it runs. `definition` is the executor's definition of
 * the tool (undefined for an unknown tool, which the executor then answers with an error).
 *
 * @since 0.1.0
 * @category models
 */
export type ToolPolicy = (
  call: ToolCall,
  definition: ToolDefinition | undefined
) => Effect.Effect<PolicyDecision> | PolicyDecision

/**
 * The caller's answer to an `approval_request`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ApprovalAnswer {
  readonly approved: boolean
  /** Remember this answer for every later call of the same tool in this run. */
  readonly always?: boolean | undefined
  /** Why (shown to the model when the call is denied). */
  readonly reason?: string | undefined
}

/**
 * The ready-made policy: tools whose definition says `readOnly: true` (or whose name is listed)
 * run without asking; every other call asks.
 *
 * @since 0.1.0
 * @category policies
 */
export const readOnlyPolicy = (alsoReadOnly: Iterable<string> = []): ToolPolicy => {
  const names = new Set(alsoReadOnly)
  return (call, definition) => definition?.readOnly === true || names.has(call.name) ? allow : ask
}

/**
 * A policy that allows everything (the default).
 *
 * @since 0.1.0
 * @category policies
 */
export const allowAll: ToolPolicy = () => allow

/**
 * Runs a policy, which may answer with a value or an effect.
 *
 * @since 0.1.0
 * @category policies
 */
export const decide = (policy: ToolPolicy, call: ToolCall, definition: ToolDefinition | undefined) =>
  Effect.suspend(() => {
    const decision = policy(call, definition)
    return Effect.isEffect(decision) ? decision : Effect.succeed(decision)
  })
