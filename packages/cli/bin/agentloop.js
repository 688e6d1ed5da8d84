#!/usr/bin/env node
// The installed command runs the compiled CLI (dist/). Inside the repository, tests run it with
// `--conditions=agentloop-source`, and the package's own exports then resolve to src/.

// @effect/platform-node 4.1 and node:sqlite need Node.js 22.19 or later: say so, not a module error.
const [major, minor] = process.versions.node.split(".").map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(
    `agentloop: needs Node.js 22.19 or later; this is Node.js ${process.versions.node} (${process.execPath}).\n` +
      "In a clone of the agentloop repository, `npm exec -- agentloop` runs it on the Node.js 22 that `npm ci` " +
      "brings.\n"
  )
  process.exit(1)
}

// Durable runs use Node's built-in `node:sqlite`, which announces itself as experimental on stderr
// when loaded, on every command: that one notice is dropped (every other warning is kept).
const emitWarning = process.emitWarning
process.emitWarning = function(warning, ...rest) {
  const text = typeof warning === "string" ? warning : warning?.message
  if (typeof text === "string" && text.startsWith("SQLite is an experimental feature")) return
  return emitWarning.call(process, warning, ...rest)
}

const { NodeRuntime } = await import("@effect/platform-node")
const { main } = await import("@agentloop/cli/main")

// A reader that goes away (`agentloop demo | head`) ends the program quietly.
process.stdout.on("error", (error) => {
  if (error.code === "EPIPE") process.exit(0)
  throw error
})

NodeRuntime.runMain(main)
