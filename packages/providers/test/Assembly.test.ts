/**
 * The assembly of a long answer: text, thinking and tool arguments are built from deltas in flat
 * batches (`TextBuilder`), and must come out whole and in order however many deltas there are,
 * across every batch boundary.
 */
import type { ModelEvent } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { MessageAssembly, TextBuilder } from "../src/internal/assembly.ts"

describe("assembling a long answer", () => {
  it(
    "10,000 text deltas, interleaved with thinking and the fragments of two calls, come out whole and in " +
      "order",
    () => {
      const assembly = new MessageAssembly("call_x")
      const out: Array<ModelEvent> = []
      const text: Array<string> = []
      const thinking: Array<string> = []
      const args = [{ path: "a.ts", content: "" }, { path: "b.ts", content: "" }]
      const fragments = args.map(() => [] as Array<string>)
      assembly.toolCall("tool:0", { id: "call_a", name: "write" }, out)
      assembly.toolCall("tool:1", { id: "call_b", name: "write" }, out)
      for (let i = 0; i < 10_000; i++) {
        const delta = `${i}é,`
        text.push(delta)
        assembly.text("text", delta, out)
        if (i % 3 === 0) {
          thinking.push(`t${i}`)
          assembly.thinking("reasoning", `t${i}`, out)
        }
        args[i % 2]!.content += `${i};`
      }
      args.forEach((value, call) => {
        const json = JSON.stringify(value)
        for (let at = 0; at < json.length; at += 3) fragments[call]!.push(json.slice(at, at + 3))
      })
      for (let i = 0; i < Math.max(fragments[0]!.length, fragments[1]!.length); i++) {
        for (const call of [0, 1]) {
          const fragment = fragments[call]![i]
          if (fragment !== undefined) assembly.toolCall(`tool:${call}`, { fragment }, out)
        }
      }
      const message = assembly.finish({ stopReason: "toolUse" })
      assert.deepStrictEqual(message.content, [
        { type: "toolCall", id: "call_a", name: "write", arguments: args[0]! },
        { type: "toolCall", id: "call_b", name: "write", arguments: args[1]! },
        { type: "text", text: text.join("") },
        { type: "thinking", thinking: thinking.join("") }
      ])
      assert.strictEqual(out.filter((event) => event.type === "text_delta").length, 10_000)
    }
  )

  it("a TextBuilder gives every append in order across batch boundaries, and set() replaces it all", () => {
    const builder = new TextBuilder()
    let expected = ""
    for (let i = 0; i < TextBuilder.batch * 3 + 7; i++) {
      builder.append(String(i % 10))
      builder.append("")
      expected += String(i % 10)
      if (i === TextBuilder.batch + 1) assert.strictEqual(builder.toString(), expected)
    }
    assert.strictEqual(builder.length, expected.length)
    assert.strictEqual(builder.toString(), expected)
    builder.append("pending, not yet joined")
    builder.set("replaced")
    builder.append("!")
    assert.strictEqual(builder.toString(), "replaced!")
    assert.strictEqual(builder.length, 9)
  })
})
