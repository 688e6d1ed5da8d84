import {
  codingTools,
  FIND_MAX_LIMIT,
  findTool,
  GREP_MAX_FILE_BYTES,
  GREP_MAX_LIMIT,
  GREP_MAX_LINE_LENGTH,
  grepTool,
  lsTool,
  SEARCH_MAX_DEPTH,
  SEARCH_MAX_OUTPUT_BYTES,
  SEARCH_MAX_PATTERN_LENGTH
} from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { context, details, failed, inWorkspace, text } from "./helpers.ts"
import { plant } from "./searchHelpers.ts"

const ctx = context()

const grep = (args: Parameters<typeof grepTool.execute>[0]) => Effect.map(grepTool.execute(args, ctx), text)
const find = (args: Parameters<typeof findTool.execute>[0]) => Effect.map(findTool.execute(args, ctx), text)
const ls = (args: Parameters<typeof lsTool.execute>[0]) => Effect.map(lsTool.execute(args, ctx), text)

describe("grep", () => {
  it.effect("finds matching lines in name order, with line numbers, and says what it left out", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, {
          "b.ts": "foo at the top\n",
          "a/z.ts": "nothing\r\nfoo in a CRLF file\r\n",
          "a.ts": "x\nfoo\ny\nfoo again",
          "a/B.ts": "upper-case names sort first: foo\n",
          "img.bin": new Uint8Array([102, 111, 111, 0, 1, 2]),
          "latin1.txt": new Uint8Array([102, 111, 111, 0xe9, 10])
        })
        const result = yield* grepTool.execute({ pattern: "foo" }, ctx)
        assert.strictEqual(
          text(result),
          "a/B.ts:1:upper-case names sort first: foo\n" +
            "a/z.ts:2:foo in a CRLF file\n" +
            "a.ts:2:foo\n" +
            "a.ts:4:foo again\n" +
            "b.ts:1:foo at the top\n\n" +
            "[2 binary files not searched: img.bin, latin1.txt.]"
        )
        assert.deepStrictEqual(details(result), {
          path: ".",
          output: "content",
          matches: 5,
          searchedFiles: 4,
          truncated: false
        })
        assert.strictEqual(
          yield* grep({ pattern: "absent" }),
          "No matches for absent in . (4 files searched).\n\n" +
            "[2 binary files not searched: img.bin, latin1.txt.]"
        )
      })
    ))

  it.effect("context lines: before and after each match, groups apart separated by --, touching ones merged", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, {
          "f.txt": ["1", "2 hit", "3", "4", "5", "6", "7 hit", "8", "9 hit", "10"].join("\n"),
          "g.txt": "hit\n"
        })
        assert.strictEqual(
          yield* grep({ pattern: "hit", context: 1 }),
          [
            "f.txt-1-1",
            "f.txt:2:2 hit",
            "f.txt-3-3",
            "--",
            "f.txt-6-6",
            "f.txt:7:7 hit",
            "f.txt-8-8",
            "f.txt:9:9 hit",
            "f.txt-10-10",
            "--",
            "g.txt:1:hit"
          ].join("\n")
        )
        const properties = grepTool.definition.parameters["properties"] as Record<string, Record<string, unknown>>
        assert.deepStrictEqual([properties["context"]?.["minimum"], properties["context"]?.["maximum"]], [0, 10])
      })
    ))

  it.effect("output files lists the matching files, output count the matches per file", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, { "a.txt": "x\nx\nx\n", "b.txt": "y\n", "c.txt": "x\n" })
        assert.strictEqual(yield* grep({ pattern: "x", output: "files" }), "a.txt\nc.txt")
        assert.strictEqual(yield* grep({ pattern: "x", output: "count" }), "a.txt:3\nc.txt:1")
        assert.strictEqual(
          yield* grep({ pattern: "x", output: "files", limit: 1 }),
          "a.txt\n\n[Showing files 1-1; there are more. Use offset=1 for more, or limit=N (at most 2000).]"
        )
      })
    ))

  it.effect("limit and offset page through the matches; a limit over the maximum is cut to it", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, { "a.txt": "m1\nm2\nm3\n", "b.txt": "m4\nm5\n" })
        assert.strictEqual(
          yield* grep({ pattern: "m", limit: 2 }),
          `a.txt:1:m1\na.txt:2:m2\n\n[Showing matches 1-2; there are more. Use offset=2 for more, or limit=N ` +
            `(at most ${GREP_MAX_LIMIT}).]`
        )
        assert.strictEqual(
          yield* grep({ pattern: "m", limit: 2, offset: 2 }),
          "a.txt:3:m3\nb.txt:1:m4\n\n[Showing matches 3-4; there are more. Use offset=4 for more, or limit=N " +
            "(at most 2000).]"
        )
        assert.strictEqual(yield* grep({ pattern: "m", limit: 2, offset: 4 }), "b.txt:2:m5")
        assert.strictEqual(yield* grep({ pattern: "m", offset: 9 }), "No matches at offset 9: there are 5.")
        plant(root, { "many.txt": "m\n".repeat(GREP_MAX_LIMIT + 10) })
        const capped = yield* grep({ pattern: "m", path: "many.txt", limit: 1_000_000 })
        assert.strictEqual(capped.split("\n").filter((l) => l.startsWith("many.txt:")).length, GREP_MAX_LIMIT)
        assert.match(capped, /\[Showing matches 1-2000; there are more\. Use offset=2000 for more/)
      })
    ))

  it.effect(`output stops at ${SEARCH_MAX_OUTPUT_BYTES} bytes, lines are cut at ${GREP_MAX_LINE_LENGTH}`, () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, { "wide.txt": `${"w".repeat(400)}\n`.repeat(500), "long.txt": `L${"y".repeat(5000)}\n` })
        const wide = yield* grep({ pattern: "w", path: "wide.txt", limit: 500 })
        const shown = wide.split("\n").filter((l) => l.startsWith("wide.txt:")).length
        assert.isBelow(shown, 500)
        assert.isAtMost(Buffer.byteLength(wide), SEARCH_MAX_OUTPUT_BYTES + 200)
        assert.include(wide, `[Showing matches 1-${shown}; there are more. Use offset=${shown} for more`)
        const long = yield* grep({ pattern: "^L", path: "long.txt" })
        assert.strictEqual(
          long,
          `long.txt:1:L${"y".repeat(GREP_MAX_LINE_LENGTH - 1)} [... line cut]\n\n[1 line was cut at 500 characters.]`
        )
      })
    ))

  it.effect("JavaScript regular expressions: u when valid (\\p{L}), lenient otherwise (\\-), literal, ignoreCase", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, { "f.txt": "déjà vu\na-b\nA.B\n(x)\nCamel\n" })
        assert.strictEqual(yield* grep({ pattern: "^\\p{L}+ vu$" }), "f.txt:1:déjà vu")
        assert.strictEqual(yield* grep({ pattern: "a\\-b" }), "f.txt:2:a-b")
        assert.strictEqual(yield* grep({ pattern: "A.B", literal: true }), "f.txt:3:A.B")
        assert.strictEqual(yield* grep({ pattern: "(x)", literal: true }), "f.txt:4:(x)")
        assert.strictEqual(yield* grep({ pattern: "camel", ignoreCase: true }), "f.txt:5:Camel")
        assert.strictEqual(yield* grep({ pattern: "(?i)camel" }), "f.txt:5:Camel")
        assert.strictEqual(yield* grep({ pattern: "camel" }), "No matches for camel in . (1 file searched).")
        const bad = yield* failed(grepTool.execute({ pattern: "(unclosed" }, ctx))
        assert.strictEqual(
          bad.message,
          "pattern is not a valid JavaScript regular expression: Invalid regular expression: /(unclosed/u: " +
            "Unterminated group (use literal=true to search for the text as it is)"
        )
        assert.notInclude(bad.message, "    at ")
        assert.strictEqual((yield* failed(grepTool.execute({ pattern: "" }, ctx))).message, "pattern is empty")
        const long = "a".repeat(SEARCH_MAX_PATTERN_LENGTH + 1)
        assert.strictEqual(
          (yield* failed(grepTool.execute({ pattern: long }, ctx))).message,
          `pattern is ${SEARCH_MAX_PATTERN_LENGTH + 1} characters long, over the limit of ${SEARCH_MAX_PATTERN_LENGTH}`
        )
      })
    ))

  it.effect("glob chooses files by name (no /) or by path relative to the folder searched", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, {
          "src/a.ts": "hit\n",
          "src/a.tsx": "hit\n",
          "src/deep/b.ts": "hit\n",
          "test/c.ts": "hit\n",
          ".hidden/d.ts": "hit\n"
        })
        assert.strictEqual(
          yield* grep({ pattern: "hit", glob: "*.ts", output: "files" }),
          ".hidden/d.ts\nsrc/a.ts\nsrc/deep/b.ts\ntest/c.ts"
        )
        assert.strictEqual(
          yield* grep({ pattern: "hit", glob: "src/**/*.{ts,tsx}", output: "files" }),
          "src/a.ts\nsrc/a.tsx\nsrc/deep/b.ts"
        )
        assert.strictEqual(
          yield* grep({ pattern: "hit", path: "src", glob: "deep/*", output: "files" }),
          "src/deep/b.ts"
        )
      })
    ))

  it.effect("a file named in path is searched alone; a binary one, a folder's absence and a FIFO say why", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, { "a.txt": "one hit\n", "b.bin": new Uint8Array([0, 1, 104, 105, 116]) })
        assert.strictEqual(yield* grep({ pattern: "hit", path: "a.txt" }), "a.txt:1:one hit")
        assert.strictEqual(
          (yield* failed(grepTool.execute({ pattern: "hit", path: "b.bin" }, ctx))).message,
          "b.bin is a binary file (a NUL byte, or not valid UTF-8); grep searches text files"
        )
        assert.strictEqual(
          (yield* failed(grepTool.execute({ pattern: "hit", path: "missing" }, ctx))).message,
          "missing: no such file or directory"
        )
      })
    ))

  it.effect(`files over ${GREP_MAX_FILE_BYTES} bytes are not searched, and the result names them`, () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, { "big.log": Buffer.alloc(GREP_MAX_FILE_BYTES + 1, "x"), "small.log": "x\n" })
        assert.strictEqual(
          yield* grep({ pattern: "x" }),
          "small.log:1:x\n\n[1 file over 10 MiB not searched: big.log; use bash to search them.]"
        )
        assert.match(
          (yield* failed(grepTool.execute({ pattern: "x", path: "big.log" }, ctx))).message,
          /big\.log is 10485761 bytes, over the limit of 10485760 bytes/
        )
      })
    ))
})

