import {
  compaction,
  CompactionError,
  estimateTokens,
  isCompactionSummary,
  makeCompactor,
  SUMMARIZER_PROMPT,
  summaryMessage
} from "@agentloop/core"
import type { Compacted, Message, ModelRequest } from "@agentloop/core"
import { assistant, echoTool, makeScriptedModel, runScripted, toolCall, turn, user } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"

const text = (m: Message | undefined): string =>
  m === undefined ? "" : typeof m.content === "string" ?
    m.content :
    m.content.map((c) => (c.type === "text" ? c.text : "")).join("")

/**
 * A history past the threshold of a 400-token window: a large question, a batch of two calls (with
 * large arguments) and their results, the answer, and a new question. What fits in `keep` (120
 * tokens) is the answer and the new question; the batch is summarised whole.
 */
const history: ReadonlyArray<Message> = [
  user(`task: ${"q".repeat(600)}`),
  assistant("toolUse", {
    calls: [toolCall("c1", "e", { body: "a".repeat(200) }), toolCall("c2", "e", { body: "b".repeat(200) })]
  }),
  {
    role: "toolResult",
    toolCallId: "c1",
    toolName: "e",
    content: [{ type: "text", text: "r".repeat(100) }],
    isError: false
  },
  {
    role: "toolResult",
    toolCallId: "c2",
    toolName: "e",
    content: [{ type: "text", text: "s".repeat(100) }],
    isError: false
  },
  assistant("stop", { text: "done with the first part" }),
  user("now the second part")
]

const isSummariser = (request: ModelRequest) => request.systemPrompt === SUMMARIZER_PROMPT

/** The model's requests that are the run's own (not summarising ones). */
const turnsOf = (requests: ReadonlyArray<ModelRequest>) => requests.filter((r) => !isSummariser(r))

