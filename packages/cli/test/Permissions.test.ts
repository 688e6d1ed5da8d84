import { assert, describe, it } from "@effect/vitest"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { checkRules, parseRule, readRules, RuleError, suggestBashRules } from "../src/Permissions.ts"
import type { PermissionRules } from "../src/Permissions.ts"
import {
  afterRun,
  answer,
  jsonLines,
  lastToolResult,
  makeWorkspace,
  providerFlags,
  scriptServer,
  sessionFiles,
  startCli,
  testEnv
} from "./helpers/agent.ts"

const rules = (allow: ReadonlyArray<string>, deny: ReadonlyArray<string> = []): PermissionRules => {
  const read = readRules({ allow, deny }, "test config")
  if (read instanceof RuleError) throw new Error(read.message)
  return read
}

const bash = (r: PermissionRules, command: string) => checkRules(r, "bash", { command }).then((v) => v._tag)

describe("permission rules", () => {
  it("reads tool and tool(pattern); a malformed rule is an error naming it and its file", () => {
    assert.deepInclude(parseRule("bash(npm test*)", "f"), { tool: "bash", pattern: "npm test*" })
    assert.deepInclude(parseRule(" read ", "f"), { tool: "read", pattern: undefined })
    for (const bad of ["bash(", "bash()", "rm -rf", "(x)"]) {
      const r = parseRule(bad, "/p/.agentloop/config.json")
      assert.instanceOf(r, RuleError, bad)
      assert.include((r as RuleError).message, "/p/.agentloop/config.json")
    }
  })

  it("bash(npm test*) allows npm test and its variants, not npm test; rm x nor a hidden second command", async () => {
    const r = rules(["bash(npm test*)", "bash(git status)"])
    for (
      const ok of [
        "npm test",
        "npm test -- --grep 'a b'",
        "npm tests",
        "'npm' \"test\"",
        "npm test $FILE",
        "git status"
      ]
    ) {
      assert.strictEqual(await bash(r, ok), "allowed", ok)
    }
    for (
      const no of [
        "npm test; rm x",
        "npm test && rm x",
        "npm test || rm x",
        "npm test | sh",
        "npm test\nrm x",
        "npm test & rm x",
        "npm test $(rm x)",
        "npm test `rm x`",
        "npm test \"$(rm x)\"",
        "npm test > package.json",
        "npm t\\\nest; rm x",
        "git status --porcelain",
        "git  statuses",
        "$CMD test",
        "f() { rm x; }; npm test",
        "CI=1 npm test",
        "/tmp/evil/npm test",
        "npm test &&"
      ]
    ) {
      assert.strictEqual(await bash(r, no), "none", no)
    }
    // two allowed commands together are allowed
    assert.strictEqual(await bash(r, "git status && npm test"), "allowed")
  })

  it("deny wins, sees through wrappers, paths, sh -c and eval, and asks when it cannot be sure", async () => {
    const r = rules(["bash"], ["bash(rm -rf *)"])
    for (
      const denied of [
        "rm -rf /",
        "ls; rm -rf /tmp/x",
        "echo $(rm -rf /)",
        "/bin/rm -rf /",
        "sudo rm -rf /",
        "timeout 5 nice -n 10 rm -rf /",
        "env FOO=1 rm -rf /",
        "X=1 rm -rf /",
        "sh -c 'rm -rf /'",
        "bash -c \"ls && rm -rf /\"",
        "eval rm -rf /",
        "if true; then rm -rf /; fi"
      ]
    ) {
      assert.strictEqual(await bash(r, denied), "denied", denied)
    }
    for (const unsure of ["rm $FLAGS /", "sh -c \"$SCRIPT\"", "r\\\nm -rf /"]) {
      assert.strictEqual(await bash(r, unsure), "unsure", unsure)
    }
    for (const fine of ["rm -r build", "ls -rf", "echo rm -rf /"]) {
      assert.strictEqual(await bash(r, fine), "allowed", fine)
    }
  })

  it("other tools: a tool name glob, and a path glob relative to the workspace", async () => {
    const r = rules(["write(src/**)", "everything__*"], ["edit(**/*.lock)", "read(.env)"])
    assert.strictEqual((await checkRules(r, "write", { path: "src/a/b.ts" }))._tag, "allowed")
    assert.strictEqual((await checkRules(r, "write", { path: "./src/a.ts" }))._tag, "allowed")
    assert.strictEqual((await checkRules(r, "write", { path: "src/../README.md" }))._tag, "none")
    assert.strictEqual((await checkRules(r, "write", { path: "README.md" }))._tag, "none")
    assert.strictEqual((await checkRules(r, "edit", { path: "a/package.lock" }))._tag, "denied")
    assert.strictEqual((await checkRules(r, "read", { path: ".env" }))._tag, "denied")
    assert.strictEqual((await checkRules(r, "everything__echo", { message: "hi" }))._tag, "allowed")
    assert.strictEqual((await checkRules(r, "other__echo", {}))._tag, "none")
  })

  it("'always' suggests this command (each simple command) and commands starting with its first words", async () => {
    assert.deepStrictEqual(await suggestBashRules("npm test -- --grep x"), {
      exact: ["bash(npm test -- --grep x)"],
      prefix: "bash(npm test*)"
    })
    assert.deepStrictEqual(await suggestBashRules("git status && git diff"), {
      exact: ["bash(git status)", "bash(git diff)"],
      prefix: undefined
    })
    // nothing to suggest for what a rule could not match later
    for (const c of ["echo $(date)", "npm test > out", "echo 'a b'"]) {
      assert.deepStrictEqual(await suggestBashRules(c), { exact: [], prefix: undefined }, c)
    }
  })
})

