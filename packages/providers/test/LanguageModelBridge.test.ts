/**
 * The bridge from effect's `LanguageModel` to the loop's `Model`, driven by a fake
 * `LanguageModel` (built with `LanguageModel.make`) that records what it is asked and streams
 * scripted response parts.
 */
import type { Message } from "@agentloop/core"
import { languageModelBridgeLayer } from "@agentloop/providers"
import { echoTool, probeTool } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Stream } from "effect"
import { AiError, LanguageModel, Prompt, Tool } from "effect/ai"
import type { Response } from "effect/ai"
import { assistants, modelEvents, runLoop, toolResults } from "./helpers/loop.ts"
import { modelErrorOf, streamOnce } from "./helpers/model.ts"

const usage = (input: number, output: number, cacheRead?: number) => ({
  inputTokens: { uncached: input, total: input + (cacheRead ?? 0), cacheRead, cacheWrite: undefined },
  outputTokens: { total: output, text: undefined, reasoning: undefined }
})

type Turn = ReadonlyArray<Response.StreamPartEncoded> | AiError.AiError

/** A fake `LanguageModel` answering each `streamText` with the next turn; it records the options. */
const fakeLanguageModel = (turns: ReadonlyArray<Turn>) => {
  const seen: Array<LanguageModel.ProviderOptions> = []
  const layer = Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: () => Effect.die("generateText is not used by the bridge"),
      streamText: (options) => {
        const turn = turns[seen.length]
        seen.push(options)
        if (turn === undefined) return Stream.die("unscripted streamText")
        return Array.isArray(turn) ? Stream.fromIterable(turn) : Stream.fail(turn as AiError.AiError)
      }
    })
  )
  return { model: Layer.provide(languageModelBridgeLayer, layer), seen }
}

/** A readable projection of an effect `Prompt` message. */
const project = (message: Prompt.Message): unknown => {
  if (message.role === "system") return { role: "system", content: message.content }
  return {
    role: message.role,
    content: message.content.map((part) => {
      switch (part.type) {
        case "text":
        case "reasoning":
          return { type: part.type, text: part.text }
        case "file":
          return { type: "file", mediaType: part.mediaType, data: part.data }
        case "tool-call":
          return { type: "tool-call", id: part.id, name: part.name, params: part.params }
        case "tool-result":
          return {
            type: "tool-result",
            id: part.id,
            name: part.name,
            isFailure: part.isFailure,
            result: part.result,
            ...(part.modelOutput === undefined ? {} : { modelOutput: part.modelOutput.map((p) => p.type) })
          }
        default:
          return { type: part.type }
      }
    })
  }
}

