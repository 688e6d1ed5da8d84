/**
 * Sampling: a server's `sampling/createMessage` is answered by the run's own `Model` through
 * `modelSamplingLayer`, after the policy (`ask`) approved it, its usage reported; a request that
 * is denied, malformed or asks for what the client cannot do, and a model that fails, give the
 * server a JSON-RPC error that says so. Against server-everything's `trigger-sampling-request`
 * and the capable fixture's `sample` (which sends any params it is given).
 */
import type { AssistantMessage, ModelRequest, Usage } from "@agentloop/core"
import { McpTools, modelSamplingLayer, samplingLayer } from "@agentloop/mcp"
import type { ModelSamplingOptions, SamplingRequest } from "@agentloop/mcp"
import { makeScriptedModel, turn } from "@agentloop/testkit"
import type { ScriptedTurn } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Stream } from "effect"
import { callTool, capableServer, node, serverBin, serversLayer, textOf } from "./helpers.ts"

const everything = {
  name: "everything",
  transport: "stdio",
  command: node,
  args: [
    serverBin("@modelcontextprotocol/server-everything"),
    "stdio"
  ]
} as const

const USAGE: Usage = { input: 7, output: 3 }

/** A final message from the model, with a model name and usage. */
const answer = (text: string, extra: Partial<AssistantMessage> = {}): ScriptedTurn =>
  turn.message({
    role: "assistant",
    content: [{ type: "text", text }],
    stopReason: "stop",
    model: "scripted-1",
    usage: USAGE,
    ...extra
  })

/**
 * Runs `f` with the server, sampling through `modelSamplingLayer(options)` on a scripted model;
 * what the model and the policy saw, and the usage reported.
 */
const withSampling = <A, E>(
  server: typeof everything | ReturnType<typeof capableServer>,
  script: ReadonlyArray<ScriptedTurn>,
  options: ModelSamplingOptions,
  f: Effect.Effect<A, E, McpTools>
) =>
  Effect.gen(function*() {
    const model = yield* makeScriptedModel(script)
    const asked: Array<SamplingRequest> = []
    const usage: Array<Usage> = []
    const sampling = modelSamplingLayer({
      ...options,
      ...(options.ask === undefined ? {} : {
        ask: (request: SamplingRequest) => Effect.andThen(Effect.sync(() => asked.push(request)), options.ask!(request))
      }),
      onUsage: (u) => Effect.sync(() => void usage.push(u))
    }).pipe(Layer.provide(model.layer))
    const value = yield* f.pipe(Effect.provide(serversLayer([server]).pipe(Layer.provide(sampling))))
    return { value, asked, usage, requests: yield* model.requests }
  })

const approve = () => Effect.succeed({ action: "approve" as const })

/** What the capable fixture's `sample` got back: the client's result, or its error. */
const sample = (params: Record<string, unknown>) =>
  Effect.map(callTool("capable__sample", { params }), (result) =>
    JSON.parse(textOf(result)) as {
      readonly result?: Record<string, unknown>
      readonly error?: { readonly code: number; readonly message: string }
    })

const params = (extra: Record<string, unknown> = {}) => ({
  messages: [{ role: "user", content: { type: "text", text: "Write a haiku" } }],
  maxTokens: 64,
  ...extra
})

const messagesOf = (request: ModelRequest | undefined) => request?.messages

