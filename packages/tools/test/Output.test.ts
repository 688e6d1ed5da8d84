/**
 * Cut outputs a model can read back: where `bash` cuts, what the notice says, and the file of the
 * output store that has the whole output, read back with `read` as the notice says.
 */
import { Executor } from "@agentloop/core"
import {
  BASH_OUTPUT_HEAD,
  BASH_OUTPUT_TAIL,
  bashTool,
  codingToolsLayer,
  limitText,
  OUTPUT_FOLDER,
  outputStoreLayer,
  READ_MAX_LINE_LENGTH,
  readTool
} from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as fc from "fast-check"
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { cutLines, Utf8Chunks } from "../src/internal/text.ts"
import { context, details, inWorkspace, text } from "./helpers.ts"

const ctx = context()

/** `f` with an output store in the workspace of `inWorkspace` (closed when `f` ends). */
const withStore = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(outputStoreLayer)
    return yield* Effect.provideContext(effect, context)
  }))

interface Notice {
  readonly path: string
  readonly offset: number
  readonly first: number
  readonly last: number
}

/** The file and offset a cut output's notice names. */
const noticeOf = (shown: string): Notice => {
  const match = new RegExp(
    String.raw`\[\.\.\. [\d,]+ characters omitted \(lines? ([\d,]+)(?:-([\d,]+))? of [\d,]+\): ` +
      String.raw`output cut at [\d,]+ characters, the first [\d,]+ and last [\d,]+ shown[^\]]*\. ` +
      String.raw`Full output: (\S+) - read it with offset=(\d+) to see the omitted part \.\.\.\]`
  )
    .exec(shown)
  if (match === null) throw new Error(`no notice with a file in: ${shown.slice(0, 300)}`)
  const num = (s: string) => Number(s.replaceAll(",", ""))
  return {
    first: num(match[1]!),
    last: num(match[2] ?? match[1]!),
    path: match[3]!,
    offset: Number(match[4])
  }
}

/** Reads `path` from line `from` to line `to` with `read`, as a model would, stripping the line numbers. */
const readLines = (path: string, from: number, to: number) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    let offset = from
    while (offset <= to) {
      const out = text(yield* readTool.execute({ path, offset }, ctx))
      const body = out.split("\n\n[Showing lines")[0]!
      for (const row of body.split("\n")) {
        const match = /^ *(\d+)\t(.*)$/s.exec(row)
        if (match === null) throw new Error(`not a numbered line: ${row.slice(0, 80)}`)
        if (Number(match[1]) !== offset) throw new Error(`expected line ${offset}, got ${match[1]}`)
        if (offset <= to) lines.push(match[2]!)
        offset++
      }
    }
    return lines
  })

const lineOf = (i: number) => `row ${i}: ${"é€😀".repeat(i % 7)} ${"x".repeat(i % 50)}`

