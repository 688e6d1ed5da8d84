/**
 * Approvals in the terminal, under the session's permission mode and rules (`Permissions.ts`).
 * Read-only tools run; a call the mode or a rule does not decide (`write`, `edit`, `bash`, MCP
 * tools) asks, showing what it will do: the command of a bash call, the diff of an edit, the path
 * and first lines of a write. Answers: `y` (yes), `n` (no; text after it is a reason the model
 * sees), `a` (always: for a bash call, this command; for another tool, the tool), `p` (bash: every
 * command starting with the same words), and `a!` / `p!` save that rule to the project's
 * `.agentloop/config.json`. Without a terminal to ask on, such calls are denied with a reason that
 * says so. Every decision is recorded in the session with who (or which rule, or mode) decided.
 *
 * @since 0.1.0
 */
import { allow, deny } from "@agentloop/core"
import type {
  ApprovalRecord as SessionApprovalRecord,
  PolicyDecision,
  ToolCall,
  ToolDefinition,
  ToolPolicy
} from "@agentloop/core"
import { Clock, Duration, Effect, Option, Semaphore } from "effect"
import type { CliError } from "./CliError.ts"
import { PROJECT_CONFIG } from "./Config.ts"
import { checkRules, EDIT_TOOLS, parseRule, RuleError, suggestBashRules } from "./Permissions.ts"
import type { PermissionMode, PermissionRule, PermissionRules } from "./Permissions.ts"
import { stripControl } from "./Sanitize.ts"
import type { Style } from "./Style.ts"

/**
 * The reason given to the model when a call needs approval and nobody can be asked.
 *
 * @since 0.1.0
 * @category constants
 */
export const NO_TERMINAL_REASON =
  "needs approval, but agentloop is not running in a terminal to ask in (--yes allows it)"

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
 * The reason the model sees for a call the read-only mode refused.
 *
 * @since 0.1.0
 * @category constants
 */
export const READ_ONLY_REASON = "the session is in read-only mode (plan): only read-only tools run (read, grep, " +
  "find, ls); describe the change you would make instead, and the user can switch modes to let it run"

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
    if (verdict._tag === "denied") {
      const reason = `denied by the permission rule ${verdict.rule.text}`
      yield* record({ ...base, decision: "denied", by: "rule", rule: describeRule(verdict.rule), reason })
      return { _tag: "decided", decision: deny(reason) }
    }
    if (definition.readOnly === true) return { _tag: "decided", decision: allow }
    const mode = permissions.mode
    if (mode === "read-only") {
      yield* record({ ...base, decision: "denied", by: "mode", mode, reason: READ_ONLY_REASON })
      return { _tag: "decided", decision: deny(READ_ONLY_REASON) }
    }
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

/**
 * The question asked for a call, with the "always" choices it offers.
 *
 * @since 0.1.0
 * @category approvals
 */
export interface Question {
  readonly prompt: string
  /** What `a` adds: this bash command's rules, or the whole tool. */
  readonly always: ReadonlyArray<string>
  /** What `p` adds (bash: commands starting with the same words), when offered. */
  readonly prefix: string | undefined
}

/**
 * The question for `call`: `[y]es / [n]o (reason) / [a]lways …` with what "always" means for it.
 *
 * @since 0.1.0
 * @category approvals
 */
export const questionFor = (call: ToolCall, permissions: Permissions, style: Style): Effect.Effect<Question> =>
  Effect.gen(function*() {
    const command = call.name === "bash" && typeof call.arguments["command"] === "string" ?
      call.arguments["command"] :
      undefined
    const suggested = command === undefined ?
      undefined :
      yield* Effect.promise(() => suggestBashRules(command))
    const always = suggested === undefined ? [call.name] : suggested.exact
    const prefix = suggested?.prefix
    const choices = [
      "[y]es",
      "[n]o (reason)",
      ...(always.length === 0 ? [] : [suggested === undefined ? `[a]lways for ${call.name}` : "[a]lways this command"]),
      ...(prefix === undefined ? [] : [`[p] ${stripControl(prefix.slice("bash(".length, -2))} …`]),
      ...(permissions.save !== undefined && (always.length > 0 || prefix !== undefined) ?
        [`${
          [...(always.length > 0 ? ["a!"] : []), ...(prefix === undefined ? [] : ["p!"])].join("/")
        }: also save to ${PROJECT_CONFIG}`] :
        [])
    ]
    return { prompt: `  allow? ${style.dim(choices.join(" / "))} `, always, prefix }
  })

