/**
 * Every Chat Completions stream recorded in `test/fixtures` (`openai-chat/*`,
 * `openai-compat/*`), replayed by a loopback server through the whole loop, checked against
 * `expected.json` and the fixtures' README.
 */
import type { AssistantMessage, StopReason } from "@agentloop/core"
import { openAiCompatFetchLayer } from "@agentloop/providers"
import { echoTool } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { assistants, deltas, expected, fixture, modelEvents, runLoop, toolResults } from "./helpers/loop.ts"
import { chatSse, makeServer } from "./helpers/server.ts"
import { withCost } from "./helpers/usage.ts"

interface ExpectedToolCall {
  readonly id: string
  readonly name: string
  readonly arguments: string
  readonly parsed_arguments: Record<string, unknown>
}

interface ExpectedChat {
  readonly content: string
  readonly reasoning: string
  readonly models: ReadonlyArray<string>
  readonly tool_calls: ReadonlyArray<ExpectedToolCall>
  readonly usage: {
    readonly prompt_tokens: number
    readonly completion_tokens: number
    readonly prompt_tokens_details?: { readonly cached_tokens?: number }
  }
}

const expectedOf = (file: string) => expected[file] as unknown as ExpectedChat

/** The message `file` must produce, built from `expected.json`. */
const expectedMessage = (file: string, stopReason: StopReason, errorMessage?: string): AssistantMessage => {
  const e = expectedOf(file)
  const cached = e.usage.prompt_tokens_details?.cached_tokens
  return {
    role: "assistant",
    content: [
      ...(e.reasoning === "" ? [] : [{ type: "thinking" as const, thinking: e.reasoning }]),
      ...(e.content === "" ? [] : [{ type: "text" as const, text: e.content }]),
      ...e.tool_calls.map((call) => ({
        type: "toolCall" as const,
        id: call.id,
        name: call.name,
        arguments: call.parsed_arguments
      }))
    ],
    stopReason,
    ...(errorMessage === undefined ? {} : { errorMessage }),
    usage: withCost({
      input: e.usage.prompt_tokens - (cached ?? 0),
      output: e.usage.completion_tokens,
      ...(cached === undefined ? {} : { cacheRead: cached })
    }, e.models.filter((m) => m !== "").at(-1)!),
    model: e.models.filter((m) => m !== "").at(-1)!,
    timestamp: 0
  }
}

const finalText = chatSse([{ choices: [{ index: 0, delta: { content: "all done" }, finish_reason: "stop" }] }])

interface Case {
  readonly file: string
  readonly stopReason: StopReason
  readonly runReason: "stop" | "length" | "error"
  readonly errorMessage?: string
}

const cases: ReadonlyArray<Case> = [
  { file: "openai-chat/text-with-usage.sse", stopReason: "stop", runReason: "stop" },
  { file: "openai-chat/single-tool-call.sse", stopReason: "toolUse", runReason: "stop" },
  { file: "openai-chat/parallel-tool-calls.sse", stopReason: "toolUse", runReason: "stop" },
  { file: "openai-chat/length-truncated-text.sse", stopReason: "length", runReason: "length" },
  { file: "openai-chat/length-reasoning-only-empty-content.sse", stopReason: "length", runReason: "length" },
  { file: "openai-chat/azure-content-filter-text.sse", stopReason: "stop", runReason: "stop" },
  { file: "openai-compat/deepseek-reasoner-reasoning-then-tool-call.sse", stopReason: "toolUse", runReason: "stop" },
  {
    file: "openai-compat/openrouter-minimax-reasoning-length-then-error.sse",
    stopReason: "error",
    runReason: "error",
    errorMessage: "the OpenAI-compatible server reported an error in the stream: Token limit reached (code 400)"
  },
  // no finish_reason at all: the tool call makes it toolUse
  { file: "openai-compat/openrouter-kimi-tool-call-no-finish-reason.sse", stopReason: "toolUse", runReason: "stop" },
  { file: "openai-compat/openrouter-kimi-tool-call-name-then-args.sse", stopReason: "toolUse", runReason: "stop" },
  { file: "openai-compat/mistral-tool-call-no-index.sse", stopReason: "toolUse", runReason: "stop" },
  { file: "openai-compat/alibaba-qwen-tool-call-empty-id-deltas.sse", stopReason: "toolUse", runReason: "stop" }
]

