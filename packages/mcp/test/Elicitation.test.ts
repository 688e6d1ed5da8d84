/**
 * Elicitation: a server's question (the `ask` tool of `fixtures/oauth-server.ts`) reaches the
 * `Elicitation` service with its fields, and the answer goes back with the defaults of the fields
 * it leaves out; without a service the client does not offer elicitation.
 */
import { elicitationLayer, headlessAuthorizationLayer, memoryTokenStoreLayer } from "@agentloop/mcp"
import type { ElicitationAnswer, ElicitationRequest } from "@agentloop/mcp"
import { toolCall, turn } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { startOAuthServer } from "./fixtures/oauth-server.ts"
import { resultsOf, runWithMcp, serversLayer, textOf } from "./helpers.ts"

const askOnce = (elicitation: Layer.Layer<never> | undefined) =>
  Effect.gen(function*() {
    const server = yield* startOAuthServer()
    const services = Layer.mergeAll(headlessAuthorizationLayer, memoryTokenStoreLayer())
    const layer = serversLayer([{ name: "srv", transport: "http", url: server.url }]).pipe(
      Layer.provide(elicitation === undefined ? services : Layer.merge(services, elicitation))
    )
    const run = yield* runWithMcp([turn.toolCalls([toolCall("c1", "srv__ask", {})]), turn.text("done")]).pipe(
      Effect.provide(layer)
    )
    return textOf(resultsOf(run.result.messages)[0]!)
  })

const answering = (answer: (request: ElicitationRequest) => ElicitationAnswer) => {
  const asked: Array<ElicitationRequest> = []
  const layer = elicitationLayer((request) => Effect.sync(() => (asked.push(request), answer(request))))
  return { asked, layer }
}

describe("Elicitation", () => {
  it.effect("hands the question to the service, with its fields, and fills in the defaults left out", () =>
    Effect.gen(function*() {
      const service = answering(() => ({ action: "accept", content: { name: "Ada" } }))
      const text = yield* askOnce(service.layer)
      assert.deepStrictEqual(JSON.parse(text), { action: "accept", content: { name: "Ada", age: 30, color: "green" } })
      const [request] = service.asked
      assert.strictEqual(request!.server, "srv")
      assert.strictEqual(request!.message, "Who are you?")
      assert.deepStrictEqual(
        request!.fields.map((f) => [f.name, f.kind, f.required, f.default, f.title]),
        [["name", "string", true, undefined, "Name"], ["age", "integer", false, 30, undefined], [
          "color",
          "choice",
          false,
          "green",
          undefined
        ]]
      )
      assert.deepStrictEqual(request!.fields[2]!.options, [{ value: "red", title: "red" }, {
        value: "green",
        title: "green"
      }])
    }))

  it.effect("passes on a decline and a cancel", () =>
    Effect.gen(function*() {
      const declined = yield* askOnce(answering(() => ({ action: "decline" })).layer)
      assert.deepStrictEqual(JSON.parse(declined), { action: "decline" })
      const cancelled = yield* askOnce(answering(() => ({ action: "cancel" })).layer)
      assert.deepStrictEqual(JSON.parse(cancelled), { action: "cancel" })
    }))

  it.effect("a service that dies answers cancel", () =>
    Effect.gen(function*() {
      const text = yield* askOnce(elicitationLayer(() => Effect.die("the UI crashed")))
      assert.deepStrictEqual(JSON.parse(text), { action: "cancel" })
    }))

  it.effect("without a service, elicitation is not offered", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* askOnce(undefined), "no elicitation offered")
    }))
})
