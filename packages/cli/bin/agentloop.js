#!/usr/bin/env node
// The installed command runs the compiled CLI (dist/). Inside the repository, tests run it with
// `--conditions=agentloop-source`, and the package's own exports then resolve to src/.
import { NodeRuntime } from "@effect/platform-node"
import { main } from "@agentloop/cli/main"

// A reader that goes away (`agentloop demo | head`) ends the program quietly.
process.stdout.on("error", (error) => {
  if (error.code === "EPIPE") process.exit(0)
  throw error
})

NodeRuntime.runMain(main)