describe(".gitignore, node_modules and .git", () => {
  const tree = {
    ".gitignore": "# build output\ndist/\n*.log\n!keep.log\n/top-only.txt\nsecret-*\n",
    ".git/config": "[core]\n",
    "a.log": "",
    "keep.log": "",
    "top-only.txt": "",
    "dist/out.js": "",
    "node_modules/pkg/index.js": "",
    "src/top-only.txt": "",
    "src/dist": "a file named dist: a dir-only rule does not match it",
    "src/.gitignore": "*.tmp\n!secret-ok\n",
    "src/x.tmp": "",
    "src/secret-ok": "",
    "src/secret-no": "",
    "src/keep.ts": "",
    "src/node_modules/dep/x.js": "",
    "other/x.tmp": ""
  }

  it.effect("every .gitignore from the root down applies, deeper ones first; node_modules and .git left out", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, tree)
        assert.strictEqual(
          yield* find({ pattern: "**" }),
          [
            ".gitignore",
            "keep.log",
            "other/",
            "other/x.tmp",
            "src/",
            "src/.gitignore",
            "src/dist",
            "src/keep.ts",
            "src/secret-ok",
            "src/top-only.txt",
            "",
            "[7 entries left out by .gitignore or as node_modules; includeIgnored=true includes them.]"
          ].join("\n")
        )
        // walking src alone still applies the root's rules (secret-*) and its own
        assert.strictEqual(
          yield* find({ pattern: "*", path: "src" }),
          "src/.gitignore\nsrc/dist\nsrc/keep.ts\nsrc/secret-ok\nsrc/top-only.txt\n\n" +
            "[3 entries left out by .gitignore or as node_modules; includeIgnored=true includes them.]"
        )
        const all = yield* find({ pattern: "**", includeIgnored: true })
        assert.include(all, "dist/out.js\n")
        assert.include(all, "node_modules/pkg/index.js\n")
        assert.include(all, "src/node_modules/dep/x.js\n")
        assert.include(all, ".git/\n")
        assert.notInclude(all, ".git/config", "never walked into .git")
        assert.notInclude(all, "left out")
      })
    ))

  it.effect("a folder named in path is walked even when ignored, with the rules inside it", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, { ...tree, "dist/.gitignore": "*.map\n", "dist/out.js.map": "" })
        assert.strictEqual(
          yield* find({ pattern: "*", path: "dist" }),
          "dist/.gitignore\ndist/out.js\n\n" +
            "[dist is ignored (.gitignore or node_modules); walked as it was named.]\n\n" +
            "[1 entry left out by .gitignore or as node_modules; includeIgnored=true includes them.]"
        )
        assert.strictEqual(
          yield* find({ pattern: "*", path: "node_modules/pkg" }),
          "node_modules/pkg/index.js\n\n[node_modules/pkg is ignored (.gitignore or node_modules); walked as it was " +
            "named.]"
        )
        assert.strictEqual(
          yield* find({ pattern: "*", path: ".git" }),
          ".git/config\n\n[.git is ignored (.gitignore " +
            "or node_modules); walked as it was named.]"
        )
      })
    ))

  it.effect("grep and ls follow the same rules", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, { ...tree, "a.log": "needle", "keep.log": "needle", "node_modules/pkg/index.js": "needle" })
        assert.strictEqual(
          yield* grep({ pattern: "needle" }),
          "keep.log:1:needle\n\n[7 entries left out by .gitignore or as node_modules; includeIgnored=true includes " +
            "them.]"
        )
        assert.strictEqual(
          yield* ls({}),
          ".gitignore\nkeep.log\nother/\nsrc/\n\n[4 entries left out by .gitignore or as node_modules; " +
            "includeIgnored=true includes them.]"
        )
        assert.strictEqual(
          yield* ls({ includeIgnored: true }),
          ".git/\n.gitignore\na.log\ndist/\nkeep.log\nnode_modules/\nother/\nsrc/\ntop-only.txt"
        )
      })
    ))
})

