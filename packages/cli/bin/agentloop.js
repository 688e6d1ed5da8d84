#!/usr/bin/env node
import { NodeRuntime } from "@effect/platform-node"
import { main } from "../src/main.ts"

// A reader that goes away (`agentloop demo | head`) ends the program quietly.
process.stdout.on("error", (error) => {
  if (error.code === "EPIPE") process.exit(0)
  throw error
})

NodeRuntime.runMain(main)
