import { allow, decide, deny, Model, pairingViolations, parseTranscript, sessionRecordsOf } from "@agentloop/core"
import type { Message, ModelRequest, ToolCall, ToolDefinition, TurnContext } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Deferred, Duration, Effect, Fiber, Stream } from "effect"
import { TestClock } from "effect/testing"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { makeApprovalPolicy, makePermissions, parseAnswer, previewCall } from "../src/Approvals.ts"
import type { ApprovalRecord } from "../src/Approvals.ts"
import { chooseCut, estimateTokens, makeCompactor, SUMMARY_HEADER, toolDefinitionsChars } from "../src/Compaction.ts"
import { rebuildRun, sameMessages } from "../src/Durable.ts"
import { stripControl } from "../src/Sanitize.ts"
import { outlineSession, summarize } from "../src/Sessions.ts"
import { makeStyle } from "../src/Style.ts"

const user = (text: string): Message => ({ role: "user", content: text })
const calls = (...ids: Array<string>): Message => ({
  role: "assistant",
  content: ids.map((id) => ({ type: "toolCall" as const, id, name: "bash", arguments: { command: `echo ${id}` } })),
  stopReason: "toolUse"
})
const result = (id: string, text = "x".repeat(200)): Message => ({
  role: "toolResult",
  toolCallId: id,
  toolName: "bash",
  content: [{ type: "text", text }],
  isError: false
})
const text = (t: string): Message => ({ role: "assistant", content: [{ type: "text", text: t }], stopReason: "stop" })

describe("control sequences", () => {
  it(
    "strips OSC (clipboard, title), CSI (clear screen, colours), DCS, C1 and stray controls; keeps newline and " +
      "tab",
    () => {
      assert.strictEqual(stripControl("a\u001b]52;c;ZXZpbA==\u0007b"), "ab")
      assert.strictEqual(stripControl("a\u001b]0;title\u001b\\b"), "ab")
      assert.strictEqual(stripControl("x\u001b[2Jy\u001b[31mred\u001b[0m"), "xyred")
      assert.strictEqual(stripControl("p\u001bPq#0;2;0;0;0\u001b\\q"), "pq")
      assert.strictEqual(stripControl("c1\u009b2Jz\u009d0;t\u009c!"), "c1z!")
      assert.strictEqual(stripControl("line\r\nnext\tcol\u0007\u0008"), "line\nnext\tcol")
      assert.strictEqual(
        stripControl("cut \u001b]52;c;AAAA"),
        "cut ",
        "a sequence cut at the end of a chunk is removed"
      )
      assert.strictEqual(stripControl("plain ünïcode ✓"), "plain ünïcode ✓")
    }
  )
})

describe("approval answers", () => {
  it("y, a, p (with ! to save), n with or without a reason; anything else asks again", () => {
    assert.deepStrictEqual(parseAnswer("y"), { kind: "yes" })
    assert.deepStrictEqual(parseAnswer(" YES "), { kind: "yes" })
    assert.deepStrictEqual(parseAnswer("a"), { kind: "always", save: false })
    assert.deepStrictEqual(parseAnswer("a!"), { kind: "always", save: true })
    assert.deepStrictEqual(parseAnswer("P!"), { kind: "prefix", save: true })
    assert.strictEqual(parseAnswer("y!"), undefined)
    assert.deepStrictEqual(parseAnswer("n"), { kind: "no", reason: undefined })
    assert.deepStrictEqual(parseAnswer("n: use the other file"), { kind: "no", reason: "use the other file" })
    assert.deepStrictEqual(parseAnswer("no not now"), { kind: "no", reason: "not now" })
    assert.strictEqual(parseAnswer(""), undefined)
    assert.strictEqual(parseAnswer("yolo"), undefined)
    assert.strictEqual(parseAnswer("y please"), undefined)
  })

  it("the preview of a call shows the command or the diff, without control sequences", () => {
    const style = makeStyle(false)
    const bash = previewCall({
      type: "toolCall",
      id: "1",
      name: "bash",
      arguments: { command: "rm -rf build\u001b[2J\nls" }
    }, style)
    assert.deepStrictEqual(bash, ["$ rm -rf build", "> ls"])
    const edit = previewCall({
      type: "toolCall",
      id: "2",
      name: "edit",
      arguments: { path: "a.ts", oldText: "a\nb", newText: "c" }
    }, style)
    assert.deepStrictEqual(edit, ["a.ts", "- a", "- b", "+ c"])
  })
})

