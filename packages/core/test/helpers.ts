import type { LoopEvent, Message, ToolResultMessage } from "@agentloop/core"
import type { ScriptedRun } from "@agentloop/testkit"
import { assert } from "@effect/vitest"
import { Effect } from "effect"

/** Asserts the run kept every invariant. */
export const assertSound = (run: Pick<ScriptedRun, "violations">) => assert.deepStrictEqual(run.violations, [])

export const results = (messages: ReadonlyArray<Message>): Array<ToolResultMessage> =>
  messages.filter((m): m is ToolResultMessage => m.role === "toolResult")

export const textOf = (result: ToolResultMessage): string =>
  result.content.map((c) => (c.type === "text" ? c.text : "")).join("")

export const eventTypes = (events: ReadonlyArray<LoopEvent>): Array<string> => events.map((e) => e.type)

export const roles = (messages: ReadonlyArray<Message>): Array<string> => messages.map((m) => m.role)

/**
 * Gives every fiber that can make progress the chance to: yields to the scheduler `turns` times
 * (each yield lets every ready fiber run until it blocks or yields in turn). Use it before
 * asserting that something did NOT happen, so that a wrong implementation has had every chance to
 * do it first. The tools in these tests are pure effects (no real I/O, no timers), so every step
 * they can take without the test's help takes a few scheduler turns at most; 100 is far beyond it.
 */
export const settle = (turns = 100): Effect.Effect<void> => Effect.repeat(Effect.yieldNow, { times: turns })
