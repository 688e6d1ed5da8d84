import { makeRenderer, makeStyle, wantsColor } from "@agentloop/cli"
import type { LoopEvent } from "@agentloop/core"
import { assistant, toolCall } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect } from "effect"
import { virtualTerminal } from "./helpers/terminal.ts"

const call = toolCall("c1", "bash", { command: "npm test" })
const events: ReadonlyArray<LoopEvent> = [
  { type: "model_event", event: { type: "text_delta", delta: "Running " } },
  { type: "model_event", event: { type: "text_delta", delta: "tests." } },
  { type: "assistant_message", message: assistant("toolUse", { text: "Running tests.", calls: [call] }) },
  { type: "tool_start", call },
  { type: "tool_progress", toolCallId: "c1", progress: { stream: "stdout", text: "ok 1\nok 2\n" } },
  {
    type: "tool_end",
    result: {
      role: "toolResult",
      toolCallId: "c1",
      toolName: "bash",
      content: [{ type: "text", text: "boom\n[Command exited with code 1.]" }],
      details: { exitCode: 1, signal: null, timedOut: false, outputLines: 2, outputBytes: 10 },
      isError: true
    }
  },
  { type: "turn_end", reason: "error", steps: 1, error: "gave up" }
]

const failed = (events[5] as Extract<LoopEvent, { type: "tool_end" }>).result

const renderAll = (color: boolean) =>
  Effect.scoped(Effect.gen(function*() {
    let out = ""
    const renderer = yield* makeRenderer({ write: (t) => void (out += t), style: makeStyle(color), live: false })
    for (const event of events) yield* renderer.render(event)
    return out
  }))

describe("renderer", () => {
  it.effect("plain output: streamed text, tool start, output lines, a summarised result, the end", () =>
    Effect.map(renderAll(false), (out) =>
      assert.strictEqual(
        out.replace(/ \d+\.\ds/g, " 0.0s"),
        [
          "assistant Running tests.",
          "▶ bash npm test",
          "  │ ok 1",
          "  │ ok 2",
          "✗ bash npm test 0.0s  exit 1 · 2 lines, 10 bytes",
          "■ run ended: error after 1 step(s) — gave up",
          ""
        ].join("\n")
      )))

  it.effect("colour when asked: errors in red", () =>
    Effect.map(renderAll(true), (out) => {
      assert.include(out, "\u001b[31m✗\u001b[0m")
      assert.include(out, "\u001b[31m■ run ended: error")
    }))

  it.effect("approval requests and steering messages get a line each", () =>
    Effect.scoped(Effect.gen(function*() {
      let out = ""
      const renderer = yield* makeRenderer({ write: (t) => void (out += t), style: makeStyle(false), live: false })
      yield* renderer.render({ type: "approval_request", call, answer: Deferred.makeUnsafe() })
      yield* renderer.render({ type: "user_message", message: { role: "user", content: "use tabs" }, kind: "steering" })
      assert.strictEqual(out, "? bash npm test is waiting for approval\nsteering use tabs\n")
    })))

  it("colour only on a terminal without NO_COLOR or TERM=dumb", () => {
    assert.isTrue(wantsColor(true, {}))
    assert.isFalse(wantsColor(false, {}))
    assert.isFalse(wantsColor(undefined, {}))
    assert.isFalse(wantsColor(true, { NO_COLOR: "1" }))
    assert.isFalse(wantsColor(true, { TERM: "dumb" }))
  })
  it.effect(
    "on a terminal the status line shows the running calls, then the wait for the model, with the context the last " +
      "request filled of the window; the end of the run clears it",
    () =>
      Effect.gen(function*() {
        let out = ""
        let window: number | undefined = 200_000
        // the screen's last row with something on it (the status line, when one is shown)
        const status = () =>
          Effect.promise(async () => {
            const vt = virtualTerminal(120, 30)
            await vt.feed(out)
            return (vt.screen().filter((row) => row.trim().length > 0).at(-1) ?? "").replace(/\d+\.\ds/g, "0.0s")
          })
        yield* Effect.scoped(Effect.gen(function*() {
          const renderer = yield* makeRenderer({
            write: (t) => void (out += t),
            style: makeStyle(false),
            live: true,
            columns: 120,
            contextWindow: () => window
          })
          const first = { ...assistant("toolUse", { calls: [call] }), usage: { input: 12_000, output: 345 } }
          yield* renderer.render({ type: "assistant_message", message: first })
          yield* renderer.render({ type: "tool_start", call })
          assert.match(yield* status(), /bash npm test 0\.0s · context: 12\.3k of 200\.0k \(6%\)$/)
          yield* renderer.render({ type: "tool_end", result: failed })
          assert.match(yield* status(), /waiting for the model 0\.0s · context: 12\.3k of 200\.0k \(6%\)$/)
          // the next answer streams: no status over it
          yield* renderer.render({ type: "model_event", event: { type: "text_delta", delta: "Fixed" } })
          assert.notInclude(yield* status(), "waiting")
          const second = { ...assistant("toolUse", { calls: [call] }), usage: { input: 150_000, output: 50_000 } }
          yield* renderer.render({ type: "assistant_message", message: second })
          yield* renderer.render({ type: "tool_start", call })
          assert.match(yield* status(), /context: 200\.0k of 200\.0k \(100%\)$/)
          // no window known: no figure
          window = undefined
          yield* renderer.render({ type: "tool_end", result: failed })
          assert.match(yield* status(), /waiting for the model 0\.0s$/)
          yield* renderer.render({ type: "turn_end", reason: "stop", steps: 2 })
          assert.match(yield* status(), /^■ run ended: stop after 2 step\(s\)$/)
        }))
      })
  )
})
