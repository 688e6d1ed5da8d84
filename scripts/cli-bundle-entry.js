// The entry of the CLI's bundle (packages/cli/bundle/agentloop.js, built by scripts/build.ts from the
// compiled packages in dist/): bin/agentloop.js imports it, and it runs the command line.
import { main } from "@agentloop/cli/main"
import { runMain } from "@effect/platform-node/NodeRuntime"

runMain(main)
