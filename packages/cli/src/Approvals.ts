/**
 * Approvals in the terminal. Read-only tools run; every other call (`write`, `edit`, `bash`, MCP
 * tools) asks, showing what it will do: the command of a bash call, the diff of an edit, the
 * path and first lines of a write. Answers: `y` (yes), `n` (no; text after it is a reason the
 * model sees), `a` (always, for this tool, for the rest of the session). `--yes` allows
 * everything; without a terminal to ask on and without `--yes`, such calls are denied with a
 * reason that says so.
 *
 * @since 0.1.0
 */
import { allow, deny } from "@agentloop/core"
import type { ApprovalRecord as SessionApprovalRecord, ToolCall, ToolPolicy } from "@agentloop/core"
import { Clock, Duration, Effect, Option, Semaphore } from "effect"
import { stripControl } from "./Sanitize.ts"
import type { Style } from "./Style.ts"

/**
 * The reason given to the model when a call needs approval and nobody can be asked.
 *
 * @since 0.1.0
 * @category constants
 */
export const NO_TERMINAL_REASON = "this call needs the user's approval, and agentloop is not running in a terminal " +
  "where it could ask (run with --yes to allow such calls)"

/**
 * One decision, as recorded in the session: the fields of core's `ApprovalRecord` (the `approval`
 * record) that the policy supplies; the writer adds `type` and `at`.
 *
 * @since 0.1.0
 * @category models
 */
export type ApprovalRecord = Omit<SessionApprovalRecord, "type" | "at">

/**
 * What the approval policy needs.
 *
 * @since 0.1.0
 * @category models
 */
export interface ApprovalOptions {
  readonly yes: boolean
  /** Asks a question on the terminal and returns the answer line (`undefined`: none possible). */
  readonly ask: ((question: string) => Effect.Effect<string | undefined>) | undefined
  readonly print: (text: string) => Effect.Effect<void>
  readonly record: (record: ApprovalRecord) => Effect.Effect<void>
  readonly style: Style
  /** Tools answered `a` so far (kept for the session, across runs). */
  readonly always: Set<string>
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
 * Reads an answer: `y`/`yes`, `a`/`always`, `n`/`no` followed by an optional reason. Anything
 * else is `undefined` (ask again).
 *
 * @since 0.1.0
 * @category approvals
 */
export const parseAnswer = (
  line: string
):
  | { readonly kind: "yes" }
  | { readonly kind: "always" }
  | { readonly kind: "no"; readonly reason: string | undefined }
  | undefined =>
{
  // a reason is plain text: no control sequences in the session file nor in what the model sees
  const text = stripControl(line).trim()
  const match = /^(y|yes|a|always|n|no)\b[\s:,-]*(.*)$/is.exec(text)
  if (match === null) return undefined
  const word = match[1]!.toLowerCase()
  if (word === "y" || word === "yes") return match[2]!.length === 0 ? { kind: "yes" } : undefined
  if (word === "a" || word === "always") return match[2]!.length === 0 ? { kind: "always" } : undefined
  return { kind: "no", reason: match[2]!.trim().length > 0 ? match[2]!.trim() : undefined }
}

/**
 * The session's approval policy (see the module's description).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeApprovalPolicy = (options: ApprovalOptions): Effect.Effect<ToolPolicy> =>
  Effect.map(Semaphore.make(1), (lock): ToolPolicy => (call, definition) => {
    if (definition === undefined || definition.readOnly === true) return allow
    const { style } = options
    const base = { toolCallId: call.id, name: call.name }
    if (options.yes) return Effect.as(options.record({ ...base, decision: "approved", by: "policy" }), allow)
    if (options.always.has(call.name)) {
      return Effect.as(options.record({ ...base, decision: "approved", by: "policy", reason: "always" }), allow)
    }
    const ask = options.ask
    if (ask === undefined) {
      return Effect.as(
        Effect.andThen(
          options.record({ ...base, decision: "denied", by: "no-terminal", reason: NO_TERMINAL_REASON }),
          options.print(style.yellow(`⊘ ${call.name} denied: no terminal to ask on (use --yes to allow)`))
        ),
        deny(NO_TERMINAL_REASON)
      )
    }
    const asker = ask
    /** Asks until the answer is one of y, n (reason), a. */
    const questionLoop = (asked: { readonly toolCallId: string; readonly name: string; readonly askedAt: number }) =>
      Effect.gen(function*() {
        while (true) {
          const line = yield* asker(`  allow? ${style.dim(`[y]es / [n]o (reason) / [a]lways for ${call.name}`)} `)
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
          if (answer.kind === "always") {
            options.always.add(call.name)
            yield* options.record({ ...asked, decision: "always", by: "user" })
            return allow
          }
          const reason = answer.reason === undefined ?
            "the user denied this call" :
            `the user denied this call: ${answer.reason}`
          yield* options.record({
            ...asked,
            decision: "denied",
            by: "user",
            ...(answer.reason === undefined ? {} : { reason: answer.reason })
          })
          return deny(reason)
        }
      })
    // one question at a time (a batch may hold several calls that ask)
    return lock.withPermits(1)(Effect.gen(function*() {
      if (options.always.has(call.name)) {
        yield* options.record({ ...base, decision: "approved", by: "policy", reason: "always" })
        return allow
      }
      yield* options.print(`${style.yellow("?")} ${style.bold(call.name)} wants to run:`)
      for (const line of previewCall(call, style)) yield* options.print(`    ${line}`)
      const asked = { ...base, askedAt: yield* Clock.currentTimeMillis }
      const timeout = options.timeout
      if (timeout === undefined) return yield* questionLoop(asked)
      // no answer in time: the question goes away (its read is interrupted) and the call is denied
      const answered = yield* Effect.timeoutOption(questionLoop(asked), timeout)
      if (Option.isSome(answered)) return answered.value
      const reason = approvalTimeoutReason(timeout)
      yield* options.record({ ...asked, decision: "denied", by: "timeout", reason })
      yield* options.print(style.yellow(`⊘ ${call.name} denied: ${reason}`))
      return deny(reason)
    }))
  })
