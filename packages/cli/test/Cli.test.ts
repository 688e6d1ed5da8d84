import { pairingViolations } from "@agentloop/core"
import type { Message } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const bin = fileURLToPath(new URL("../bin/agentloop.js", import.meta.url))

/** Runs the CLI as a separate process (not a terminal), the way a user or CI would. */
const cli = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ["--conditions=agentloop-source", bin, ...args], {
      env: { ...process.env, ...env }
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

describe("agentloop demo (end to end, as a process)", () => {
  it("runs the whole scripted coding session, exits 0 and saves the transcript", async () => {
    const workspace = join(mkdtempSync(join(tmpdir(), "agentloop-cli-test-")), "ws")
    const run = await cli(["demo", "--workspace", workspace], { npm_lifecycle_event: "test" })
    assert.strictEqual(run.code, 0, run.stderr)
    const out = run.stdout
    for (
      const line of [
        "▶ read src/math.js",
        "▶ read test.js",
        "✗ edit src/math.js",
        "✓ edit src/math.js",
        "    +  return a + b",
        "▶ bash node test.js",
        "  │ ok    add(2, 3) = 5",
        "✓ bash node test.js",
        "⊘ write  Tool call was not executed because the model response was truncated.",
        "■ run ended: length after 5 step(s)",
        "↻ the response was cut off; asking the model to continue",
        "■ run ended: stop after 2 step(s)",
        "  runs         length → stop",
        "  tools run    6 (1 failed, 1 skipped)",
        "  invariants   all three hold (checkInvariants: 0 violations)"
      ]
    ) assert.include(out, line)
    assert.notMatch(out, /\u001b\[/, "no colour codes when the output is not a terminal")
    // the tools really ran in the workspace
    assert.include(readFileSync(join(workspace, "src/math.js"), "utf8"), "return a + b")
    assert.include(readFileSync(join(workspace, "NOTES.md"), "utf8"), "now adds them")
    // the transcript is JSONL, one message per line, every call paired
    const transcript = readFileSync(join(workspace, ".agentloop/transcript.jsonl"), "utf8").trim().split("\n")
      .map((line) => JSON.parse(line) as Message)
    assert.strictEqual(transcript.length, 16)
    assert.deepStrictEqual(pairingViolations(transcript), [])
    assert.include(out, `transcript   ${join(workspace, ".agentloop/transcript.jsonl")}`)
    // it ends with the one command that runs the same session on a real model
    assert.match(
      out,
      new RegExp(
        /\nNext: the same session on a real model\n[^]*/.source +
          /\n  agentloop demo --provider anthropic --model claude-sonnet-4-5\n/.source
      )
    )
  }, 120_000)

  it("started by `npm run demo`, it names the npm command for a real model", async () => {
    const fromNpm = await cli(["demo", "--workspace", join(mkdtempSync(join(tmpdir(), "agentloop-cli-test-")), "ws")], {
      npm_lifecycle_event: "demo"
    })
    assert.strictEqual(fromNpm.code, 0, fromNpm.stderr)
    assert.include(fromNpm.stdout, "\n  npm run demo -- --provider anthropic --model claude-sonnet-4-5\n")
    assert.notInclude(fromNpm.stdout, "agentloop demo --provider")
  }, 120_000)

  it("on a Node.js older than 22.19 it says which it needs, and how to run it from a clone, in two lines", async () => {
    const preload = join(mkdtempSync(join(tmpdir(), "agentloop-cli-test-")), "old-node.mjs")
    writeFileSync(
      preload,
      `Object.defineProperty(process, "versions", { value: { ...process.versions, node: "20.20.2" } })\n`
    )
    const old = await cli(["--help"], { NODE_OPTIONS: `${process.env["NODE_OPTIONS"] ?? ""} --import=${preload}` })
    assert.strictEqual(old.code, 1)
    assert.strictEqual(old.stdout, "")
    assert.match(
      old.stderr,
      /^agentloop: needs Node\.js 22\.19 or later; this is Node\.js 20\.20\.2 \(.+\)\.\n.*npm exec -- agentloop.*\n$/
    )
  }, 120_000)

  it("--help shows the commands and their flags", async () => {
    const [top, demo, run] = await Promise.all([cli(["--help"]), cli(["demo", "--help"]), cli(["run", "--help"])])
    assert.strictEqual(top.code, 0)
    assert.include(top.stdout, "agentloop <subcommand> [flags]")
    for (const command of ["run", "chat", "sessions", "view", "demo"]) assert.include(top.stdout, command)
    assert.strictEqual(run.code, 0)
    for (const flag of ["--yes", "--continue", "--resume", "--context-window", "--api-key-env", "--idle-timeout"]) {
      assert.include(run.stdout, flag)
    }
    assert.strictEqual(demo.code, 0)
    assert.include(demo.stdout, "--workspace")
    assert.include(demo.stdout, "--max-steps")
  }, 120_000)

  it(
    "bad flags and unknown commands: one line on stderr naming the problem and the --help to read, exit 2",
    async () => {
      const [bogus, steps, unknown, missing, near, nearFlag] = await Promise.all([
        cli(["demo", "--bogus"]),
        cli(["demo", "--max-steps", "many"]),
        cli(["frobnicate"]),
        cli(["run"]),
        cli(["rn"]),
        cli(["run", "--mdoel", "x", "task"])
      ])
      const oneLine = (r: { code: number | null; stdout: string; stderr: string }, text: string, command: string) => {
        assert.strictEqual(r.code, 2, r.stderr)
        assert.strictEqual(r.stdout, "", "no help on a usage error")
        assert.strictEqual(r.stderr.split("\n").length, 2, r.stderr)
        assert.include(r.stderr, text)
        assert.match(r.stderr, new RegExp(`^agentloop: .*; see ${command} --help\\n$`))
      }
      oneLine(bogus, "Unrecognized flag: --bogus", "agentloop demo")
      oneLine(steps, "Invalid value for flag --max-steps: \"many\"", "agentloop demo")
      oneLine(unknown, "Unknown subcommand \"frobnicate\"", "agentloop")
      oneLine(missing, "Missing required argument: task", "agentloop run")
      // a near name: suggested in the sentence, not run on after it
      assert.strictEqual(
        near.stderr,
        "agentloop: Unknown subcommand \"rn\" for \"agentloop\" (did you mean run?); see agentloop --help\n"
      )
      oneLine(nearFlag, "Unrecognized flag: --mdoel in command agentloop run (did you mean --model?)", "agentloop run")
    },
    120_000
  )
})
