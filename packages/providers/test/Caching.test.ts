/**
 * Prompt caching and cost: Anthropic breakpoints on the tools, the system prompt and the latest
 * turns, with the cached prefix unchanged from one request to the next over a 5-turn session;
 * cache usage reported; OpenAI-compatible requests that extend the previous one (so automatic
 * prefix caching applies); each turn's `usage.cost` from the price table, summed over the run.
 */
import { anthropicFetchLayer, openAiCompatFetchLayer } from "@agentloop/providers"
import { echoTool } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { assistants, runLoop } from "./helpers/loop.ts"
import { chatSse, makeServer, namedSse } from "./helpers/server.ts"
import type { Reply } from "./helpers/server.ts"

type Json = Record<string, unknown>

/** The cacheable units of a Messages request in the order Anthropic caches them: tools, system, message blocks. */
const cacheUnits = (body: Json): Array<Json> => {
  const tools = (body["tools"] ?? []) as ReadonlyArray<Json>
  const system = body["system"]
  const messages = body["messages"] as ReadonlyArray<{ role: string; content: string | ReadonlyArray<Json> }>
  const systemUnits: Array<Json> = system === undefined ?
    [] :
    typeof system === "string" ?
    [{ system }] :
    (system as ReadonlyArray<Json>).map((s) => ({ system: s }))
  return [
    ...tools.map((tool): Json => ({ tool })),
    ...systemUnits,
    ...messages.flatMap((message, index): Array<Json> =>
      typeof message.content === "string" ?
        [{ message: index, role: message.role, text: message.content }] :
        message.content.map((block) => ({ message: index, role: message.role, block }))
    )
  ]
}

const marked = (unit: Json): boolean => JSON.stringify(unit).includes("\"cache_control\"")
/** The bytes the cache hashes: the units without the breakpoint markers. */
const bytesOf = (units: ReadonlyArray<Json>): string =>
  JSON.stringify(units, (key, value: unknown) => (key === "cache_control" ? undefined : value))

const anthropicTurn = (turn: number, final: boolean): Reply => ({
  kind: "sse",
  body: namedSse([
    {
      type: "message_start",
      message: {
        model: "claude-sonnet-4-5-20250929",
        usage: { input_tokens: 10, output_tokens: 1, cache_creation_input_tokens: 1000, cache_read_input_tokens: 3000 }
      }
    },
    { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
    { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: `step ${turn}` } },
    { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: `sig-${turn}` } },
    { type: "content_block_stop", index: 0 },
    { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
    {
      type: "content_block_delta",
      index: 1,
      delta: { type: "text_delta", text: final ? "All done." : `Turn ${turn}.` }
    },
    { type: "content_block_stop", index: 1 },
    ...(final ? [] : [
      {
        type: "content_block_start",
        index: 2,
        content_block: { type: "tool_use", id: `toolu_${turn}`, name: "echo", input: {} }
      },
      { type: "content_block_delta", index: 2, delta: { type: "input_json_delta", partial_json: `{"n":${turn}}` } },
      { type: "content_block_stop", index: 2 }
    ]),
    { type: "message_delta", delta: { stop_reason: final ? "end_turn" : "tool_use" }, usage: { output_tokens: 20 } },
    { type: "message_stop" }
  ])
})

describe("Anthropic prompt caching", () => {
  it.effect("in a 5-turn session, every prefix a request marks for caching comes back byte-identical in the next", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([0, 1, 2, 3, 4].map((turn) => anthropicTurn(turn, turn === 4)))
      const run = yield* runLoop(
        anthropicFetchLayer({
          model: "claude-sonnet-4-5",
          baseUrl: server.url,
          apiKey: "k",
          maxTokens: 4096,
          thinking: { budgetTokens: 2048 }
        }),
        {
          systemPrompt: "You are a careful agent.",
          messages: [{ role: "user", content: "count to four" }],
          tools: [echoTool("echo"), echoTool("other")]
        }
      )
      assert.deepStrictEqual(run.violations, [])
      assert.strictEqual(run.result.reason, "stop")
      const requests = yield* server.requests
      assert.strictEqual(requests.length, 5)
      const bodies = requests.map((request) => JSON.parse(request.body) as Json)
      for (let i = 0; i < bodies.length; i++) {
        const units = cacheUnits(bodies[i]!)
        const breakpoints = units.flatMap((unit, index) => (marked(unit) ? [index] : []))
        // the last tool, the system prompt, and the latest user turns (two once there are two)
        assert.strictEqual(breakpoints.length, i === 0 ? 3 : 4, `request ${i}`)
        assert.isTrue(marked(units[1]!) && marked(units[2]!), "the last tool and the system prompt")
        assert.isTrue(marked(units[units.length - 1]!), "the latest turn")
        if (i === bodies.length - 1) continue
        const next = cacheUnits(bodies[i + 1]!)
        for (const breakpoint of breakpoints) {
          assert.strictEqual(
            bytesOf(next.slice(0, breakpoint + 1)),
            bytesOf(units.slice(0, breakpoint + 1)),
            `request ${i + 1} changes the prefix request ${i} cached up to unit ${breakpoint}`
          )
        }
      }
    }))

  it.effect("cache reads and writes are reported and priced; the run sums the cost", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([anthropicTurn(0, false), anthropicTurn(1, true)])
      const run = yield* runLoop(
        anthropicFetchLayer({ model: "claude-sonnet-4-5", baseUrl: server.url, apiKey: "k" }),
        { tools: [echoTool("echo")] }
      )
      const turns = assistants(run.result.messages)
      assert.strictEqual(turns.length, 2)
      // $3 input, $15 output, $3.75 cache write, $0.30 cache read per million tokens
      const cost = (10 * 3 + 20 * 15 + 1000 * 3.75 + 3000 * 0.3) / 1_000_000
      for (const turn of turns) {
        assert.deepStrictEqual(turn.usage, { input: 10, output: 20, cacheRead: 3000, cacheWrite: 1000, cost })
      }
      assert.closeTo(run.result.usage!.cost!, 2 * cost, 1e-12)
    }))

  it.effect("explicit prices win over the table; prices: false sets no cost", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([anthropicTurn(1, true), anthropicTurn(1, true)])
      const priced = yield* runLoop(
        anthropicFetchLayer({
          model: "claude-sonnet-4-5",
          baseUrl: server.url,
          apiKey: "k",
          prices: { input: 1, output: 2, cacheRead: 0, cacheWrite: 0 }
        })
      )
      assert.strictEqual(assistants(priced.result.messages)[0]!.usage!.cost, (10 + 40) / 1_000_000)
      const unpriced = yield* runLoop(
        anthropicFetchLayer({ model: "claude-sonnet-4-5", baseUrl: server.url, apiKey: "k", prices: false })
      )
      assert.isFalse("cost" in assistants(unpriced.result.messages)[0]!.usage!)
    }))
})