describe("approval records", () => {
  it.effect(
    "a decision that asked records when the question was put (askedAt), apart from when it was answered " +
      "(at)",
    () =>
      Effect.gen(function*() {
        const records: Array<ApprovalRecord & { readonly at: number }> = []
        const options = (yes: boolean) => ({
          permissions: makePermissions({ mode: yes ? "yes" : "ask", rules: { allow: [], deny: [] } }),
          // the user takes five seconds to answer
          ask: () => Effect.as(TestClock.adjust("5 seconds"), "y"),
          print: () => Effect.void,
          record: (r: ApprovalRecord) => Effect.map(Clock.currentTimeMillis, (at) => void records.push({ ...r, at })),
          style: makeStyle(false)
        })
        const call: ToolCall = { type: "toolCall", id: "c1", name: "bash", arguments: { command: "ls" } }
        const definition = { name: "bash", description: "", parameters: {} }
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(yield* decide(yield* makeApprovalPolicy(options(false)), call, definition), allow)
        assert.deepStrictEqual(yield* decide(yield* makeApprovalPolicy(options(true)), call, definition), allow)
        assert.deepStrictEqual(records, [
          { toolCallId: "c1", name: "bash", askedAt: 1000, decision: "approved", by: "user", at: 6000 },
          { toolCallId: "c1", name: "bash", decision: "approved", by: "mode", mode: "yes", at: 6000 }
        ])
      })
  )
  it.effect(
    "--approval-timeout: a question not answered in time goes away and the call is denied, recorded by " +
      "timeout",
    () =>
      Effect.gen(function*() {
        const records: Array<ApprovalRecord> = []
        let interrupted = false
        const asked = yield* Deferred.make<void>()
        const policy = yield* makeApprovalPolicy({
          permissions: makePermissions({ mode: "ask", rules: { allow: [], deny: [] } }),
          // nobody answers; the question is taken away when the time is up
          ask: () =>
            Effect.andThen(
              Deferred.succeed(asked, undefined),
              Effect.onInterrupt(Effect.never, () => Effect.sync(() => void (interrupted = true)))
            ),
          print: () => Effect.void,
          record: (r) => Effect.sync(() => void records.push(r)),
          style: makeStyle(false),
          timeout: Duration.minutes(10)
        })
        const call: ToolCall = { type: "toolCall", id: "c1", name: "bash", arguments: { command: "ls" } }
        const fiber = yield* Effect.forkChild(decide(policy, call, { name: "bash", description: "", parameters: {} }))
        // the clock moves once the question is up (the rules are checked first, off the clock)
        yield* Deferred.await(asked)
        yield* TestClock.adjust("9 minutes")
        assert.isUndefined(fiber.pollUnsafe(), "still waiting before the time is up")
        yield* TestClock.adjust("1 minute")
        const decision = yield* Fiber.join(fiber)
        const reason = "no answer to the approval request within 10m"
        assert.deepStrictEqual(decision, deny(reason))
        assert.isTrue(interrupted, "the question was taken away")
        assert.deepStrictEqual(records, [{
          toolCallId: "c1",
          name: "bash",
          askedAt: 0,
          decision: "denied",
          by: "timeout",
          reason
        }])
      })
  )
})

