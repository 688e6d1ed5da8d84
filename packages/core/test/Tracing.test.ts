import {
  AgentTrace,
  allow,
  ask,
  callbackSinkLayer,
  Model,
  otlpTracingLayer,
  runAgentLoop,
  toolExecutorLayer
} from "@agentloop/core"
import type { LoopEvent, ToolPolicy } from "@agentloop/core"
import { assistant, echoTool, makeScriptedModel, scriptedSubAgent, toolCall, turn, user } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Layer } from "effect"
import { childrenOf, startOtlpReceiver } from "./fixtures/otlp-receiver.ts"
import type { ReceivedSpan } from "./fixtures/otlp-receiver.ts"

const INTERNAL = 1
const CLIENT = 3

/** A receiver for the test's duration. */
const receiver = Effect.acquireRelease(Effect.promise(startOtlpReceiver), (r) => Effect.promise(r.close))

/** Approves call `w1`, denies every other call that asks. */
const answerApprovals = (event: LoopEvent) => {
  if (event.type !== "approval_request") return
  Deferred.doneUnsafe(
    event.answer,
    Exit.succeed(event.call.id === "w1" ? { approved: true } : { approved: false, reason: "not that one" })
  )
}

const writesAsk: ToolPolicy = (call) => call.name === "write" ? ask : allow

const one = (spans: ReadonlyArray<ReceivedSpan>, name: string): ReceivedSpan => {
  const found = spans.filter((s) => s.name === name)
  assert.strictEqual(found.length, 1, `one span named "${name}" among ${spans.map((s) => s.name).join(", ")}`)
  return found[0]!
}

