/**
 * Every Anthropic Messages stream recorded in `test/fixtures` (`anthropic/*`), replayed by a
 * loopback server through the whole loop, checked against `expected.json` and the fixtures'
 * README; tool turns are followed by the next request, which must replay the turn exactly
 * (thinking signatures, redacted thinking, tool ids).
 */
import type { AssistantMessage, StopReason } from "@agentloop/core"
import { anthropicFetchLayer } from "@agentloop/providers"
import { echoTool } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { assistants, deltas, expected, fixture, modelEvents, runLoop, toolResults } from "./helpers/loop.ts"
import { makeServer, namedSse } from "./helpers/server.ts"
import { withCost } from "./helpers/usage.ts"

type ExpectedBlock =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "thinking"; readonly thinking: string; readonly signature: string }
  | { readonly type: "redacted_thinking"; readonly data: string }
  | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: Record<string, unknown> }

interface WireUsage {
  readonly input_tokens?: number
  readonly output_tokens?: number
  readonly cache_read_input_tokens?: number
  readonly cache_creation_input_tokens?: number
}

interface ExpectedAnthropic {
  readonly model: string
  readonly content: ReadonlyArray<ExpectedBlock>
  readonly message_start_usage: WireUsage
  readonly message_delta_usage: WireUsage | null
}

const expectedOf = (file: string) => expected[file] as unknown as ExpectedAnthropic

/** The message `file` must produce, built from `expected.json`. */
const expectedMessage = (file: string, stopReason: StopReason, errorMessage?: string): AssistantMessage => {
  const e = expectedOf(file)
  const usage = { ...e.message_start_usage, ...e.message_delta_usage }
  return {
    role: "assistant",
    content: e.content.map((block) => {
      switch (block.type) {
        case "text":
          return { type: "text", text: block.text }
        case "thinking":
          return { type: "thinking", thinking: block.thinking, signature: block.signature }
        case "redacted_thinking":
          return { type: "thinking", thinking: "", signature: block.data, redacted: true }
        case "tool_use":
          return { type: "toolCall", id: block.id, name: block.name, arguments: block.input }
      }
    }),
    stopReason,
    ...(errorMessage === undefined ? {} : { errorMessage }),
    usage: withCost({
      input: usage.input_tokens!,
      output: usage.output_tokens!,
      ...(usage.cache_read_input_tokens === undefined ? {} : { cacheRead: usage.cache_read_input_tokens }),
      ...(usage.cache_creation_input_tokens === undefined ? {} : { cacheWrite: usage.cache_creation_input_tokens })
    }, e.model),
    model: e.model,
    timestamp: 0
  }
}

const finalText = namedSse([
  { type: "message_start", message: { model: "claude-test", usage: { input_tokens: 1, output_tokens: 1 } } },
  { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
  { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "all done" } },
  { type: "content_block_stop", index: 0 },
  { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 3 } },
  { type: "message_stop" }
] as ReadonlyArray<{ type: string }>)

interface Case {
  readonly file: string
  readonly stopReason: StopReason
  readonly runReason: "stop" | "length" | "error"
  readonly errorMessage?: string
}

const cases: ReadonlyArray<Case> = [
  { file: "anthropic/text.sse", stopReason: "stop", runReason: "stop" },
  { file: "anthropic/tool-use.sse", stopReason: "toolUse", runReason: "stop" },
  { file: "anthropic/parallel-tool-use.sse", stopReason: "toolUse", runReason: "stop" },
  { file: "anthropic/thinking-then-tool-use.sse", stopReason: "toolUse", runReason: "stop" },
  { file: "anthropic/max-tokens.sse", stopReason: "length", runReason: "length" },
  { file: "anthropic/redacted-thinking.sse", stopReason: "stop", runReason: "stop" },
  {
    file: "anthropic/error-overloaded-mid-stream.sse",
    stopReason: "error",
    runReason: "error",
    errorMessage: "Anthropic reported an error in the stream: overloaded_error: Overloaded"
  }
]

// the recorded requests are without cache breakpoints (Anthropic.test.ts covers them)
const layer = (url: string) =>
  anthropicFetchLayer({ model: "claude-test", baseUrl: url, apiKey: "sk-ant-test", promptCaching: false })

