/**
 * Roots: with `roots` in the layer's options the client declares the capability and answers
 * `roots/list` with them (server-everything then offers its `get-roots-list` tool); `setRoots`
 * replaces them and tells the servers. A root that is not a `file://` URI is a configuration error.
 */
import { McpTools, rootOfDirectory } from "@agentloop/mcp"
import type { McpRoot } from "@agentloop/mcp"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer } from "effect"
import { pathToFileURL } from "node:url"
import { callTool, capableServer, node, serverBin, serversLayer, textOf } from "./helpers.ts"

const everything = {
  name: "everything",
  transport: "stdio",
  command: node,
  args: [serverBin("@modelcontextprotocol/server-everything"), "stdio"]
} as const

const workspace = rootOfDirectory("/tmp/agentloop-workspace")

/** The capable fixture's view of the roots: what `roots/list` answers now, and the changes it was told of. */
const rootsSeen = Effect.map(
  callTool("capable__roots"),
  (result) => JSON.parse(textOf(result)) as { roots: ReadonlyArray<McpRoot>; changes: number }
)

describe("Roots", { timeout: 30_000 }, () => {
  it("rootOfDirectory gives the folder's absolute file:// URI, named after it", () => {
    assert.deepStrictEqual(workspace, {
      uri: pathToFileURL("/tmp/agentloop-workspace").href,
      name: "agentloop-workspace"
    })
    assert.strictEqual(rootOfDirectory("/tmp/a b", "Project").uri, "file:///tmp/a%20b")
  })

  it.effect("server-everything offers get-roots-list to a client with roots, and lists the workspace", () =>
    Effect.gen(function*() {
      const result = yield* callTool("everything__get-roots-list").pipe(
        Effect.provide(serversLayer([everything], { roots: [workspace] }))
      )
      assert.isFalse(result.isError, textOf(result))
      assert.include(textOf(result), "Current MCP Roots (1 total)")
      assert.include(textOf(result), `URI: ${workspace.uri}`)
      assert.include(textOf(result), "agentloop-workspace")
      // without roots the capability is not declared, and the tool not offered
      const names = yield* Effect.gen(function*() {
        return (yield* (yield* McpTools).definitions).map((d) => d.name)
      }).pipe(Effect.provide(serversLayer([everything])))
      assert.notInclude(names, "everything__get-roots-list")
    }))

  it.effect("setRoots replaces the roots and tells the connected servers", () =>
    Effect.gen(function*() {
      const mcp = yield* McpTools
      const before = yield* rootsSeen
      assert.deepStrictEqual(before, { roots: [workspace], changes: 0 })
      const other = { uri: "file:///srv/other" }
      yield* mcp.setRoots([workspace, other])
      const after = yield* rootsSeen
      assert.deepStrictEqual(after, { roots: [workspace, other], changes: 1 })
      // a root that is not a file:// URI is refused, and the roots stay as they were
      const refused = yield* Effect.flip(mcp.setRoots([{ uri: "https://example.com/" }]))
      assert.strictEqual(refused._tag, "McpConfigError")
      assert.include(refused.message, "\"https://example.com/\" is not a file:// URI")
      assert.deepStrictEqual((yield* rootsSeen).roots, [workspace, other])
    }).pipe(Effect.provide(serversLayer([capableServer()], { roots: [workspace] }))))

  it.effect("without roots, a server asking for them gets an error, and setRoots says none were offered", () =>
    Effect.gen(function*() {
      const result = yield* callTool("capable__roots")
      assert.isTrue(result.isError)
      assert.include(textOf(result), "Method not found")
      const refused = yield* Effect.flip((yield* McpTools).setRoots([workspace]))
      assert.include(refused.message, "no roots were offered")
    }).pipe(Effect.provide(serversLayer([capableServer()]))))

  it.effect("a root that is not a file:// URI fails the layer", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(
        Layer.build(serversLayer([capableServer()], { roots: [{ uri: "/home/me/project" }] }))
      )
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail")?.error : undefined
      assert.strictEqual((error as { _tag: string })._tag, "McpConfigError")
      assert.include((error as Error).message, "\"/home/me/project\" is not a file:// URI")
    }).pipe(Effect.scoped))
})
