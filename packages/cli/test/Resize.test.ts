/**
 * The terminal resized while `chat` works, in a real terminal that reflows (tmux): what was written
 * stays in the scrollback, whole, however the footer (the line being typed) is redrawn meanwhile.
 */
import { assert, describe, it } from "@effect/vitest"
import { createServer } from "node:http"
import type { ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { bin, makeWorkspace, testEnv } from "./helpers/agent.ts"
import { tmuxTerminal } from "./helpers/terminal.ts"

/** A model server (OpenAI format) whose one answer streams what the test sends, when it sends it. */
const streamingServer = async () => {
  let answer: ServerResponse | undefined
  let arrived: () => void = () => {}
  const asked = new Promise<void>((resolve) => (arrived = resolve))
  let requests = 0
  const server = createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      requests++
      res.writeHead(200, { "content-type": "text/event-stream" })
      if (answer !== undefined) {
        res.end("data: [DONE]\n\n")
        return
      }
      answer = res
      arrived()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const chunk = (delta: Record<string, unknown>, finish: string | null) =>
    `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    asked,
    requests: () => requests,
    send: (text: string) => void answer!.write(chunk({ role: "assistant", content: text }, null)),
    finish: () => void answer!.end(`${chunk({}, "stop")}data: [DONE]\n\n`),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

describe("agentloop chat in a terminal that is resized", () => {
  it("a resize storm while typing during a streamed answer keeps every line of the scrollback", async () => {
    const ws = makeWorkspace()
    const server = await streamingServer()
    const term = tmuxTerminal(
      [
        process.execPath,
        "--conditions=agentloop-source",
        bin,
        "chat",
        "--yes",
        "--provider",
        "openai-compat",
        "--base-url",
        server.url,
        "--model",
        "test-model"
      ],
      { cwd: ws, env: testEnv(ws), cols: 80, rows: 24 }
    )
    try {
      await term.waitFor((lines) => lines.some((l) => l.includes("/help for commands")))
      await term.waitFor((lines) => lines.filter((l) => l.length > 0).at(-1) === ">")
      term.type("tell me")
      term.keys("Enter")
      await server.asked
      const expected = Array.from({ length: 30 }, (_, i) => `line ${i + 1} of the answer`)
      server.send(`${expected.slice(0, 24).join("\n")}\nline 25 `)
      await term.waitFor((lines) => lines.includes("line 24 of the answer"))
      term.type("typed below")
      await term.waitFor((lines) => lines.some((l) => l.startsWith("» typed below")))
      const sizes = [[60, 20], [100, 30], [50, 15], [80, 24], [70, 12], [120, 40], [40, 18], [90, 22]] as const
      let n = 25
      for (const [cols, rows] of sizes) {
        term.resize(cols, rows)
        term.type("!")
        if (n === 25) server.send("of the answer\n")
        else if (n <= 30) server.send(`line ${n} of the answer\n`)
        n++
        await new Promise((r) => setTimeout(r, 150))
      }
      server.finish()
      const lines = await term.waitFor((l) =>
        l.filter((r) => r.length > 0).at(-1)?.startsWith("> typed below") === true
      )
      const shown = lines.filter((l) => l.length > 0)
      const firstAt = shown.findIndex((l) => l.endsWith("line 1 of the answer"))
      assert.isAtLeast(firstAt, 0, shown.join("\n"))
      assert.deepStrictEqual(
        shown.slice(firstAt, firstAt + 30).map((l) => l.replace(/^assistant /, "")),
        expected,
        shown.join("\n")
      )
      assert.include(shown, "> tell me", shown.join("\n"))
      // each line once, and nothing of the footer left among them
      for (const line of expected) assert.lengthOf(shown.filter((l) => l.endsWith(line)), 1, shown.join("\n"))
      assert.deepStrictEqual(
        shown.filter((l) => l.includes("typed below")),
        ["> typed below!!!!!!!!"],
        shown.join("\n")
      )
    } finally {
      term.close()
      await server.close()
    }
  }, 240_000)
})
