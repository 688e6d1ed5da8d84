/**
 * Resources: a server that offers them gets two read-only tools, `<server>__list_resources` (the
 * resources, then the templates, a page at a time) and `<server>__read_resource`; what is read is
 * capped and its images fitted like any tool result, binary data only described; an unknown URI
 * or cursor is an error result naming it. Against the capable fixture and server-everything.
 */
import { McpTools } from "@agentloop/mcp"
import type { McpResultDetails } from "@agentloop/mcp"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { PNG } from "./fixtures/capable-server.ts"
import { callTool, capableServer, fakeServer, node, serverBin, serversLayer, textOf } from "./helpers.ts"

const everything = {
  name: "everything",
  transport: "stdio",
  command: node,
  args: [serverBin("@modelcontextprotocol/server-everything"), "stdio"]
} as const

const list = (cursor?: string) => callTool("capable__list_resources", cursor === undefined ? {} : { cursor })
const read = (uri: string) => callTool("capable__read_resource", { uri })

describe("Resources", { timeout: 30_000 }, () => {
  it.effect("a server with resources gets list and read tools, read-only; one without gets none", () =>
    Effect.gen(function*() {
      const definitions = yield* (yield* McpTools).definitions
      const byName = new Map(definitions.map((d) => [d.name, d]))
      assert.isTrue(byName.get("capable__list_resources")?.readOnly)
      assert.isTrue(byName.get("capable__read_resource")?.readOnly)
      assert.deepStrictEqual(byName.get("capable__read_resource")?.parameters["required"], ["uri"])
      assert.isFalse(byName.has("fake__list_resources"))
      assert.isFalse(byName.has("fake__read_resource"))
      const status = yield* (yield* McpTools).servers
      assert.deepStrictEqual(status.map((s) => [s.name, s.resources, s.prompts]), [
        ["capable", true, true],
        ["fake", false, false]
      ])
    }).pipe(Effect.provide(serversLayer([capableServer(), fakeServer()]))))

  it.effect("lists the resources a page at a time, then the templates, until no cursor is left", () =>
    Effect.gen(function*() {
      const pages: Array<string> = []
      const resources: Array<string> = []
      const templates: Array<string> = []
      let cursor: string | undefined
      do {
        const page = yield* list(cursor)
        assert.isFalse(page.isError, textOf(page))
        pages.push(textOf(page))
        const details = page.details as {
          listed: { resources: Array<{ uri: string }>; resourceTemplates: Array<{ uriTemplate: string }> }
          nextCursor?: string
        }
        resources.push(...details.listed.resources.map((r) => r.uri))
        templates.push(...details.listed.resourceTemplates.map((t) => t.uriTemplate))
        cursor = details.nextCursor
      } while (cursor !== undefined && pages.length < 10)
      assert.deepStrictEqual(resources, [1, 2, 3, 4, 5].map((i) => `test://doc/${i}`))
      assert.deepStrictEqual(templates, ["test://doc/{id}", "test://big/{lines}"])
      assert.strictEqual(pages.length, 4)
      assert.strictEqual(
        pages[0],
        "Resources of MCP server \"capable\":\n" +
          "- test://doc/1: doc-1 (text/plain, 10 bytes) - Document 1 of 5\n" +
          "- test://doc/2: doc-2 (text/plain, 11 bytes) - Document 2 of 5\n" +
          "More: call capable__list_resources with cursor \"r:2\"."
      )
      assert.include(pages[2], "Resource templates of MCP server \"capable\" (fill in the {placeholders} to read one):")
      assert.include(pages[2], "- test://doc/{id}: A document by id (text/plain)")
      assert.include(pages[3], "- test://big/{lines}: big - A text of {lines} lines")
      assert.notInclude(pages[3], "More:")
    }).pipe(Effect.provide(serversLayer([capableServer()]))))

  it.effect("an invalid cursor is an error result saying what to pass", () =>
    Effect.gen(function*() {
      const result = yield* list("made-up")
      assert.isTrue(result.isError)
      assert.include(textOf(result), "Invalid cursor for tool \"capable__list_resources\"")
      assert.deepInclude(result.details as object, { invalidArguments: true })
    }).pipe(Effect.provide(serversLayer([capableServer()]))))

  it.effect("reads text, several contents, images (fitted) and binary data (described, not kept)", () =>
    Effect.gen(function*() {
      const doc = yield* read("test://doc/3")
      assert.isFalse(doc.isError)
      assert.strictEqual(textOf(doc), "[resource test://doc/3 (text/plain)]\nthe text of test://doc/3")
      assert.deepStrictEqual((doc.details as McpResultDetails).mcp, {
        server: "capable",
        tool: "resources/read",
        uri: "test://doc/3"
      })

      const pair = yield* read("test://pair")
      assert.strictEqual(
        textOf(pair),
        "[resource test://pair/a]\nfirst\n[resource test://pair/b (text/markdown)]\n# second"
      )

      const image = yield* read("test://image.png")
      const [note, picture] = image.content
      assert.strictEqual(note?.type, "text")
      assert.include(note?.type === "text" ? note.text : "", "the image from capable (resource test://image.png)")
      assert.strictEqual(picture?.type, "image")

      const binary = yield* read("test://data.bin")
      const base64 = Buffer.from("binary secret bytes").toString("base64")
      assert.strictEqual(textOf(binary), "[resource test://data.bin (application/octet-stream), 19 bytes: not shown]")
      assert.notInclude(JSON.stringify(binary), base64)
      assert.notInclude(JSON.stringify(binary), PNG.slice(0, 20))
    }).pipe(Effect.provide(serversLayer([capableServer()]))))

  it.effect("a large resource is cut to the server's maxOutputChars like a tool result", () =>
    Effect.gen(function*() {
      const big = yield* read("test://big/5000")
      assert.isFalse(big.isError)
      const text = textOf(big)
      assert.isBelow(text.length, 1000 + 600)
      assert.include(text, "output cut at 1,000 characters")
      assert.include(text, "line 1\n")
      assert.include(text, "line 5000")
      assert.deepInclude(big.details as object, { truncated: true })
    }).pipe(Effect.provide(serversLayer([capableServer("capable", { maxOutputChars: 1000 })]))))

  it.effect("an unknown URI, or none, is an error result naming it", () =>
    Effect.gen(function*() {
      const unknown = yield* read("test://nope")
      assert.isTrue(unknown.isError)
      assert.strictEqual(
        textOf(unknown),
        "MCP server \"capable\" answered with an error: MCP error -32002: Resource not found: test://nope"
      )
      assert.deepInclude(unknown.details as object, { mcpError: { code: -32002 } })
      const missing = yield* callTool("capable__read_resource", {})
      assert.isTrue(missing.isError)
      assert.strictEqual(textOf(missing), "Invalid arguments for tool \"capable__read_resource\": uri: is required")
    }).pipe(Effect.provide(serversLayer([capableServer()]))))

  it.effect("server-everything's documents and templates are listed and read", () =>
    Effect.gen(function*() {
      let text = ""
      let cursor: string | undefined
      do {
        const page = yield* callTool("everything__list_resources", cursor === undefined ? {} : { cursor })
        assert.isFalse(page.isError, textOf(page))
        text += textOf(page) + "\n"
        cursor = (page.details as { nextCursor?: string }).nextCursor
      } while (cursor !== undefined)
      assert.include(text, "demo://resource/static/document/architecture.md: architecture.md (text/markdown)")
      assert.include(text, "demo://resource/dynamic/text/{resourceId}: Dynamic Text Resource (text/plain)")
      const dynamic = yield* callTool("everything__read_resource", { uri: "demo://resource/dynamic/text/7" })
      assert.match(textOf(dynamic), /^\[resource demo:\/\/resource\/dynamic\/text\/7 \(text\/plain\)\]\nResource 7: /)
    }).pipe(Effect.provide(serversLayer([everything]))))
})