describe("Sampling", { timeout: 30_000 }, () => {
  it.effect("server-everything's sampling tool is offered, answered by the model once approved; usage reported", () =>
    Effect.gen(function*() {
      const run = yield* withSampling(
        everything,
        [answer("Autumn moon rises")],
        { ask: approve },
        Effect.gen(function*() {
          const names = (yield* (yield* McpTools).definitions).map((d) => d.name)
          assert.include(names, "everything__trigger-sampling-request")
          return yield* callTool("everything__trigger-sampling-request", { prompt: "a haiku", maxTokens: 50 })
        })
      )
      assert.isFalse(run.value.isError, textOf(run.value))
      const sent = JSON.parse(textOf(run.value).replace(/^LLM sampling result: \n/, ""))
      assert.deepStrictEqual(sent, {
        role: "assistant",
        content: { type: "text", text: "Autumn moon rises" },
        model: "scripted-1",
        stopReason: "endTurn"
      })
      // the model got the server's system prompt and message, and no tools
      const [request] = run.requests
      assert.strictEqual(request?.systemPrompt, "You are a helpful test server.")
      assert.deepStrictEqual(messagesOf(request), [{
        role: "user",
        content: [{ type: "text", text: "Resource trigger-sampling-request context: a haiku" }]
      }])
      assert.deepStrictEqual(request?.tools, [])
      // the policy saw the whole request
      assert.strictEqual(run.asked.length, 1)
      assert.deepInclude(run.asked[0]!, {
        server: "everything",
        maxTokens: 50,
        temperature: 0.7,
        includeContext: "none"
      })
      assert.deepStrictEqual(run.usage, [USAGE])
    }))

  it.effect("with no one to ask, a request is denied (code -1) and the model is not asked", () =>
    Effect.gen(function*() {
      const run = yield* withSampling(capableServer(), [], {}, sample(params()))
      assert.deepStrictEqual(run.value.error, {
        code: -1,
        message: "MCP error -1: User rejected sampling request: no one is there to approve it"
      })
      assert.strictEqual(run.requests.length, 0)
      assert.deepStrictEqual(run.usage, [])
    }))

  it.effect("the policy can deny with a reason, or edit the request before the model sees it", () =>
    Effect.gen(function*() {
      const denied = yield* withSampling(
        capableServer(),
        [],
        { ask: () => Effect.succeed({ action: "deny", reason: "not now" }) },
        sample(params())
      )
      assert.strictEqual(denied.value.error?.message, "MCP error -1: User rejected sampling request: not now")

      // a policy that dies denies the request
      const crashed = yield* withSampling(
        capableServer(),
        [],
        { ask: () => Effect.die("the prompt crashed") },
        sample(params())
      )
      assert.deepStrictEqual(crashed.value.error, {
        code: -1,
        message: "MCP error -1: User rejected sampling request: it could not be asked"
      })
      assert.strictEqual(crashed.requests.length, 0)

      const edited = yield* withSampling(
        capableServer(),
        [answer("edited answer")],
        {
          ask: (request) =>
            Effect.succeed({
              action: "edit",
              request: { ...request, systemPrompt: "Be brief.", messages: [{ role: "user", content: "A shorter one" }] }
            })
        },
        sample(params({ systemPrompt: "You are a poet." }))
      )
      assert.deepInclude(edited.value.result!, { content: { type: "text", text: "edited answer" } })
      assert.strictEqual(edited.requests[0]?.systemPrompt, "Be brief.")
      assert.deepStrictEqual(messagesOf(edited.requests[0]), [{ role: "user", content: "A shorter one" }])
    }))

  it.effect("review can withhold the answer (its usage still counted); stop sequences cut it", () =>
    Effect.gen(function*() {
      const withheld = yield* withSampling(
        capableServer(),
        [answer("the answer")],
        { ask: approve, review: () => Effect.succeed({ action: "deny" }) },
        sample(params())
      )
      assert.strictEqual(withheld.value.error?.code, -1)
      assert.deepStrictEqual(withheld.usage, [USAGE])

      const cut = yield* withSampling(
        capableServer(),
        [answer("one two STOP three")],
        { ask: approve },
        sample(params({ stopSequences: ["STOP"] }))
      )
      assert.deepInclude(cut.value.result!, { content: { type: "text", text: "one two " }, stopReason: "stopSequence" })
    }))

  it.effect("a model that fails or dies gives the server an internal error saying so, never a stack", () =>
    Effect.gen(function*() {
      const failed = yield* withSampling(
        capableServer(),
        [turn.failing("rate limited (429)")],
        { ask: approve },
        sample(params())
      )
      assert.deepStrictEqual(failed.value.error, {
        code: -32603,
        message: "MCP error -32603: The model failed: rate limited (429)"
      })
      const died = yield* withSampling(
        capableServer(),
        [turn.dying(new Error("boom at line 3"))],
        { ask: approve },
        sample(params())
      )
      assert.deepStrictEqual(died.value.error, {
        code: -32603,
        message: "MCP error -32603: The model failed unexpectedly."
      })
      const stopped = yield* withSampling(
        capableServer(),
        [turn.error("overloaded")],
        { ask: approve },
        sample(params())
      )
      assert.strictEqual(stopped.value.error?.message, "MCP error -32603: The model failed: overloaded")
    }))

  it.effect("a malformed request, or one the client cannot answer, is refused naming what is wrong", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
        [{ messages: [{ role: "user", content: { type: "text", text: "hi" } }] }, "params.maxTokens"],
        [params({ messages: "not a list" }), "params.messages"],
        [params({ tools: [{ name: "t", inputSchema: { type: "object" } }] }), "declares no sampling.tools"],
        [
          params({ messages: [{ role: "user", content: { type: "audio", data: "UklGRg==", mimeType: "audio/wav" } }] }),
          "params.messages.0: audio cannot be sampled"
        ],
        [
          params({
            messages: [{ role: "assistant", content: { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" } }]
          }),
          "params.messages.0: an assistant message's image cannot be sampled"
        ]
      ]
      const run = yield* withSampling(
        capableServer(),
        [],
        { ask: approve },
        Effect.forEach(cases, ([p]) => sample(p))
      )
      for (const [i, [, expected]] of cases.entries()) {
        const error = run.value[i]!.error
        assert.strictEqual(error?.code, -32602, JSON.stringify(error))
        assert.include(error!.message, expected)
      }
      assert.strictEqual(run.requests.length, 0)
      assert.strictEqual(run.asked.length, 0)
    }))

  it.effect("without a Sampling service the capability is not declared", () =>
    Effect.gen(function*() {
      const names = yield* Effect.gen(function*() {
        return (yield* (yield* McpTools).definitions).map((d) => d.name)
      }).pipe(Effect.provide(serversLayer([everything])))
      assert.notInclude(names, "everything__trigger-sampling-request")
      const refused = yield* sample(params()).pipe(Effect.provide(serversLayer([capableServer()])))
      assert.strictEqual(refused.error?.code, -32601)
    }))

  it.effect("a server that cancels its request interrupts the model", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const interrupted = yield* Deferred.make<void>()
      const waiting: ScriptedTurn = () =>
        Stream.fromEffect(
          Deferred.succeed(started, undefined).pipe(
            Effect.andThen(Effect.never),
            Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined))
          )
        )
      const run = yield* withSampling(
        capableServer(),
        [waiting],
        { ask: approve },
        Effect.gen(function*() {
          const call = yield* Effect.forkChild(callTool("capable__sample_then_cancel", { params: params() }))
          yield* Deferred.await(started)
          yield* callTool("capable__cancel_sample")
          yield* Deferred.await(interrupted)
          return yield* Fiber.join(call)
        })
      )
      assert.strictEqual(textOf(run.value), "\"cancelled\"")
      assert.deepStrictEqual(run.usage, [])
    }))

  it.effect("a Sampling service of one's own answers; one that dies gives an internal error", () =>
    Effect.gen(function*() {
      const own = samplingLayer((request) =>
        Effect.succeed({ text: `${request.messages.length} message(s)`, model: "mine", stopReason: "endTurn" })
      )
      const answered = yield* sample(params()).pipe(
        Effect.provide(serversLayer([capableServer()]).pipe(Layer.provide(own)))
      )
      assert.deepInclude(answered.result!, { content: { type: "text", text: "1 message(s)" }, model: "mine" })
      const dying = samplingLayer(() => Effect.die(new Error("the UI crashed")))
      const died = yield* sample(params()).pipe(
        Effect.provide(serversLayer([capableServer()]).pipe(Layer.provide(dying)))
      )
      assert.deepStrictEqual(died.error, {
        code: -32603,
        message: "MCP error -32603: The sampling service failed unexpectedly."
      })
    }))
})