describe("compaction", () => {
  const transcript: Array<Message> = [
    user("task"),
    calls("a", "b"),
    result("a"),
    result("b"),
    text("half"),
    user("more"),
    calls("c"),
    result("c"),
    calls("d", "e", "f"),
    result("d"),
    result("e"),
    result("f"),
    text("done")
  ]

  it("never cuts between a call and its result, whatever the budget", () => {
    for (let keep = 0; keep <= estimateTokens(transcript) + 10; keep += 7) {
      for (let from = 0; from < transcript.length; from++) {
        const cut = chooseCut(transcript, from, keep)
        if (cut === undefined) continue
        assert.isAbove(cut, from)
        assert.notStrictEqual(transcript[cut]!.role, "toolResult", `keep ${keep}, from ${from}: cut at ${cut}`)
        assert.deepStrictEqual(pairingViolations(transcript.slice(cut)), [])
        // the tail fits, or it is the last turn alone
        const last = transcript.map((m, i) => (m.role === "toolResult" ? -1 : i)).filter((i) => i > from).pop()
        assert.isTrue(estimateTokens(transcript.slice(cut)) <= keep || cut === last)
      }
    }
  })

  /** What the loop tells a transform about a request carrying `tools`. */
  const requestWith = (model: typeof Model.Service, tools: ReadonlyArray<ToolDefinition> = []): TurnContext => ({
    model,
    systemPrompt: "",
    tools,
    step: 1,
    addUsage: () => Effect.void
  })

  it.effect("past 75% of the window the older turns become one summary message; the latest stay verbatim", () =>
    Effect.gen(function*() {
      const requests: Array<ModelRequest> = []
      const model = Model.of({
        stream: (request) => {
          requests.push(request)
          return Stream.make({
            type: "done" as const,
            message: {
              role: "assistant" as const,
              content: [{ type: "text" as const, text: "SUMMARY" }],
              stopReason: "stop" as const
            }
          })
        }
      })
      const recorded: Array<number> = []
      const window = Math.ceil(estimateTokens(transcript) / 0.7)
      const compactor = makeCompactor({
        contextWindow: () => window,
        model,
        initial: undefined,
        onCompact: (state) => Effect.sync(() => void recorded.push(state.covered)),
        onError: () => Effect.die("no error expected")
      })
      const small = yield* compactor.transform(transcript.slice(0, 5), requestWith(model))
      assert.deepStrictEqual(small, transcript.slice(0, 5), "under the threshold nothing changes")
      assert.strictEqual(requests.length, 0)
      const bigger = [...transcript, user("x".repeat(window * 2))]
      const out = yield* compactor.transform(bigger, requestWith(model))
      assert.strictEqual(requests.length, 1)
      assert.strictEqual(recorded.length, 1)
      const summary = out[0]!
      assert.strictEqual(summary.role, "user")
      assert.isTrue(typeof summary.content === "string" && summary.content.startsWith(SUMMARY_HEADER))
      assert.include(summary.content as string, "<summary>\nSUMMARY\n</summary>")
      assert.deepStrictEqual(out.slice(1), bigger.slice(recorded[0]!))
      assert.deepStrictEqual(pairingViolations(out), [])
      // the next request reuses the summary without asking again while it fits
      const again = yield* compactor.transform(bigger.slice(0, recorded[0]! + 1), requestWith(model))
      assert.strictEqual(again[0], summary)
      assert.strictEqual(requests.length, 1)
    }))
  it.effect("the window is asked before each request: a smaller model's compacts, the summary carries over", () =>
    Effect.gen(function*() {
      let asked = 0
      const model = Model.of({
        stream: () => {
          asked++
          return Stream.make({
            type: "done" as const,
            message: {
              role: "assistant" as const,
              content: [{ type: "text" as const, text: "SUMMARY" }],
              stopReason: "stop" as const
            }
          })
        }
      })
      const fits = Math.ceil(estimateTokens(transcript) / 0.7)
      let window: number | undefined = fits * 100
      const compactor = makeCompactor({
        contextWindow: () => window,
        model,
        initial: undefined,
        onCompact: () => Effect.void,
        onError: () => Effect.die("no error expected")
      })
      const bigger = [...transcript, user("x".repeat(fits * 2))]
      assert.deepStrictEqual(yield* compactor.transform(bigger, requestWith(model)), bigger, "a large window: as it is")
      assert.strictEqual(asked, 0)
      // the model in use now has a smaller window (/model)
      window = fits
      const out = yield* compactor.transform(bigger, requestWith(model))
      assert.strictEqual(asked, 1)
      assert.isTrue(typeof out[0]!.content === "string" && out[0]!.content.startsWith(SUMMARY_HEADER))
      const summary = compactor.state()
      assert.isDefined(summary)
      // back to no known window: no new summary, the one in force still applies
      window = undefined
      const later = yield* compactor.transform(bigger, requestWith(model))
      assert.strictEqual(asked, 1)
      assert.strictEqual(later[0], out[0])
      assert.strictEqual(compactor.state(), summary)
    }))
  it.effect(
    "the tool definitions count: a request that fits on its messages alone but not with its tools is " +
      "compacted",
    () =>
      Effect.gen(function*() {
        const requests: Array<ModelRequest> = []
        const model = Model.of({
          stream: (request) => {
            requests.push(request)
            return Stream.make({
              type: "done" as const,
              message: {
                role: "assistant" as const,
                content: [{ type: "text" as const, text: "SUMMARY" }],
                stopReason: "stop" as const
              }
            })
          }
        })
        const transcript: Array<Message> = [
          user("task"),
          calls("c1"),
          result("c1"),
          text("ok"),
          user("next"),
          calls("c2"),
          result("c2")
        ]
        const tools = [
          {
            name: "bash",
            description: "d".repeat(400),
            parameters: { type: "object", properties: { command: { type: "string" } } }
          },
          {
            name: "read",
            description: "r".repeat(400),
            parameters: { type: "object", properties: { path: { type: "string" } } }
          }
        ] as const
        const chars = toolDefinitionsChars(tools)
        assert.strictEqual(
          chars,
          4 + 400 + JSON.stringify(tools[0].parameters).length + 4 + 400 + JSON.stringify(tools[1].parameters).length
        )
        // the messages alone take 60% of the window: under 75%; with the tools, over it
        const window = Math.ceil(estimateTokens(transcript) / 0.6)
        assert.isAbove(estimateTokens(transcript, "", chars), window * 0.75)
        const make = () =>
          makeCompactor({
            contextWindow: () => window,
            model,
            initial: undefined,
            onCompact: () => Effect.void,
            onError: () => Effect.die("no error expected")
          })
        const without = yield* make().transform(transcript, requestWith(model))
        assert.deepStrictEqual(without, transcript, "without tools counted it fits")
        assert.strictEqual(requests.length, 0)
        const withTools = yield* make().transform(transcript, requestWith(model, tools))
        assert.strictEqual(requests.length, 1, "counted with its tools it is summarised")
        assert.isTrue(typeof withTools[0]!.content === "string" && withTools[0]!.content.startsWith(SUMMARY_HEADER))
        assert.deepStrictEqual(pairingViolations(withTools), [])
      })
  )
})

