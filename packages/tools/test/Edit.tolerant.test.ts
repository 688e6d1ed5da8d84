import { editTool, workspaceLayer } from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fc from "fast-check"
import { readFileSync, writeFileSync } from "node:fs"
import { context, details, failed, inWorkspace, node, text } from "./helpers.ts"

const ctx = context()

const run = (path: string, oldText: string, newText: string, replaceAll = false) =>
  editTool.execute({ path, oldText, newText, ...(replaceAll ? { replaceAll } : {}) }, ctx)

/** Writes `content` to `root/f.txt`, edits it, and returns the result's text and the file after. */
const editFile = (root: string, content: string, oldText: string, newText: string, replaceAll = false) =>
  Effect.gen(function*() {
    writeFileSync(`${root}/f.txt`, content)
    const out = yield* run("f.txt", oldText, newText, replaceAll)
    return { out: text(out), details: details(out), after: readFileSync(`${root}/f.txt`, "utf8") }
  })

/** Writes `content`, expects the edit to fail, checks the file is untouched, returns the message. */
const refused = (root: string, content: string, oldText: string, newText: string, replaceAll = false) =>
  Effect.gen(function*() {
    writeFileSync(`${root}/f.txt`, content)
    const error = yield* failed(run("f.txt", oldText, newText, replaceAll))
    assert.strictEqual(readFileSync(`${root}/f.txt`, "utf8"), content, "the file is untouched")
    return error.message
  })

describe("edit: \"exactly once\" counts every variant", () => {
  it.effect("pi's scenario: hello\\r\\nworld\\r\\n and hello\\nworld\\n in one file are two places, not one", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const message = yield* refused(root, "hello\r\nworld\r\n---\r\nhello\nworld\n", "hello\nworld\n", "bye\n")
        assert.strictEqual(
          message,
          "oldText occurs 2 times in f.txt, counting loose matches (at lines 1 and 4: 1 exactly, 1 once line " +
            "endings, trailing whitespace, typographic quotes, dashes, special spaces and Unicode forms are " +
            "normalised); include more surrounding text to make it unique, or set replaceAll to true"
        )
      })
    ))

  it.effect("an exact match and a loose one elsewhere (smart quotes, trailing space) are two places", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const quotes = yield* refused(root, "say(\u2018hi\u2019)\nsay('hi')\n", "say('hi')", "say('bye')")
        assert.match(quotes, /^oldText occurs 2 times in f\.txt, counting loose matches \(at lines 1 and 2: 1 exactly/)
        const loose = yield* refused(root, "a \u2013 b\nx\na \u2014 b\n", "a - b", "c")
        assert.match(
          loose,
          /^oldText occurs 2 times in f\.txt, counting loose matches \(at lines 1 and 3: none exactly, 2 once/
        )
      })
    ))

  it.effect("without loose variants the count and lines are the exact ones; overlapping ones are said to count", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        assert.strictEqual(
          yield* refused(root, "x = 1\ny\nx = 1\n", "x = 1", "x = 2"),
          "oldText occurs 2 times in f.txt (at lines 1 and 3); include more surrounding text to make it unique, or " +
            "set replaceAll to true"
        )
        assert.match(yield* refused(root, "ababa", "aba", "X"), /\(at line 1; overlapping occurrences count\)/)
        const many = Array.from({ length: 12 }, () => "k\n").join("")
        assert.match(
          yield* refused(root, many, "k", "K"),
          /^oldText occurs 12 times in f\.txt \(at lines 1, 2, 3, 4, 5 and more\)/
        )
      })
    ))

  it.effect("replaceAll replaces every variant, exact and loose, and says how many matched loosely", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const r = yield* editFile(root, "it's\nit\u2019s\nits\nit's\n", "it's", "it is", true)
        assert.strictEqual(r.after, "it is\nit is\nits\nit is\n")
        assert.match(
          r.out,
          /^Edited f\.txt \(3 replacements, matched loosely \(1 of them\): typographic quotes differ\)\./
        )
        assert.deepStrictEqual(r.details["loose"], { replacements: 1, normalised: ["quotes"] })
      })
    ))
})

