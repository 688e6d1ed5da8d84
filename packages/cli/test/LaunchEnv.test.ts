/**
 * The agent's tools see the environment the user typed `agentloop` in, whatever route started it:
 * `npm exec --prefix CLONE -- agentloop` (the README's alias), the launcher `npm run link` installs,
 * the bin itself (as a global install runs it). The user's PATH has a `node` of its own first: the
 * bash tool must find that one, not the clone's Node.js 22 that npm puts first, and see no npm_*
 * variables.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { userEnvironment } from "../bin/user-env.js"
import { bin, makeWorkspace, providerFlags, scriptServer } from "./helpers/agent.ts"

const root = fileURLToPath(new URL("../../..", import.meta.url))
const linkScript = join(root, "scripts", "link.ts")

const PROBE = "command -v node; node --version; echo \"$PATH\"; env | grep -c ^npm_; " +
  "echo \"EDITOR=${EDITOR-unset} NODE=${NODE-unset} INIT_CWD=${INIT_CWD-unset}\" " +
  "\"NPM_CONFIG_FUND=${NPM_CONFIG_FUND-unset}\""

const run = (file: string, args: ReadonlyArray<string>, options: { cwd: string; env: NodeJS.ProcessEnv }) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(file, args, { ...options, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

/**
 * A user's shell: a folder of their own with a `node` that answers `--version` with a marker (and
 * otherwise runs a real Node.js, for npm) first on PATH, then a `node_modules/.bin` of their own,
 * then the system's folders; no npm variables (whatever started the tests), an upper-case npm
 * setting of their own.
 */
const userShell = (workspace: string) => {
  const userBin = join(workspace, ".user", "bin")
  const ownBins = join(workspace, ".user", "project", "node_modules", ".bin")
  mkdirSync(userBin, { recursive: true })
  mkdirSync(ownBins, { recursive: true })
  writeFileSync(
    join(userBin, "node"),
    "#!/bin/sh\n" +
      `if [ "$1" = "--version" ]; then echo v0.0.0-the-users-node; exit 0; fi\nexec '${process.execPath}' "$@"\n`
  )
  chmodSync(join(userBin, "node"), 0o755)
  const system = (process.env["PATH"] ?? "").split(":")
    .filter((dir) => dir.length > 0 && !dir.includes("node_modules") && !dir.endsWith("node-gyp-bin"))
  const PATH = [userBin, ownBins, ...system].join(":")
  const env: NodeJS.ProcessEnv = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (name.startsWith("npm_") || ["INIT_CWD", "COLOR", "NODE", "EDITOR", "VISUAL"].includes(name)) continue
    if (name.startsWith("AGENTLOOP_") || name === "NO_COLOR" || name === "FORCE_COLOR") continue
    env[name] = value
  }
  Object.assign(env, {
    PATH,
    NPM_CONFIG_FUND: "false",
    XDG_CONFIG_HOME: join(workspace, ".no-user-config"),
    XDG_STATE_HOME: join(workspace, ".no-user-state")
  })
  return { env, PATH, userBin }
}

/** Runs one `agentloop run` whose model calls bash with PROBE once; returns what bash answered. */
const probe = async (
  start: (args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv) => ReturnType<typeof run>
) => {
  const workspace = makeWorkspace()
  const shell = userShell(workspace)
  const server = await scriptServer([
    { calls: [{ id: "p1", name: "bash", args: { command: PROBE } }] },
    { text: "seen" }
  ])
  try {
    const done = await start(["run", "--yes", ...providerFlags(server), "look around"], workspace, shell.env)
    assert.strictEqual(done.code, 0, done.stdout + done.stderr)
    const messages = server.bodies[1]!.body["messages"] as Array<{ role: string; content: unknown }>
    const result = messages.find((m) => m.role === "tool")
    assert.isDefined(result, JSON.stringify(messages))
    const text = typeof result!.content === "string" ? result!.content : JSON.stringify(result!.content)
    return { lines: text.split("\n"), shell }
  } finally {
    await server.close()
  }
}

/** The bash output of PROBE is the user's environment: their node, their PATH as it was, no npm variables. */
const assertUsersEnvironment = (
  { lines, shell }: { lines: ReadonlyArray<string>; shell: ReturnType<typeof userShell> }
) => {
  assert.strictEqual(lines[0], join(shell.userBin, "node"), lines.join("\n"))
  assert.strictEqual(lines[1], "v0.0.0-the-users-node", lines.join("\n"))
  assert.strictEqual(lines[2], shell.PATH, "the PATH the user had, in its order, nothing added or removed")
  assert.strictEqual(lines[3], "0", "no npm_* variable")
  assert.strictEqual(lines[4], "EDITOR=unset NODE=unset INIT_CWD=unset NPM_CONFIG_FUND=false")
}

describe("the agent's tools get the user's environment, whatever route started agentloop", () => {
  it("through `npm exec --prefix CLONE -- agentloop` (the README's alias)", async () => {
    assertUsersEnvironment(
      await probe((args, cwd, env) => run("npm", ["exec", "--prefix", root, "--", "agentloop", ...args], { cwd, env }))
    )
  }, 120_000)

  it("through the launcher `npm run link` installs (which starts no npm)", async () => {
    const launcherDir = join(makeWorkspace(), "bin")
    const linked = await run(process.execPath, [linkScript, "--bin-dir", launcherDir], { cwd: root, env: process.env })
    assert.strictEqual(linked.code, 0, linked.stderr)
    assertUsersEnvironment(await probe((args, cwd, env) => run(join(launcherDir, "agentloop"), args, { cwd, env })))
  }, 120_000)

  it("through the bin itself (as an installed command runs it)", async () => {
    assertUsersEnvironment(await probe((args, cwd, env) => run(process.execPath, [bin, ...args], { cwd, env })))
  }, 120_000)
})