/**
 * Adds the rules an `a` / `p` answer asked for to the session (and, with `!`, to the project's
 * config); returns a line saying what was added, and what the record names.
 *
 * @since 0.1.0
 * @category approvals
 */
export const addAnswerRules = (
  permissions: Permissions,
  texts: ReadonlyArray<string>,
  save: boolean
): Effect.Effect<{ readonly line: string; readonly rule: string }> =>
  Effect.gen(function*() {
    for (const text of texts) {
      const rule = parseRule(text, "session")
      if (!(rule instanceof RuleError)) permissions.session.push(rule)
    }
    const list = texts.join(", ")
    if (!save || permissions.save === undefined) {
      return {
        line: `  allowed from now on: ${stripControl(list)} (until the session ends)`,
        rule: `${list} (session)`
      }
    }
    const saved: Array<string> = []
    let failure: string | undefined
    for (const text of texts) {
      const result = yield* Effect.result(permissions.save(text))
      if (result._tag === "Success") saved.push(result.success)
      else failure = result.failure.message
    }
    if (failure !== undefined) {
      return {
        line: `  allowed from now on: ${stripControl(list)} (until the session ends; not saved: ${
          stripControl(failure)
        })`,
        rule: `${list} (session)`
      }
    }
    return {
      line: `  allowed, and saved to ${saved[0] ?? "the config"}: ${stripControl(list)}`,
      rule: `${list} (${saved[0]})`
    }
  })

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
 * The reason the model sees for a call whose approval was not given in time.
 *
 * @since 0.1.0
 * @category approvals
 */
export const approvalTimeoutReason = (timeout: Duration.Duration): string =>
  `no answer to the approval request within ${Duration.format(timeout)}`

const clip = (lines: ReadonlyArray<string>, max: number) =>
  lines.length > max ? [...lines.slice(0, max), `… ${lines.length - max} more line(s)`] : lines

/**
 * What a call will do, as lines to show before asking.
 *
 * @since 0.1.0
 * @category approvals
 */
export const previewCall = (call: ToolCall, style: Style): ReadonlyArray<string> => {
  const a = call.arguments
  const str = (k: string) => (typeof a[k] === "string" ? stripControl(a[k]) : undefined)
  if (call.name === "bash" && str("command") !== undefined) {
    return clip(str("command")!.split("\n").map((l, i) => `${i === 0 ? "$" : ">"} ${l}`), 20).map(style.bold)
  }
  if (call.name === "edit" && str("path") !== undefined) {
    const removed = (str("oldText") ?? "").split("\n").map((l) => style.red(`- ${l}`))
    const added = (str("newText") ?? "").split("\n").map((l) => style.green(`+ ${l}`))
    return [
      `${style.bold(str("path")!)}${a["replaceAll"] === true ? " (every occurrence)" : ""}`,
      ...clip(removed, 20),
      ...clip(added, 20)
    ]
  }
  if (call.name === "write" && str("path") !== undefined) {
    const lines = (str("content") ?? "").split("\n")
    return [
      `${style.bold(str("path")!)} (${lines.length} line(s))`,
      ...clip(lines.map((l) => style.green(`+ ${l}`)), 12)
    ]
  }
  return clip(JSON.stringify(a, null, 2).split("\n").map(stripControl), 20)
}

/**
 * Reads an answer: `y`/`yes`, `a`/`always`, `p`/`prefix` (either with `!` to save the rule), `n`/`no`
 * followed by an optional reason. Anything else is `undefined` (ask again).
 *
 * @since 0.1.0
 * @category approvals
 */
