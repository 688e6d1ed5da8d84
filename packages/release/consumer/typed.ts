// (b) The public types of every package, under the consumer's strict settings (no skipLibCheck).
import * as Cli from "@agentloop/cli"
import type { AgentRunResult, LoopEvent, Message, ToolDefinition } from "@agentloop/core"
import { callbackSinkLayer, defineTool, runAgentLoop, ToolError, toolExecutorLayer } from "@agentloop/core"
import * as Durable from "@agentloop/durable"
import * as Mcp from "@agentloop/mcp"
import { anthropicFetchLayer, openAiCompatFetchLayer } from "@agentloop/providers"
import { checkInvariants, scriptedModelLayer, toolCall, turn } from "@agentloop/testkit"
import { codingTools, workspaceLayer } from "@agentloop/tools"
import { NodeServices } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"

const half = defineTool({
  name: "half",
  description: "Halves a number",
  parameters: Schema.Struct({ n: Schema.Number }),
  execute: ({ n }) => n < 0 ? Effect.fail(new ToolError({ message: "negative" })) : Effect.succeed(String(n / 2))
})
const definition: ToolDefinition = half.definition
const messages: ReadonlyArray<Message> = [{ role: "user", content: "halve 3" }]
const events: Array<LoopEvent> = []
const layer = Layer.mergeAll(
  scriptedModelLayer([turn.toolCalls([toolCall("a", "half", { n: 3 })]), turn.text("1.5")]),
  toolExecutorLayer([...codingTools, half]).pipe(Layer.provide(workspaceLayer(".")), Layer.provide(NodeServices.layer)),
  callbackSinkLayer((event) => Effect.sync(() => void events.push(event)))
)
export const program: Effect.Effect<AgentRunResult> = runAgentLoop({ messages }).pipe(
  Effect.provide(layer),
  Effect.orDie
)
export const checked = program.pipe(
  Effect.map((result) => checkInvariants({ input: messages, result, events, requests: [] }))
)
export const providers = [openAiCompatFetchLayer, anthropicFetchLayer] as const
export const modules = [Cli, Mcp, Durable, definition] as const
