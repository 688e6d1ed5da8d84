// Two copies of effect: the program's Schema comes from one, @agentloop/core uses another (the
// test nests a second copy under core). defineTool must say so, not decode with the wrong copy.
import { Effect, Schema } from "effect"
import { defineTool } from "@agentloop/core"

try {
  defineTool({
    name: "half",
    description: "Halves a number",
    parameters: Schema.Struct({ n: Schema.Number }),
    execute: ({ n }) => Effect.succeed(String(n / 2))
  })
  console.log(JSON.stringify({ threw: false }))
} catch (error) {
  console.log(JSON.stringify({ threw: true, message: String(error instanceof Error ? error.message : error) }))
}
