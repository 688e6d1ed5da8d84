import {
  describeHistory,
  describeResult,
  excerptLines,
  excerptOf,
  makeRenderer,
  makeStyle,
  wholeOutputOf
} from "@agentloop/cli"
import type { Message, ToolResultMessage } from "@agentloop/core"
import { toolCall } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { virtualTerminal } from "./helpers/terminal.ts"

const plain = makeStyle(false)

/** A bash result as the tool makes it (BashTool.ts): the text the model is sent, and the details. */
const bashResult = (
  text: string,
  details: Record<string, unknown>,
  isError = false
): ToolResultMessage => ({
  role: "toolResult",
  toolCallId: "c1",
  toolName: "bash",
  content: [{ type: "text", text }],
  details: { command: "x", signal: null, timedOut: false, truncated: false, containment: "pid-namespace", ...details },
  isError
})

// `seq 1 300000` as bash returns it: the first 10,000 and last 20,000 characters around the notice
const seq = Array.from({ length: 300000 }, (_, i) => `${i + 1}\n`).join("")
const head = seq.slice(0, seq.lastIndexOf("\n", 10_000) + 1)
const tail = seq.slice(seq.indexOf("\n", seq.length - 20_000) + 1)
const cutSeq = bashResult(
  `${head}[... 1,958,908 characters omitted (lines 1,892-296,599 of 300,000): output cut at 30,000 characters, ` +
    `the first 10,000 and last 20,000 shown. Full output: .agentloop/output/1-0a0b0c0d/bash-1.txt - read it with ` +
    `offset=1892 to see the omitted part ...]\n${tail}`,
  {
    exitCode: 0,
    truncated: true,
    outputLines: 300000,
    outputBytes: seq.length,
    fullOutput: ".agentloop/output/1-0a0b0c0d/bash-1.txt"
  }
)