describe("Anthropic fixtures, replayed through the loop", () => {
  it("covers every Anthropic fixture of expected.json", () => {
    const files = Object.keys(expected).filter((f) => f.startsWith("anthropic/")).sort()
    assert.deepStrictEqual(cases.map((c) => c.file).sort(), files)
  })

  for (const c of cases) {
    it.effect(c.file, () =>
      Effect.gen(function*() {
        const blocks = expectedOf(c.file).content
        const calls = blocks.flatMap((b) => (b.type === "tool_use" ? [b] : []))
        const tools = [...new Set(calls.map((call) => call.name))].map((name) => echoTool(name))
        const server = yield* makeServer([
          { kind: "sse", body: fixture(c.file), chunkSize: 61 },
          { kind: "sse", body: finalText }
        ])
        const run = yield* runLoop(layer(server.url), { messages: [{ role: "user", content: "go" }], tools })
        assert.deepStrictEqual(run.violations, [])
        assert.strictEqual(run.result.reason, c.runReason)
        if (c.errorMessage !== undefined) assert.strictEqual(run.result.error, c.errorMessage)

        const [first] = assistants(run.result.messages)
        assert.deepStrictEqual(first, expectedMessage(c.file, c.stopReason, c.errorMessage))

        const firstTurn = run.events.slice(0, run.events.findIndex((ev) => ev.type === "assistant_message"))
        const join = (type: ExpectedBlock["type"], get: (b: ExpectedBlock) => string) =>
          blocks.filter((b) => b.type === type).map(get).join("")
        assert.strictEqual(deltas(firstTurn, "text_delta"), join("text", (b) => (b.type === "text" ? b.text : "")))
        assert.strictEqual(
          deltas(firstTurn, "thinking_delta"),
          join("thinking", (b) => (b.type === "thinking" ? b.thinking : ""))
        )
        for (const call of calls) {
          const fragments = deltas(firstTurn, "toolcall_delta", call.id)
          assert.deepStrictEqual(fragments === "" ? {} : JSON.parse(fragments), call.input)
          const announced = modelEvents(firstTurn).find((ev) => ev.type === "toolcall_delta" && ev.id === call.id)
          assert.deepStrictEqual(announced?.type === "toolcall_delta" ? announced.name : undefined, call.name)
        }

        const requests = yield* server.requests
        if (c.stopReason !== "toolUse") {
          assert.strictEqual(requests.length, 1)
          return
        }
        // the next request replays the turn: thinking with its signature, tool_use, tool_result
        assert.strictEqual(requests.length, 2)
        assert.deepStrictEqual(toolResults(run.result.messages).map((r) => r.toolCallId), calls.map((call) => call.id))
        const second = (yield* server.bodyOf(1)) as { messages: ReadonlyArray<unknown> }
        assert.deepStrictEqual(second.messages, [
          { role: "user", content: "go" },
          {
            role: "assistant",
            content: blocks.map(({ caller: _, ...block }: ExpectedBlock & { caller?: unknown }) => block)
          },
          {
            role: "user",
            content: calls.map((call) => ({
              type: "tool_result",
              tool_use_id: call.id,
              content: [{ type: "text", text: JSON.stringify(call.input) }]
            }))
          }
        ])
      }))
  }

  it.effect("redacted thinking is replayed opaque, byte for byte, in the next request", () =>
    Effect.gen(function*() {
      const file = "anthropic/redacted-thinking.sse"
      const server = yield* makeServer([{ kind: "sse", body: fixture(file) }, { kind: "sse", body: finalText }])
      const first = yield* runLoop(layer(server.url), { messages: [{ role: "user", content: "magic" }] })
      const next = yield* runLoop(layer(server.url), {
        messages: [...first.result.messages, { role: "user", content: "and now?" }]
      })
      assert.strictEqual(next.result.reason, "stop")
      const body = (yield* server.bodyOf(1)) as { messages: ReadonlyArray<unknown> }
      const replayed = expectedOf(file).content
      assert.deepStrictEqual(body.messages, [
        { role: "user", content: "magic" },
        { role: "assistant", content: replayed },
        { role: "user", content: "and now?" }
      ])
      assert.strictEqual((replayed[0] as { data: string }).data.length, 744)
    }))
})