describe("cutLines", () => {
  it("cuts on line breaks, never inside a surrogate pair, and counts the omitted lines as read numbers them", () => {
    const piece = fc.oneof(
      fc.constantFrom("\n", "\r\n", "😀", "é", "\u0000", "a"),
      fc.string({ unit: "grapheme", maxLength: 8 }),
      fc.string({ unit: "binary", maxLength: 8 })
    )
    fc.assert(
      fc.property(
        fc.array(piece, { maxLength: 120 }),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 40 }),
        (
          pieces,
          head,
          tail
        ) => {
          const whole = pieces.join("")
          const buffer = cutLines(whole, head, tail)
          const cut = buffer.cut()
          if (whole.length <= head + tail) {
            assert.isUndefined(cut)
            assert.strictEqual(buffer.whole, whole)
            return
          }
          assert.isDefined(cut)
          if (cut === undefined) return
          assert.isTrue(whole.startsWith(cut.head) && whole.endsWith(cut.tail))
          assert.isAtMost(cut.head.length, head)
          assert.isAtMost(cut.tail.length, tail)
          const omitted = whole.slice(cut.head.length, whole.length - cut.tail.length)
          assert.strictEqual(cut.omittedChars, omitted.length)
          assert.isAbove(omitted.length, 0)
          const window = whole.slice(0, head)
          // the head ends a line, or its window holds no line break (its first line is longer than it)
          assert.isTrue(cut.head.endsWith("\n") || !window.includes("\n"))
          const startsLine = cut.tail.length === whole.length
            ? true
            : whole[whole.length - cut.tail.length - 1] === "\n"
          const tailWindow = whole.slice(whole.length - tail)
          assert.isTrue(startsLine || !tailWindow.slice(0, -1).includes("\n"))
          assert.strictEqual(cut.insideLine, !cut.head.endsWith("\n") || !startsLine)
          // no half of a surrogate pair on either side of a cut (unless the input had a lone one there)
          const split = (at: number) =>
            /[\uD800-\uDBFF]/.test(whole[at - 1] ?? "") && /[\uDC00-\uDFFF]/.test(whole[at] ?? "")
          assert.isFalse(split(cut.head.length), "the head's cut splits a pair")
          assert.isFalse(split(whole.length - cut.tail.length), "the tail's cut splits a pair")
          // the lines as read numbers them: 1 + the line breaks before a character
          const lineAt = (index: number) => 1 + (whole.slice(0, index).match(/\n/g)?.length ?? 0)
          assert.strictEqual(cut.firstOmittedLine, lineAt(cut.head.length))
          assert.strictEqual(cut.lastOmittedLine, lineAt(whole.length - cut.tail.length - 1))
          const readLines = whole.split("\n")
          if (readLines.length > 1 && readLines[readLines.length - 1] === "") readLines.pop()
          assert.strictEqual(cut.totalLines, readLines.length)
        }
      ),
      { numRuns: 2000 }
    )
  })

  it("a single line longer than the limit is cut inside, between two characters", () => {
    const line = "😀".repeat(100) // 200 UTF-16 units, no line break
    const cut = cutLines(line, 11, 21).cut()!
    assert.strictEqual(cut.head, "😀".repeat(5), "11 units hold 5 whole emoji, not 5 and a half")
    assert.strictEqual(cut.tail, "😀".repeat(10), "21 units hold 10 whole emoji")
    assert.isTrue(cut.insideLine)
    assert.deepStrictEqual([cut.firstOmittedLine, cut.lastOmittedLine, cut.totalLines], [1, 1, 1])
  })
})

describe("Utf8Chunks", () => {
  it("splits a byte stream between characters only, keeping every byte", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "binary", maxLength: 200 }),
        fc.array(fc.integer({ min: 0, max: 600 }), { maxLength: 10 }),
        fc.uint8Array({ maxLength: 4 }),
        (value, cuts, junk) => {
          const bytes = Buffer.concat([Buffer.from(value), junk, Buffer.from(value)])
          const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
          const chunks = new Utf8Chunks()
          const out: Array<Uint8Array> = []
          let shown = ""
          let from = 0
          for (const to of [...at, bytes.length]) {
            const { bytes: b, text } = chunks.push(bytes.subarray(from, to))
            out.push(Buffer.from(b))
            shown += text
            from = to
          }
          const end = chunks.end()
          out.push(Buffer.from(end.bytes))
          shown += end.text
          assert.isTrue(Buffer.concat(out).equals(bytes), "every byte, in order")
          assert.strictEqual(shown, new TextDecoder().decode(bytes))
          if (junk.length === 0) {
            // valid input: every piece is valid UTF-8 on its own
            for (const piece of out) assert.doesNotThrow(() => new TextDecoder("utf-8", { fatal: true }).decode(piece))
          }
        }
      ),
      { numRuns: 1000 }
    )
  })
})

