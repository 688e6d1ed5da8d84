/**
 * The viewer's timeline model, without a server or a browser: session lines → runs, turns, lanes,
 * totals and invariant checks.
 */
import { parseTranscript } from "@agentloop/core"
import { echoTool, runScripted, scriptedSubAgent, toolCall, turn } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { buildTimeline, parseSessionText, renderPage } from "../src/view/index.ts"
import type { Timeline } from "../src/view/index.ts"

const fixture = (name: string) =>
  readFileSync(fileURLToPath(new URL(`./fixtures/view/${name}`, import.meta.url)), "utf8")

const jsonl = (...values: ReadonlyArray<unknown>) => values.map((v) => JSON.stringify(v)).join("\n") + "\n"
const timelineOf = (...values: ReadonlyArray<unknown>): Timeline => buildTimeline(parseSessionText(jsonl(...values)))

const user = (text: string) => ({ role: "user", content: text })
const call = (id: string, name = "read", args: Record<string, unknown> = { path: "a.txt" }) => ({
  type: "toolCall",
  id,
  name,
  arguments: args
})
const assistant = (calls: ReadonlyArray<ReturnType<typeof call>>, extra: Record<string, unknown> = {}) => ({
  role: "assistant",
  content: [{ type: "text", text: "working" }, ...calls],
  stopReason: calls.length > 0 ? "toolUse" : "stop",
  ...extra
})
const result = (id: string, extra: Record<string, unknown> = {}) => ({
  role: "toolResult",
  toolCallId: id,
  toolName: "read",
  content: [{ type: "text", text: `result of ${id}` }],
  isError: false,
  ...extra
})
const violationsOf = (timeline: Timeline, id: string) => timeline.invariants.find((c) => c.id === id)!.violations

describe("parseSessionText", () => {
  it("reads messages and records, drops a torn last line, keeps bad lines as problems, skips unknown records", () => {
    const text = jsonl(
      { type: "session", version: 1, id: "s1", at: 1 },
      user("hi"),
      { type: "future_record", at: 2, whatever: true },
      { role: "assistant", content: "not an array", stopReason: "stop" },
      [1, 2]
    ) + "{ not json\n" + jsonl({ type: "run_end", at: 3, reason: "stop" }) + `{"type":"run_end","at":4,"rea`
    const lines = parseSessionText(text)
    assert.deepStrictEqual(lines.map((l) => [l._tag, l.line]), [
      ["Record", 1],
      ["Message", 2],
      ["Problem", 4],
      ["Problem", 5],
      ["Problem", 6],
      ["Record", 7]
    ])
    const problems = lines.flatMap((l) => l._tag === "Problem" ? [l.problem] : [])
    assert.match(problems[0]!, /^not a valid message: /)
    assert.strictEqual(problems[1], "not a JSON object")
    assert.strictEqual(problems[2], "not valid JSON")
  })

  it("reports a known record with a wrong shape", () => {
    const lines = parseSessionText(jsonl({ type: "run_end", at: 3, reason: "finished" }))
    assert.strictEqual(lines.length, 1)
    assert.strictEqual(lines[0]!._tag, "Problem")
    assert.include(lines[0]!._tag === "Problem" ? lines[0]!.problem : "", `not a valid "run_end" record`)
  })
})

describe("the fixtures are sessions core's reader accepts", () => {
  it.effect("loadTranscript's parser reads the same messages and records, and would repair the killed one", () =>
    Effect.gen(function*() {
      for (
        const [name, torn, repaired] of [["coding-session.jsonl", undefined, 0], [
          "killed-mid-batch.jsonl",
          9,
          2
        ]] as const
      ) {
        const text = fixture(name)
        const loaded = yield* parseTranscript(text, name)
        const ours = parseSessionText(text)
        assert.strictEqual(loaded.tornLine, torn, name)
        assert.strictEqual(loaded.repaired, repaired, name)
        assert.strictEqual(loaded.records.length, ours.filter((l) => l._tag === "Record").length, name)
        assert.strictEqual(loaded.messages.length - repaired, ours.filter((l) => l._tag === "Message").length, name)
      }
    }))
})

