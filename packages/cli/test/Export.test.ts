/**
 * `agentloop export` as a process: the page of a hostile session (message text that tries to end
 * the page's JSON block and start a script) keeps the text as text; where it writes, and what it
 * refuses. The page in a real browser is in ViewBrowser.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync, lstatSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startCli, testEnv } from "./helpers/agent.ts"
import { ATTACK, hostileWorkspace } from "./helpers/hostile.ts"

const blockOf = (html: string): string => {
  const match = /<script type="application\/json" id="agentloop-session">([^]*?)<\/script>/.exec(html)
  assert.isNotNull(match, "the page embeds the session's data")
  return match![1]!
}

describe("agentloop export", () => {
  it("writes one HTML file: no script runs, the data embedded, the attack kept as text", async () => {
    const ws = hostileWorkspace()
    const cli = startCli(["export", "hostile"], { cwd: ws, env: testEnv(ws) })
    assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.stderr())
    const out = join(ws, ".agentloop", "exports", "hostile.html")
    assert.strictEqual(cli.output().split("\n")[0], out)
    const html = readFileSync(out, "utf8")
    // the only script element is the JSON block; the attack's script tag never appears as markup
    assert.strictEqual(html.match(/<script/g)?.length, 1)
    assert.notInclude(html, "<script>window.pwned")
    assert.notInclude(html, "<img src=x")
    assert.include(html, "&lt;/script&gt;&lt;script&gt;window.pwned = 1;")
    assert.include(html, `<meta http-equiv="Content-Security-Policy" content="default-src &#39;none&#39;;`)
    assert.notInclude(html, "/api/version", "no live reload: there is no server")
    const data = JSON.parse(blockOf(html)) as { file: string; timeline: { runs: Array<{ prompt: string }> } }
    assert.strictEqual(data.timeline.runs[0]!.prompt, `Fix it ${ATTACK}`)
    assert.strictEqual(data.file, join(ws, ".agentloop", "sessions", "hostile.jsonl"))
  }, 120_000)

  it("--out outside the workspace replaces a link planted there instead of writing through it", async () => {
    const ws = hostileWorkspace()
    const elsewhere = mkdtempSync(join(tmpdir(), "agentloop-export-out-"))
    const victim = join(elsewhere, "victim.txt")
    writeFileSync(victim, "keep me\n")
    const target = join(elsewhere, "page.html")
    symlinkSync(victim, target)
    const cli = startCli(["export", "hostile", "--out", target], { cwd: ws, env: testEnv(ws) })
    assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.stderr())
    assert.strictEqual(readFileSync(victim, "utf8"), "keep me\n")
    assert.isTrue(lstatSync(target).isFile())
    assert.include(readFileSync(target, "utf8"), "agentloop-session")
  }, 120_000)

  it(
    "bad input: an unknown session, --out through a link in the workspace: one line, exit 2, nothing written",
    async () => {
      const ws = hostileWorkspace()
      const outside = mkdtempSync(join(tmpdir(), "agentloop-export-link-"))
      symlinkSync(outside, join(ws, "linked"))
      const cases: Array<[Array<string>, string]> = [
        [["export", "nope"], `no session "nope"`],
        [["export", "hostile", "--out", join(ws, "linked", "page.html")], "linked"],
        [["export", "hostile", "--out", ""], "--out is empty"]
      ]
      for (const [args, expected] of cases) {
        const cli = startCli(args, { cwd: ws, env: testEnv(ws) })
        assert.strictEqual((await cli.exitedWithin(60_000)).code, 2, `${args.join(" ")}: ${cli.stderr()}`)
        const err = cli.stderr().trim()
        assert.notInclude(err, "\n")
        assert.include(err, expected)
      }
      assert.isFalse(existsSync(join(ws, ".agentloop", "exports")))
      assert.isFalse(existsSync(join(outside, "page.html")))
    },
    120_000
  )
})