describe("tool output: true sizes, excerpts, the whole", () => {
  it("a cut bash output: the size of the whole output, a note that the model got it cut, its last lines", () => {
    assert.strictEqual(
      describeResult(cutSeq),
      "exit 0 · 300,000 lines, 1.9 MB · the model saw it cut to its start and end"
    )
    const excerpt = excerptOf(undefined, cutSeq)!
    assert.deepStrictEqual(excerpt.lines.map((l) => l.text), ["299996", "299997", "299998", "299999", "300000"])
    assert.strictEqual(excerpt.more, 299995)
    assert.deepStrictEqual(
      excerptLines(undefined, cutSeq, { style: plain, columns: 80, expandHint: "/last shows all" }),
      [
        "  … 299,995 earlier lines (/last shows all)",
        "  │ 299996",
        "  │ 299997",
        "  │ 299998",
        "  │ 299999",
        "  │ 300000"
      ]
    )
    assert.deepStrictEqual(wholeOutputOf(undefined, cutSeq).file, ".agentloop/output/1-0a0b0c0d/bash-1.txt")
  })

  it("no output is no output (not one line), a closing note is not output, and a short one is shown whole", () => {
    const quiet = bashResult("(no output)", { exitCode: 0, outputLines: 0, outputBytes: 0 })
    assert.strictEqual(describeResult(quiet), "exit 0 · no output")
    assert.isUndefined(excerptOf(undefined, quiet))
    const failed = bashResult(
      "oops\n[Command exited with code 2.]",
      { exitCode: 2, outputLines: 1, outputBytes: 5 },
      true
    )
    assert.strictEqual(describeResult(failed), "exit 2 · 1 line, 5 bytes")
    assert.deepStrictEqual(excerptLines(undefined, failed, { style: plain, columns: 80 }), ["  │ oops"])
    assert.deepStrictEqual(wholeOutputOf(undefined, failed), { text: "oops" })
    const killed = bashResult("[Command was killed by signal SIGKILL.]", { exitCode: null, signal: "SIGKILL" }, true)
    assert.strictEqual(describeResult(killed), "killed by SIGKILL")
    assert.isUndefined(excerptOf(undefined, killed))
  })

  it("an edit's diff (cut at 12 lines, saying how many more), a write's first lines; none for other tools", () => {
    const diff = ["@@ -1,14 +1,14 @@", ...Array.from({ length: 14 }, (_, i) => `-old ${i}\n+new ${i}`)].join("\n")
    const edit: ToolResultMessage = {
      role: "toolResult",
      toolCallId: "e1",
      toolName: "edit",
      content: [{ type: "text", text: `Edited a.txt (14 replacements).\n${diff}` }],
      details: { path: "a.txt", replacements: 14, diff },
      isError: false
    }
    const lines = excerptLines(undefined, edit, { style: plain, columns: 80, expandHint: "/last shows all" })
    assert.deepStrictEqual(lines.slice(0, 3), ["    -old 0", "    +new 0", "    -old 1"])
    assert.strictEqual(lines.length, 13)
    assert.strictEqual(lines[12], "    … 16 more lines (/last shows all)")
    const call = toolCall("w1", "write", { path: "b.txt", content: "1\n2\n3\n4\n5\n6\n7\n" })
    const write: ToolResultMessage = {
      role: "toolResult",
      toolCallId: "w1",
      toolName: "write",
      content: [{ type: "text", text: "Created b.txt (14 bytes)." }],
      details: { path: "b.txt", bytes: 14, created: true },
      isError: false
    }
    assert.deepStrictEqual(excerptLines(call, write, { style: plain, columns: 80 }), [
      "    +1",
      "    +2",
      "    +3",
      "    +4",
      "    +5",
      "    … 2 more lines"
    ])
    assert.strictEqual(wholeOutputOf(call, write).text, "1\n2\n3\n4\n5\n6\n7\n")
    const read: ToolResultMessage = { ...write, toolName: "read", details: { path: "b.txt", totalLines: 7 } }
    assert.isUndefined(excerptOf(toolCall("r1", "read", { path: "b.txt" }), read))
  })

  it("attacker: control sequences in an output never reach the excerpt; long lines are cut to the width", () => {
    const hostile = bashResult(`\u001b]52;c;c2VjcmV0\u0007\u001b[2Jx${"y".repeat(200)}\n`, {
      exitCode: 0,
      outputLines: 1,
      outputBytes: 220
    })
    const [line] = excerptLines(undefined, hostile, { style: plain, columns: 40 })
    assert.notMatch(line!, /\u001b/)
    assert.strictEqual(line, `  │ x${"y".repeat(32)}…`)
  })

  it.effect("on a terminal the renderer shows the excerpt under the call's line, with the true size", () =>
    Effect.gen(function*() {
      let out = ""
      yield* Effect.scoped(Effect.gen(function*() {
        const renderer = yield* makeRenderer({
          write: (t) => void (out += t),
          style: plain,
          live: true,
          columns: 120,
          expandHint: "/last shows all"
        })
        const call = toolCall("c1", "bash", { command: "seq 1 300000" })
        yield* renderer.render({ type: "tool_start", call })
        yield* renderer.render({ type: "tool_progress", toolCallId: "c1", progress: { stream: "stdout", text: "1\n" } })
        yield* renderer.render({ type: "tool_end", result: cutSeq })
      }))
      const vt = virtualTerminal(120, 12)
      yield* Effect.promise(() => vt.feed(out))
      const rows = vt.screen()
      assert.strictEqual(rows[0], "▶ bash seq 1 300000")
      assert.match(rows[1]!, /^✓ bash seq 1 300000 \d+\.\ds {2}exit 0 · 300,000 lines, 1\.9 MB · the model saw it cut/)
      assert.deepStrictEqual(rows.slice(2, 8), [
        "  … 299,995 earlier lines (/last shows all)",
        "  │ 299996",
        "  │ 299997",
        "  │ 299998",
        "  │ 299999",
        "  │ 300000"
      ])
      // below the output, the status line: the batch done, the run waits for the model
      assert.match(rows[8]!, /^⠋ waiting for the model \d+\.\ds$/)
    }))

  it("a conversation told compactly: prompts, assistant text, one line per call with how it ended", () => {
    const call = toolCall("c1", "bash", { command: "seq 1 300000" })
    const messages: ReadonlyArray<Message> = [
      { role: "user", content: "count to a lot" },
      {
        role: "assistant",
        content: [{ type: "text", text: "Counting." }, call],
        stopReason: "toolUse"
      },
      { ...cutSeq, toolCallId: "c1" },
      { role: "assistant", content: [{ type: "text", text: "Done:\n1\n2\n3\n4\n5\n6\n7" }], stopReason: "stop" },
      { role: "user", content: [{ type: "text", text: "and \u001b[31mnow?" }, { type: "text", text: "attached" }] }
    ]
    assert.deepStrictEqual(describeHistory(messages, { style: plain }), [
      "> count to a lot",
      "assistant Counting.",
      "✓ bash seq 1 300000  exit 0 · 300,000 lines, 1.9 MB · the model saw it cut to its start and end",
      "assistant Done:",
      "1",
      "2",
      "3",
      "4",
      "5",
      "… 2 more line(s)",
      "> and now? [+1 attached]"
    ])
    assert.deepStrictEqual(describeHistory(messages, { style: plain, prompts: 1 }), [
      "… 1 earlier message(s) not shown",
      "> and now? [+1 attached]"
    ])
  })
})
