import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import sharp from "sharp"
import { attach, droppedPaths, MENTION_MAX_BYTES, parseMentions } from "../src/internal/Attachments.ts"
import { mentionCompleter } from "../src/internal/Completion.ts"
import { imageTypeOf } from "../src/internal/Images.ts"
import { foldersAbove, projectContextSection, readProjectContext } from "../src/internal/ProjectContext.ts"
import { buildSystemPrompt } from "../src/internal/SystemPrompt.ts"
import { makeWorkspace, PNG } from "./helpers/agent.ts"

const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a, 0x46])
const GIF = Buffer.from("GIF89a\u0001\u0000\u0001\u0000", "latin1")
const WEBP = Buffer.concat([Buffer.from("RIFF"), Buffer.from([36, 0, 0, 0]), Buffer.from("WEBPVP8 ")])

const failure = <A, E extends { readonly message: string }>(effect: Effect.Effect<A, E>) =>
  Effect.runPromise(Effect.flip(effect)).then((e) => e.message)

/** A workspace and, beside it, a folder outside it holding a secret. */
const withOutside = () => {
  const base = realpathSync(mkdtempSync(join(tmpdir(), "agentloop-mention-")))
  const ws = join(base, "ws")
  mkdirSync(join(ws, "src"), { recursive: true })
  mkdirSync(join(base, "outside"))
  writeFileSync(join(base, "outside", "secret.txt"), "TOP-SECRET\n")
  writeFileSync(join(ws, "src", "a.ts"), "export const A = 1\n")
  return { base, ws }
}

