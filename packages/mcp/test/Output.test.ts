/**
 * Large MCP results are capped like local tools' output (per server), their whole text kept in the
 * workspace's output store for `read`; images go through the `prepareImage` seam.
 */
import type { ToolResultMessage } from "@agentloop/core"
import { decodeMcpServers, limitResult, MCP_MAX_OUTPUT_CHARS, McpTools } from "@agentloop/mcp"
import type { McpServerConfig, McpToolsOptions } from "@agentloop/mcp"
import { outputStoreLayer, readTool, workspaceLayer } from "@agentloop/tools"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, FileSystem, Layer } from "effect"
import { readFileSync } from "node:fs"
import { fakeServer, serversLayer, textOf } from "./helpers.ts"

const largeServer = (name: string, extra: Partial<McpServerConfig> = {}) => fakeServer(name, extra)

/** The fixture's line `i` (as test/fixtures/misbehaving-server.ts makes it). */
const lineOf = (i: number): string => `line ${i} é€😀 ${"y".repeat(i % 40)}`
const linesOf = (count: number) => Array.from({ length: count }, (_, i) => lineOf(i + 1)).join("\n")

const toolContext = (name: string) => ({
  signal: new AbortController().signal,
  reportProgress: () => Effect.void,
  toolCallId: `call-${name}`,
  toolName: name
})

const call = (name: string, args: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const mcp = yield* McpTools
    return yield* mcp.executor.execute(
      { type: "toolCall", id: `call-${name}`, name, arguments: args },
      toolContext(name)
    )
  })

/** Runs `f` with the servers, and an output store in a fresh workspace shared with `read`. */
const withServers = <A, E>(
  servers: ReadonlyArray<McpServerConfig>,
  f: (root: string) => Effect.Effect<A, E, McpTools | import("@agentloop/tools").Workspace>,
  options: { readonly store?: boolean; readonly mcp?: McpToolsOptions } = {}
) =>
  Effect.scoped(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const root = yield* fs.realPath(yield* fs.makeTempDirectoryScoped({ prefix: "agentloop-mcp-out-" }))
    const workspace = workspaceLayer(root).pipe(Layer.provide(NodeServices.layer))
    const store = options.store === false ? Layer.empty : outputStoreLayer
    const layer = serversLayer(servers, options.mcp).pipe(Layer.provideMerge(store), Layer.provideMerge(workspace))
    return yield* f(root).pipe(Effect.provide(layer))
  })).pipe(Effect.provide(NodeServices.layer))

const noticeOf = (shown: string) => {
  const match = new RegExp(
    String.raw`output cut at ([\d,]+) characters, the first ([\d,]+) and last ([\d,]+) shown\. ` +
      String.raw`Full output: (\S+) - read it with offset=(\d+) to see the omitted part \.\.\.\]`
  )
    .exec(shown)
  if (match === null) throw new Error(`no notice with a file in: ${shown.slice(0, 200)}`)
  const num = (s: string) => Number(s.replaceAll(",", ""))
  return {
    limit: num(match[1]!),
    head: num(match[2]!),
    tail: num(match[3]!),
    path: match[4]!,
    offset: Number(match[5])
  }
}

