import { allow, ask, callbackSinkLayer, pairingViolations, runAgentLoop, toolExecutorLayer } from "@agentloop/core"
import type { ToolResultMessage } from "@agentloop/core"
import { toolkitPolicy, toolkitTools } from "@agentloop/providers"
import { makeScriptedModel, runScripted, toolCall, turn, user } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Layer, Schema } from "effect"
import { Tool, Toolkit } from "effect/ai"

// A toolkit written as effect's docs write one (Tool.make, Toolkit.make, toLayer), with a service
// its handlers need, a "return" failure mode, an "error" one, a streaming handler and approvals.
class Docs extends Context.Service<Docs, { readonly search: (q: string) => ReadonlyArray<string> }>()("test/Docs") {}

class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

const SearchDocs = Tool.make("SearchDocs", {
  description: "Search project documentation",
  parameters: Schema.Struct({ query: Schema.String }),
  success: Schema.Array(Schema.String)
})
const ReadPage = Tool.make("ReadPage", {
  description: "Read a page",
  parameters: Schema.Struct({ page: Schema.Number }),
  success: Schema.String,
  failure: NotFound,
  failureMode: "return"
})
const DeletePage = Tool.make("DeletePage", {
  description: "Delete a page",
  parameters: Schema.Struct({ page: Schema.Number }),
  success: Schema.String,
  failure: NotFound,
  needsApproval: true
})
const Count = Tool.make("Count", {
  description: "Count up to n",
  parameters: Schema.Struct({ n: Schema.Number }),
  success: Schema.Number,
  needsApproval: ({ n }) => n > 10
})

const DocsToolkit = Toolkit.make(SearchDocs, ReadPage, DeletePage, Count)

const handlers = DocsToolkit.toLayer(Effect.gen(function*() {
  const docs = yield* Docs
  return {
    SearchDocs: ({ query }) => Effect.succeed(docs.search(query)),
    ReadPage: ({ page }) =>
      page === 1 ? Effect.succeed("page one") : Effect.fail(new NotFound({ message: `no page ${page}` })),
    DeletePage: ({ page }) => Effect.fail(new NotFound({ message: `no page ${page} to delete` })),
    // a long-running handler reports preliminary results before its final one
    Count: ({ n }, { preliminary }) =>
      Effect.gen(function*() {
        for (let i = 1; i < n; i++) yield* preliminary(i)
        return n
      })
  }
}))

const docsLayer = Effect.provideService(Docs, { search: (q) => [`${q}: guide.md`, `${q}: api.md`] })

const textOf = (m: ToolResultMessage) => m.content.map((c) => (c.type === "text" ? c.text : "[image]")).join("")

describe("effect/ai toolkits as agentloop tools", () => {
  it.effect("each tool's JSON Schema, successes, both failure modes and bad arguments as paired results", () =>
    Effect.gen(function*() {
      const tools = yield* toolkitTools(DocsToolkit).pipe(Effect.provide(handlers), docsLayer)
      assert.deepStrictEqual(tools.map((t) => t.name), ["SearchDocs", "ReadPage", "DeletePage", "Count"])
      assert.deepInclude(tools[0]!.definition.parameters as object, {
        type: "object",
        properties: { query: { type: "string" } },
        required: ["query"]
      })
      const run = yield* runScripted([
        turn.toolCalls([
          toolCall("s1", "SearchDocs", { query: "loop" }),
          toolCall("r1", "ReadPage", { page: 1 }),
          toolCall("r2", "ReadPage", { page: 7 }),
          toolCall("d1", "DeletePage", { page: 3 }),
          toolCall("b1", "ReadPage", { page: "seven" }),
          toolCall("c1", "Count", { n: 3 })
        ]),
        turn.text("done")
      ], { tools })
      assert.deepStrictEqual(run.violations, [])
      const results = run.result.messages.flatMap((m) => (m.role === "toolResult" ? [m] : []))
      assert.deepStrictEqual(results.map((r) => [r.toolCallId, r.isError]), [
        ["s1", false],
        ["r1", false],
        ["r2", true],
        ["d1", true],
        ["b1", true],
        ["c1", false]
      ])
      assert.strictEqual(textOf(results[0]!), `["loop: guide.md","loop: api.md"]`)
      assert.strictEqual(textOf(results[1]!), "page one")
      assert.include(textOf(results[2]!), "no page 7", "failureMode return: the encoded failure")
      assert.include(textOf(results[3]!), "no page 3 to delete", "failureMode error: the handler's error")
      assert.notInclude(textOf(results[3]!), "    at ", "never a stack")
      assert.include(textOf(results[4]!).toLowerCase(), "page", "the toolkit's parameter failure names the field")
      assert.strictEqual(textOf(results[5]!), "3", "a streaming handler's final result")
      const progress = run.events.flatMap((e) => (e.type === "tool_progress" ? [e.progress] : []))
      assert.deepStrictEqual(progress, [1, 2], "its preliminary results, as progress")
    }))

  it.effect("needsApproval: true asks, a function asks by the arguments, other tools go to the given policy", () =>
    Effect.gen(function*() {
      const policy = toolkitPolicy(DocsToolkit, () => allow)
      const decide = (name: string, args: Record<string, unknown>) =>
        Effect.gen(function*() {
          const d = policy(toolCall("x", name, args), undefined)
          return Effect.isEffect(d) ? yield* d : d
        })
      assert.deepStrictEqual(yield* decide("DeletePage", { page: 1 }), ask)
      assert.deepStrictEqual(yield* decide("Count", { n: 11 }), ask)
      assert.deepStrictEqual(yield* decide("Count", { n: 2 }), allow)
      assert.deepStrictEqual(yield* decide("Count", { n: "many" }), ask, "arguments that do not decode ask")
      assert.deepStrictEqual(yield* decide("SearchDocs", { query: "x" }), allow)
      // in a run: the approval request comes up, and a denial is a paired result
      const tools = yield* toolkitTools(DocsToolkit).pipe(Effect.provide(handlers), docsLayer)
      const model = yield* makeScriptedModel([
        turn.toolCalls([toolCall("d1", "DeletePage", { page: 1 })]),
        turn.text("ok")
      ])
      const asked: Array<string> = []
      const sink = callbackSinkLayer((event) => {
        if (event.type !== "approval_request") return
        asked.push(event.call.id)
        Deferred.doneUnsafe(event.answer, Exit.succeed({ approved: false, reason: "not now" }))
      })
      const result = yield* runAgentLoop({ messages: [user("go")], policy }).pipe(
        Effect.provide(Layer.mergeAll(model.layer, toolExecutorLayer(tools), sink))
      )
      assert.deepStrictEqual(asked, ["d1"])
      const denied = result.messages.find((m) => m.role === "toolResult")
      assert.include(JSON.stringify(denied), "not now")
      assert.deepStrictEqual(pairingViolations(result.messages), [])
    }))
})