describe("bash: a cut output can be read back", () => {
  it.effect("the notice names the limit and the file; read at its offset gives the omitted lines byte for byte", () =>
    inWorkspace((root) =>
      withStore(Effect.gen(function*() {
        const lines = Array.from({ length: 3000 }, (_, i) => lineOf(i + 1))
        writeFileSync(`${root}/gen.txt`, `${lines.join("\n")}\n`)
        const out = yield* bashTool.execute({ command: "cat gen.txt; echo to-stderr >&2" }, ctx)
        const shown = text(out)
        assert.match(shown, /output cut at 30,000 characters, the first 10,000 and last 20,000 shown\./)
        const notice = noticeOf(shown)
        assert.match(notice.path, new RegExp(`^${OUTPUT_FOLDER}/\\d+-[0-9a-f]{8}/bash-1\\.txt$`))
        assert.strictEqual(details(out)["fullOutput"], notice.path)
        assert.isTrue(details(out)["truncated"])
        assert.strictEqual(notice.offset, notice.first)
        // the shown head ends a line and the tail starts one
        const head = shown.slice(0, shown.indexOf("[... "))
        assert.isTrue(head.endsWith("\n"))
        assert.strictEqual(head, `${lines.slice(0, notice.first - 1).join("\n")}\n`)
        // the file is the whole output, byte for byte
        const expected = Buffer.from(`${lines.join("\n")}\nto-stderr\n`)
        assert.isTrue(readFileSync(`${root}/${notice.path}`).equals(expected))
        // and a model following the notice gets the omitted lines back exactly
        const back = yield* readLines(notice.path, notice.offset, notice.last)
        assert.deepStrictEqual(back, lines.slice(notice.first - 1, notice.last))
        const tail = shown.slice(shown.indexOf(" ...]\n") + 6)
        assert.strictEqual(`${head}${back.join("\n")}\n${tail}`, expected.toString("utf8"))
      }))
    ))

  it.effect("a single line longer than the limit: cut between two characters, the file has every byte", () =>
    inWorkspace((root) =>
      withStore(Effect.gen(function*() {
        const out = yield* bashTool.execute({ command: "for i in $(seq 1 20000); do printf '😀'; done" }, ctx)
        const shown = text(out)
        assert.match(shown, /line 1 of 1\): .* a line longer than its part is cut between two characters\./)
        const head = shown.slice(0, shown.indexOf("\n[... "))
        const tail = shown.slice(shown.indexOf(" ...]\n") + 6)
        assert.strictEqual(head, "😀".repeat(BASH_OUTPUT_HEAD / 2))
        assert.strictEqual(tail, "😀".repeat(BASH_OUTPUT_TAIL / 2))
        assert.isFalse(shown.includes("\uFFFD"))
        const notice = noticeOf(shown)
        assert.strictEqual(notice.offset, 1)
        assert.isTrue(readFileSync(`${root}/${notice.path}`).equals(Buffer.from("😀".repeat(20000))))
      }))
    ))

  it.effect("bytes that are not UTF-8, and characters split across chunks and streams, are kept as they came", () =>
    inWorkspace((root) =>
      withStore(Effect.gen(function*() {
        // 40,000 lines: each a 4-byte emoji written byte by byte, one invalid byte, and stderr between
        const command = "for i in $(seq 1 8000); do printf '\\xf0\\x9f'; printf '\\x98\\x80\\xff\\n'; " +
          "echo e >&2; done"
        const out = yield* bashTool.execute({ command }, ctx)
        const notice = noticeOf(text(out))
        const kept = readFileSync(`${root}/${notice.path}`)
        const stdout = Buffer.concat(
          Array.from({ length: 8000 }, () => Buffer.from([0xf0, 0x9f, 0x98, 0x80, 0xff, 0x0a]))
        )
        const withoutStderr = Buffer.from(kept.toString("latin1").replaceAll("e\n", ""), "latin1")
        assert.isTrue(withoutStderr.equals(stdout), "stdout's bytes, whole, in order")
        assert.strictEqual(kept.length, stdout.length + 8000 * 2)
        assert.strictEqual(kept.toString("latin1").split("\xf0\x9f\x98\x80").length - 1, 8000, "no emoji torn apart")
      }))
    ))

  it.effect("a short output is not kept, and no folder is made for it", () =>
    inWorkspace((root) =>
      withStore(Effect.gen(function*() {
        const out = yield* bashTool.execute({ command: "seq 1 1000" }, ctx)
        assert.isFalse(details(out)["truncated"])
        assert.isUndefined(details(out)["fullOutput"])
        assert.isFalse(existsSync(`${root}/.agentloop`))
      }))
    ))

  it.effect("without an output store the notice says the output was not kept, and why", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const out = yield* bashTool.execute({ command: "seq 1 100000" }, ctx)
        assert.match(
          text(out),
          new RegExp(
            String.raw`\[\.\.\. [\d,]+ characters omitted \(lines [\d,]+-[\d,]+ of 100,000\): output cut at 30,000 ` +
              String.raw`characters, the first 10,000 and last 20,000 shown\. The full output was not kept: ` +
              String.raw`no output store is set up \(outputStoreLayer\)\. \.\.\.\]`
          )
        )
        assert.isUndefined(details(out)["fullOutput"])
      })
    ))

  it.effect("codingToolsLayer keeps cut outputs, readable with read, and removes them when the layer closes", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const path = yield* Effect.scoped(Effect.gen(function*() {
          const context = yield* Layer.build(codingToolsLayer(root))
          const executor = Context.get(context, Executor)
          const result = yield* executor.execute(
            { type: "toolCall", id: "c1", name: "bash", arguments: { command: "seq 1 50000" } },
            ctx
          )
          const shown = result.content.map((c) => (c.type === "text" ? c.text : "")).join("")
          const notice = noticeOf(shown)
          const read = yield* executor.execute(
            {
              type: "toolCall",
              id: "c2",
              name: "read",
              arguments: { path: notice.path, offset: notice.offset, limit: 1 }
            },
            ctx
          )
          const first = read.content.map((c) => (c.type === "text" ? c.text : "")).join("")
          assert.strictEqual(first.split("\n")[0], `${String(notice.offset).padStart(6)}\t${notice.offset}`)
          assert.isTrue(existsSync(`${root}/${notice.path}`))
          return notice.path
        }))
        assert.isFalse(existsSync(`${root}/${path}`), "the file is removed with the layer")
        assert.deepStrictEqual(readdirSync(`${root}/${OUTPUT_FOLDER}`), [], "and so is the store's folder")
      })
    ))
})