describe("LanguageModel bridge", () => {
  it.effect("streams text, reasoning and tool calls; the loop, not effect, runs the tools", () =>
    Effect.gen(function*() {
      const probe = probeTool(echoTool("lookup"))
      const fake = fakeLanguageModel([
        [
          { type: "response-metadata", id: "r1", modelId: "fake-model-1" },
          { type: "reasoning-start", id: "r" },
          { type: "reasoning-delta", id: "r", delta: "need data" },
          { type: "reasoning-end", id: "r" },
          { type: "text-start", id: "t" },
          { type: "text-delta", id: "t", delta: "Looking " },
          { type: "text-delta", id: "t", delta: "up." },
          { type: "text-end", id: "t" },
          { type: "tool-params-start", id: "tc1", name: "lookup" },
          { type: "tool-params-delta", id: "tc1", delta: "{\"q\":" },
          { type: "tool-params-delta", id: "tc1", delta: "\"x\"}" },
          { type: "tool-params-end", id: "tc1" },
          { type: "tool-call", id: "tc1", name: "lookup", params: { q: "x" } },
          { type: "finish", reason: "tool-calls", usage: usage(20, 9, 4) }
        ],
        [
          { type: "text-delta", id: "t2", delta: "Found it." },
          { type: "finish", reason: "stop", usage: usage(40, 3) }
        ]
      ])
      const run = yield* runLoop(fake.model, {
        systemPrompt: "sys",
        messages: [{ role: "user", content: "find x" }],
        tools: [probe.tool]
      })
      assert.deepStrictEqual(run.violations, [])
      assert.strictEqual(run.result.reason, "stop")
      assert.strictEqual(yield* probe.executions, 1)
      assert.deepStrictEqual(assistants(run.result.messages), [
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "need data" },
            { type: "text", text: "Looking up." },
            { type: "toolCall", id: "tc1", name: "lookup", arguments: { q: "x" } }
          ],
          stopReason: "toolUse",
          usage: { input: 20, output: 9, cacheRead: 4 },
          model: "fake-model-1",
          timestamp: 0
        },
        {
          role: "assistant",
          content: [{ type: "text", text: "Found it." }],
          stopReason: "stop",
          usage: { input: 40, output: 3 },
          timestamp: 0
        }
      ])
      const firstTurn = run.events.slice(0, run.events.findIndex((e) => e.type === "assistant_message"))
      assert.deepStrictEqual(modelEvents(firstTurn), [
        { type: "thinking_delta", delta: "need data" },
        { type: "text_delta", delta: "Looking " },
        { type: "text_delta", delta: "up." },
        { type: "toolcall_delta", id: "tc1", name: "lookup", delta: "" },
        { type: "toolcall_delta", id: "tc1", delta: "{\"q\":" },
        { type: "toolcall_delta", id: "tc1", delta: "\"x\"}" }
      ])

      // what effect was asked: the tools as dynamic JSON-Schema tools, deferred validation
      const [first, second] = fake.seen
      assert.deepStrictEqual(first!.tools.map((tool) => [tool.name, Tool.getDescription(tool)]), [
        ["lookup", "fake tool lookup"]
      ])
      assert.deepStrictEqual(Tool.getJsonSchema(first!.tools[0]!), probe.tool.definition.parameters)
      assert.strictEqual(first!.toolCallValidation, "deferred")
      assert.deepStrictEqual(first!.prompt.content.map(project), [
        { role: "system", content: "sys" },
        { role: "user", content: [{ type: "text", text: "find x" }] }
      ])
      assert.deepStrictEqual(second!.prompt.content.map(project), [
        { role: "system", content: "sys" },
        { role: "user", content: [{ type: "text", text: "find x" }] },
        {
          role: "assistant",
          content: [
            { type: "reasoning", text: "need data" },
            { type: "text", text: "Looking up." },
            { type: "tool-call", id: "tc1", name: "lookup", params: { q: "x" } }
          ]
        },
        {
          role: "tool",
          content: [{ type: "tool-result", id: "tc1", name: "lookup", isFailure: false, result: "{\"q\":\"x\"}" }]
        }
      ])
    }))

  it.effect("maps the transcript's images and failed tool results into the prompt", () =>
    Effect.gen(function*() {
      const fake = fakeLanguageModel([[{ type: "finish", reason: "stop", usage: usage(1, 1) }]])
      const messages: ReadonlyArray<Message> = [
        {
          role: "user",
          content: [{ type: "text", text: "see" }, { type: "image", data: "aGk=", mimeType: "image/png" }]
        },
        {
          role: "assistant",
          content: [{ type: "toolCall", id: "c", name: "shot", arguments: {} }],
          stopReason: "toolUse"
        },
        {
          role: "toolResult",
          toolCallId: "c",
          toolName: "shot",
          content: [{ type: "text", text: "failed" }, { type: "image", data: "eA==", mimeType: "image/gif" }],
          isError: true
        }
      ]
      yield* runLoop(fake.model, { messages })
      assert.deepStrictEqual(fake.seen[0]!.prompt.content.map(project), [
        {
          role: "user",
          content: [{ type: "text", text: "see" }, { type: "file", mediaType: "image/png", data: "aGk=" }]
        },
        { role: "assistant", content: [{ type: "tool-call", id: "c", name: "shot", params: {} }] },
        {
          role: "tool",
          content: [{
            type: "tool-result",
            id: "c",
            name: "shot",
            isFailure: true,
            result: "failed",
            modelOutput: ["text", "file"]
          }]
        }
      ])
    }))

  it.effect("a tool call that was not streamed is announced whole", () =>
    Effect.gen(function*() {
      const fake = fakeLanguageModel([
        [
          { type: "tool-call", id: "w1", name: "lookup", params: { q: 1 } },
          { type: "finish", reason: "tool-calls", usage: usage(1, 1) }
        ],
        [{ type: "finish", reason: "stop", usage: usage(1, 1) }]
      ])
      const run = yield* runLoop(fake.model, { tools: [echoTool("lookup")] })
      assert.deepStrictEqual(run.violations, [])
      const firstTurn = run.events.slice(0, run.events.findIndex((e) => e.type === "assistant_message"))
      assert.deepStrictEqual(modelEvents(firstTurn), [
        { type: "toolcall_delta", id: "w1", name: "lookup", delta: "{\"q\":1}" }
      ])
      assert.deepStrictEqual(toolResults(run.result.messages).map((r) => [r.toolCallId, r.isError]), [["w1", false]])
    }))

  const stopOf = (reason: Response.FinishReason, expected: string) =>
    it.effect(`finish "${reason}" is ${expected}`, () =>
      Effect.gen(function*() {
        const fake = fakeLanguageModel([[
          { type: "text-delta", id: "t", delta: "x" },
          { type: "finish", reason, usage: usage(1, 1) }
        ]])
        const run = yield* runLoop(fake.model)
        assert.deepStrictEqual(run.violations, [])
        assert.strictEqual(assistants(run.result.messages)[0]!.stopReason, expected)
      }))
  stopOf("stop", "stop")
  stopOf("length", "length")
  stopOf("content-filter", "error")
  stopOf("unknown", "stop")

  it.effect("tool-call params that are not an object end the message error; nothing runs", () =>
    Effect.gen(function*() {
      const probe = probeTool(echoTool("lookup"))
      const fake = fakeLanguageModel([[
        { type: "tool-call", id: "b1", name: "lookup", params: "oops" },
        { type: "finish", reason: "tool-calls", usage: usage(1, 1) }
      ]])
      const run = yield* runLoop(fake.model, { tools: [probe.tool] })
      assert.deepStrictEqual(run.violations, [])
      assert.strictEqual(yield* probe.executions, 0)
      assert.strictEqual(
        run.result.error,
        "the arguments of tool call \"b1\" (lookup) are not an object; no tool was run"
      )
    }))

  it.effect("an error part ends the message error", () =>
    Effect.gen(function*() {
      const fake = fakeLanguageModel([[
        { type: "text-delta", id: "t", delta: "par" },
        { type: "error", error: { message: "stream broke" } },
        { type: "finish", reason: "error", usage: usage(1, 1) }
      ]])
      const run = yield* runLoop(fake.model)
      const first = assistants(run.result.messages)[0]!
      assert.strictEqual(first.stopReason, "error")
      assert.strictEqual(first.errorMessage, "the language model reported an error: stream broke")
      assert.deepStrictEqual(first.content, [{ type: "text", text: "par" }])
    }))

  it.effect("an AiError is a ModelError with its message", () =>
    Effect.gen(function*() {
      const fake = fakeLanguageModel([
        AiError.make({ module: "FakeProvider", method: "streamText", reason: new AiError.RateLimitError({}) })
      ])
      const run = yield* runLoop(fake.model)
      assert.deepStrictEqual(run.violations, [])
      assert.strictEqual(run.result.reason, "error")
      assert.strictEqual(
        run.result.error,
        "model error: the language model failed: FakeProvider.streamText: Rate limit exceeded"
      )
    }))

  it.effect("the ModelError of an AiError says why: rate limit, bad key, anything else", () =>
    Effect.gen(function*() {
      const reasons = [
        [new AiError.RateLimitError({}), "rate_limit"],
        [new AiError.AuthenticationError({ kind: "InvalidKey" }), "auth"],
        [new AiError.UnknownError({}), "unknown"]
      ] as const
      for (const [reason, expected] of reasons) {
        const fake = fakeLanguageModel([AiError.make({ module: "FakeProvider", method: "streamText", reason })])
        const error = modelErrorOf(yield* streamOnce(fake.model))
        assert.strictEqual(error.reason, expected)
      }
    }))

  it.effect("a stream without a finish part is a ModelError", () =>
    Effect.gen(function*() {
      const fake = fakeLanguageModel([[{ type: "text-delta", id: "t", delta: "x" }]])
      const run = yield* runLoop(fake.model)
      assert.strictEqual(run.result.error, "model error: the language model stream ended without a finish part")
    }))
})
