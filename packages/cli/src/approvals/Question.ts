/**
 * The one question put on the terminal about a call, for every engine (in memory, durable): the
 * gate is checked again (an earlier answer may have decided the call), then the call is shown (the
 * command of a bash call, the diff of an edit, the path and first lines of a write) and asked
 * about until the answer is one of `y` (yes), `n` (no; text after it is a reason the model sees),
 * `a` (always: for a bash call, this command; for another tool, the tool), `p` (bash: every command
 * starting with the same words), `a!` / `p!` (that rule, saved to the project's
 * `.agentloop/config.json`). One question at a time; each answer is recorded in the session.
 *
 * @since 0.1.0
 */
import { allow, deny } from "@agentloop/core"
import type { PolicyDecision, ToolCall, ToolDefinition } from "@agentloop/core"
import { Clock, Effect, Option, Semaphore } from "effect"
import type { Duration } from "effect"
import { PROJECT_CONFIG } from "../Config.ts"
import { parseRule, RuleError, suggestBashRules } from "../Permissions.ts"
import { stripControl } from "../Sanitize.ts"
import type { Style } from "../Style.ts"
import { denialRecord, denialText } from "./Denial.ts"
import type { Denial } from "./Denial.ts"
import { gateCall } from "./Gate.ts"
import type { ApprovalRecord, Permissions } from "./Gate.ts"

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
 * What the terminal's question needs: the session's permissions, a way to read an answer line
 * (`undefined`: no answer can come from this terminal), to print, and to record a decision.
 *
 * @since 0.1.0
 * @category models
 */
export interface TerminalQuestion {
  readonly permissions: Permissions
  readonly read: (prompt: string) => Effect.Effect<string | undefined>
  readonly print: (text: string) => Effect.Effect<void>
  readonly record: (record: ApprovalRecord) => Effect.Effect<void>
  readonly style: Style
}

/**
 * What came of asking about a call: a decision (the gate's, or the user's: `always` when the
 * user allowed the whole tool for the session), or no answer from this terminal (its input ended).
 *
 * @since 0.1.0
 * @category models
 */
export type TerminalAnswer =
  | { readonly _tag: "Decided"; readonly decision: PolicyDecision; readonly always: boolean }
  | { readonly _tag: "Unanswered"; readonly askedAt: number }

/**
 * How one call is asked about.
 *
 * @since 0.1.0
 * @category models
 */
export interface AskCall {
  /** When the call was asked for, when that was before the question (a durable run's request). */
  readonly askedAt?: number | undefined
  /** Lines shown after the call (e.g. how to answer from another terminal). */
  readonly notes?: ReadonlyArray<string> | undefined
  /** A question not answered within this time goes away and the call is denied. Default: no limit. */
  readonly timeout?: Duration.Duration | undefined
}

/**
 * Shows what a call will do: `? <tool> wants to run:`, its preview, then `notes`.
 *
 * @since 0.1.0
 * @category approvals
 */
export const showCall = (
  print: (text: string) => Effect.Effect<void>,
  style: Style,
  call: ToolCall,
  notes: ReadonlyArray<string> = []
): Effect.Effect<void> =>
  Effect.gen(function*() {
    yield* print(`${style.yellow("?")} ${style.bold(call.name)} wants to run:`)
    for (const line of previewCall(call, style)) yield* print(`    ${line}`)
    for (const note of notes) yield* print(note)
  })

/**
 * Denies a call whose question was not answered in time: recorded (by `timeout`) and said on the
 * terminal, the same whoever kept the time (the question, or a durable run's journal).
 *
 * @since 0.1.0
 * @category approvals
 */
export const denyOnTimeout = (
  options: Pick<TerminalQuestion, "print" | "record" | "style">,
  asked: { readonly toolCallId: string; readonly name: string; readonly askedAt: number },
  timeout: Duration.Duration
): Effect.Effect<PolicyDecision> =>
  Effect.gen(function*() {
    const denial: Denial = { by: "timeout", timeout }
    yield* options.record(denialRecord(asked, denial))
    yield* options.print(options.style.yellow(`⊘ ${asked.name} denied: ${denialText(denial)}`))
    return deny(denialText(denial))
  })

/**
 * The terminal's question, one call at a time (a batch may hold several calls that ask): returns
 * the function that asks about one call (see the module's description).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeTerminalQuestion = (
  options: TerminalQuestion
): Effect.Effect<
  (call: ToolCall, definition: ToolDefinition | undefined, how?: AskCall) => Effect.Effect<TerminalAnswer>
> =>
  Effect.map(Semaphore.make(1), (lock) => (call, definition, how = {}) =>
    lock.withPermits(1)(Effect.gen(function*() {
      const { permissions, style } = options
      // an answer to an earlier question may have decided this one
      const earlier = how.askedAt
      const gate = yield* gateCall(
        permissions,
        call,
        definition,
        earlier === undefined ? options.record : (r) => options.record({ ...r, askedAt: earlier })
      )
      if (gate._tag === "decided") return decided(gate.decision)
      yield* showCall(options.print, style, call, [
        ...(gate.why === undefined ? [] : [style.yellow(`    (${stripControl(gate.why)})`)]),
        ...(how.notes ?? [])
      ])
      const question = yield* questionFor(call, permissions, style)
      const asked = { toolCallId: call.id, name: call.name, askedAt: earlier ?? (yield* Clock.currentTimeMillis) }
      const loop = questionLoop(options, call, question, asked)
      const timeout = how.timeout
      if (timeout === undefined) return yield* loop
      // no answer in time: the question goes away (its read is interrupted) and the call is denied
      const answered = yield* Effect.timeoutOption(loop, timeout)
      if (Option.isSome(answered)) return answered.value
      return decided(yield* denyOnTimeout(options, asked, timeout))
    })))

const decided = (decision: PolicyDecision, always = false): TerminalAnswer => ({ _tag: "Decided", decision, always })

/** Asks until the answer is one of y, n (reason), a, p (with `!`). */
const questionLoop = (
  options: TerminalQuestion,
  call: ToolCall,
  question: Question,
  asked: { readonly toolCallId: string; readonly name: string; readonly askedAt: number }
): Effect.Effect<TerminalAnswer> =>
  Effect.gen(function*() {
    while (true) {
      const line = yield* options.read(question.prompt)
      if (line === undefined) return { _tag: "Unanswered", askedAt: asked.askedAt }
      const answer = parseAnswer(line)
      if (answer === undefined) continue
      if (answer.kind === "yes") {
        yield* options.record({ ...asked, decision: "approved", by: "user" })
        return decided(allow)
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
        // the whole tool allowed (not a bash command's rule)
        return decided(allow, answer.kind === "always" && texts.length === 1 && texts[0] === call.name)
      }
      const denial: Denial = { by: "user", reason: answer.reason }
      yield* options.record(denialRecord(asked, denial))
      return decided(deny(denialText(denial)))
    }
  })