describe("read: its notices name its limits", () => {
  it.effect("the lines per call, the bytes per call and the characters per line; a caller's limit is not named", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        writeFileSync(`${root}/many.txt`, Array.from({ length: 2500 }, (_, i) => `l${i + 1}`).join("\n"))
        assert.match(
          text(yield* readTool.execute({ path: "many.txt" }, ctx)),
          /\n\n\[Showing lines 1-2000 of 2500 \(read's limit: 2,000 lines per call\)\. Use offset=2001 to read on\.\]$/
        )
        assert.match(
          text(yield* readTool.execute({ path: "many.txt", limit: 3 }, ctx)),
          /\n\n\[Showing lines 1-3 of 2500\. Use offset=4 to read on\.\]$/
        )
        writeFileSync(`${root}/wide.txt`, Array.from({ length: 100 }, () => "w".repeat(1000)).join("\n"))
        assert.match(
          text(yield* readTool.execute({ path: "wide.txt" }, ctx)),
          /\[Showing lines 1-50 of 100 \(read's limit: 50 KB per call\)\. Use offset=51 to read on\.\]$/
        )
        writeFileSync(`${root}/long.txt`, `short\n${"😀".repeat(READ_MAX_LINE_LENGTH)}\nshort\n`)
        const long = text(yield* readTool.execute({ path: "long.txt" }, ctx))
        assert.match(
          long,
          new RegExp(
            String.raw`\[1 line\(s\) longer than read's limit of 2,000 characters were cut there \(line 2\); ` +
              String.raw`use bash to see them whole\.\]$`
          )
        )
        assert.include(long, `     2\t${"😀".repeat(READ_MAX_LINE_LENGTH / 2)} [... line cut at 2000 characters]`)
      })
    ))
})

describe("limitText", () => {
  it.effect("gives the text as it is when it fits, else the same notice as bash", () =>
    inWorkspace((root) =>
      withStore(Effect.gen(function*() {
        const small = yield* limitText("srv__tool", "a\nb\n", { head: 10, tail: 10 })
        assert.deepStrictEqual(small, { text: "a\nb\n", truncated: false })
        const big = Array.from({ length: 100 }, (_, i) => `line ${i + 1}`).join("\n")
        const cut = yield* limitText("srv__tool", big, { head: 30, tail: 60 })
        assert.isTrue(cut.truncated)
        const notice = noticeOf(cut.text)
        assert.match(notice.path, /\/srv__tool-1\.txt$/)
        assert.strictEqual(cut.fullOutput, notice.path)
        assert.strictEqual(readFileSync(`${root}/${notice.path}`, "utf8"), big)
        assert.match(cut.text, /^line 1\nline 2\nline 3\nline 4\n\[\.\.\. /)
      }))
    ))
})
