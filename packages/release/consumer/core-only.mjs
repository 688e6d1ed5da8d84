// The packages whose engines say Node 20.19: core, testkit and providers, on the oldest Node they
// declare. A scripted run with a tool, checked with checkInvariants.
import { Effect, Schema } from "effect"
import { defineTool } from "@agentloop/core"
import { openAiCompatFetchLayer } from "@agentloop/providers"
import { runScripted, toolCall, turn } from "@agentloop/testkit"

void openAiCompatFetchLayer
const double = defineTool({
  name: "double",
  description: "Doubles a number",
  parameters: Schema.Struct({ n: Schema.Number }),
  execute: ({ n }) => Effect.succeed(String(n * 2))
})
const run = await Effect.runPromise(
  runScripted([turn.toolCalls([toolCall("a", "double", { n: 1.5 })]), turn.text("3")], { tools: [double] })
)
console.log(JSON.stringify({
  node: process.version,
  reason: run.result.reason,
  answer: run.result.messages[2]?.content,
  violations: run.violations
}))