describe("OpenAI-compatible fixtures, replayed through the loop", () => {
  it("covers every Chat Completions fixture of expected.json", () => {
    const files = Object.keys(expected).filter((f) => f.startsWith("openai-")).sort()
    assert.deepStrictEqual(cases.map((c) => c.file).sort(), files)
  })

  for (const c of cases) {
    it.effect(c.file, () =>
      Effect.gen(function*() {
        const e = expectedOf(c.file)
        const calls = e.tool_calls
        const tools = [...new Set(calls.map((call) => call.name))].map((name) => echoTool(name))
        const server = yield* makeServer([
          { kind: "sse", body: fixture(c.file), chunkSize: 97 },
          { kind: "sse", body: finalText }
        ])
        const run = yield* runLoop(
          openAiCompatFetchLayer({ model: "test-model", baseUrl: `${server.url}/v1`, apiKey: "test-key" }),
          { messages: [{ role: "user", content: "go" }], tools }
        )
        assert.deepStrictEqual(run.violations, [])
        assert.strictEqual(run.result.reason, c.runReason)

        // the turn's final message, exactly
        const [first] = assistants(run.result.messages)
        assert.deepStrictEqual(first, expectedMessage(c.file, c.stopReason, c.errorMessage))

        // the streamed deltas add up to the same content; each call is announced with its name
        const firstTurn = run.events.slice(0, run.events.findIndex((ev) => ev.type === "assistant_message"))
        assert.strictEqual(deltas(firstTurn, "text_delta"), e.content)
        assert.strictEqual(deltas(firstTurn, "thinking_delta"), e.reasoning)
        for (const call of calls) {
          assert.strictEqual(deltas(firstTurn, "toolcall_delta", call.id), call.arguments)
          const announced = modelEvents(firstTurn).find((ev) => ev.type === "toolcall_delta" && ev.id === call.id)
          assert.deepStrictEqual(announced?.type === "toolcall_delta" ? announced.name : undefined, call.name)
        }

        const requests = yield* server.requests
        if (c.stopReason !== "toolUse") {
          assert.strictEqual(requests.length, 1)
          return
        }
        // the calls ran, and the next request sends them back with their recorded ids
        assert.strictEqual(requests.length, 2)
        assert.deepStrictEqual(
          toolResults(run.result.messages).map((r) => [r.toolCallId, r.isError]),
          calls.map((call) => [call.id, false])
        )
        const second = (yield* server.bodyOf(1)) as { messages: ReadonlyArray<unknown> }
        assert.deepStrictEqual(second.messages, [
          { role: "user", content: "go" },
          {
            role: "assistant",
            content: null,
            tool_calls: calls.map((call) => ({
              id: call.id,
              type: "function",
              function: { name: call.name, arguments: JSON.stringify(call.parsed_arguments) }
            }))
          },
          ...calls.map((call) => ({
            role: "tool",
            tool_call_id: call.id,
            content: JSON.stringify(call.parsed_arguments)
          }))
        ])
      }))
  }

  it.effect("the SSE comments OpenRouter sends are skipped, and the fixture has 17 of them", () =>
    Effect.gen(function*() {
      const body = fixture("openai-compat/openrouter-minimax-reasoning-length-then-error.sse")
      assert.strictEqual(body.split("\n").filter((line) => line.startsWith(":")).length, 17)
      const server = yield* makeServer([{ kind: "sse", body, chunkSize: 5 }])
      const run = yield* runLoop(openAiCompatFetchLayer({ model: "m", baseUrl: server.url, apiKey: "k" }))
      assert.strictEqual(assistants(run.result.messages)[0]?.content.length, 1)
    }))
})