describe("edit: loose matching, applied only when it names one place", () => {
  it.effect("exact wins: an exact match is replaced as it is and the result says nothing of loose matching", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const r = yield* editFile(root, "const x = 'exact';\nconst y = \u2018other\u2019;\n", "const x = 'exact';", "x")
        assert.strictEqual(r.after, "x\nconst y = \u2018other\u2019;\n")
        assert.match(r.out, /^Edited f\.txt \(1 replacement\)\.\n/)
        assert.isUndefined(r.details["loose"])
      })
    ))

  it.effect("trailing whitespace in the file (pi's scenario); the rest of the file keeps its own", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const r = yield* editFile(
          root,
          "line one   \nline two  \nline three \t\n",
          "line one\nline two\n",
          "replaced\n"
        )
        assert.strictEqual(r.after, "replaced\nline three \t\n")
        assert.match(r.out, /^Edited f\.txt \(1 replacement, matched loosely: trailing whitespace differ\)\./)
      })
    ))

  it.effect("typographic quotes: only the matched ones change; smart quotes elsewhere stay", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const content =
          "// \u201Cdocs\u201D say \u2018hi\u2019\nconsole.log(\u2018hello\u2019);\nmsg = \u201CHello\u201D;\n"
        const single = yield* editFile(root, content, "console.log('hello');", "console.log('world');")
        assert.strictEqual(
          single.after,
          "// \u201Cdocs\u201D say \u2018hi\u2019\nconsole.log('world');\nmsg = \u201CHello\u201D;\n"
        )
        assert.match(single.out, /matched loosely: typographic quotes differ/)
        const double = yield* editFile(root, content, "msg = \"Hello\";", "msg = \"Bye\";")
        assert.strictEqual(
          double.after,
          "// \u201Cdocs\u201D say \u2018hi\u2019\nconsole.log(\u2018hello\u2019);\nmsg = \"Bye\";\n"
        )
      })
    ))

  it.effect("dashes, the minus sign, no-break and other spaces (each way round)", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const dashes = yield* editFile(
          root,
          "range: 1\u20135\nbreak\u2014here \u2212 x\n",
          "range: 1-5\nbreak-here - x",
          "r"
        )
        assert.strictEqual(dashes.after, "r\n")
        assert.match(dashes.out, /matched loosely: dashes differ/)
        const nbsp = yield* editFile(root, "hello\u00A0world\n10.00\u202FAM\n", "hello world", "hi")
        assert.strictEqual(nbsp.after, "hi\n10.00\u202FAM\n")
        assert.match(nbsp.out, /matched loosely: no-break and other spaces differ/)
        // the model's text has the special characters, the file plain ones
        const reverse = yield* editFile(root, "a - 'b' c\n", "a \u2014\u00A0\u2018b\u2019 c", "d")
        assert.strictEqual(reverse.after, "d\n")
        assert.match(reverse.out, /typographic quotes, dashes, no-break and other spaces differ/)
      })
    ))

  it.effect("Unicode forms: NFD against NFC, and compatibility forms (fullwidth, pi's scenarios)", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const nfd = yield* editFile(
          root,
          "\uFF21\uFF22\uFF23\uFF11\uFF12\uFF13\ncafe\u0301\nend\n",
          "ABC123\ncaf\u00E9\n",
          "X\n"
        )
        assert.strictEqual(nfd.after, "X\nend\n")
        assert.match(nfd.out, /matched loosely: Unicode forms differ/)
        const nfc = yield* editFile(root, "caf\u00E9 au lait\n", "cafe\u0301 au", "tea,")
        assert.strictEqual(nfc.after, "tea, lait\n")
        const chinese = yield* editFile(
          root,
          "\u4F60\u597D\uFF0C\u4E16\u754C\n\u4F60\u597D\uFF08\u4E16\u754C\uFF09\n",
          "\u4F60\u597D,\u4E16\u754C\n\u4F60\u597D(\u4E16\u754C)\n",
          "\u4F60\u597D\uFF0Cpi\n"
        )
        assert.strictEqual(chinese.after, "\u4F60\u597D\uFF0Cpi\n", "the new text is written as given")
      })
    ))

  it.effect("line endings: a CRLF region gets CRLF in the new text, an LF file stays LF, a BOM stays", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const crlf = yield* editFile(root, "\uFEFFfirst\r\nsecond\r\nthird\r\n", "second\n", "RE\nPLACED\n")
        assert.strictEqual(crlf.after, "\uFEFFfirst\r\nRE\r\nPLACED\r\nthird\r\n")
        assert.match(crlf.out, /matched loosely: line endings differ; the file's CRLF line endings were kept/)
        const lf = yield* editFile(root, "first\nsecond\nthird\n", "second\n", "RE\nPLACED\n")
        assert.strictEqual(lf.after, "first\nRE\nPLACED\nthird\n")
        assert.match(lf.out, /^Edited f\.txt \(1 replacement\)\./)
      })
    ))

  it.effect("a match never starts or ends inside a normalised character (the ... of an …)", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        assert.match(yield* refused(root, "wait\u2026b\n", "..b", "c"), /^oldText was not found in f\.txt/)
        const whole = yield* editFile(root, "wait\u2026b\n", "wait...b", "c")
        assert.strictEqual(whole.after, "c\n")
      })
    ))
})

