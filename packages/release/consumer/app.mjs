// (a) A plain Node ESM program, as a user writes one: the loop with the testkit's scripted model
// and the real coding tools on a temporary folder. Prints one JSON line for the test to check.
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Layer, Schema } from "effect"
import { callbackSinkLayer, defineTool, runAgentLoop, toolExecutorLayer } from "@agentloop/core"
import { checkInvariants, makeScriptedModel, toolCall, turn } from "@agentloop/testkit"
import { codingTools, workspaceLayer } from "@agentloop/tools"
import { NodeServices } from "@effect/platform-node"

const root = mkdtempSync(join(tmpdir(), "agentloop-consumer-"))
const half = defineTool({
  name: "half",
  description: "Halves a number",
  parameters: Schema.Struct({ n: Schema.Number }),
  execute: ({ n }) => Effect.succeed(String(n / 2))
})
const script = [
  turn.toolCalls([
    toolCall("w", "write", { path: "notes/hello.txt", content: "hello from a consumer\n" }),
    toolCall("h", "half", { n: 1.5 })
  ]),
  turn.toolCalls([toolCall("r", "read", { path: "notes/hello.txt" }), toolCall("b", "bash", { command: "cat notes/hello.txt" })]),
  turn.text("done")
]
const events = []
const input = [{ role: "user", content: "write, read and cat a file" }]
const model = await Effect.runPromise(makeScriptedModel(script))
const layer = Layer.mergeAll(
  model.layer,
  toolExecutorLayer([...codingTools, half]).pipe(Layer.provide(workspaceLayer(root)), Layer.provide(NodeServices.layer)),
  callbackSinkLayer((event) => Effect.sync(() => events.push(event)))
)
const result = await Effect.runPromise(runAgentLoop({ messages: input }).pipe(Effect.provide(layer)))
const requests = await Effect.runPromise(model.requests)
const violations = checkInvariants({ input, result, events, requests })
console.log(JSON.stringify({
  reason: result.reason,
  steps: result.steps,
  file: readFileSync(join(root, "notes/hello.txt"), "utf8"),
  results: result.messages.filter((m) => m.role === "toolResult").map((m) => ({ id: m.toolCallId, isError: m.isError, text: m.content[0]?.text ?? "" })),
  violations
}))
