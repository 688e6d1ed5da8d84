/**
 * Installs `agentloop` from this clone as a command: a small launcher in a bin folder (default
 * `~/.local/bin`) that runs the clone's own Node.js (the 22.x `npm ci` brings, `node_modules/.bin/node`)
 * on `packages/cli/bin/agentloop.js`, with nothing added to the environment. So the command starts
 * without `npm exec`'s cost, and the agent's tools see the shell it was typed in as it is (its PATH,
 * its `node`), not the clone's.
 *
 *     npm run link                          # ~/.local/bin/agentloop
 *     npm run link -- --bin-dir ~/bin       # another folder (relative to where npm was run)
 *     npm run link -- --uninstall           # removes it (with --bin-dir if it was given one)
 *
 * Running it again rewrites the launcher (a clone moved or a new Node.js: the same command). A file
 * of that name that is not such a launcher (an npm global install, say) is never written over or
 * removed. Prints what it did, and says so when the folder is not on PATH.
 */
import { execFileSync } from "node:child_process"
import { chmodSync, lstatSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { homedir } from "node:os"
import { delimiter, join, resolve } from "node:path"
import { parseArgs } from "node:util"

const MARKER = "# agentloop launcher, written by `npm run link` in"

const USAGE = "usage: npm run link [-- --bin-dir DIR] [--uninstall]"

const fail = (message: string, code = 1): never => {
  process.stderr.write(`link: ${message}\n`)
  process.exit(code)
}

const parsed = (() => {
  try {
    return parseArgs({
      options: {
        "bin-dir": { type: "string" },
        uninstall: { type: "boolean" },
        help: { type: "boolean", short: "h" }
      },
      allowPositionals: false
    }).values
  } catch (error) {
    return fail(`${error instanceof Error ? error.message : String(error)}\n${USAGE}`, 2)
  }
})()

if (parsed.help === true) {
  process.stdout.write(
    `${USAGE}\n` +
      "Installs an `agentloop` command that runs this clone on its own Node.js, in DIR (default ~/.local/bin).\n" +
      "--uninstall removes it.\n"
  )
  process.exit(0)
}
if (process.platform === "win32") fail("the launcher is a POSIX shell script; on Windows use `npm exec -- agentloop`")

const root = resolve(import.meta.dirname, "..")
// `npm run` runs this in the clone: a relative --bin-dir is meant from the folder npm was run in
const from = process.env["INIT_CWD"] ?? process.cwd()
const given = parsed["bin-dir"]
if (given !== undefined && given.trim().length === 0) fail(`--bin-dir is empty\n${USAGE}`, 2)
const binDir = given === undefined ?
  join(homedir(), ".local", "bin") :
  given === "~" || given.startsWith("~/") ?
  join(homedir(), given.slice(1)) :
  resolve(from, given)
const target = join(binDir, "agentloop")

/** Whether `path` is a launcher this script wrote (a regular file with its marker line). */
const isLauncher = (path: string): boolean => {
  const stat = lstatSync(path, { throwIfNoEntry: false })
  if (stat === undefined) return false
  if (!stat.isFile() || stat.size > 4096) return false
  return readFileSync(path, "utf8").split("\n")[1]?.startsWith(MARKER) === true
}

const exists = (path: string): boolean => lstatSync(path, { throwIfNoEntry: false }) !== undefined

if (parsed.uninstall === true) {
  if (!exists(target)) {
    process.stdout.write(`link: no ${target}: nothing to remove\n`)
    process.exit(0)
  }
  if (!isLauncher(target)) {
    fail(`${target} is not a launcher \`npm run link\` wrote (an npm global install?): left as it is`)
  }
  rmSync(target)
  process.stdout.write(`link: removed ${target}\n`)
  process.exit(0)
}

// the clone's Node.js, by the path `node_modules/.bin/node` leads to (the `node` package's binary)
const linked = join(root, "node_modules", ".bin", "node")
if (!exists(linked)) fail(`${linked} is missing: run \`npm ci\` in ${root} first`)
const node = realpathSync(linked)
const version = execFileSync(node, ["-p", "process.versions.node"], { encoding: "utf8" }).trim()
const [major = 0, minor = 0] = version.split(".").map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  fail(`${node} is Node.js ${version}; agentloop needs 22.19 or later: run \`npm ci\` in ${root}`)
}
const entry = join(root, "packages", "cli", "bin", "agentloop.js")

/** `text` as one word of a POSIX shell command line. */
const quote = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`

const uninstall = `npm run link -- --uninstall${given === undefined ? "" : ` --bin-dir ${quote(binDir)}`}`
const launcher = [
  "#!/bin/sh",
  `${MARKER} ${root}; \`${uninstall}\` there removes it.`,
  "# It runs the clone's Node.js; the agent's tools get this shell's environment as it is.",
  `exec ${quote(node)} ${quote(entry)} "$@"`,
  ""
].join("\n")

if (exists(target) && !isLauncher(target)) {
  fail(
    `${target} exists and is not a launcher \`npm run link\` wrote (an npm global install?): ` +
      "remove it, or choose another folder with --bin-dir"
  )
}
const same = exists(target) && readFileSync(target, "utf8") === launcher
if (!same) {
  mkdirSync(binDir, { recursive: true })
  // written beside it and renamed over it: a command that runs meanwhile sees the old or the new one
  const temporary = `${target}.${process.pid}.tmp`
  writeFileSync(temporary, launcher, { mode: 0o755 })
  chmodSync(temporary, 0o755)
  renameSync(temporary, target)
}
process.stdout.write(`link: ${same ? "up to date" : "wrote"} ${target} (Node.js ${version} from ${node})\n`)
const onPath = (process.env["PATH"] ?? "").split(delimiter).some((dir) => dir.length > 0 && resolve(dir) === binDir)
if (!onPath) {
  process.stdout.write(
    `link: ${binDir} is not on your PATH: add it (e.g. \`export PATH="${binDir}:$PATH"\` in your shell's ` +
      "startup file), then run `agentloop`\n"
  )
}