describe("a session's usage", () => {
  it("counts a compaction in a run once (it is in the run's usage), and one outside a run (/compact) too", () => {
    const usage = (input: number) => ({ input, output: 1 })
    const summary = summarize("s", [
      { type: "session", at: 1 },
      { type: "run_start", at: 2, prompt: "go" },
      { type: "compaction", at: 3, summarized: 2, usage: usage(10), inRun: true },
      { type: "run_end", at: 4, reason: "stop", steps: 1, usage: usage(110) },
      { type: "compaction", at: 5, summarized: 3, usage: usage(7) }
    ])
    assert.deepStrictEqual(summary.usage, { input: 117, output: 2, cacheRead: 0, cacheWrite: 0 })
  })
})

describe("a durable run's part of the session, rebuilt after a restart", () => {
  it(
    "records kept once (the last of a call or turn that ran again), each message after its turn's or call's " +
      "record",
    () => {
      const a1 = calls("r1", "b1")
      const r1 = result("r1", "a")
      const b1 = result("b1", "b")
      const a2 = text("done")
      const rec = (type: string, fields: Record<string, unknown>) => JSON.stringify({ type, at: 1, ...fields })
      const question = { server: "s", request: "elicitation", message: "?", answer: "accept", by: "user", runId: "x.1" }
      const after = [
        rec("turn_start", { step: 1 }),
        JSON.stringify(a1),
        rec("tool_start", { toolCallId: "r1", name: "bash", n: "first process" }),
        rec("tool_end", { toolCallId: "r1", isError: false }),
        JSON.stringify(r1),
        rec("tool_start", { toolCallId: "b1", name: "bash", n: "first process" }),
        // an MCP server's question during the call, asked in each process that ran it: both kept
        rec("mcp_request", { ...question, n: "first process" }),
        // killed; the next process runs b1 again
        rec("tool_start", { toolCallId: "b1", name: "bash", n: "second process" }),
        rec("mcp_request", { ...question, n: "second process" }),
        rec("tool_end", { toolCallId: "b1", isError: false }),
        rec("turn_start", { step: 2 })
      ]
      const rebuilt = rebuildRun(after, [a1, r1, b1, a2])
      assert.deepStrictEqual(rebuilt, [
        after[0],
        JSON.stringify(a1),
        after[2],
        after[3],
        JSON.stringify(r1),
        after[6],
        after[7],
        after[8],
        after[9],
        JSON.stringify(b1),
        after[10],
        JSON.stringify(a2)
      ])
      assert.isTrue(
        sameMessages(rebuilt, [a1, b1, r1, a2]),
        "the same messages, whatever the order of a batch's results"
      )
      assert.isFalse(sameMessages(after, [a1, r1, b1, a2]), "a result missing")
    }
  )
})

describe("a session written by 0.1, read through core's session records", () => {
  it.effect("every record decodes, and summarize gives the runs, steps, ending, usage and model", () =>
    Effect.gen(function*() {
      const text = readFileSync(fileURLToPath(new URL("./fixtures/view/coding-session.jsonl", import.meta.url)), "utf8")
      const loaded = yield* parseTranscript(text, "coding-session.jsonl")
      const records = sessionRecordsOf(loaded.records)
      assert.strictEqual(records.length, loaded.records.length, "every record decodes")
      const summary = summarize("s", yield* outlineSession(text, "coding-session.jsonl"))
      assert.deepStrictEqual(
        { ...summary, usage: undefined },
        {
          id: "s",
          at: 1795000000000,
          firstPrompt: "Fix the failing test in src/math.js",
          runs: 3,
          // the model's answers: the last run's ended in an error, so it is no step
          steps: 4,
          ended: "error",
          unfinished: false,
          usage: undefined,
          model: "claude-sonnet-4-5"
        }
      )
      // the two runs that reported usage, summed by core's addUsage
      assert.strictEqual(summary.usage?.input, 6530 + 2600)
      assert.strictEqual(summary.usage?.cacheRead, 5100 + 2400)
      assert.strictEqual(summary.usage?.cacheWrite, 0, "a run's usage counts a cache field nobody reported as 0")
    }))
})
