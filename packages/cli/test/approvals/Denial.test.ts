import { assert, describe, it } from "@effect/vitest"
import { Duration } from "effect"
import { denialFromElsewhere, denialRecord, denialText, deniedTextOf, wasDenied } from "../../src/approvals/Denial.ts"
import type { Denial } from "../../src/approvals/Denial.ts"

const call = { toolCallId: "c1", name: "bash" }
const tenMinutes = Duration.minutes(10)

describe("a denial: who denied, the user's reason, and the text the model is sent, built in one place", () => {
  it("the model is sent the words it has always been sent, for every kind of denial", () => {
    const texts: Array<[Denial, string]> = [
      [{ by: "user" }, "the user denied this call"],
      [{ by: "user", reason: "use pnpm" }, "the user denied this call: use pnpm"],
      [{ by: "remote", reason: "use the other file" }, "the user denied this call: use the other file"],
      [{ by: "timeout", timeout: tenMinutes }, "no answer to the approval request within 10m"],
      [
        { by: "rule", rule: "bash(rm *)", source: ".agentloop/config.json" },
        "denied by the permission rule bash(rm *)"
      ],
      [{ by: "no-terminal" }, "needs approval, but agentloop is not running in a terminal to ask in (--yes allows it)"]
    ]
    for (const [denial, text] of texts) assert.strictEqual(denialText(denial), text)
    assert.match(denialText({ by: "mode", mode: "read-only" }), /^the session is in read-only mode \(plan\)/)
  })

  it("the session records the user's own reason apart from the model's text, in the fields and order it had", () => {
    const asked = { ...call, askedAt: 5 }
    assert.strictEqual(
      JSON.stringify(denialRecord(asked, { by: "user", reason: "use pnpm" })),
      `{"toolCallId":"c1","name":"bash","askedAt":5,"decision":"denied","by":"user","reason":"use pnpm"}`
    )
    assert.strictEqual(
      JSON.stringify(denialRecord(asked, { by: "user" })),
      `{"toolCallId":"c1","name":"bash","askedAt":5,"decision":"denied","by":"user"}`
    )
    assert.strictEqual(
      JSON.stringify(denialRecord(call, { by: "rule", rule: "bash(rm *)", source: ".agentloop/config.json" })),
      `{"toolCallId":"c1","name":"bash","decision":"denied","by":"rule",` +
        `"rule":"bash(rm *) (.agentloop/config.json)","reason":"denied by the permission rule bash(rm *)"}`
    )
    assert.deepStrictEqual(Object.keys(denialRecord(call, { by: "mode", mode: "read-only" })), [
      "toolCallId",
      "name",
      "decision",
      "by",
      "mode",
      "reason"
    ])
    assert.deepStrictEqual(denialRecord(asked, { by: "timeout", timeout: tenMinutes }), {
      ...asked,
      decision: "denied",
      by: "timeout",
      reason: "no answer to the approval request within 10m"
    })
  })

  it("a durable run's call answered outside this process: the timeout the run was given, or another terminal", () => {
    // what crosses from the other process is the text; each kind comes back as the value it was built from
    const remote: ReadonlyArray<Denial> = [
      { by: "remote" },
      { by: "remote", reason: "use the other file" },
      { by: "remote", reason: "no: the user denied this call: twice" },
      { by: "timeout", timeout: tenMinutes }
    ]
    for (const denial of remote) assert.deepStrictEqual(denialFromElsewhere(denialText(denial), tenMinutes), denial)
    // the same words with no --approval-timeout in force are someone's reason
    assert.deepStrictEqual(denialFromElsewhere("no answer to the approval request within 10m", undefined), {
      by: "remote",
      reason: "no answer to the approval request within 10m"
    })
    // worded by a program answering through @agentloop/durable: all of it is the reason; none given: none
    assert.deepStrictEqual(denialFromElsewhere("not on Fridays", tenMinutes), {
      by: "remote",
      reason: "not on Fridays"
    })
    assert.deepStrictEqual(denialFromElsewhere(undefined, tenMinutes), { by: "remote" })
    // `agentloop approve RUN CALL n` with no reason is recorded as the terminal's `n` is: with no reason
    assert.deepStrictEqual(denialRecord(call, denialFromElsewhere("the user denied this call", undefined)), {
      ...call,
      decision: "denied",
      by: "remote"
    })
  })

  it("a denied result is told from others by core's details; its text is the one the model was sent", () => {
    const result = (details: unknown) => ({
      role: "toolResult" as const,
      toolCallId: "c1",
      toolName: "bash",
      content: [],
      isError: true,
      details
    })
    const denied = result({ skipped: true, reason: "denied", denial: "the user denied this call: no" })
    assert.isTrue(wasDenied(denied))
    assert.strictEqual(deniedTextOf(denied), "the user denied this call: no")
    assert.isTrue(wasDenied(result({ skipped: true, reason: "denied" })))
    assert.isUndefined(deniedTextOf(result({ skipped: true, reason: "denied" })))
    assert.isFalse(wasDenied(result({ skipped: true, reason: "aborted" })))
    assert.isFalse(wasDenied(result(undefined)))
    assert.isUndefined(deniedTextOf(result({ exitCode: 1 })))
  })
})