describe("find", () => {
  it.effect("a glob without / matches names at any depth, with / the path; folders end with /, links with @", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, {
          "README.md": "",
          "docs/guide.md": "",
          "docs/img/a.png": "",
          "src/index.ts": "",
          "src/lib/util.ts": "",
          "src/lib/util.test.ts": "",
          "link.md": { link: "README.md" }
        })
        assert.strictEqual(yield* find({ pattern: "*.md" }), "README.md\ndocs/guide.md\nlink.md@")
        assert.strictEqual(
          yield* find({ pattern: "src/**/*.ts" }),
          "src/index.ts\nsrc/lib/util.test.ts\nsrc/lib/util.ts"
        )
        assert.strictEqual(yield* find({ pattern: "*.test.*", path: "src" }), "src/lib/util.test.ts")
        assert.strictEqual(yield* find({ pattern: "**", type: "directory" }), "docs/\ndocs/img/\nsrc/\nsrc/lib/")
        assert.strictEqual(yield* find({ pattern: "*", type: "symlink" }), "link.md@")
        assert.strictEqual(yield* find({ pattern: "*.rs" }), "No paths match *.rs in ..")
        assert.strictEqual(
          (yield* failed(findTool.execute({ pattern: "*", path: "README.md" }, ctx))).message,
          "README.md is not a folder; find searches folders"
        )
      })
    ))

  it.effect("limit and offset page through the paths, with the total", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`f${i}.txt`, ""])))
        const page = yield* findTool.execute({ pattern: "*.txt", limit: 2, offset: 1 }, ctx)
        assert.strictEqual(
          text(page),
          `f1.txt\nf2.txt\n\n[Showing paths 2-3 of 5. Use offset=3 for more, or limit=N (at most ${FIND_MAX_LIMIT}).]`
        )
        assert.deepStrictEqual(details(page), { path: ".", paths: 2, total: 5, truncated: true })
        assert.strictEqual(yield* find({ pattern: "*.txt", offset: 7 }), "No paths at offset 7: there are 5.")
      })
    ))

  it.effect(`folders deeper than ${SEARCH_MAX_DEPTH} levels are not walked, and the result says so`, () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const deep = Array.from({ length: SEARCH_MAX_DEPTH + 1 }, () => "d").join("/")
        plant(root, { [`${deep}/too-deep.txt`]: "", [`${deep.slice(0, -2)}/deepest.txt`]: "" })
        assert.strictEqual(
          yield* find({ pattern: "*.txt" }),
          `${deep.slice(0, -2)}/deepest.txt\n\n[1 folder deeper than ${SEARCH_MAX_DEPTH} levels not walked.]`
        )
      })
    ))
})

