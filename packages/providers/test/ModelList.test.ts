import { listModels, openAiCompatFetchLayer } from "@agentloop/providers"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { runLoop } from "./helpers/loop.ts"
import { chatSse, makeServer } from "./helpers/server.ts"

describe("model lists and reasoning effort", () => {
  it.effect("an OpenAI-compatible server's /models, sorted; Anthropic's /v1/models with its key and names", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        { kind: "status", status: 200, body: JSON.stringify({ data: [{ id: "qwen2.5-coder" }, { id: "llama3" }] }) },
        {
          kind: "status",
          status: 200,
          body: JSON.stringify({ data: [{ id: "claude-sonnet-4-5", display_name: "Claude Sonnet 4.5" }] })
        }
      ])
      const openai = yield* listModels({ provider: "openai-compat", baseUrl: `${server.url}/v1` })
      assert.deepStrictEqual(openai, [{ id: "llama3" }, { id: "qwen2.5-coder" }])
      const anthropic = yield* listModels({ provider: "anthropic", baseUrl: server.url, apiKey: "sk-ant-secret" })
      assert.deepStrictEqual(anthropic, [{ id: "claude-sonnet-4-5", name: "Claude Sonnet 4.5" }])
      const [first, second] = yield* server.requests
      assert.strictEqual(first!.path, "/v1/models?limit=1000")
      assert.isUndefined(first!.headers["authorization"], "no key goes to a server that was not given one")
      assert.strictEqual(second!.path, "/v1/models?limit=1000")
      assert.strictEqual(second!.headers["x-api-key"], "sk-ant-secret")
    }))

  it.effect("a refusal or a body that is not a list: an error naming the server and the status, never the key", () =>
    Effect.gen(function*() {
      const server = yield* makeServer([
        { kind: "status", status: 401, body: JSON.stringify({ error: "bad key sk-secret-777" }) },
        { kind: "status", status: 200, body: "<html>not json</html>" }
      ])
      const refused = yield* Effect.exit(
        listModels({ provider: "openai-compat", baseUrl: `${server.url}/v1`, apiKey: "sk-secret-777" })
      )
      assert.isTrue(Exit.isFailure(refused))
      const text = JSON.stringify(refused)
      assert.include(text, "answered HTTP 401")
      assert.notInclude(text, "sk-secret-777")
      const garbled = yield* Effect.exit(listModels({ provider: "openai-compat", baseUrl: `${server.url}/v1` }))
      assert.include(JSON.stringify(garbled), "did not answer with a model list")
    }))

  it.effect("reasoningEffort is sent as reasoning_effort, and only when set; a bad value is a config error", () =>
    Effect.gen(function*() {
      const reply = {
        kind: "sse",
        body: chatSse([{ choices: [{ index: 0, delta: { content: "ok" }, finish_reason: "stop" }] }])
      } as const
      const server = yield* makeServer([reply, reply])
      const options = { model: "o4-mini", baseUrl: `${server.url}/v1` }
      yield* runLoop(openAiCompatFetchLayer({ ...options, reasoningEffort: "high" }), {
        messages: [{ role: "user", content: "hi" }]
      })
      yield* runLoop(openAiCompatFetchLayer(options), { messages: [{ role: "user", content: "hi" }] })
      assert.strictEqual(((yield* server.bodyOf(0)) as Record<string, unknown>)["reasoning_effort"], "high")
      assert.notProperty(yield* server.bodyOf(1), "reasoning_effort")
      const bad = yield* Effect.exit(
        runLoop(openAiCompatFetchLayer({ ...options, reasoningEffort: "max" as never }), {
          messages: [{ role: "user", content: "hi" }]
        })
      )
      assert.include(JSON.stringify(bad), "reasoningEffort must be")
    }))
})
