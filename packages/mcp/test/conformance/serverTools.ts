/**
 * The tools the conformance suite's server scenarios call, as an agentloop `Executor` (what any
 * program would hand `serveMcpHttp`): each answers as its scenario describes, through agentloop's
 * own result shape (text and images), so a scenario passing shows the server's mapping, not a
 * hand-written MCP answer.
 */
import { errorResult, Executor } from "@agentloop/core"
import type { ToolCall, ToolDefinition, ToolResultMessage } from "@agentloop/core"
import { Effect } from "effect"

/** A 1x1 red PNG. */
const RED_PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="

const noArguments = { type: "object", properties: {} }

const definitions: ReadonlyArray<ToolDefinition> = [
  { name: "test_simple_text", description: "Returns a simple text", parameters: noArguments, readOnly: true },
  { name: "test_image_content", description: "Returns an image", parameters: noArguments, readOnly: true },
  { name: "test_error_handling", description: "Always fails", parameters: noArguments, readOnly: true },
  { name: "test_tool_with_progress", description: "Reports progress", parameters: noArguments, readOnly: true },
  {
    name: "json_schema_2020_12_tool",
    description: "Tool with JSON Schema 2020-12 features",
    parameters: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      $defs: {
        address: { type: "object", properties: { street: { type: "string" }, city: { type: "string" } } }
      },
      properties: { name: { type: "string" }, address: { $ref: "#/$defs/address" } },
      additionalProperties: false
    },
    readOnly: true
  }
]

const ok = (call: ToolCall, content: ToolResultMessage["content"]): ToolResultMessage => ({
  role: "toolResult",
  toolCallId: call.id,
  toolName: call.name,
  content,
  isError: false
})

export const conformanceExecutor = Executor.of({
  definitions,
  execute: (call, context) =>
    Effect.gen(function*() {
      switch (call.name) {
        case "test_simple_text":
          return ok(call, [{ type: "text", text: "This is a simple text response for testing." }])
        case "test_image_content":
          return ok(call, [{ type: "image", data: RED_PIXEL, mimeType: "image/png" }])
        case "test_error_handling":
          return errorResult(call, "This tool intentionally returns an error for testing")
        case "test_tool_with_progress":
          for (const progress of [0, 50, 100]) yield* context.reportProgress({ progress, total: 100 })
          return ok(call, [{ type: "text", text: "Progress test completed" }])
        default:
          return ok(call, [{ type: "text", text: JSON.stringify(call.arguments) }])
      }
    })
})
