import { assert } from "@effect/vitest"
import type { LoopEvent, Message, ToolResultMessage } from "@agentloop/core"
import type { ScriptedRun } from "@agentloop/testkit"

/** Asserts the run kept every invariant. */
export const assertSound = (run: Pick<ScriptedRun, "violations">) => assert.deepStrictEqual(run.violations, [])

export const results = (messages: ReadonlyArray<Message>): Array<ToolResultMessage> =>
  messages.filter((m): m is ToolResultMessage => m.role === "toolResult")

export const textOf = (result: ToolResultMessage): string =>
  result.content.map((c) => (c.type === "text" ? c.text : "")).join("")

export const eventTypes = (events: ReadonlyArray<LoopEvent>): Array<string> => events.map((e) => e.type)

export const roles = (messages: ReadonlyArray<Message>): Array<string> => messages.map((m) => m.role)
