import { assert, describe, it } from "@effect/vitest"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { INIT_PROMPT } from "../src/internal/ProjectContext.ts"
import {
  jsonLines,
  makeWorkspace,
  PNG,
  providerFlags,
  scriptServer,
  sessionFiles,
  startCli,
  testEnv
} from "./helpers/agent.ts"
import type { Running } from "./helpers/agent.ts"

type Body = Record<string, unknown>
const openAiSystem = (body: Body) => (body["messages"] as Array<{ role: string; content: string }>)[0]!.content
const lastUser = (body: Body) => {
  const messages = body["messages"] as Array<{ role: string; content: unknown }>
  return messages.filter((m) => m.role === "user").pop()!.content
}

/** Types `text` once `marker` has appeared after `from`; returns where the output was then. */
const typeAfter = async (cli: Running, marker: string | RegExp, text: string, from = 0) => {
  await cli.waitFor(marker, 90_000, from)
  const at = cli.output().length
  cli.write(text)
  return at
}

describe("project context and attachments (in a pseudo-terminal)", () => {
  it(
    "run: AGENTS.md from the workspace, the folders above up to the repository root and the user's reach the " +
      "system prompt, after the built-in prompt and the config's addition; --image reaches the request",
    async () => {
      const base = realpathSync(mkdtempSync(join(tmpdir(), "agentloop-context-")))
      const repo = join(base, "repo")
      const ws = join(repo, "pkg")
      mkdirSync(join(repo, ".git"), { recursive: true })
      mkdirSync(join(ws, ".agentloop"), { recursive: true })
      mkdirSync(join(ws, ".no-user-config", "agentloop"), { recursive: true })
      writeFileSync(join(base, "AGENTS.md"), "ABOVE-THE-REPOSITORY\n")
      writeFileSync(join(repo, "AGENTS.md"), "REPO-RULE: run npm test\n")
      writeFileSync(join(ws, "AGENTS.md"), "WS-RULE: tabs, not spaces\n")
      writeFileSync(join(ws, ".no-user-config", "agentloop", "AGENTS.md"), "USER-RULE: answer briefly\n")
      writeFileSync(join(ws, ".agentloop", "config.json"), JSON.stringify({ systemPrompt: "CONFIG-ADDITION" }))
      writeFileSync(join(ws, "screen.bin"), PNG)
      const server = await scriptServer([{ text: "seen" }])
      try {
        const cli = startCli(["run", ...providerFlags(server), "--image", "screen.bin", "describe it"], {
          cwd: ws,
          env: testEnv(ws),
          pty: true
        })
        const { code } = await cli.exitedWithin(120_000)
        assert.strictEqual(code, 0, cli.output())
        assert.include(cli.output(), "+ image screen.bin (image/png, 2×2 px, 96 B)")
        const system = openAiSystem(server.bodies[0]!.body)
        const order = [
          "You are a careful coding agent",
          "- read: ",
          "- bash: ",
          `- workspace: ${ws}`,
          `- date: ${new Date().getFullYear()}-`,
          `- platform: ${process.platform}`,
          "CONFIG-ADDITION",
          "USER-RULE: answer briefly",
          "REPO-RULE: run npm test",
          "WS-RULE: tabs, not spaces"
        ]
        let at = 0
        for (const part of order) {
          const i = system.indexOf(part, at)
          assert.isAtLeast(i, 0, `"${part}" after the earlier parts in:\n${system}`)
          at = i
        }
        assert.notInclude(system, "ABOVE-THE-REPOSITORY", "nothing above the repository root")
        assert.deepStrictEqual(lastUser(server.bodies[0]!.body), [
          { type: "text", text: "describe it" },
          { type: "text", text: "[Image screen.bin: image/png (by its content; the name says .bin), 2×2 px, 96 B.]" },
          { type: "image_url", image_url: { url: `data:image/png;base64,${PNG.toString("base64")}` } }
        ])
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it(
    "chat: Tab completes an @ mention, the file's content and a mentioned image reach the request; /init writes " +
      "AGENTS.md through the write's approval, and the next session has it",
    async () => {
      const ws = makeWorkspace()
      mkdirSync(join(ws, "src"))
      writeFileSync(join(ws, "src", "main.ts"), "export const MAIN_MARKER = 42\n")
      writeFileSync(join(ws, "src", "other.ts"), "")
      writeFileSync(join(ws, "shot.png"), PNG)
      const server = await scriptServer([
        { text: "it exports a marker" },
        { calls: [{ id: "w1", name: "write", args: { path: "AGENTS.md", content: "# Agents\nINIT-WROTE-THIS\n" } }] },
        { text: "wrote AGENTS.md" },
        { text: "hello again" }
      ])
      try {
        const cli = startCli(["chat", ...providerFlags(server)], { cwd: ws, env: testEnv(ws), pty: true })
        let at = await typeAfter(cli, "/help for commands", "explain @sr\t")
        at = await typeAfter(cli, "@src/", "m\t", at)
        // readline writes what the completion adds
        at = await typeAfter(cli, "ain.ts ", "and @shot.png\r", at)
        at = await typeAfter(cli, "it exports a marker", "/init\r", at)
        at = await typeAfter(cli, "allow?", "y\r", at)
        at = await typeAfter(cli, "/clear starts one that has it", "/clear\r", at)
        at = await typeAfter(cli, "new session", "hi\r", at)
        await cli.waitFor("hello again", 90_000, at)
        cli.write("/exit\r")
        const { code } = await cli.exitedWithin(60_000)
        assert.strictEqual(code, 0, cli.output())
        const first = lastUser(server.bodies[0]!.body) as Array<{ type: string; text?: string }>
        assert.strictEqual(first[0]!.text, "explain @src/main.ts and @shot.png")
        assert.strictEqual(first[1]!.text, `<file path="src/main.ts">\nexport const MAIN_MARKER = 42\n</file>`)
        assert.strictEqual(first[2]!.text, "[Image shot.png: image/png, 2×2 px, 96 B.]")
        assert.deepStrictEqual(first[3], {
          type: "image_url",
          image_url: { url: `data:image/png;base64,${PNG.toString("base64")}` }
        } as never)
        assert.strictEqual(lastUser(server.bodies[1]!.body), INIT_PROMPT)
        assert.strictEqual(readFileSync(join(ws, "AGENTS.md"), "utf8"), "# Agents\nINIT-WROTE-THIS\n")
        assert.notInclude(openAiSystem(server.bodies[1]!.body), "INIT-WROTE-THIS")
        assert.include(openAiSystem(server.bodies[3]!.body), "INIT-WROTE-THIS")
      } finally {
        await server.close()
      }
    },
    300_000
  )
})

describe("attachments on other paths", () => {
  it(
    "anthropic gets --image as an image block; a server refusing images gives a clear error; --system-prompt " +
      "replaces the built-in prompt (AGENTS.md still added)",
    async () => {
      const ws = makeWorkspace()
      writeFileSync(join(ws, "AGENTS.md"), "WS-RULE\n")
      writeFileSync(join(ws, "shot.png"), PNG)
      const server = await scriptServer([
        { text: "a tiny image" },
        { status: 400, error: "this model does not support image input" }
      ])
      try {
        const env = testEnv(ws, { AGENTLOOP_TEST_KEY: "k" })
        const flags = [...providerFlags(server, "anthropic"), "--system-prompt", "MY-OWN-PROMPT", "--image", "shot.png"]
        const ok = startCli(["run", ...flags, "what is it"], { cwd: ws, env })
        assert.strictEqual((await ok.exitedWithin(120_000)).code, 0, ok.output() + ok.stderr())
        const body = server.bodies[0]!.body
        const system = JSON.stringify(body["system"])
        assert.include(system, "MY-OWN-PROMPT")
        assert.include(system, "WS-RULE")
        assert.notInclude(system, "careful coding agent")
        const parts = lastUser(body) as Array<{ type: string; source?: unknown }>
        assert.deepStrictEqual(
          parts.find((p) => p.type === "image")?.source,
          { type: "base64", media_type: "image/png", data: PNG.toString("base64") },
          JSON.stringify(parts)
        )
        const refused = startCli(["run", ...flags, "what is it"], { cwd: ws, env })
        assert.strictEqual((await refused.exitedWithin(120_000)).code, 1)
        assert.include(refused.stderr(), "this model does not support image input")
        assert.include(refused.stderr(), "the request carried 1 image(s): if claude-test does not accept images")
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it("--durable: an attached image reaches the request and the session file keeps it", async () => {
    const ws = makeWorkspace()
    writeFileSync(join(ws, "shot.png"), PNG)
    const server = await scriptServer([{ text: "a red square" }])
    try {
      const cli = startCli(["run", "--durable", ...providerFlags(server), "--image", "shot.png", "what is it"], {
        cwd: ws,
        env: testEnv(ws)
      })
      assert.strictEqual((await cli.exitedWithin(120_000)).code, 0, cli.output() + cli.stderr())
      assert.deepStrictEqual(lastUser(server.bodies[0]!.body), [
        { type: "text", text: "what is it" },
        { type: "text", text: "[Image shot.png: image/png, 2×2 px, 96 B.]" },
        { type: "image_url", image_url: { url: `data:image/png;base64,${PNG.toString("base64")}` } }
      ])
      const session = jsonLines(sessionFiles(ws)[0]!)
      const user = session.find((r) => r["role"] === "user")
      assert.include(JSON.stringify(user), PNG.toString("base64"))
    } finally {
      await server.close()
    }
  }, 180_000)

  it("a mention out of the workspace is refused with one line before any request (exit 2)", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([{ text: "should not be asked" }])
    try {
      const cli = startCli(["run", ...providerFlags(server), "read @../../etc/passwd"], { cwd: ws, env: testEnv(ws) })
      assert.strictEqual((await cli.exitedWithin(120_000)).code, 2)
      assert.match(cli.stderr(), /agentloop: @\.\.\/\.\.\/etc\/passwd: not attached: .*outside the workspace/)
      assert.strictEqual(server.bodies.length, 0)
      assert.isFalse(existsSync(join(ws, "AGENTS.md")))
    } finally {
      await server.close()
    }
  }, 180_000)
})