describe("ls", () => {
  it.effect("lists one folder in name order: folders with /, links with @ and where they lead", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        plant(root, {
          "b.txt": "",
          "A.txt": "",
          "sub/inner.txt": "",
          ".env.example": "",
          "to-b@": { link: "b.txt" },
          "to-sub": { link: "sub" },
          "dangling": { link: "nothing-here" },
          "loop": { link: "loop" }
        })
        assert.strictEqual(
          yield* ls({}),
          [
            ".env.example",
            "A.txt",
            "b.txt",
            "dangling@ -> nothing-here (missing)",
            "loop@ -> loop (a loop of links)",
            "sub/",
            "to-b@@ -> b.txt",
            "to-sub@ -> sub"
          ].join("\n")
        )
        assert.strictEqual(yield* ls({ path: "sub" }), "inner.txt")
        assert.strictEqual(yield* ls({ path: "to-sub" }), "inner.txt", "a link inside is followed when named")
        assert.strictEqual(yield* ls({ path: "b.txt" }), "b.txt is a file (0 bytes), not a folder; use read to see it.")
        plant(root, { "empty/.keep": "" })
        assert.strictEqual(yield* ls({ path: "empty", limit: 1, offset: 1 }), "No entries at offset 1: empty has 1.")
        assert.strictEqual(
          yield* ls({ limit: 2 }),
          ".env.example\nA.txt\n\n[Showing entries 1-2 of 9. Use offset=2 for more, or limit=N (at most 5000).]"
        )
      })
    ))
})

describe("registration", () => {
  it("grep, find and ls are read-only, not exclusive, and in codingTools after the others", () => {
    for (const tool of [grepTool, findTool, lsTool]) {
      assert.isTrue(tool.definition.readOnly, tool.name)
      assert.isUndefined(tool.definition.exclusive, tool.name)
    }
    assert.deepStrictEqual(codingTools.map((t) => t.name), ["read", "write", "edit", "bash", "grep", "find", "ls"])
  })
})