describe("edit: \"not found\" names the closest place", () => {
  it.effect("one line that differs: its line number and both excerpts", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const message = yield* refused(root, "const a = 1\nconst b = 2\nconst c = 3\n", "const b = 3", "x")
        assert.strictEqual(
          message,
          "oldText was not found in f.txt, not even once line endings, trailing whitespace, typographic quotes, " +
            "dashes, special spaces and Unicode forms are normalised. The most similar line is line 2: " +
            "\"const b = 2\". Read the file again and copy the text exactly, including whitespace and indentation."
        )
      })
    ))

  it.effect("several lines: where they start, how many agree, and the first that differs", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const file = "function f(a, b) {\n  const s = a + b\n  return s * 2\n}\n\nfunction g() {}\n"
        const message = yield* refused(root, file, "  const s = a + b\n  return s * 3\n}", "x")
        assert.include(
          message,
          "The closest text starts at line 2 (2 of 3 lines the same): line 3 is \"  return s * 2\" where oldText " +
            "has \"  return s * 3\"."
        )
      })
    ))

  it.effect("a difference in indentation only is said to be one, with the line shown as JSON (tabs visible)", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const message = yield* refused(root, "if (x) {\n\treturn 1\n}\n", "if (x) {\n    return 1\n}", "y")
        assert.include(
          message,
          "The text at line 1 differs from oldText only in whitespace inside lines (indentation or spacing): " +
            "line 2 is \"\\treturn 1\" where oldText has \"    return 1\"."
        )
      })
    ))

  it.effect("nothing close: the message says so; long lines are cut in the excerpt", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        assert.include(
          yield* refused(root, "completely different content\n", "this does not exist", "r"),
          "No line of the file is close to it."
        )
        const long = `${"word ".repeat(40)}tail`
        const message = yield* refused(root, `${long}\n`, `${"word ".repeat(40)}TAIL`, "r")
        assert.include(message, `The most similar line is line 1: "${"word ".repeat(16)}…".`)
      })
    ))
})