/** The text of the last tool result a request sends (OpenAI's format). */
const SHIFT_TAB = "\u001b[Z"

describe("permissions in chat (in a pseudo-terminal)", () => {
  it(
    "a rule runs npm test unasked but asks for npm test; rm x; a deny rule refuses; read-only plans; accept-edits " +
      "writes unasked and bash asks; p! saves the rule",
    async () => {
      const ws = makeWorkspace()
      writeFileSync(join(ws, "package.json"), JSON.stringify({ scripts: { test: "echo TESTS-RAN" } }))
      writeFileSync(join(ws, "x"), "keep me\n")
      mkdirSync(join(ws, ".agentloop"))
      writeFileSync(
        join(ws, ".agentloop", "config.json"),
        JSON.stringify({ permissions: { allow: ["bash(npm test*)"], deny: ["bash(rm -rf *)"] } })
      )
      const server = await scriptServer([
        { calls: [{ id: "t1", name: "bash", args: { command: "npm test" } }] },
        { calls: [{ id: "t2", name: "bash", args: { command: "npm test; rm x" } }] },
        { calls: [{ id: "t3", name: "bash", args: { command: "rm -rf build" } }] },
        { text: "first done" },
        // read-only: write refused, read runs
        { calls: [{ id: "r1", name: "write", args: { path: "plan.txt", content: "no\n" } }] },
        { calls: [{ id: "r2", name: "read", args: { path: "x" } }] },
        { text: "planned" },
        // accept-edits: the write runs unasked, bash asks
        { calls: [{ id: "e1", name: "write", args: { path: "made.txt", content: "yes\n" } }] },
        { calls: [{ id: "e2", name: "bash", args: { command: "touch z" } }] },
        { text: "edited" }
      ])
      try {
        const cli = startCli(["chat", ...providerFlags(server)], { cwd: ws, env: testEnv(ws), pty: true })
        let at = await answer(cli, "/help for commands", "go")
        at = await answer(cli, "allow?", "n not that", at)
        await cli.waitFor("first done", 90_000, at)
        assert.include(cli.output(), "$ npm test; rm x", "the second command was shown before asking")
        at = await answer(cli, "first done", "/mode read-only", at)
        at = await answer(cli, "mode: read-only", "plan it", at)
        await cli.waitFor("planned", 90_000, at)
        at = await answer(cli, "planned", "/mode accept-edits", at)
        at = await answer(cli, "mode: accept-edits", "edit it", at)
        at = await answer(cli, "allow?", "p!", at)
        await cli.waitFor("edited", 90_000, at)
        cli.write("/exit\r")
        assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())

        const bodies = server.bodies.map((b) => b.body)
        assert.include(lastToolResult(bodies[1]!), "TESTS-RAN", "npm test ran by the rule")
        assert.include(lastToolResult(bodies[2]!), "the user denied this call: not that")
        assert.include(lastToolResult(bodies[3]!), "denied by the permission rule bash(rm -rf *)")
        assert.strictEqual(readFileSync(join(ws, "x"), "utf8"), "keep me\n")
        assert.include(JSON.stringify(bodies[4]!["messages"]), "Permission mode: read-only")
        assert.include(lastToolResult(bodies[5]!), "read-only mode")
        assert.isFalse(existsSync(join(ws, "plan.txt")))
        assert.include(lastToolResult(bodies[6]!), "keep me", "read runs in read-only mode")
        assert.strictEqual(readFileSync(join(ws, "made.txt"), "utf8"), "yes\n")
        assert.isTrue(existsSync(join(ws, "z")), "touch ran after p!")
        const saved = JSON.parse(readFileSync(join(ws, ".agentloop", "config.json"), "utf8"))
        assert.deepStrictEqual(saved.permissions, {
          allow: ["bash(npm test*)", "bash(touch z*)"],
          deny: ["bash(rm -rf *)"]
        })
        const records = jsonLines(sessionFiles(ws)[0]!).filter((r) => r["type"] === "approval")
        assert.deepStrictEqual(records.map((r) => [r["toolCallId"], r["decision"], r["by"], r["mode"]]), [
          ["t1", "approved", "rule", undefined],
          ["t2", "denied", "user", undefined],
          ["t3", "denied", "rule", undefined],
          ["r1", "denied", "mode", "read-only"],
          ["e1", "approved", "mode", "accept-edits"],
          ["e2", "always", "user", undefined]
        ])
        assert.strictEqual(records[0]!["rule"], `bash(npm test*) (${join(ws, ".agentloop", "config.json")})`)
        assert.strictEqual(records[5]!["rule"], "bash(touch z*) (.agentloop/config.json)")
      } finally {
        await server.close()
      }
    },
    240_000
  )
  it(
    "Shift+Tab switches ask → accept-edits → read-only → ask: at the prompt (the text typed kept) and while a run " +
      "works (the next call decided by the new mode)",
    async () => {
      const ws = makeWorkspace()
      let release = () => {}
      const gate = new Promise<void>((resolve) => (release = resolve))
      const server = await scriptServer([
        { text: "working", calls: [{ id: "w1", name: "write", args: { path: "a.txt", content: "a\n" } }], hold: gate },
        { text: "wrote" },
        { calls: [{ id: "w2", name: "write", args: { path: "b.txt", content: "b\n" } }] },
        { text: "planned" },
        { calls: [{ id: "w3", name: "write", args: { path: "c.txt", content: "c\n" } }] },
        { text: "asked" }
      ])
      try {
        const cli = startCli(["chat", ...providerFlags(server)], { cwd: ws, env: testEnv(ws), pty: true })
        let at = await answer(cli, "/help for commands", "go")
        // while the run works: its answer is held until the mode is switched
        await cli.waitFor("working", 90_000, at)
        cli.write(SHIFT_TAB)
        await cli.waitFor(/working\s*\n[^\n]*mode: accept-edits \(Shift\+Tab: next\)/, 90_000, at)
        release()
        // the write ran unasked: accept-edits decided it
        await cli.waitFor(/wrote[\s\S]*usage:[^\n]*\n/, 90_000, at)
        assert.notInclude(cli.output().slice(at), "allow?")
        // at the prompt: the typed text stays while the mode changes
        at = cli.output().length
        cli.write(`plan${SHIFT_TAB}`)
        await cli.waitFor("mode: read-only (Shift+Tab: next)", 90_000, at)
        at = await answer(cli, /read-only \(Shift\+Tab: next\)[\s\S]*plan/, "", at)
        at = await afterRun(cli, "planned", SHIFT_TAB, at)
        await cli.waitFor("mode: ask (Shift+Tab: next)", 90_000, at)
        at = await answer(cli, /ask \(Shift\+Tab: next\)[\s\S]*> /, "ask now", at)
        at = await answer(cli, "allow?", "y", at)
        await cli.waitFor(/asked[\s\S]*usage:/, 90_000, at)
        cli.write("/exit\r")
        assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())

        const bodies = server.bodies.map((b) => b.body)
        assert.strictEqual(readFileSync(join(ws, "a.txt"), "utf8"), "a\n")
        const planned = JSON.stringify(bodies[2]!["messages"])
        assert.include(planned, "Permission mode: read-only", "the model was told of the mode")
        assert.include(planned, `"plan"`, "the text typed before Shift+Tab was sent")
        assert.include(lastToolResult(bodies[3]!), "read-only mode")
        assert.isFalse(existsSync(join(ws, "b.txt")))
        assert.notInclude(JSON.stringify(bodies[4]!["messages"]), "Permission mode: read-only")
        assert.strictEqual(readFileSync(join(ws, "c.txt"), "utf8"), "c\n")
        const records = jsonLines(sessionFiles(ws)[0]!).filter((r) => r["type"] === "approval")
        assert.deepStrictEqual(records.map((r) => [r["toolCallId"], r["decision"], r["by"], r["mode"]]), [
          ["w1", "approved", "mode", "accept-edits"],
          ["w2", "denied", "mode", "read-only"],
          ["w3", "approved", "user", undefined]
        ])
      } finally {
        await server.close()
      }
    },
    240_000
  )
})