export const parseAnswer = (
  line: string
):
  | { readonly kind: "yes" }
  | { readonly kind: "always"; readonly save: boolean }
  | { readonly kind: "prefix"; readonly save: boolean }
  | { readonly kind: "no"; readonly reason: string | undefined }
  | undefined =>
{
  // a reason is plain text: no control sequences in the session file nor in what the model sees
  const text = stripControl(line).trim()
  const choice = /^(y|yes|a|always|p|prefix)(!?)$/i.exec(text)
  if (choice !== null) {
    const word = choice[1]!.toLowerCase()
    const save = choice[2] === "!"
    if (word === "y" || word === "yes") return save ? undefined : { kind: "yes" }
    return { kind: word === "p" || word === "prefix" ? "prefix" : "always", save }
  }
  const match = /^(n|no)\b[\s:,-]*(.*)$/is.exec(text)
  if (match === null) return undefined
  return { kind: "no", reason: match[2]!.trim().length > 0 ? match[2]!.trim() : undefined }
}

/**
 * The session's approval policy (see the module's description).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeApprovalPolicy = (options: ApprovalOptions): Effect.Effect<ToolPolicy> =>
  Effect.map(Semaphore.make(1), (lock): ToolPolicy => (call, definition) =>
    Effect.gen(function*() {
      const { permissions, style } = options
      const gate = yield* gateCall(permissions, call, definition, options.record)
      if (gate._tag === "decided") return gate.decision
      const base = { toolCallId: call.id, name: call.name }
      const ask = options.ask
      if (ask === undefined) {
        // (the call's result line shows the denial and its reason: one line, nothing printed here)
        yield* options.record({ ...base, decision: "denied", by: "no-terminal", reason: NO_TERMINAL_REASON })
        return deny(NO_TERMINAL_REASON)
      }
      // one question at a time (a batch may hold several calls that ask)
      return yield* lock.withPermits(1)(Effect.gen(function*() {
        // an answer to an earlier question of the batch may have decided this one
        const again = yield* gateCall(permissions, call, definition, options.record)
        if (again._tag === "decided") return again.decision
        yield* options.print(`${style.yellow("?")} ${style.bold(call.name)} wants to run:`)
        for (const line of previewCall(call, style)) yield* options.print(`    ${line}`)
        if (again.why !== undefined) yield* options.print(style.yellow(`    (${stripControl(again.why)})`))
        const question = yield* questionFor(call, permissions, style)
        const asked = { ...base, askedAt: yield* Clock.currentTimeMillis }
        const loop = questionLoop(options, ask, question, asked)
        const timeout = options.timeout
        if (timeout === undefined) return yield* loop
        // no answer in time: the question goes away (its read is interrupted) and the call is denied
        const answered = yield* Effect.timeoutOption(loop, timeout)
        if (Option.isSome(answered)) return answered.value
        const reason = approvalTimeoutReason(timeout)
        yield* options.record({ ...asked, decision: "denied", by: "timeout", reason })
        yield* options.print(style.yellow(`⊘ ${call.name} denied: ${reason}`))
        return deny(reason)
      }))
    }))

/** Asks until the answer is one of y, n (reason), a, p (with `!`). */
const questionLoop = (
  options: ApprovalOptions,
  ask: (question: string) => Effect.Effect<string | undefined>,
  question: Question,
  asked: { readonly toolCallId: string; readonly name: string; readonly askedAt: number }
) =>
  Effect.gen(function*() {
    while (true) {
      const line = yield* ask(question.prompt)
      if (line === undefined) {
        yield* options.record({ ...asked, decision: "denied", by: "no-terminal", reason: NO_TERMINAL_REASON })
        return deny(NO_TERMINAL_REASON)
      }
      const answer = parseAnswer(line)
      if (answer === undefined) continue
      if (answer.kind === "yes") {
        yield* options.record({ ...asked, decision: "approved", by: "user" })
        return allow
      }
      if (answer.kind === "always" || answer.kind === "prefix") {
        const texts = answer.kind === "always"
          ? question.always
          : question.prefix === undefined
          ? []
          : [question.prefix]
        if (texts.length === 0) continue
        const added = yield* addAnswerRules(options.permissions, texts, answer.save)
        yield* options.print(options.style.dim(added.line))
        yield* options.record({ ...asked, decision: "always", by: "user", rule: added.rule })
        return allow
      }
      yield* options.record({
        ...asked,
        decision: "denied",
        by: "user",
        ...(answer.reason === undefined ? {} : { reason: answer.reason })
      })
      return deny(
        answer.reason === undefined ? "the user denied this call" : `the user denied this call: ${answer.reason}`
      )
    }
  })