describe("MCP results are capped", { timeout: 60_000 }, () => {
  it.effect("a 4 MiB text result is cut to MCP_MAX_OUTPUT_CHARS; the file has it whole, read gives its lines", () =>
    withServers([largeServer("big")], (root) =>
      Effect.gen(function*() {
        const count = 120_000 // about 4 MiB of text
        const result = yield* call("big__lines", { count })
        const shown = textOf(result)
        assert.isAtMost(shown.length, MCP_MAX_OUTPUT_CHARS + 400)
        assert.isFalse(result.isError)
        const notice = noticeOf(shown)
        assert.deepStrictEqual([notice.limit, notice.head, notice.tail], [30_000, 10_000, 20_000])
        const details = result.details as Record<string, unknown>
        assert.strictEqual(details["fullOutput"], notice.path)
        assert.isTrue(details["truncated"])
        assert.deepStrictEqual(details["mcp"], { server: "big", tool: "lines" })
        assert.match(notice.path, /^\.agentloop\/output\/\d+-[0-9a-f]{8}\/big__lines-1\.txt$/)
        const whole = linesOf(count)
        assert.isAbove(Buffer.byteLength(whole), 4 * 1024 * 1024)
        assert.isTrue(readFileSync(`${root}/${notice.path}`).equals(Buffer.from(whole)))
        // the head is whole lines, and the line the notice names is the first one not shown
        const head = shown.slice(0, shown.indexOf("[... "))
        assert.strictEqual(head, `${linesOf(notice.offset - 1)}\n`)
        const read = yield* readTool.execute(
          { path: notice.path, offset: notice.offset, limit: 2 },
          toolContext("read")
        )
        assert.strictEqual(
          (read as { content: ReadonlyArray<{ text: string }> }).content[0]!.text.split("\n\n")[0],
          `${String(notice.offset).padStart(6)}\t${lineOf(notice.offset)}\n${String(notice.offset + 1).padStart(6)}\t${
            lineOf(notice.offset + 1)
          }`
        )
      })))

  it.effect("each server has its own cap (maxOutputChars); an embedded text resource counts as text", () =>
    withServers([largeServer("small", { maxOutputChars: 900 }), largeServer("wide")], () =>
      Effect.gen(function*() {
        const small = noticeOf(textOf(yield* call("small__lines", { count: 2000 })))
        assert.deepStrictEqual([small.limit, small.head, small.tail], [900, 300, 600])
        const fits = yield* call("wide__lines", { count: 100 })
        assert.strictEqual(textOf(fits), linesOf(100))
        assert.isUndefined((fits.details as Record<string, unknown>)["truncated"])
        const resource = textOf(yield* call("small__big_resource", { count: 2000 }))
        assert.isTrue(resource.startsWith("[resource file:///big.txt (text/plain)]\nline 1 "))
        assert.strictEqual(noticeOf(resource).limit, 900)
      })))

  it.effect("without an output store the notice says the text was not kept", () =>
    withServers([largeServer("big")], () =>
      Effect.gen(function*() {
        const result = yield* call("big__lines", { count: 20_000 })
        assert.match(textOf(result), /The full output was not kept: no output store is set up \(outputStoreLayer\)\./)
        assert.isUndefined((result.details as Record<string, unknown>)["fullOutput"])
      }), { store: false }))

  it.effect("every image of a result goes through prepareImage (the seam for resizing)", () => {
    const seen: Array<string> = []
    const mcp: McpToolsOptions = {
      prepareImage: (image, source) =>
        Effect.sync(() => {
          seen.push(`${source.server}/${source.tool}: ${image.mimeType}`)
          return image.mimeType === "image/png" ?
            [{ type: "text" as const, text: "[a png, left out]" }] :
            [{ ...image, data: "resized" }]
        })
    }
    return withServers([largeServer("pics")], () =>
      Effect.gen(function*() {
        const result = yield* call("pics__images")
        assert.deepStrictEqual(seen, ["pics/images: image/png", "pics/images: image/jpeg"])
        assert.deepStrictEqual(result.content, [
          { type: "text", text: "two images" },
          { type: "text", text: "[a png, left out]" },
          { type: "image", data: "resized", mimeType: "image/jpeg" }
        ])
      }), { mcp })
  })
  it.effect("by default an image goes as read sends it: checked by its bytes, and one that is not whole left out", () =>
    withServers([largeServer("pics")], () =>
      Effect.gen(function*() {
        // the fixture's images are a PNG signature and a JPEG header with nothing after them
        const result = yield* call("pics__images")
        assert.strictEqual(result.content.length, 3)
        assert.deepStrictEqual(result.content[0], { type: "text", text: "two images" })
        for (const part of result.content.slice(1)) {
          assert.strictEqual(part.type, "text")
          assert.match(part.type === "text" ? part.text : "", /the image from pics \(tool images\).*it was left out/)
        }
      })))
})

describe("limitResult", () => {
  const result = (content: ToolResultMessage["content"]): ToolResultMessage => ({
    role: "toolResult",
    toolCallId: "c",
    toolName: "srv__t",
    content,
    details: { mcp: { server: "srv", tool: "t" } },
    isError: false
  })

  it.effect("counts every text part (and a line break between two), and puts images after the cut text", () =>
    Effect.gen(function*() {
      const exact = result([{ type: "text", text: "a".repeat(50) }, { type: "text", text: "b".repeat(49) }])
      assert.deepStrictEqual(yield* limitResult(exact, 100), exact)
      const over = result([
        { type: "text", text: "a".repeat(50) },
        { type: "image", data: "AAAA", mimeType: "image/png" },
        { type: "text", text: "b".repeat(50) }
      ])
      const cut = yield* limitResult(over, 100)
      assert.strictEqual(cut.content.length, 2)
      assert.match(
        (cut.content[0] as { text: string }).text,
        /^a{33}\n\[\.\.\. 18 characters omitted \(line 1 of 2\)[^\]]*\]\nb{50}$/
      )
      assert.deepStrictEqual(cut.content[1], { type: "image", data: "AAAA", mimeType: "image/png" })
      assert.deepStrictEqual((cut.details as Record<string, unknown>)["truncated"], true)
    }))
})

describe("maxOutputChars in a config file", () => {
  it.effect("is read for stdio and http entries; a value under 100 or not an integer is refused", () =>
    Effect.gen(function*() {
      const servers = yield* decodeMcpServers({
        a: { command: "x", maxOutputChars: 5000 },
        b: { url: "https://example.com/mcp", maxOutputChars: 100 }
      })
      assert.deepStrictEqual(servers.map((s) => s.maxOutputChars), [5000, 100])
      for (const bad of [99, 1.5, "1000"]) {
        const exit = yield* Effect.exit(decodeMcpServers({ a: { command: "x", maxOutputChars: bad } }))
        assert.isTrue(Exit.isFailure(exit), `maxOutputChars ${JSON.stringify(bad)} is refused`)
      }
    }))
})