describe("npm run link", () => {
  it(
    "installs a launcher on the clone's Node.js, again idempotently, and --uninstall removes only its own",
    async () => {
      const dir = makeWorkspace()
      const binDir = join(dir, "bin")
      const target = join(binDir, "agentloop")
      const link = (...args: Array<string>) =>
        run(process.execPath, [linkScript, ...args], { cwd: root, env: { ...process.env, PATH: "/usr/bin:/bin" } })
      const first = await link("--bin-dir", binDir)
      assert.strictEqual(first.code, 0, first.stderr)
      assert.include(first.stdout, `link: wrote ${target}`)
      assert.include(first.stdout, `${binDir} is not on your PATH`)
      const launcher = readFileSync(target, "utf8")
      assert.include(launcher, `'${join(root, "node_modules", "node", "bin", "node")}'`)
      assert.include(launcher, `'${join(root, "packages", "cli", "bin", "agentloop.js")}' "$@"`)
      assert.notInclude(launcher, "PATH", "the launcher leaves the environment as it is")
      const version = await run(target, ["--version"], { cwd: dir, env: { PATH: "/usr/bin:/bin" } })
      assert.strictEqual(version.stdout, "agentloop v0.1.0\n", version.stderr)

      const again = await link("--bin-dir", binDir)
      assert.strictEqual(again.code, 0, again.stderr)
      assert.include(again.stdout, `link: up to date ${target}`)
      assert.strictEqual(readFileSync(target, "utf8"), launcher)

      const gone = await link("--bin-dir", binDir, "--uninstall")
      assert.strictEqual(gone.code, 0, gone.stderr)
      assert.include(gone.stdout, `link: removed ${target}`)
      const nothing = await link("--bin-dir", binDir, "--uninstall")
      assert.strictEqual(nothing.code, 0, nothing.stderr)
      assert.include(nothing.stdout, "nothing to remove")

      // a command of that name it did not write (an npm global install, say) is never replaced or removed
      writeFileSync(target, "#!/bin/sh\necho someone else's agentloop\n", { mode: 0o755 })
      const refused = await link("--bin-dir", binDir)
      assert.strictEqual(refused.code, 1)
      assert.match(refused.stderr, /^link: .*agentloop exists and is not a launcher `npm run link` wrote/)
      const kept = await link("--bin-dir", binDir, "--uninstall")
      assert.strictEqual(kept.code, 1)
      assert.include(kept.stderr, "left as it is")
      assert.strictEqual(readFileSync(target, "utf8"), "#!/bin/sh\necho someone else's agentloop\n")

      const bad = await link("--bin-dir")
      assert.strictEqual(bad.code, 2)
      assert.match(bad.stderr, /^link: Option '--bin-dir <value>' argument missing\nusage: npm run link/)
    },
    60_000
  )
})

describe("userEnvironment: exactly what npm exec added goes", () => {
  const gyp = "/usr/lib/node_modules/npm/node_modules/@npmcli/run-script/lib/node-gyp-bin"
  const npmExec = (user: Record<string, string>, path: string) => ({
    ...user,
    PATH: `/clone/node_modules/.bin:/work/node_modules/.bin:/node_modules/.bin:${gyp}:${path}`,
    npm_lifecycle_event: "npx",
    npm_lifecycle_script: "agentloop",
    npm_config_prefix: "/clone",
    npm_execpath: "/usr/lib/node_modules/npm/bin/npm-cli.js",
    npm_node_execpath: "/usr/bin/node",
    NODE: "/usr/bin/node",
    INIT_CWD: "/work",
    COLOR: "0",
    EDITOR: user["EDITOR"] ?? user["VISUAL"] ?? "vi"
  })

  it("keeps the user's PATH as it was (their own node_modules/.bin, an outer npm script's folders)", () => {
    const user = "/home/u/bin:/home/u/p/node_modules/.bin:/p/node_modules/.bin:" + gyp + ":/usr/bin"
    assert.deepStrictEqual(userEnvironment(npmExec({ HOME: "/home/u" }, user)), { HOME: "/home/u", PATH: user })
    assert.deepStrictEqual(userEnvironment(npmExec({}, "")), { PATH: "" })
  })

  it("keeps the user's EDITOR, NODE and upper-case NPM_ settings", () => {
    const env = { ...npmExec({ EDITOR: "nano", NPM_TOKEN: "t", NPM_CONFIG_FUND: "false" }, "/usr/bin"), NODE: "/n" }
    assert.deepStrictEqual(userEnvironment(env), {
      EDITOR: "nano",
      NPM_TOKEN: "t",
      NPM_CONFIG_FUND: "false",
      NODE: "/n",
      PATH: "/usr/bin"
    })
    assert.deepStrictEqual(userEnvironment(npmExec({ VISUAL: "code" }, "/usr/bin")), {
      VISUAL: "code",
      PATH: "/usr/bin"
    })
  })

  it("leaves an environment npm exec did not make as it is (the same object)", () => {
    const script = { PATH: `/p/node_modules/.bin:${gyp}:/usr/bin`, npm_lifecycle_event: "test" }
    assert.strictEqual(userEnvironment(script), script)
    const shell = { PATH: "/usr/bin", HOME: "/home/u" }
    assert.strictEqual(userEnvironment(shell), shell)
  })
})