describe("OpenAI-compatible caching and cost", () => {
  const toolTurn = (turn: number): Reply => ({
    kind: "sse",
    body: chatSse([
      { choices: [{ index: 0, delta: { content: `Turn ${turn}.` }, finish_reason: null }] },
      {
        choices: [{
          index: 0,
          delta: {
            tool_calls: [{
              index: 0,
              id: `call_${turn}`,
              type: "function",
              function: { name: "echo", arguments: `{"n":${turn}}` }
            }]
          },
          finish_reason: "tool_calls"
        }]
      },
      {
        choices: [],
        usage: { prompt_tokens: 1500, completion_tokens: 100, prompt_tokens_details: { cached_tokens: 500 } }
      }
    ])
  })
  const finalTurn: Reply = {
    kind: "sse",
    body: chatSse([
      { choices: [{ index: 0, delta: { content: "Done." }, finish_reason: "stop" }] },
      {
        choices: [],
        usage: { prompt_tokens: 1500, completion_tokens: 100, prompt_tokens_details: { cached_tokens: 500 } }
      }
    ])
  }

  it.effect("in a 5-turn session each request starts with the previous one, byte for byte; cached tokens priced", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([toolTurn(0), toolTurn(1), toolTurn(2), toolTurn(3), finalTurn])
      const run = yield* runLoop(
        openAiCompatFetchLayer({ model: "gpt-4.1", baseUrl: `${server.url}/v1`, apiKey: "k" }),
        { systemPrompt: "be brief", messages: [{ role: "user", content: "count" }], tools: [echoTool("echo")] }
      )
      assert.strictEqual(run.result.reason, "stop")
      const bodies = (yield* server.requests).map((request) => JSON.parse(request.body) as Json)
      assert.strictEqual(bodies.length, 5)
      for (let i = 0; i + 1 < bodies.length; i++) {
        const before = bodies[i]!["messages"] as ReadonlyArray<unknown>
        const after = bodies[i + 1]!["messages"] as ReadonlyArray<unknown>
        assert.strictEqual(JSON.stringify(after.slice(0, before.length)), JSON.stringify(before))
        assert.strictEqual(JSON.stringify(bodies[i + 1]!["tools"]), JSON.stringify(bodies[i]!["tools"]))
      }
      // $2 input, $0.50 cached input, $8 output per million tokens (gpt-4.1)
      const cost = (1000 * 2 + 500 * 0.5 + 100 * 8) / 1_000_000
      for (const turn of assistants(run.result.messages)) {
        assert.deepStrictEqual(turn.usage, { input: 1000, output: 100, cacheRead: 500, cost })
      }
      assert.closeTo(run.result.usage!.cost!, 5 * cost, 1e-12)
    }))

  it.effect("DeepSeek's prompt_cache_hit_tokens are cache reads", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([{
        kind: "sse",
        body: chatSse([
          { choices: [{ index: 0, delta: { content: "ok" }, finish_reason: "stop" }] },
          {
            choices: [],
            usage: {
              prompt_tokens: 900,
              completion_tokens: 5,
              prompt_cache_hit_tokens: 800,
              prompt_cache_miss_tokens: 100
            }
          }
        ])
      }])
      const run = yield* runLoop(
        openAiCompatFetchLayer({ model: "deepseek-chat", baseUrl: `${server.url}/v1`, apiKey: "k" })
      )
      assert.deepStrictEqual(assistants(run.result.messages)[0]!.usage, { input: 100, output: 5, cacheRead: 800 })
    }))
})