describe("buildTimeline", () => {
  it("groups the recorded session into runs, turns and lanes with their times, approvals and outcomes", () => {
    const timeline = buildTimeline(parseSessionText(fixture("coding-session.jsonl")))
    assert.strictEqual(timeline.header?.id, "2026-11-18-a1b2c3")
    assert.deepStrictEqual(timeline.runs.map((r) => r.prompt), [
      "Fix the failing test in src/math.js",
      "Run the whole test suite",
      "Now refactor add() to accept any number of arguments"
    ])
    assert.deepStrictEqual(timeline.runs.map((r) => r.end?.reason), ["stop", "aborted", "error"])
    assert.deepStrictEqual(timeline.runs.map((r) => r.turns.map((t) => t.lanes.length)), [[3, 2, 0], [1], [0]])

    const [first, second, third] = timeline.runs[0]!.turns
    assert.deepStrictEqual(first!.lanes.map((l) => [l.name, l.summary, l.status]), [
      ["read", "src/math.js", "ok"],
      ["read", "test.js", "ok"],
      ["bash", "git log --oneline -5", "ok"]
    ])
    const T = 1795000000000
    assert.deepStrictEqual(first!.lanes.map((l) => [l.startedAt! - T, l.endedAt! - T]), [[2310, 2390], [2312, 2330], [
      2315,
      2900
    ]])
    assert.strictEqual(first!.maxParallel, 3)
    assert.strictEqual(first!.startedAt! - T, 120)
    assert.strictEqual(first!.answeredAt! - T, 2310)
    assert.strictEqual(first!.endedAt! - T, 2900)
    assert.deepStrictEqual(first!.usage, { input: 1840, output: 96, cacheRead: 1200, cost: 0.00693 })

    assert.deepStrictEqual(second!.lanes.map((l) => [l.status, l.approval?.decision, l.approval?.reason]), [
      ["ok", "approved", undefined],
      ["denied", "denied", "do not reinstall; just run node test.js"]
    ])
    // The answer came when the first approval was asked, not when the person decided.
    assert.strictEqual(second!.answeredAt! - T, 5105)
    assert.deepStrictEqual(second!.lanes.map((l) => l.approval!.askedAt! - T), [5105, 7431])
    assert.strictEqual(second!.lanes[1]!.startedAt, undefined)
    assert.strictEqual(second!.lanes[1]!.skipReason, "denied")
    assert.strictEqual(third!.stopReason, "stop")

    // /compact and /model between runs: after the first run's turns.
    assert.deepStrictEqual(timeline.runs[0]!.compactions.map((c) => [c.beforeTurn, c.summarized, c.kept]), [[4, 6, 2]])
    assert.deepStrictEqual(timeline.runs[0]!.modelChanges, [{ at: T + 40000, beforeTurn: 4, model: "claude-opus-4-1" }])

    const aborted = timeline.runs[1]!
    assert.strictEqual(aborted.end?.error, "interrupted by the user (Ctrl-C)")
    assert.strictEqual(aborted.turns[0]!.lanes[0]!.status, "interrupted")
    assert.strictEqual(aborted.turns[0]!.lanes[0]!.approval?.decision, "always")
    assert.strictEqual(timeline.runs[2]!.turns[0]!.errorMessage, "Anthropic API error 529: overloaded")

    assert.strictEqual(timeline.totals.turns, 5)
    assert.strictEqual(timeline.totals.toolCalls, 6)
    assert.strictEqual(timeline.totals.toolErrors, 2)
    assert.strictEqual(timeline.totals.input, 9130)
    assert.strictEqual(timeline.totals.output, 306)
    assert.strictEqual(timeline.totals.cacheRead, 7500)
    assert.closeTo(timeline.totals.cost!, 0.0319, 1e-9)
    for (const check of timeline.invariants) assert.deepStrictEqual([check.id, check.violations], [check.id, []])
    assert.deepStrictEqual(timeline.problems, [])
  })

  it("counts calls as parallel only when their times overlap", () => {
    const lanes = (times: ReadonlyArray<readonly [number, number]>) =>
      timelineOf(
        { type: "run_start", at: 0, prompt: "p" },
        user("p"),
        { type: "turn_start", at: 0, step: 1 },
        assistant(times.map((_, i) => call(`c${i}`))),
        ...times.flatMap(([start, end], i) => [
          { type: "tool_start", at: start, toolCallId: `c${i}`, name: "read" },
          { type: "tool_end", at: end, toolCallId: `c${i}`, isError: false }
        ]),
        ...times.map((_, i) => result(`c${i}`)),
        { type: "run_end", at: 100, reason: "stop", steps: 1 }
      ).runs[0]!.turns[0]!
    assert.strictEqual(lanes([[10, 20], [20, 30], [30, 40]]).maxParallel, 1)
    assert.strictEqual(lanes([[10, 20], [15, 30], [30, 40]]).maxParallel, 2)
    assert.strictEqual(lanes([[10, 50], [15, 30], [20, 40]]).maxParallel, 3)
  })

  it("reads a plain transcript (no records): a run per user message, a turn per assistant message", () => {
    const timeline = timelineOf(
      user("first"),
      assistant([call("a"), call("b")]),
      result("a"),
      result("b"),
      assistant([]),
      user("second"),
      assistant([])
    )
    assert.deepStrictEqual(timeline.runs.map((r) => [r.prompt, r.turns.length, r.end]), [
      ["first", 2, undefined],
      ["second", 1, undefined]
    ])
    assert.deepStrictEqual(timeline.runs[0]!.turns[0]!.lanes.map((l) => [l.status, l.startedAt]), [
      ["ok", undefined],
      ["ok", undefined]
    ])
    for (const check of timeline.invariants) {
      assert.deepStrictEqual(check.violations, [])
      assert.deepStrictEqual(check.notes, [])
    }
  })

  it("reports a tool call answered twice, out of order, or not at all", () => {
    const twice = timelineOf(user("p"), assistant([call("a")]), result("a"), result("a"))
    assert.deepStrictEqual(violationsOf(twice, "pairing"), [`messages[3]: extra tool result for "a"`])
    // A batch's results are in the file in the order the calls finished: that is not a violation.
    const completionOrder = timelineOf(user("p"), assistant([call("a"), call("b")]), result("b"), result("a"))
    assert.deepStrictEqual(violationsOf(completionOrder, "pairing"), [])
    const late = timelineOf(user("p"), assistant([call("a")]), assistant([]), result("a"))
    assert.deepStrictEqual(violationsOf(late, "pairing"), [
      `messages[1]: tool call "a" has no result`,
      `messages[3]: extra tool result for "a"`
    ])
    const stranger = timelineOf(user("p"), assistant([call("a")]), result("a"), result("zz"))
    assert.deepStrictEqual(violationsOf(stranger, "pairing"), [`messages[3]: extra tool result for "zz"`])
    const missing = timelineOf(user("p"), assistant([call("a")]), assistant([]))
    assert.deepStrictEqual(violationsOf(missing, "pairing"), [`messages[1]: tool call "a" has no result`])
  })

  it("reports a request answered twice, a run ended twice, and steps that do not match the turns", () => {
    const timeline = timelineOf(
      { type: "run_start", at: 1, prompt: "p" },
      user("p"),
      { type: "turn_start", at: 2, step: 1 },
      assistant([]),
      assistant([]),
      { type: "run_end", at: 3, reason: "stop", steps: 1 },
      { type: "run_end", at: 4, reason: "stop", steps: 1 }
    )
    // The second assistant message has no turn_start of its own: it becomes a turn without a request.
    assert.strictEqual(timeline.runs[0]!.turns.length, 2)
    assert.deepStrictEqual(violationsOf(timeline, "one-answer-per-turn"), [
      "run 1, turn 2: an assistant message without a request (turn_start)"
    ])
    assert.deepStrictEqual(violationsOf(timeline, "one-end-per-run"), [
      "run 1: 2 run_end records",
      "run 1: run_end says 1 step(s), the file has 2 turn(s)"
    ])
    const requestWithoutAnswer = timelineOf(
      { type: "run_start", at: 1, prompt: "p" },
      user("p"),
      { type: "turn_start", at: 2, step: 1 },
      { type: "turn_start", at: 3, step: 2 },
      assistant([]),
      { type: "run_end", at: 4, reason: "stop", steps: 2 }
    )
    assert.deepStrictEqual(violationsOf(requestWithoutAnswer, "one-answer-per-turn"), [
      "run 1, turn 1: a request with no assistant message"
    ])
    // A request whose stream failed has no final message and ends the run with an error: that holds.
    const failedStream = (reason: string) =>
      timelineOf(
        { type: "run_start", at: 1, prompt: "p" },
        user("p"),
        { type: "turn_start", at: 2, step: 1 },
        { type: "run_end", at: 3, reason, steps: 1, error: "model error: HTTP 500" }
      )
    assert.deepStrictEqual(violationsOf(failedStream("error"), "one-answer-per-turn"), [])
    assert.deepStrictEqual(violationsOf(failedStream("aborted"), "one-answer-per-turn"), [])
    assert.deepStrictEqual(violationsOf(failedStream("stop"), "one-answer-per-turn"), [
      "run 1, turn 1: a request with no assistant message"
    ])
  })

  it("reports tool timings that do not match the calls", () => {
    const timeline = timelineOf(
      { type: "run_start", at: 1, prompt: "p" },
      user("p"),
      { type: "turn_start", at: 2, step: 1 },
      assistant([call("a")]),
      { type: "tool_end", at: 3, toolCallId: "a", isError: false },
      { type: "tool_start", at: 4, toolCallId: "ghost", name: "read" },
      { type: "tool_end", at: 5, toolCallId: "a", isError: false },
      result("a"),
      { type: "run_end", at: 6, reason: "stop", steps: 1 }
    )
    assert.deepStrictEqual(violationsOf(timeline, "tool-timing"), [
      `line 6: tool_start for unknown tool call "ghost"`,
      `line 7: tool call "a" ended twice`,
      `run 1, turn 1: tool call "a" has a result but no tool_start`
    ])
    // A call that never ran (denied, skipped) has a tool_end and no tool_start: that is fine.
    const denied = timelineOf(
      { type: "run_start", at: 1, prompt: "p" },
      user("p"),
      { type: "turn_start", at: 2, step: 1 },
      assistant([call("a")]),
      { type: "approval", at: 3, toolCallId: "a", name: "read", decision: "denied", by: "no-terminal" },
      { type: "tool_end", at: 4, toolCallId: "a", isError: true },
      result("a", { isError: true, details: { skipped: true, reason: "denied" } }),
      { type: "run_end", at: 6, reason: "stop", steps: 1 }
    )
    assert.deepStrictEqual(violationsOf(denied, "tool-timing"), [])
    assert.strictEqual(denied.runs[0]!.turns[0]!.lanes[0]!.approval?.by, "no-terminal")
  })

  it("notes a run without run_end (a killed process) without calling it a violation", () => {
    const timeline = buildTimeline(parseSessionText(fixture("killed-mid-batch.jsonl")))
    const ends = timeline.invariants.find((c) => c.id === "one-end-per-run")!
    assert.deepStrictEqual(ends.violations, [])
    assert.deepStrictEqual(ends.notes, ["run 1 has no run_end yet: it is still going, or its process was killed"])
    assert.strictEqual(timeline.runs[0]!.end, undefined)
    assert.deepStrictEqual(timeline.runs[0]!.turns[0]!.lanes.map((l) => l.status), ["running", "running"])
    assert.deepStrictEqual(timeline.problems, [])
  })

  it("names how each call ended from its result", () => {
    const timeline = timelineOf(
      user("p"),
      assistant([call("ok"), call("err"), call("skip"), call("deny"), call("int"), call("slow")]),
      result("ok"),
      result("err", { isError: true, details: { failed: true } }),
      result("skip", { isError: true, details: { skipped: true, reason: "length" } }),
      result("deny", { isError: true, details: { skipped: true, reason: "denied" } }),
      result("int", { isError: true, details: { interrupted: true } }),
      result("slow", { isError: true, details: { timedOut: true, timeoutMs: 5 } })
    )
    assert.deepStrictEqual(timeline.runs[0]!.turns[0]!.lanes.map((l) => [l.status, l.skipReason]), [
      ["ok", undefined],
      ["error", undefined],
      ["skipped", "length"],
      ["denied", "denied"],
      ["interrupted", undefined],
      ["timedOut", undefined]
    ])
  })

  it("places a compaction before the turn that first used the summary", () => {
    const timeline = timelineOf(
      { type: "run_start", at: 1, prompt: "p" },
      user("p"),
      { type: "turn_start", at: 2, step: 1 },
      assistant([]),
      {
        type: "compaction",
        at: 3,
        summarized: 12,
        kept: 4,
        summary: user("Summary of earlier turns"),
        usage: { input: 500, output: 80 }
      },
      { type: "turn_start", at: 4, step: 2 },
      assistant([])
    )
    assert.deepStrictEqual(timeline.runs[0]!.compactions, [
      {
        at: 3,
        beforeTurn: 2,
        summarized: 12,
        kept: 4,
        summary: "Summary of earlier turns",
        usage: { input: 500, output: 80 }
      }
    ])
    // The tokens spent on the summary count in the session's totals.
    assert.strictEqual(timeline.totals.input, 500)
    assert.strictEqual(timeline.totals.output, 80)
  })
})

