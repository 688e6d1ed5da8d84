/**
 * Approvals in the terminal, under the session's permission mode and rules (`Permissions.ts`).
 * Read-only tools run; a call the mode or a rule does not decide (`write`, `edit`, `bash`, MCP
 * tools) asks, showing what it will do: the command of a bash call, the diff of an edit, the path
 * and first lines of a write. Answers: `y` (yes), `n` (no; text after it is a reason the model
 * sees), `a` (always: for a bash call, this command; for another tool, the tool), `p` (bash: every
 * command starting with the same words), and `a!` / `p!` save that rule to the project's
 * `.agentloop/config.json`. Without a terminal to ask in, such calls are denied with a reason that
 * says so. Every decision is recorded in the session with who (or which rule, or mode) decided.
 *
 * The code lives in `approvals/`: the gate (`Gate.ts`), the one question every engine asks
 * (`Question.ts`), the structured denial (`Denial.ts`) and the in-memory policy (`Policy.ts`).
 * This module keeps the package's public names where they were.
 *
 * @since 0.1.0
 */
export { approvalTimeoutReason, NO_TERMINAL_REASON, READ_ONLY_REASON } from "./approvals/Denial.ts"
export { gateCall, makePermissions, modeSection, nextMode } from "./approvals/Gate.ts"
export type { ApprovalRecord, Gate, Permissions } from "./approvals/Gate.ts"
export { makeApprovalPolicy } from "./approvals/Policy.ts"
export type { ApprovalOptions } from "./approvals/Policy.ts"
export { addAnswerRules, parseAnswer, previewCall, questionFor } from "./approvals/Question.ts"
export type { Question } from "./approvals/Question.ts"
