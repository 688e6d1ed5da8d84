import { assert, describe, it } from "@effect/vitest"
import { checkRules, parseRule, readRules, RuleError, suggestBashRules } from "../src/Permissions.ts"
import type { PermissionRules } from "../src/Permissions.ts"

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
