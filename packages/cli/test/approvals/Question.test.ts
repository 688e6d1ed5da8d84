import { allow, decide, deny } from "@agentloop/core"
import type { ToolCall } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import type { ApprovalRecord } from "../../src/approvals/Gate.ts"
import { makePermissions } from "../../src/approvals/Gate.ts"
import { makeApprovalPolicy } from "../../src/approvals/Policy.ts"
import { makeTerminalQuestion } from "../../src/approvals/Question.ts"
import { makeStyle } from "../../src/Style.ts"

const bash = (id: string, command: string): ToolCall => ({ type: "toolCall", id, name: "bash", arguments: { command } })
const definition = { name: "bash", description: "", parameters: {} }

/** A terminal that answers with `answers` in turn (then its input ends), and what was printed and recorded. */
const terminal = (answers: ReadonlyArray<string>) => {
  const printed: Array<string> = []
  const records: Array<ApprovalRecord> = []
  const left = [...answers]
  return {
    printed,
    records,
    options: {
      permissions: makePermissions({ mode: "ask", rules: { allow: [], deny: [] } }),
      read: (prompt: string) => Effect.sync(() => (printed.push(prompt), left.shift())),
      print: (text: string) => Effect.sync(() => void printed.push(text)),
      record: (r: ApprovalRecord) => Effect.sync(() => void records.push(r)),
      style: makeStyle(false)
    }
  }
}

describe("the terminal's question, the one both engines ask", () => {
  it.effect("asked for earlier (a durable run's request): its records carry that time, its notes follow the call", () =>
    Effect.gen(function*() {
      const t = terminal(["n use pnpm"])
      yield* TestClock.adjust("1 minute")
      const ask = yield* makeTerminalQuestion(t.options)
      const answer = yield* ask(bash("c1", "npm i"), definition, { askedAt: 42, notes: ["  (answer elsewhere)"] })
      assert.deepStrictEqual(answer, {
        _tag: "Decided",
        decision: deny("the user denied this call: use pnpm"),
        always: false
      })
      assert.deepStrictEqual(t.printed.slice(0, 3), ["? bash wants to run:", "    $ npm i", "  (answer elsewhere)"])
      assert.deepStrictEqual(t.records, [
        { toolCallId: "c1", name: "bash", askedAt: 42, decision: "denied", by: "user", reason: "use pnpm" }
      ])
    }))

  it.effect("an input that ends leaves the call unanswered and records nothing (a durable run then waits)", () =>
    Effect.gen(function*() {
      const t = terminal([])
      const ask = yield* makeTerminalQuestion(t.options)
      assert.deepStrictEqual(yield* ask(bash("c1", "npm i"), definition, { askedAt: 42 }), {
        _tag: "Unanswered",
        askedAt: 42
      })
      assert.deepStrictEqual(t.records, [])
    }))

  it.effect("an earlier answer decides a later call without asking; recorded with the time it was asked for", () =>
    Effect.gen(function*() {
      const t = terminal(["a"])
      const ask = yield* makeTerminalQuestion(t.options)
      const write: ToolCall = { type: "toolCall", id: "w1", name: "write", arguments: { path: "a", content: "" } }
      const first = yield* ask(write, { name: "write", description: "", parameters: {} }, { askedAt: 1 })
      // `a` for a tool other than bash allows the whole tool: a durable run remembers it too
      assert.deepStrictEqual(first, { _tag: "Decided", decision: allow, always: true })
      const printedBefore = t.printed.length
      const second = yield* ask({ ...write, id: "w2" }, { name: "write", description: "", parameters: {} }, {
        askedAt: 2
      })
      assert.deepStrictEqual(second, { _tag: "Decided", decision: allow, always: false })
      assert.strictEqual(t.printed.length, printedBefore, "not asked")
      // the session file's line, key for key (askedAt last, as it always was)
      assert.strictEqual(
        JSON.stringify(t.records[1]),
        `{"toolCallId":"w2","name":"write","decision":"approved","by":"policy","rule":"write (session)",` +
          `"reason":"always","askedAt":2}`
      )
    }))

  it.effect("`a` for a bash call allows that command for the session, not the whole tool", () =>
    Effect.gen(function*() {
      const t = terminal(["a"])
      const ask = yield* makeTerminalQuestion(t.options)
      assert.deepStrictEqual(yield* ask(bash("c1", "npm test"), definition), {
        _tag: "Decided",
        decision: allow,
        always: false
      })
    }))

  it.effect("in memory, an input that ends at the question denies the call: no terminal, with when it was asked", () =>
    Effect.gen(function*() {
      const t = terminal([])
      yield* TestClock.adjust("3 seconds")
      const policy = yield* makeApprovalPolicy({ ...t.options, ask: t.options.read, timeout: undefined })
      const decision = yield* decide(policy, bash("c1", "npm i"), definition)
      const reason = "needs approval, but agentloop is not running in a terminal to ask in (--yes allows it)"
      assert.deepStrictEqual(decision, deny(reason))
      assert.deepStrictEqual(t.records, [
        { toolCallId: "c1", name: "bash", askedAt: 3000, decision: "denied", by: "no-terminal", reason }
      ])
    }))
})
