/**
 * The permission gate: a session's permission mode and rules (`Permissions.ts`), and what they
 * decide about a call before anyone is asked. Every engine (in memory, durable) puts this gate
 * before its question, and every decision it takes is recorded with which rule or mode took it.
 *
 * @since 0.1.0
 */
import { allow, deny } from "@agentloop/core"
import type { ApprovalRecord as SessionApprovalRecord, PolicyDecision, ToolCall, ToolDefinition } from "@agentloop/core"
import { Effect } from "effect"
import type { CliError } from "../CliError.ts"
import { checkRules, EDIT_TOOLS } from "../Permissions.ts"
import type { PermissionMode, PermissionRule, PermissionRules } from "../Permissions.ts"
import { denialRecord, denialText } from "./Denial.ts"
import type { Denial } from "./Denial.ts"

/**
 * One decision, as recorded in the session: the fields of core's `ApprovalRecord` (the `approval`
 * record) that the policy supplies; the writer adds `type` and `at`.
 *
 * @since 0.1.0
 * @category models
 */
export type ApprovalRecord = Omit<SessionApprovalRecord, "type" | "at">

/**
 * A session's permissions: the mode (switchable while the session runs), the rules of the config
 * files, the rules the session's answers added, and where a saved rule goes.
 *
 * @since 0.1.0
 * @category models
 */
export interface Permissions {
  mode: PermissionMode
  readonly configured: PermissionRules
  /** Rules added by `a` / `p` answers (each also recorded), for the rest of the session. */
  readonly session: Array<PermissionRule>
  /** Saves a rule to the project's config (`a!`, `p!`); returns the file. Undefined: saving is not offered. */
  readonly save: ((rule: string) => Effect.Effect<string, CliError>) | undefined
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const makePermissions = (options: {
  readonly mode: PermissionMode
  readonly rules: PermissionRules
  readonly save?: ((rule: string) => Effect.Effect<string, CliError>) | undefined
}): Permissions => ({ mode: options.mode, configured: options.rules, session: [], save: options.save })

/**
 * The mode Shift+Tab switches to in `chat`: `ask` → `accept-edits` → `read-only` → `ask`. It never
 * goes to `yes` (only `--yes`, `--mode yes` or `/mode yes` do); from `yes` it goes to `ask`.
 *
 * @since 0.1.0
 * @category approvals
 */
export const nextMode = (mode: PermissionMode): PermissionMode =>
  mode === "ask" ? "accept-edits" : mode === "accept-edits" ? "read-only" : "ask"

/** The rules in force now: the config files' and the session's. */
const rulesNow = (p: Permissions): PermissionRules => ({
  allow: [...p.configured.allow, ...p.session],
  deny: p.configured.deny
})

const describeRule = (rule: PermissionRule) => `${rule.text} (${rule.source})`

/**
 * What the system prompt says of the mode, for the modes the model must know about (read-only:
 * it plans instead of changing things); empty for the others.
 *
 * @since 0.1.0
 * @category approvals
 */
export const modeSection = (mode: PermissionMode): string =>
  mode === "read-only" ?
    "\n\n# Permission mode: read-only (plan)\n\nOnly read-only tools run now (read, grep, find, ls); calls of other " +
    "tools are refused. Investigate, then describe the plan or the change you would make; the user switches " +
    "modes to let changes run." :
    ""

/**
 * What the mode and the rules decide about a call before anyone is asked (the decision is
 * recorded), or that it must be asked (with why, when a deny rule may match).
 *
 * @since 0.1.0
 * @category approvals
 */
export type Gate =
  | { readonly _tag: "decided"; readonly decision: PolicyDecision }
  | { readonly _tag: "ask"; readonly why: string | undefined }

/**
 * The permission gate every engine puts before its question (in memory and durable runs alike):
 * a deny rule, then read-only tools (allowed, not recorded), the read-only mode, `yes`, an allow
 * rule, `accept-edits` for the workspace's writes and edits; otherwise ask.
 *
 * @since 0.1.0
 * @category approvals
 */
export const gateCall = (
  permissions: Permissions,
  call: ToolCall,
  definition: ToolDefinition | undefined,
  record: (record: ApprovalRecord) => Effect.Effect<void>
): Effect.Effect<Gate> =>
  Effect.gen(function*() {
    if (definition === undefined) return { _tag: "decided", decision: allow }
    const base = { toolCallId: call.id, name: call.name }
    const verdict = yield* Effect.promise(() => checkRules(rulesNow(permissions), call.name, call.arguments))
    const refuse = (denial: Denial) =>
      Effect.as(record(denialRecord(base, denial)), { _tag: "decided", decision: deny(denialText(denial)) } as const)
    if (verdict._tag === "denied") {
      return yield* refuse({ by: "rule", rule: verdict.rule.text, source: verdict.rule.source })
    }
    if (definition.readOnly === true) return { _tag: "decided", decision: allow }
    const mode = permissions.mode
    if (mode === "read-only") return yield* refuse({ by: "mode", mode })
    if (verdict._tag === "unsure") {
      return { _tag: "ask", why: `the deny rule ${verdict.rule.text} may match: ${verdict.why}` }
    }
    if (mode === "yes") {
      yield* record({ ...base, decision: "approved", by: "mode", mode })
      return { _tag: "decided", decision: allow }
    }
    if (verdict._tag === "allowed") {
      // an earlier "always" of the session, or a rule of a config file
      const session = verdict.rule.source === "session"
      yield* record({
        ...base,
        decision: "approved",
        by: session ? "policy" : "rule",
        rule: describeRule(verdict.rule),
        ...(session ? { reason: "always" } : {})
      })
      return { _tag: "decided", decision: allow }
    }
    if (mode === "accept-edits" && EDIT_TOOLS.has(call.name)) {
      yield* record({ ...base, decision: "approved", by: "mode", mode })
      return { _tag: "decided", decision: allow }
    }
    return { _tag: "ask", why: undefined }
  })