describe("edit: bytes outside the replaced text never change (property)", () => {
  /** Pieces of a region: the plain form oldText has first, then the forms the file may have instead. */
  const pieces: ReadonlyArray<ReadonlyArray<string>> = [
    ["'", "\u2018", "\u2019"],
    ["-", "\u2013", "\u2212"],
    [" ", "\u00A0", "\u202F"],
    ["\n", "\r\n", "  \n", " \t\r\n"],
    ["\u00E9", "e\u0301"],
    ["\"", "\u201C"],
    ["...", "\u2026"],
    ["A", "\uFF21"],
    ["x"]
  ]
  const piece = fc.integer({ min: 0, max: pieces.length - 1 }).chain((i) =>
    fc.constantFrom(...pieces[i]!).map((form) => ({ plain: pieces[i]![0]!, form }))
  )

  it.effect("a loosely matched region is replaced, and every byte before and after it is kept", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        // arbitrary text around a region (with a marker, so it is the only place) whose quotes, dashes,
        // spaces, line endings, trailing blanks and letter forms vary; oldText is its plain form
        const around = fc.string({ unit: "binary", maxLength: 30 }).map((s) =>
          s.replace(/[\u0000\uD800-\uDFFF\uFFFD]/g, "").replace(/[@\uFF20\uFE6B]/g, "")
        )
        const region = fc.tuple(fc.array(piece, { maxLength: 6 }), fc.array(piece, { minLength: 1, maxLength: 6 }))
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(around, around, region, fc.string({ maxLength: 10 }), async (head, tail, parts, repl) => {
              const [left, right] = parts
              // what would join with the region's ends: a mark after it, \r\n across its start, a
              // trailing blank at its end (its trailing blanks are no longer part of a match)
              if (/^\p{M}/u.test(tail) || repl.includes("\u0000")) return
              if (head.endsWith("\r") && [...left, ...right][0]!.form.startsWith("\n")) return
              if (right[right.length - 1]!.plain === " ") return
              const decorated = `${left.map((p) => p.form).join("")}@@${right.map((p) => p.form).join("")}`
              const plain = `${left.map((p) => p.plain).join("")}@@${right.map((p) => p.plain).join("")}`
              const before = `${head}${decorated}${tail}`
              writeFileSync(`${root}/p.txt`, before)
              await Effect.runPromise(
                run("p.txt", plain, repl).pipe(Effect.provide(Layer.provide(workspaceLayer(root), node)))
              )
              const crlf = decorated !== plain && decorated.includes("\r\n") && !/(^|[^\r])\n/.test(decorated)
              // blanks before a line break that starts the region trail the line before: not matched, kept
              const kept = /^[ \t\u00A0\u202F]*(?=\r?\n)/.exec(decorated)?.[0] ?? ""
              // an exact match wins, replaced as it is (it can lie inside the region: \n@@ in \r\n@@)
              const exact = before.indexOf(plain)
              const expected = exact >= 0 ?
                `${before.slice(0, exact)}${repl}${before.slice(exact + plain.length)}` :
                `${head}${kept}${crlf ? repl.replace(/\r?\n/g, "\r\n") : repl}${tail}`
              assert.deepStrictEqual(readFileSync(`${root}/p.txt`), Buffer.from(expected, "utf8"))
            }),
            { numRuns: 200 }
          )
        )
      })
    ))
})

describe("edit: loose matching stays linear", () => {
  it.effect(
    "a 100k-line CRLF file with typographic quotes: a loose edit and a not-found hint stay within seconds",
    () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          const lines = Array.from({ length: 100_000 }, (_, i) => `  say(\u2018line ${i}\u2019) \u2014 ok  `)
          const content = `${lines.join("\r\n")}\r\n`
          const r = yield* editFile(root, content, "say('line 12345') - ok\n  say", "X\n  say")
          assert.strictEqual(r.after, content.replace("say(\u2018line 12345\u2019) \u2014 ok  \r\n  say", "X\r\n  say"))
          const message = yield* refused(root, content, "say('line 77') - ko", "x")
          assert.include(message, "line 78: \"  say(\u2018line 77\u2019) \u2014 ok  \"")
        })
      ),
    15_000
  )
})
