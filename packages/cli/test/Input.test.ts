import { pairingViolations, parseTranscript } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { chmodSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { historyFile } from "../src/History.ts"
import { applyKey, layout, makeKeyDecoder } from "../src/LineEditor.ts"
import {
  eventually,
  isSummaryRequest,
  jsonLines,
  makeWorkspace,
  processesWith,
  providerFlags,
  scriptServer,
  sessionFiles,
  startCli,
  testEnv
} from "./helpers/agent.ts"
import type { Running } from "./helpers/agent.ts"

const PASTE = (text: string) => `\u001b[200~${text}\u001b[201~`

/** The user messages the server was sent, in order (the last one of each request). */
const userTexts = (bodies: ReadonlyArray<{ body: Record<string, unknown> }>) =>
  bodies.filter((b) => !isSummaryRequest(b.body)).map((b) => {
    const messages = b.body["messages"] as Array<{ role: string; content: unknown }>
    return String(messages.filter((m) => m.role === "user").pop()!.content)
  })

/** Sends `line` and waits for `marker` after it, then for the prompt after that. */
const step = async (cli: Running, line: string, marker: string) => {
  const at = cli.output().length
  cli.write(line)
  await cli.waitFor(new RegExp(`${marker}[\\s\\S]*> `), 90_000, at)
}

describe("the line editor's keys", () => {
  it("a bracketed paste is one text whatever its lines, even split over reads; new-line keys; arrows", () => {
    const decode = makeKeyDecoder()
    assert.deepStrictEqual(decode(`a${PASTE("x\ry").slice(0, 9)}`), [{ type: "text", text: "a" }])
    assert.deepStrictEqual(decode(`${PASTE("x\ry").slice(9, -3)}`), [])
    assert.deepStrictEqual(decode(`${PASTE("x\ry").slice(-3)}\r`), [
      { type: "paste", text: "x\ry" },
      { type: "key", name: "enter" }
    ])
    const names = (s: string) => decode(s).map((k) => (k.type === "key" ? k.name : k.text))
    assert.deepStrictEqual(names("\n\u001b\r\u001b[13;2u\u001b[27;2;13~\u001b[Z"), [
      "newline",
      "altEnter",
      "newline",
      "newline",
      "backTab"
    ])
    assert.deepStrictEqual(applyKey({ text: "a", cursor: 1 }, { type: "key", name: "altEnter" }), {
      text: "a\n",
      cursor: 2
    })
    assert.deepStrictEqual(names("\u001b[A\u001b[B\u001bOC\u001b[3~\u0012\u0007\u0004\u0003"), [
      "up",
      "down",
      "right",
      "delete",
      "search",
      "editor",
      "eof",
      "interrupt"
    ])
    const pasted = applyKey({ text: "see: ", cursor: 5 }, { type: "paste", text: "a\r\nb\rc\u001b[31m" })
    assert.deepStrictEqual(pasted, { text: "see: a\nb\nc[31m", cursor: 14 })
  })

  it("the layout counts wrapped rows and the continuation prompt", () => {
    assert.deepStrictEqual(layout("> ", "… ", { text: "abcdefgh", cursor: 3 }, 5), {
      end: { row: 2, col: 0 },
      cursor: { row: 1, col: 0 }
    })
    assert.deepStrictEqual(layout("> ", "… ", { text: "ab\ncd", cursor: 5 }, 80), {
      end: { row: 1, col: 4 },
      cursor: { row: 1, col: 4 }
    })
  })
})

describe("agentloop chat input (in a pseudo-terminal)", () => {
  it("a three-line paste arrives whole; Ctrl-J and Alt-Enter add lines; a line typed with it is not lost", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer((_body, index) => ({ text: `answer ${index + 1}` }))
    try {
      const cli = startCli(["chat", ...providerFlags(server)], { cwd: ws, env: testEnv(ws), pty: true })
      await cli.waitFor("/help for commands")
      const trace = "TypeError: x is undefined\n    at f (a.js:1:2)\n    at g (b.js:3:4)"
      await step(cli, `explain this error: ${PASTE(trace)}\r`, "answer 1")
      await step(cli, "one\ntwo\u001b\rthree\r", "answer 2")
      // two messages in one write (typed ahead): the second, typed while the first one's run starts, steers
      // it: both are in its first request, in order
      await step(cli, "first\rsecond\r", "answer 3")
      cli.write("/exit\r")
      assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())
      assert.deepStrictEqual(userTexts(server.bodies), [`explain this error: ${trace}`, "one\ntwo\nthree", "second"])
      const third = server.bodies[2]!.body["messages"] as Array<{ role: string; content: unknown }>
      assert.deepStrictEqual(third.filter((m) => m.role === "user").slice(-2).map((m) => m.content), [
        "first",
        "second"
      ])
    } finally {
      await server.close()
    }
  }, 240_000)

  it(
    "Ctrl-D exits at once after --continue, /compact, /model and /clear; while a run streams it aborts it",
    async () => {
      const ws = makeWorkspace()
      const server = await scriptServer((body, index) =>
        isSummaryRequest(body) ?
          { text: "summary" } :
          JSON.stringify(body).includes("wait for it") ?
          { hang: true } :
          { text: `answer ${index + 1}` }
      )
      try {
        const env = testEnv(ws)
        const first = startCli(["run", ...providerFlags(server), "hello"], { cwd: ws, env })
        assert.strictEqual((await first.exitedWithin(120_000)).code, 0, first.stderr())
        const cli = startCli(["chat", "--continue", ...providerFlags(server)], { cwd: ws, env, pty: true })
        await cli.waitFor("/help for commands")
        await step(cli, "more\r", "answer")
        await step(cli, "/compact\r", "compacted")
        await step(cli, "/model other\r", "model: other")
        await step(cli, "/clear\r", "new session")
        cli.write("\u0004")
        assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())

        // a run that streams (the server sends nothing more): Ctrl-D aborts it, pairs it, and leaves
        const again = startCli(["chat", ...providerFlags(server)], { cwd: ws, env, pty: true })
        await again.waitFor("/help for commands")
        const before = server.bodies.length
        again.write("wait for it\r")
        assert.isTrue(await eventually(() => server.bodies.length > before, 90_000), "the request was sent")
        again.write("\u0004")
        assert.strictEqual((await again.exitedWithin(60_000)).code, 0, again.output())
        const file = sessionFiles(ws).find((f) => readFileSync(f, "utf8").includes("wait for it"))!
        const loaded = Effect.runSync(parseTranscript(readFileSync(file, "utf8"), file))
        assert.deepStrictEqual(pairingViolations(loaded.messages), [])
        assert.strictEqual(jsonLines(file).find((l) => l["type"] === "run_end")!["reason"], "aborted")
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it(
    "history survives a restart: ↑ recalls a whole multi-line entry, Ctrl-R finds one; 0600; no approval answers",
    async () => {
      const ws = makeWorkspace()
      const server = await scriptServer((_body, index) =>
        index === 1 ?
          { calls: [{ id: "h1", name: "bash", args: { command: "touch x" } }] } :
          { text: `answer ${index + 1}` }
      )
      try {
        const env = testEnv(ws)
        const one = startCli(["chat", ...providerFlags(server)], { cwd: ws, env, pty: true })
        await one.waitFor("/help for commands")
        await step(one, "alpha line\nbeta line\r", "answer 1")
        let at = one.output().length
        one.write("make a file\r")
        await one.waitFor("allow?", 90_000, at)
        at = one.output().length
        one.write("n secret-approval-reason\r")
        await one.waitFor(/answer 3[\s\S]*> /, 90_000, at)
        one.write("\u0004")
        assert.strictEqual((await one.exitedWithin(60_000)).code, 0, one.output())
        const file = historyFile(ws, env)
        assert.strictEqual(statSync(file).mode & 0o777, 0o600)
        assert.deepStrictEqual(
          readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l) as string),
          ["alpha line\nbeta line", "make a file"]
        )

        const two = startCli(["chat", ...providerFlags(server)], { cwd: ws, env, pty: true })
        await two.waitFor("/help for commands")
        // ↑ ↑: the multi-line entry, then Enter sends it again
        await step(two, "\u001b[A\u001b[A\r", "answer 4")
        // Ctrl-R "a fi": the later entry
        await step(two, "\u0012a fi\r", "answer 5")
        two.write("\u0004")
        assert.strictEqual((await two.exitedWithin(60_000)).code, 0, two.output())
        assert.deepStrictEqual(userTexts(server.bodies).slice(-2), ["alpha line\nbeta line", "make a file"])
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it(
    "/edit and Ctrl-G: the message is written in $EDITOR, then sent with Enter; no editor process is left",
    async () => {
      const ws = makeWorkspace()
      const server = await scriptServer((_body, index) => ({ text: `answer ${index + 1}` }))
      try {
        const editor = join(ws, "editor.sh")
        writeFileSync(editor, `#!/bin/sh\nprintf 'from the editor\\nline two\\n' >> "$1"\n`)
        chmodSync(editor, 0o755)
        const cli = startCli(["chat", ...providerFlags(server)], {
          cwd: ws,
          env: testEnv(ws, { EDITOR: editor }),
          pty: true
        })
        await cli.waitFor("/help for commands")
        let at = cli.output().length
        cli.write("/edit\r")
        await cli.waitFor("line two", 90_000, at)
        await step(cli, "\r", "answer 1")
        at = cli.output().length
        cli.write("typed: \u0007")
        await cli.waitFor("line two", 90_000, at)
        await step(cli, "\r", "answer 2")
        cli.write("/exit\r")
        assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())
        assert.deepStrictEqual(userTexts(server.bodies), [
          "from the editor\nline two",
          "typed: from the editor\nline two"
        ])
        assert.deepStrictEqual(processesWith(editor), [], "the editor is gone")
      } finally {
        await server.close()
      }
    },
    240_000
  )
})