describe("images are recognised by their bytes", () => {
  it("PNG, JPEG, GIF and WebP magic numbers; text named .png is not an image", () => {
    assert.strictEqual(imageTypeOf(PNG), "image/png")
    assert.strictEqual(imageTypeOf(JPEG), "image/jpeg")
    assert.strictEqual(imageTypeOf(GIF), "image/gif")
    assert.strictEqual(imageTypeOf(WEBP), "image/webp")
    assert.strictEqual(imageTypeOf(Buffer.from("RIFF\u0000\u0000\u0000\u0000WAVE")), undefined)
    assert.strictEqual(imageTypeOf(Buffer.from("not an image")), undefined)
    assert.strictEqual(imageTypeOf(PNG.subarray(0, 7)), undefined)
  })

  it("a PNG named .dat goes as an image after a note, a text named .png as text; a broken one is refused", async () => {
    const { ws } = withOutside()
    writeFileSync(join(ws, "shot.dat"), PNG)
    writeFileSync(join(ws, "fake.png"), "just text\n")
    const attached = await Effect.runPromise(attach(ws, "see @shot.dat and @fake.png"))
    assert.deepStrictEqual(
      (attached.content as ReadonlyArray<{ type: string; mimeType?: string }>).map((p) => p.mimeType ?? p.type),
      ["text", "text", "image/png", "text"]
    )
    assert.strictEqual(attached.images, 1)
    // a PNG header followed by nothing of an image: refused, naming it, nothing sent
    writeFileSync(join(ws, "broken.png"), Buffer.concat([PNG.subarray(0, 16), Buffer.alloc(4096)]))
    assert.match(await failure(attach(ws, "@broken.png")), /@broken\.png: not attached: .*cannot be read as one/)
    assert.match(
      await failure(attach(ws, "x", { images: ["fake.png"] })),
      /--image fake\.png: fake\.png is not an image/
    )
    assert.match(await failure(attach(ws, "x", { images: ["none.png"] })), /--image none\.png: no such file/)
  })
  it("an image too large for providers is resized as read resizes it; the model and the user are told", async () => {
    const { ws } = withOutside()
    const wide = await sharp({ create: { width: 3000, height: 200, channels: 3, background: "#3060c0" } }).png()
      .toBuffer()
    writeFileSync(join(ws, "wide.png"), wide)
    const attached = await Effect.runPromise(attach(ws, "what is @wide.png"))
    const parts = attached.content as ReadonlyArray<{ type: string; text?: string; data?: string; mimeType?: string }>
    assert.deepStrictEqual(parts.map((p) => p.type), ["text", "text", "image"])
    assert.match(parts[1]!.text!, /^\[Image wide\.png: image\/png, 3000×200 px, .*; sent as 2000×133 px/)
    const sent = await sharp(Buffer.from(parts[2]!.data!, "base64")).metadata()
    assert.deepStrictEqual([sent.width, sent.height], [2000, 133])
    assert.match(
      attached.notes[0]!,
      /^\+ image wide\.png \(image\/png, 3000×200 px, .*; sent as 2000×133 px image\/png/
    )
  })
})

describe("@ mentions", () => {
  it("parses bare, escaped and quoted paths; not e-mail addresses; trailing punctuation is not the path", () => {
    assert.deepStrictEqual(
      parseMentions(`look at @src/a.ts, @"my file.md" and @dir/with\\ space.txt. mail me@example.com (@b.ts)`).map((
        m
      ) => m.path),
      ["src/a.ts", "my file.md", "dir/with space.txt", "b.ts"]
    )
    assert.deepStrictEqual(droppedPaths(`what is '/tmp/my shot.png' and /a/b\\ c.jpg and /x/y.txt file:///z/w.gif`), [
      "/tmp/my shot.png",
      "/a/b c.jpg",
      "/z/w.gif"
    ])
  })

  it("a text file is attached whole up to the cap, then cut at a line with a note saying where", async () => {
    const { ws } = withOutside()
    const line = `${"x".repeat(99)}\n`
    writeFileSync(join(ws, "big.txt"), line.repeat(1000))
    const attached = await Effect.runPromise(attach(ws, "@big.txt"))
    const block = (attached.content as ReadonlyArray<{ text?: string }>)[1]!.text!
    const lines = Math.floor(MENTION_MAX_BYTES / 100)
    assert.include(block, `[big.txt is 100000 bytes; only its first ${lines * 100} bytes (lines 1-${lines})`)
    assert.include(block, `offset=${lines + 1}`)
    assert.isBelow(block.length, MENTION_MAX_BYTES + 400)
    assert.include(attached.notes[0]!, "cut to 50.0 KiB")
    writeFileSync(join(ws, "bin.o"), Buffer.from([1, 2, 0, 3]))
    assert.match(await failure(attach(ws, "@bin.o")), /@bin\.o: bin\.o is a binary file/)
  })

  it("a missing path stays text with a note; a dropped image path outside the workspace is not read", async () => {
    const { base, ws } = withOutside()
    writeFileSync(join(base, "outside", "shot.png"), PNG)
    const attached = await Effect.runPromise(attach(ws, `@param is a tag; see ${base}/outside/shot.png`))
    assert.strictEqual(attached.content, `@param is a tag; see ${base}/outside/shot.png`)
    assert.match(attached.notes[0]!, /@param: no such file in the workspace; sent as text/)
    assert.match(attached.notes[1]!, /shot\.png: not attached \(outside the workspace/)
    writeFileSync(join(ws, "in.png"), PNG)
    const dropped = await Effect.runPromise(attach(ws, `what is '${ws}/in.png'`))
    assert.strictEqual(dropped.images, 1)
  })

  it("attacker: .., absolute paths, a link out (file or folder), in a mention or --image, are refused", async () => {
    const { base, ws } = withOutside()
    symlinkSync(join(base, "outside", "secret.txt"), join(ws, "leak.txt"))
    symlinkSync(join(base, "outside"), join(ws, "out"))
    for (
      const [prompt, images] of [
        ["@../outside/secret.txt", []],
        [`@${base}/outside/secret.txt`, []],
        ["@/etc/passwd", []],
        ["@leak.txt", []],
        ["@out/secret.txt", []],
        ["x", ["leak.txt"]],
        ["x", ["../outside/secret.txt"]]
      ] as const
    ) {
      const message = await failure(attach(ws, prompt, { images }))
      assert.match(message, /not attached: .*outside the workspace/, `${prompt} ${images.join(" ")}: ${message}`)
      assert.notInclude(message, "TOP-SECRET")
    }
  })

  it("attacker: a file swapped for a link out while it is mentioned is never read through the link", async () => {
    const { base, ws } = withOutside()
    writeFileSync(join(ws, "race.txt"), "inside\n")
    // another process swaps race.txt between a regular file and a link to the secret, as fast as it can
    const swapper = spawn("bash", [
      "-c",
      `cd '${ws}'; while true; do ln -sfn '${base}/outside/secret.txt' race.tmp && mv -fT race.tmp race.txt; ` +
      `echo inside > race.tmp && mv -fT race.tmp race.txt; done`
    ], { stdio: "ignore" })
    try {
      let inside = 0
      for (let i = 0; i < 300; i++) {
        const r = await Effect.runPromise(Effect.result(attach(ws, "@race.txt")))
        const text = JSON.stringify(r)
        assert.notInclude(text, "TOP-SECRET")
        if (r._tag === "Success" && text.includes("inside")) inside++
      }
      assert.isAbove(inside, 0, "some reads found the regular file")
    } finally {
      swapper.kill("SIGKILL")
    }
  })
})

describe("Tab completion of mentions", () => {
  it("completes workspace names, folders with /, a name with a space; nothing outside or via a link out", async () => {
    const { base, ws } = withOutside()
    writeFileSync(join(ws, "src", "b with space.ts"), "")
    mkdirSync(join(ws, ".git"))
    writeFileSync(join(ws, ".env"), "")
    symlinkSync(join(base, "outside"), join(ws, "out"))
    const complete = mentionCompleter(ws)
    assert.deepStrictEqual(await complete("explain @sr"), [["@src/"], "@sr"])
    assert.deepStrictEqual(await complete("explain @src/"), [["@src/a.ts", "@src/b\\ with\\ space.ts"], "@src/"])
    assert.deepStrictEqual(await complete("explain @src/a"), [["@src/a.ts "], "@src/a"])
    assert.deepStrictEqual(await complete("@."), [["@.env "], "@."], "dot files when asked, never .git")
    assert.deepStrictEqual((await complete("@"))[0], ["@out", "@src/"], "a link is listed, not followed")
    assert.deepStrictEqual(await complete("@out/"), [[], "@out/"])
    assert.deepStrictEqual(await complete("@../"), [[], "@../"])
    assert.deepStrictEqual(await complete(`@${base}/`), [[], `@${base}/`])
    assert.deepStrictEqual(await complete("no mention"), [[], "no mention"])
  })
})

describe("the system prompt and the project's instructions", () => {
  it("AGENTS.md, else CLAUDE.md, from the user's folder and each folder from the repository root down", async () => {
    const base = realpathSync(mkdtempSync(join(tmpdir(), "agentloop-context-")))
    const repo = join(base, "repo")
    const ws = join(repo, "pkg", "ws")
    mkdirSync(join(repo, ".git"), { recursive: true })
    mkdirSync(ws, { recursive: true })
    mkdirSync(join(base, "xdg", "agentloop"), { recursive: true })
    writeFileSync(join(base, "AGENTS.md"), "ABOVE-THE-REPOSITORY\n")
    writeFileSync(join(base, "xdg", "agentloop", "AGENTS.md"), "USER-RULE\n")
    writeFileSync(join(repo, "AGENTS.md"), "REPO-RULE\n")
    writeFileSync(join(repo, "pkg", "CLAUDE.md"), "PKG-CLAUDE\n")
    writeFileSync(join(ws, "AGENTS.md"), "WS-RULE\n")
    writeFileSync(join(ws, "CLAUDE.md"), "WS-CLAUDE-NOT-USED\n")
    assert.deepStrictEqual(foldersAbove(ws), [repo, join(repo, "pkg")])
    const context = await Effect.runPromise(readProjectContext(ws, { XDG_CONFIG_HOME: join(base, "xdg") }))
    assert.deepStrictEqual(context.files.map((f) => f.text.trim()), ["USER-RULE", "REPO-RULE", "PKG-CLAUDE", "WS-RULE"])
    assert.deepStrictEqual(context.notes, [])
    // a link above the workspace is not followed
    writeFileSync(join(base, "secret.txt"), "TOP-SECRET\n")
    symlinkSync(join(base, "secret.txt"), join(repo, "pkg", "AGENTS.md"))
    const linked = await Effect.runPromise(readProjectContext(ws, { XDG_CONFIG_HOME: join(base, "xdg") }))
    assert.notInclude(JSON.stringify(linked.files), "TOP-SECRET")
    assert.match(linked.notes[0]!, /pkg\/AGENTS\.md is not used as project instructions: it is a link/)
    // outside a repository: the workspace's own only (and the user's)
    const lone = makeWorkspace()
    writeFileSync(join(lone, "CLAUDE.md"), "LONE\n")
    const alone = await Effect.runPromise(readProjectContext(lone, { XDG_CONFIG_HOME: join(lone, "none") }))
    assert.deepStrictEqual(alone.files.map((f) => [f.shown, f.text.trim()]), [["CLAUDE.md", "LONE"]])
    const big = makeWorkspace()
    writeFileSync(join(big, "AGENTS.md"), "y".repeat(70_000))
    const cut = await Effect.runPromise(readProjectContext(big, { XDG_CONFIG_HOME: join(big, "none") }))
    assert.include(cut.files[0]!.text, "[AGENTS.md is 70000 bytes; only its first 65536 are shown]")
  })

  it("built in: tools, workspace, date, platform; the config's systemPrompt adds, a replacement replaces", () => {
    const parts = {
      tools: [{ name: "read", description: "Read a file. More words." }],
      workspace: "/w",
      now: new Date(2026, 0, 5, 12).getTime(),
      platform: "linux x64",
      addition: undefined,
      replacement: undefined,
      projectContext: projectContextSection({ files: [{ shown: "AGENTS.md", text: "RULE" }], notes: [] })
    }
    const built = buildSystemPrompt(parts)
    for (const part of ["careful coding agent", "- read: Read a file.\n", "workspace: /w", "date: 2026-01-05"]) {
      assert.include(built, part)
    }
    assert.notInclude(built, "More words")
    assert.match(built, /platform: linux x64[\s\S]*## AGENTS\.md\n\nRULE$/)
    assert.match(buildSystemPrompt({ ...parts, addition: "ALSO" }), /date: [\s\S]*ALSO[\s\S]*RULE$/)
    assert.strictEqual(buildSystemPrompt({ ...parts, replacement: "MINE", addition: "ALSO" }).split("\n\n")[0], "MINE")
    assert.notInclude(buildSystemPrompt({ ...parts, replacement: "MINE" }), "careful coding agent")
    assert.include(buildSystemPrompt({ ...parts, replacement: "MINE" }), "RULE")
  })
})
