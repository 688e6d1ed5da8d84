// A durable run on the embedded engine (one SQLite file), as the durable guide writes one. Prints
// one JSON line. On a Node.js older than the package's engines, the import alone ends the process.
// The program emits a warning of its own, which must reach stderr (only node:sqlite's notice is
// dropped).
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Layer } from "effect"
import { toolExecutorLayer } from "@agentloop/core"
import { durableRunnerLayer, embeddedEngineLayer, runDurable } from "@agentloop/durable"
import { scriptedModelLayer, turn } from "@agentloop/testkit"

process.emitWarning("the consumer's own warning")
const folder = mkdtempSync(join(tmpdir(), "agentloop-consumer-durable-"))
const Runner = durableRunnerLayer({ approvalTimeout: "1 hour" }).pipe(
  Layer.provide(Layer.mergeAll(scriptedModelLayer([turn.text("hello")]), toolExecutorLayer([]))),
  Layer.provideMerge(embeddedEngineLayer({ filename: join(folder, "runs.db") }))
)
try {
  const result = await Effect.runPromise(
    runDurable({ runId: "ticket-42", messages: [{ role: "user", content: "hi" }] }).pipe(Effect.provide(Runner))
  )
  console.log(JSON.stringify({ node: process.version, reason: result.reason, answer: result.messages.at(-1)?.content }))
} finally {
  rmSync(folder, { recursive: true, force: true })
}