describe("compaction", () => {
  it.effect("past the threshold the run's model summarises the older turns; a batch is summarised whole", () =>
    Effect.gen(function*() {
      const compacted: Array<Compacted> = []
      const run = yield* runScripted(
        [
          turn.text("SUMMARY OF PART ONE", { input: 50, output: 10 }),
          turn.text("second part done", { input: 5, output: 1 })
        ],
        {
          messages: history,
          transformContext: compaction({
            contextWindow: 400,
            onCompact: (c) => Effect.sync(() => compacted.push(c))
          })
        }
      )
      assert.strictEqual(run.result.reason, "stop")
      assert.deepStrictEqual(run.violations.filter((v) => v.invariant !== "consistency"), [])
      // the first request the model got is the summarising one, with no tools; it read the whole batch
      const [summarising, request] = run.requests
      assert.isTrue(isSummariser(summarising!))
      assert.deepStrictEqual(summarising!.tools, [])
      const read = text(summarising!.messages[0])
      assert.include(read, "[calls e")
      assert.include(read, `tool result (e): ${"r".repeat(100)}`)
      assert.include(read, `tool result (e): ${"s".repeat(100)}`)
      // the run's request: the summary, marked as one, then the latest turns verbatim
      const sent = request!.messages
      assert.isTrue(isCompactionSummary(sent[0]!))
      assert.include(text(sent[0]), "(4 messages)")
      assert.include(text(sent[0]), "SUMMARY OF PART ONE")
      assert.deepStrictEqual(sent.slice(1), history.slice(4))
      assert.deepStrictEqual(compacted.map((c) => [c.state.covered, c.kept, c.inRun]), [[4, 2, true]])
      // the transcript keeps every message; the summary is only in the request
      assert.deepStrictEqual(run.result.messages.slice(0, history.length), [...history])
      assert.isFalse(run.result.messages.some(isCompactionSummary))
      // the summarising request's usage is counted in the run's
      assert.deepStrictEqual(run.result.usage, { input: 55, output: 11, cacheRead: 0, cacheWrite: 0 })
    }))

  it.effect("the summary is reused for the next requests; it is made again only past the threshold again", () =>
    Effect.gen(function*() {
      const big = "x".repeat(1200)
      const run = yield* runScripted(
        [
          turn.text("SUMMARY ONE"),
          turn.toolCalls([toolCall("d1", "e", { n: 1 })]),
          turn.toolCalls([toolCall("d2", "e", { body: big })]),
          turn.text("SUMMARY TWO"),
          turn.text("finished")
        ],
        { messages: history, tools: [echoTool("e")], transformContext: compaction({ contextWindow: 400 }) }
      )
      assert.strictEqual(run.result.reason, "stop")
      assert.deepStrictEqual(run.violations.filter((v) => v.invariant !== "consistency"), [])
      assert.deepStrictEqual(run.requests.map(isSummariser), [true, false, false, true, false])
      const turns = turnsOf(run.requests)
      // the second request still starts with the first summary (the same message)
      assert.strictEqual(turns[1]!.messages[0], turns[0]!.messages[0])
      // the second summary covers the first one and the messages after it
      assert.include(text(run.requests[3]!.messages[0]), "(earlier summary): [agentloop: summary")
      assert.include(text(turns[2]!.messages[0]), "SUMMARY TWO")
      // every request the run sent is paired and starts after a whole batch
      for (const t of turns) assert.notStrictEqual(t.messages[1]?.role, "toolResult")
    }))

  it.effect("a given model summarises instead of the run's", () =>
    Effect.gen(function*() {
      const summariser = yield* makeScriptedModel([turn.text("SMALL MODEL SUMMARY", { input: 7, output: 3 })])
      const run = yield* runScripted([turn.text("ok", { input: 1, output: 1 })], {
        messages: history,
        transformContext: compaction({ contextWindow: 400, model: summariser.service })
      })
      assert.deepStrictEqual(run.violations, [])
      assert.strictEqual(run.requests.length, 1)
      assert.include(text(run.requests[0]!.messages[0]), "SMALL MODEL SUMMARY")
      assert.strictEqual((yield* summariser.requests).length, 1)
      assert.deepStrictEqual(run.result.usage, { input: 8, output: 4, cacheRead: 0, cacheWrite: 0 })
    }))

  it.effect("a summary that cannot be made loses nothing: the request goes as it is and onError is told", () =>
    Effect.gen(function*() {
      const errors: Array<CompactionError> = []
      const summariser = yield* makeScriptedModel([turn.failing("overloaded"), turn.text("   ")])
      const transformContext = compaction({
        contextWindow: 400,
        model: summariser.service,
        onError: (e) => Effect.sync(() => errors.push(e))
      })
      const run = yield* runScripted([turn.toolCalls([toolCall("k", "e")]), turn.text("ok")], {
        messages: history,
        tools: [echoTool("e")],
        transformContext
      })
      assert.strictEqual(run.result.reason, "stop")
      assert.deepStrictEqual(run.violations, [])
      assert.deepStrictEqual(run.requests[0]!.messages, history)
      assert.deepStrictEqual(errors.map((e) => e.message), [
        "the summarising request failed: overloaded",
        "the summarising request gave no text"
      ])
    }))

  it.effect("options that are not valid end the run error naming the option; the model is never called", () =>
    Effect.gen(function*() {
      for (
        const [options, wrong] of [
          [{ contextWindow: 0 }, "contextWindow must be a positive number of tokens, got 0"],
          [{ contextWindow: 100, threshold: 1.5 }, "threshold must be a share of the window"],
          [{ contextWindow: 100, keep: -1 }, "keep must be a share of the window"]
        ] as const
      ) {
        const run = yield* runScripted([], { messages: history, transformContext: compaction(options) })
        assert.strictEqual(run.result.reason, "error")
        assert.include(run.result.error!, `transformContext failed: compaction: ${wrong}`)
        assert.strictEqual(run.requests.length, 0)
        assert.deepStrictEqual([...run.result.messages], [...history])
        const failed = yield* Effect.flip(makeCompactor(options).compactNow(history))
        assert.instanceOf(failed, CompactionError)
      }
    }))

  it.effect("compactNow summarises all but the last turn; a summary applies only where it was made", () =>
    Effect.gen(function*() {
      const summariser = yield* makeScriptedModel([turn.text("EVERYTHING SO FAR")])
      const compacted: Array<Compacted> = []
      const compactor = makeCompactor({
        contextWindow: Number.POSITIVE_INFINITY,
        onCompact: (c) => Effect.sync(() => compacted.push(c))
      })
      assert.isFalse(yield* compactor.compactNow([user("only one turn")], summariser.service))
      assert.isTrue(yield* compactor.compactNow(history, summariser.service))
      assert.deepStrictEqual(compacted.map((c) => [c.state.covered, c.kept, c.inRun]), [[5, 1, false]])
      // with no window to keep, every request of this conversation gets the summary...
      const run = yield* runScripted([turn.text("ok")], {
        messages: history,
        transformContext: compactor.transformContext
      })
      assert.deepStrictEqual(run.requests[0]!.messages, [compactor.state()!.summary, history[5]])
      // ...and another conversation of as many messages does not
      const other = history.map((m) => m.role === "user" ? user(`other ${text(m)}`) : m)
      const again = yield* runScripted([turn.text("ok")], {
        messages: other,
        transformContext: compactor.transformContext
      })
      assert.deepStrictEqual(again.requests[0]!.messages, other)
    }))

  it("the summary message is marked and counted as text", () => {
    const summary = summaryMessage("what happened", 3)
    assert.isTrue(isCompactionSummary(summary))
    assert.isFalse(isCompactionSummary(user("[agentloop: summary of the earlier conversation, I typed")))
    assert.isAbove(estimateTokens([summary]), 10)
    // an image counts as about 1,600 tokens, not as its base64 text
    const image = estimateTokens([{
      role: "user",
      content: [{ type: "image", data: "A".repeat(100_000), mimeType: "image/png" }]
    }])
    assert.isBelow(image, 2000)
  })
})