describe("tracing over OTLP (otlpTracingLayer)", () => {
  it.effect("a run with tools, an approval and a sub-agent: the span tree and its GenAI attributes", () =>
    Effect.scoped(Effect.gen(function*() {
      const otlp = yield* receiver
      const researcher = yield* scriptedSubAgent({
        name: "researcher",
        tools: [echoTool("lookup")],
        script: [turn.toolCalls([toolCall("l1", "lookup", { q: "x" })]), turn.text("x is 42", { input: 5, output: 1 })]
      })
      const scripted = yield* makeScriptedModel([
        turn.message({
          ...assistant("toolUse", {
            calls: [toolCall("r1", "read"), toolCall("w1", "write"), toolCall("w2", "write")],
            usage: { input: 10, output: 4, cacheRead: 6 }
          }),
          model: "gpt-test-2025-01-01"
        }),
        turn.toolCalls([toolCall("s1", "researcher", { task: "find x" })]),
        turn.text("x is 42", { input: 30, output: 2 })
      ])
      // a model that says what it is, as the providers' models do
      const model = Model.of({
        stream: scripted.service.stream,
        describe: () => ({ provider: "openai", model: "gpt-test" })
      })
      const result = yield* runAgentLoop({ messages: [user("what is x?")], policy: writesAsk }).pipe(
        Effect.provide(Layer.mergeAll(
          Layer.succeed(Model, model),
          callbackSinkLayer(answerApprovals),
          toolExecutorLayer([echoTool("read"), echoTool("write"), researcher.tool])
        )),
        Effect.provideService(AgentTrace, { name: "lead", conversationId: "conversation-1" }),
        // the layer's scope closes with the run: what is left is sent then
        Effect.provide(otlpTracingLayer({ url: `${otlp.url}/v1/traces`, serviceName: "tracing-test" }))
      )
      assert.strictEqual(result.reason, "stop")

      assert.isTrue(otlp.exports.every((e) => e.path === "/v1/traces"))
      const spans = otlp.spans()
      assert.isTrue(spans.every((s) => s.service === "tracing-test"))
      assert.strictEqual(new Set(spans.map((s) => s.traceId)).size, 1, "one trace")

      // the run: invoke_agent, the root
      const run = one(spans, "invoke_agent lead")
      assert.isUndefined(run.parentSpanId)
      assert.strictEqual(run.kind, INTERNAL)
      assert.deepInclude(run.attributes, {
        "agentloop.span": "agentloop.run",
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "lead",
        "gen_ai.conversation.id": "conversation-1",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
        "agentloop.reason": "stop",
        "agentloop.steps": 3,
        // the run's usage, the sub-agent's included; input counts the cache reads too
        "gen_ai.usage.input_tokens": 10 + 6 + 30 + 5,
        "gen_ai.usage.output_tokens": 4 + 2 + 1
      })
      const top = childrenOf(spans, run)
      assert.sameMembers(top.map((s) => s.name), [
        "chat gpt-test",
        "chat gpt-test",
        "chat gpt-test",
        "execute_tool read",
        "execute_tool write",
        "execute_tool write",
        "execute_tool researcher"
      ])

      // each model turn: chat {model}, a client span
      const chats = top.filter((s) => s.attributes["gen_ai.operation.name"] === "chat")
        .sort((a, b) => Number(a.attributes["agentloop.step"]) - Number(b.attributes["agentloop.step"]))
      assert.deepStrictEqual(chats.map((s) => s.attributes["agentloop.step"]), [1, 2, 3])
      assert.isTrue(chats.every((s) => s.kind === CLIENT && s.attributes["agentloop.span"] === "agentloop.turn"))
      assert.deepInclude(chats[0]!.attributes, {
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
        "gen_ai.response.model": "gpt-test-2025-01-01",
        "gen_ai.usage.input_tokens": 16,
        "gen_ai.usage.output_tokens": 4,
        "gen_ai.usage.cache_read.input_tokens": 6,
        "gen_ai.response.finish_reasons": ["tool_calls"]
      })
      assert.isUndefined(chats[1]!.attributes["gen_ai.usage.input_tokens"], "a turn without usage reports none")
      assert.deepInclude(chats[2]!.attributes, {
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 2,
        "gen_ai.response.finish_reasons": ["stop"]
      })

      // each call: execute_tool {tool}, the approval inside the call that asked
      const call = (id: string) => {
        const found = top.find((s) => s.attributes["gen_ai.tool.call.id"] === id)
        assert.isDefined(found, `a span for call ${id}`)
        return found!
      }
      const read = call("r1")
      assert.strictEqual(read.kind, INTERNAL)
      assert.deepInclude(read.attributes, {
        "agentloop.span": "agentloop.tool",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "read",
        "gen_ai.tool.type": "function",
        "gen_ai.agent.name": "lead",
        "agentloop.tool.outcome": "ok"
      })
      assert.deepStrictEqual(childrenOf(spans, read), [], "a call allowed outright waits for nobody")
      const approved = call("w1")
      assert.strictEqual(approved.attributes["agentloop.tool.outcome"], "ok")
      const [approval] = childrenOf(spans, approved)
      assert.strictEqual(approval?.name, "agentloop.approval")
      assert.deepInclude(approval!.attributes, {
        "agentloop.approval.outcome": "approved",
        "agentloop.approval.always": false,
        "agentloop.tool.call_id": "w1"
      })
      const denied = call("w2")
      assert.deepInclude(denied.attributes, { "agentloop.tool.outcome": "error", "error.type": "denied" })
      assert.deepStrictEqual(childrenOf(spans, denied).map((s) => s.attributes["agentloop.approval.outcome"]), [
        "denied"
      ])

      // the sub-agent: its own invoke_agent inside the call's span, its turns and calls inside that
      const delegated = call("s1")
      const [child] = childrenOf(spans, delegated)
      assert.strictEqual(child?.name, "invoke_agent researcher")
      assert.deepInclude(child!.attributes, {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "researcher",
        "agentloop.reason": "stop"
      })
      assert.isUndefined(child!.attributes["gen_ai.conversation.id"], "a sub-agent's transcript is its own")
      const inner = childrenOf(spans, child!)
      // (the scripted sub-agent's model does not describe itself: its turns are plain `chat`)
      assert.sameMembers(inner.map((s) => s.name), ["chat", "chat", "execute_tool lookup"])
      assert.strictEqual(one(inner, "execute_tool lookup").attributes["gen_ai.agent.name"], "researcher")
    })))
})
