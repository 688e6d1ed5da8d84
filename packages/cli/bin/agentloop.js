#!/usr/bin/env node
// The installed command runs the compiled CLI (dist/). Inside the repository, tests run it with
// `--conditions=agentloop-source`, and the package's own exports then resolve to src/.

// @effect/platform-node 4.1 and node:sqlite need Node.js 22.19 or later: say so, not a module error.
const [major, minor] = process.versions.node.split(".").map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(
    `agentloop: needs Node.js 22.19 or later; this is Node.js ${process.versions.node} (${process.execPath}).\n` +
      "In a clone of the agentloop repository, `npm run link` installs an `agentloop` that runs on the Node.js 22 " +
      "`npm ci` brings (or run `npm exec -- agentloop` there).\n"
  )
  process.exit(1)
}

// Under the `agentloop-source` condition (the repository's tests) the package resolves to src/, and
// the sources run; otherwise the bundle (bundle/agentloop.js, built with the packages) does. A
// condition is set only on Node's command line or in NODE_OPTIONS, so without the name in either the
// package resolution (about 2 ms of every start) is skipped.
const mayBeSource = [...process.execArgv, process.env.NODE_OPTIONS ?? ""].some((a) => a.includes("agentloop-source"))
const fromSource = mayBeSource && import.meta.resolve("@agentloop/cli/main").endsWith(".ts")

// `--help`, `--version` and each command's `--help` print what the build rendered through the
// command line itself (bundle/static.json, see src/internal/StaticOutput.ts), without loading the
// bundle. Colored as effect's TerminalCapabilities colors help: never when TERM is dumb or NO_COLOR
// is set, always when FORCE_COLOR is (and is not 0 or false), otherwise on a terminal.
const staticText = async () => {
  const args = process.argv.slice(2)
  if (fromSource || args.length === 0 || args.length > 4 || !args.some((a) => a.startsWith("-"))) return undefined
  const { readFileSync } = await import("node:fs")
  let file
  try {
    file = JSON.parse(readFileSync(new URL("../bundle/static.json", import.meta.url), "utf8"))
  } catch {
    return undefined // no bundle yet, or an older one: the command line answers
  }
  const index = file?.version === 1 ? file.entries?.[JSON.stringify(args)] : undefined
  const entry = typeof index === "number" ? file.outputs?.[index] : undefined
  if (entry === undefined) return undefined
  const env = process.env
  const set = (name) => env[name] !== undefined && env[name].length > 0
  const color = env.TERM !== "dumb" && !set("NO_COLOR") &&
    ((set("FORCE_COLOR") && env.FORCE_COLOR !== "0" && env.FORCE_COLOR.toLowerCase() !== "false") ||
      process.stdout.isTTY === true)
  return color ? entry.color : entry.plain
}

// A reader that goes away (`agentloop demo | head`) ends the program quietly.
process.stdout.on("error", (error) => {
  if (error.code === "EPIPE") process.exit(0)
  throw error
})

const text = await staticText()
if (text !== undefined) process.stdout.write(text)
else await start()

async function start() {
  // Every process agentloop starts (the tools', git, MCP servers, an editor) gets the environment the
  // user typed the command in: without what `npm exec` added when it started this one (its bin
  // folders first on PATH, which run the clone's Node.js as `node`, and its npm_* variables).
  const { userEnvironment } = await import("./user-env.js")
  const user = userEnvironment(process.env)
  if (user !== process.env) {
    for (const name of Object.keys(process.env)) if (!Object.hasOwn(user, name)) delete process.env[name]
    Object.assign(process.env, user)
  }

  // Durable runs use Node's built-in `node:sqlite`, which announces itself as experimental on stderr
  // when loaded, on every command: that one notice is dropped (every other warning is kept).
  const emitWarning = process.emitWarning
  process.emitWarning = function(warning, ...rest) {
    const text = typeof warning === "string" ? warning : warning?.message
    if (typeof text === "string" && text.startsWith("SQLite is an experimental feature")) return
    return emitWarning.call(process, warning, ...rest)
  }

  // Compiled code is cached per user (Node's compile cache, in the user's cache folder, never a shared
  // temporary one: a cache another user could write would be code this one runs), so later starts skip
  // parsing the bundle. NODE_COMPILE_CACHE, when set, chooses the folder; NODE_DISABLE_COMPILE_CACHE
  // turns it off (Node reads both itself).
  const { enableCompileCache } = await import("node:module")
  if (typeof enableCompileCache === "function" && process.env.NODE_COMPILE_CACHE === undefined) {
    const { homedir } = await import("node:os")
    const cache = process.env.XDG_CACHE_HOME
    const base = cache?.startsWith("/") === true ? cache : `${homedir()}/.cache`
    try {
      enableCompileCache(`${base}/agentloop/compile-cache`)
    } catch {
      // no cache folder (a read-only home): start without one
    }
  }

  // The bundle's entry holds the flags and help; each command's code loads when it runs.
  if (fromSource) {
    const { runMain } = await import("@effect/platform-node/NodeRuntime")
    const { main } = await import("@agentloop/cli/main")
    runMain(main)
  } else {
    const bundle = new URL("../bundle/agentloop.js", import.meta.url)
    try {
      await import(bundle.href)
    } catch (error) {
      // a checkout built with `tsc -b` alone has dist/ but no bundle: say what to run, not a module error
      if (error?.code !== "ERR_MODULE_NOT_FOUND" || !String(error.message).includes("bundle/agentloop.js")) throw error
      process.stderr.write("agentloop: the command's bundle is missing (bundle/agentloop.js): run `npm run build`\n")
      process.exit(1)
    }
  }
}
