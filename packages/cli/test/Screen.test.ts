import { makeScreen } from "@agentloop/cli"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { virtualTerminal } from "./helpers/terminal.ts"

/** A live screen on a virtual terminal of `cols` × `rows`. */
const onTerminal = (cols: number, rows: number) => {
  const vt = virtualTerminal(cols, rows)
  let pending = ""
  const screen = makeScreen({ write: (t) => void (pending += t), live: true, columns: () => cols, rows: () => rows })
  const settle = async () => {
    const text = pending
    pending = ""
    await vt.feed(text)
  }
  return { vt, screen, settle }
}

const typed = (text: string) => ({ lines: [`» ${text}`], cursor: { line: 0, column: 2 + text.length }, wrap: true })

describe("screen: output above, a live footer below", () => {
  it("a line being streamed goes on where it was while the footer is drawn under it", async () => {
    const { screen, settle, vt } = onTerminal(40, 10)
    screen.write("assistant Working on ")
    screen.setBlock("input", typed("also fix b"))
    await settle()
    assert.deepStrictEqual(vt.screen().slice(0, 3), ["assistant Working on", "» also fix b", ""])
    assert.deepStrictEqual(vt.cursor(), { row: 1, col: 12 }, "the cursor is in the typed line")
    screen.write("it now.")
    screen.write("\nnext line\n")
    screen.setBlock("input", typed("also fix b.txt"))
    await settle()
    assert.deepStrictEqual(vt.screen().slice(0, 4), [
      "assistant Working on it now.",
      "next line",
      "» also fix b.txt",
      ""
    ])
    screen.setBlock("input", undefined)
    screen.write("done\n")
    await settle()
    assert.deepStrictEqual(vt.screen().slice(0, 4), ["assistant Working on it now.", "next line", "done", ""])
  })

  it("at the bottom of the screen the output scrolls; the footer stays below, out of the scrollback", async () => {
    const { screen, settle, vt } = onTerminal(30, 6)
    screen.setBlock("status", { lines: ["⠋ bash seq 1 9 0.1s"] })
    screen.setBlock("input", typed("steer"))
    const expected: Array<string> = []
    for (let i = 1; i <= 25; i++) {
      // half a line, a footer change, the rest of it
      screen.write(`line ${i} `)
      screen.setBlock("status", { lines: [`⠋ bash seq 1 9 ${i}.0s`] })
      screen.write(`of 25\n`)
      expected.push(`line ${i} of 25`)
      if (i % 5 === 0) await settle()
    }
    await settle()
    assert.deepStrictEqual(vt.all().filter((l) => l.length > 0), [...expected, "⠋ bash seq 1 9 25.0s", "» steer"])
    assert.deepStrictEqual(vt.screen(), [...expected.slice(-4), "⠋ bash seq 1 9 25.0s", "» steer"])
  })

  it("footer lines are cut to the width; typed text wraps, and a full row puts the cursor on the next", async () => {
    const { screen, settle, vt } = onTerminal(12, 8)
    screen.setBlock("queue", { lines: ["⇢ steering: a very long message indeed"] })
    screen.setBlock("input", typed("0123456789abcdefghijklmnopqrstuv"))
    await settle()
    assert.deepStrictEqual(vt.screen().slice(0, 5), ["⇢ steering:", "» 012345678", "9abcdefghij", "klmnopqrstu", "v"])
    assert.deepStrictEqual(vt.cursor(), { row: 4, col: 1 })
    screen.setBlock("input", typed("012345678"))
    await settle()
    assert.deepStrictEqual(vt.screen().slice(0, 3), ["⇢ steering:", "» 012345678", ""])
    assert.deepStrictEqual(vt.cursor(), { row: 2, col: 0 })
  })

  it.effect("suspend: the footer goes while something else writes, on a line of its own, and comes back", () =>
    Effect.promise(async () => {
      const { screen, settle, vt } = onTerminal(40, 10)
      screen.write("assistant half a line")
      screen.setBlock("status", { lines: ["⠋ bash make 1.0s"] })
      await settle()
      await Effect.runPromise(screen.suspend(Effect.sync(() => screen.write("? allow [y/n] y\n"))))
      await settle()
      assert.deepStrictEqual(vt.screen().slice(0, 4), [
        "assistant half a line",
        "? allow [y/n] y",
        "⠋ bash make 1.0s",
        ""
      ])
    }))

  it("narrower than it says (tmux tells a resize late): the footer is cut, never wrapped; output stays", async () => {
    // the screen is told 60 columns; the terminal has 30
    const vt = virtualTerminal(30, 6)
    let pending = ""
    const screen = makeScreen({ write: (t) => void (pending += t), live: true, columns: () => 60, rows: () => 6 })
    const settle = async () => {
      const text = pending
      pending = ""
      await vt.feed(text)
    }
    const hint = "  Enter: steer the run now · Esc: stop the run"
    const expected: Array<string> = []
    for (let i = 1; i <= 8; i++) {
      screen.write(`line ${i} `)
      screen.setBlock("input", { lines: [`» typed ${i}`, hint], cursor: { line: 0, column: 9 }, wrap: true })
      screen.write("of 8\n")
      expected.push(`line ${i} of 8`)
      await settle()
    }
    const rows = vt.all().filter((l) => l.length > 0)
    assert.deepStrictEqual(rows.slice(0, -1), [...expected, "» typed 8"])
    // (with autowrap off the terminal writes what goes past the edge on its last column)
    assert.strictEqual(rows.at(-1)!.slice(0, 29), hint.slice(0, 29))
  })

  it("a wide character in the unfinished line: the rest of it goes on right after it", async () => {
    const { screen, settle, vt } = onTerminal(20, 6)
    screen.write("答え: ")
    screen.setBlock("status", { lines: ["⠋ waiting"] })
    screen.write("はい")
    screen.setBlock("status", { lines: ["⠙ waiting"] })
    screen.write(" done\n")
    await settle()
    assert.deepStrictEqual(vt.screen().slice(0, 2), ["答え: はい done", "⠙ waiting"])
  })

  it("not on a terminal: output is written as it is and there is no footer", () => {
    let out = ""
    const screen = makeScreen({ write: (t) => void (out += t), live: false })
    screen.write("a")
    screen.setBlock("input", typed("x"))
    screen.setBlock("status", { lines: ["⠋"] })
    screen.write("b\n")
    assert.strictEqual(out, "ab\n")
  })
})