describe("sub-agent runs", () => {
  /** A real run of core with a sub-agent calling its own sub-agent, saved as a plain transcript. */
  const subAgentSession = Effect.gen(function*() {
    const checker = yield* scriptedSubAgent({
      name: "checker",
      script: [turn.text("checked: fine", { input: 5, output: 2 })]
    })
    const researcher = yield* scriptedSubAgent({
      name: "researcher",
      tools: [echoTool("read"), checker.tool],
      script: [
        turn.toolCalls([
          toolCall("r1", "read", { path: "notes" }),
          toolCall("k1", "checker", { task: "check the notes" })
        ]),
        turn.text("The notes say 42.", { input: 20, output: 4 })
      ]
    })
    const run = yield* runScripted(
      [turn.toolCalls([toolCall("s1", "researcher", { task: "find the answer" })]), turn.text("It is 42.")],
      { tools: [researcher.tool], messages: [{ role: "user", content: "what is the answer?" }] }
    )
    assert.deepStrictEqual(run.violations, [])
    return run.result.messages
  })

  it.effect("each sub-agent's run is nested under the call that started it, its own sub-agents under its calls", () =>
    Effect.gen(function*() {
      const messages = yield* subAgentSession
      const timeline = timelineOf(...messages)
      const lane = timeline.runs[0]!.turns[0]!.lanes[0]!
      assert.strictEqual(lane.toolCallId, "s1")
      const researcher = lane.subAgent!
      assert.deepStrictEqual(
        [researcher.agent, researcher.task, researcher.reason, researcher.steps, researcher.turns.length],
        ["researcher", "find the answer", "stop", 2, 2]
      )
      assert.deepStrictEqual(researcher.turns[0]!.lanes.map((l) => [l.toolCallId, l.name, l.status]), [
        ["r1", "read", "ok"],
        ["k1", "checker", "ok"]
      ])
      assert.strictEqual(researcher.turns[1]!.text, "The notes say 42.")
      const checker = researcher.turns[0]!.lanes[1]!.subAgent!
      assert.deepStrictEqual([checker.agent, checker.task, checker.steps, checker.turns[0]!.text], [
        "checker",
        "check the notes",
        1,
        "checked: fine"
      ])
      assert.isUndefined(researcher.turns[0]!.lanes[0]!.subAgent, "a plain call has no sub-agent")
      assert.deepStrictEqual(violationsOf(timeline, "pairing"), [])
      // the sub-agents' tokens count in the session's totals (the researcher's include the checker's)
      assert.deepStrictEqual([timeline.totals.input, timeline.totals.output], [25, 6])
      // the page nests them the same way
      const html = renderPage(timeline, { file: "s.jsonl", version: "1" })
      const outer = html.indexOf(`data-testid="subagent" data-agent="researcher"`)
      const inner = html.indexOf(`data-testid="subagent" data-agent="checker"`)
      assert.isTrue(
        outer > html.indexOf(`<code>s1</code>`) && inner > outer,
        "checker inside researcher, under call s1"
      )
      assert.include(html.slice(outer, inner), "find the answer")
      assert.include(html.slice(inner), "checked: fine")
    }))

  it.effect("a child transcript that breaks pairing or its step count is a violation naming where it is", () =>
    Effect.gen(function*() {
      const messages = yield* subAgentSession
      const broken = messages.map((m) => {
        if (m.role !== "toolResult" || m.toolCallId !== "s1") return m
        const sub =
          (m.details as { subAgent: { messages: ReadonlyArray<{ role: string; toolCallId?: string }>; steps: number } })
            .subAgent
        return {
          ...m,
          details: {
            subAgent: {
              ...sub,
              steps: 3,
              messages: sub.messages.filter((c) => !(c.role === "toolResult" && c.toolCallId === "r1"))
            }
          }
        }
      })
      const timeline = timelineOf(...broken)
      assert.deepStrictEqual(violationsOf(timeline, "pairing"), [
        `run 1, turn 1: sub-agent researcher (call s1): messages[2]: expected the result for call "r1" (call ` +
        `order), found "k1"`,
        `run 1, turn 1: sub-agent researcher (call s1): messages[2]: tool call "k1" has no result`
      ])
      assert.deepStrictEqual(violationsOf(timeline, "one-end-per-run"), [
        "run 1, turn 1: sub-agent researcher (call s1): its result says 3 step(s), its transcript has 2 turn(s)"
      ])
    }))
})
