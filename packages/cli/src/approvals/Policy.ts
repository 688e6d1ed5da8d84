/**
 * The approval policy of an in-memory run: the permission gate (`Gate.ts`), then the terminal's
 * question (`Question.ts`) for a call the gate leaves to the user. Without a terminal to ask in,
 * such a call is denied with a reason that says so. Every decision is recorded in the session with
 * who (or which rule, or mode) decided. (A durable run puts the same gate in its policy and asks
 * the same question when its journal asks: internal/DurableEngine.ts.)
 *
 * @since 0.1.0
 */
import { deny } from "@agentloop/core"
import type { ToolPolicy } from "@agentloop/core"
import { Effect } from "effect"
import type { Duration } from "effect"
import type { Style } from "../Style.ts"
import { denialRecord, denialText } from "./Denial.ts"
import type { Denial } from "./Denial.ts"
import { gateCall } from "./Gate.ts"
import type { ApprovalRecord, Permissions } from "./Gate.ts"
import { makeTerminalQuestion } from "./Question.ts"

/**
 * What the approval policy needs.
 *
 * @since 0.1.0
 * @category models
 */
export interface ApprovalOptions {
  readonly permissions: Permissions
  /** Asks a question on the terminal and returns the answer line (`undefined`: none possible). */
  readonly ask: ((question: string) => Effect.Effect<string | undefined>) | undefined
  readonly print: (text: string) => Effect.Effect<void>
  readonly record: (record: ApprovalRecord) => Effect.Effect<void>
  readonly style: Style
  /** A question not answered within this time is answered denied (`--approval-timeout`). Default: no limit. */
  readonly timeout?: Duration.Duration | undefined
}

/**
 * The session's approval policy (see the module's description).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeApprovalPolicy = (options: ApprovalOptions): Effect.Effect<ToolPolicy> =>
  Effect.gen(function*() {
    const { permissions, ask } = options
    const question = ask === undefined ?
      undefined :
      yield* makeTerminalQuestion({
        permissions,
        read: ask,
        print: options.print,
        record: options.record,
        style: options.style
      })
    const noTerminal = (call: { readonly toolCallId: string; readonly name: string; readonly askedAt?: number }) => {
      const denial: Denial = { by: "no-terminal" }
      return Effect.as(options.record(denialRecord(call, denial)), deny(denialText(denial)))
    }
    return (call, definition) =>
      Effect.gen(function*() {
        const gate = yield* gateCall(permissions, call, definition, options.record)
        if (gate._tag === "decided") return gate.decision
        // (the call's result line shows the denial and its reason: one line, nothing printed here)
        if (question === undefined) return yield* noTerminal({ toolCallId: call.id, name: call.name })
        const answer = yield* question(call, definition, { timeout: options.timeout })
        if (answer._tag === "Decided") return answer.decision
        return yield* noTerminal({ toolCallId: call.id, name: call.name, askedAt: answer.askedAt })
      })
  })
