/**
 * agentloop's own MCP server (`serveMcpHttp`, `connectMcpServer`) with the coding tools confined to
 * a temporary workspace, driven by the official SDK's client and by this package's own client
 * (`mcpToolsLayer`: the two halves talk to each other): the tools and their schemas, the policy (read-only
 * by default, nobody to ask), results as MCP content, errors as `isError`, confinement, progress,
 * cancellation that leaves no process behind, and the loopback-only HTTP endpoint.
 */
import { allowAll, Executor } from "@agentloop/core"
import { connectMcpServer, serveMcpHttp } from "@agentloop/mcp"
import type { McpServeOptions } from "@agentloop/mcp"
import { toolCall, turn } from "@agentloop/testkit"
import { codingToolsLayer } from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import { CallToolResultSchema, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { Context, Deferred, Effect, Layer } from "effect"
import type { Scope } from "effect"
import { execFileSync } from "node:child_process"
import { createReadStream, existsSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs"
import { request } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { resultsOf, runWithMcp, serversLayer, textOf } from "./helpers.ts"

/** A fresh workspace with one file, and a folder beside it that must stay untouched. */
const makeWorkspace = () => {
  const base = realpathSync(mkdtempSync(join(tmpdir(), "agentloop-serve-")))
  const root = join(base, "ws")
  execFileSync("mkdir", ["-p", root])
  writeFileSync(join(root, "hello.txt"), "hello from the workspace\n")
  return { base, root }
}

/** A 1x1 PNG. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==",
  "base64"
)

/** The coding tools of `root` served in memory to an SDK client (closed with the scope). */
const sdkClientOf = (root: string, options: McpServeOptions = {}) =>
  Effect.gen(function*() {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
    const tools = yield* Layer.build(codingToolsLayer(root))
    yield* Effect.provideContext(
      connectMcpServer(serverSide, options),
      Context.merge(yield* Effect.context<Scope.Scope>(), tools)
    )
    const client = new Client({ name: "sdk-test-client", version: "1.0.0" })
    yield* Effect.promise(() => client.connect(clientSide))
    yield* Effect.addFinalizer(() => Effect.promise(() => client.close()))
    return client
  })

/** The coding tools of `root` served over HTTP on loopback (stopped with the scope). */
const served = (root: string, options: McpServeOptions = {}) =>
  Effect.flatMap(Layer.build(codingToolsLayer(root)), (tools) => Effect.provideContext(serveMcpHttp(options), tools))

/** A POST of `body` to `url` with these headers (node:http: fetch does not let a caller set Host). */
const postRaw = (url: string, headers: Record<string, string>, body: string) =>
  Effect.callback<number>((resume) => {
    const req = request(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers }
    }, (res) => {
      res.resume()
      resume(Effect.succeed(res.statusCode ?? 0))
      res.destroy()
    })
    req.end(body)
  })

const call = (client: Client, name: string, args: Record<string, unknown>) =>
  Effect.promise(() => client.callTool({ name, arguments: args }) as Promise<CallToolResult>)

const textOfResult = (result: CallToolResult): string =>
  result.content.map((part) => (part.type === "text" ? part.text : `[${part.type}]`)).join("\n")

describe("agentloop's MCP server", () => {
  it.effect("lists the coding tools with their JSON Schemas and read-only hints", () =>
    Effect.gen(function*() {
      const { root } = makeWorkspace()
      const client = yield* sdkClientOf(root)
      const { tools } = yield* Effect.promise(() => client.listTools())
      const executor = Context.get(yield* Layer.build(codingToolsLayer(root)), Executor)
      assert.deepStrictEqual(tools.map((t) => t.name), executor.definitions.map((d) => d.name))
      for (const definition of executor.definitions) {
        const tool = tools.find((t) => t.name === definition.name)!
        assert.deepStrictEqual(tool.inputSchema, definition.parameters, definition.name)
        assert.strictEqual(tool.description, definition.description)
        assert.strictEqual(tool.annotations?.readOnlyHint, definition.readOnly === true, definition.name)
      }
    }))

  it.effect("by default runs read-only tools and denies the rest, saying how to allow them", () =>
    Effect.gen(function*() {
      const { root } = makeWorkspace()
      const client = yield* sdkClientOf(root)
      const read = yield* call(client, "read", { path: "hello.txt" })
      assert.isFalse(read.isError === true)
      assert.include(textOfResult(read), "hello from the workspace")

      const write = yield* call(client, "write", { path: "new.txt", content: "x" })
      assert.isTrue(write.isError)
      assert.include(textOfResult(write), "needs approval")
      assert.include(textOfResult(write), "--yes")
      assert.isFalse(existsSync(join(root, "new.txt")), "a denied call changes nothing")

      const bash = yield* call(client, "bash", { command: "touch ran.txt" })
      assert.isTrue(bash.isError)
      assert.isFalse(existsSync(join(root, "ran.txt")))
    }))

  it.effect("with allowAll runs every tool, confined to the workspace", () =>
    Effect.gen(function*() {
      const { base, root } = makeWorkspace()
      const client = yield* sdkClientOf(root, { policy: allowAll })
      const write = yield* call(client, "write", { path: "new.txt", content: "written over MCP" })
      assert.isFalse(write.isError === true, textOfResult(write))
      assert.strictEqual(readFileSync(join(root, "new.txt"), "utf8"), "written over MCP")

      const outside = yield* call(client, "write", { path: "../outside.txt", content: "escaped" })
      assert.isTrue(outside.isError)
      assert.isFalse(existsSync(join(base, "outside.txt")), "nothing is written outside the workspace")
      const absolute = yield* call(client, "read", { path: join(base, "..", "etc", "passwd") })
      assert.isTrue(absolute.isError)
    }))

  it.effect("answers bad arguments with an error result and an unknown tool with invalid params", () =>
    Effect.gen(function*() {
      const { root } = makeWorkspace()
      const client = yield* sdkClientOf(root)
      const bad = yield* call(client, "read", { file: "hello.txt" })
      assert.isTrue(bad.isError)
      assert.include(textOfResult(bad), "path")
      const unknown = yield* Effect.flip(Effect.tryPromise(() => client.callTool({ name: "nope", arguments: {} })))
      const error = unknown.cause
      assert.instanceOf(error, McpError)
      assert.strictEqual((error as McpError).code, ErrorCode.InvalidParams)
    }))

  it.effect("sends images as image content", () =>
    Effect.gen(function*() {
      const { root } = makeWorkspace()
      writeFileSync(join(root, "dot.png"), PNG)
      const client = yield* sdkClientOf(root)
      const result = yield* call(client, "read", { path: "dot.png" })
      const image = result.content.find((part) => part.type === "image")
      assert.isDefined(image, textOfResult(result))
      assert.strictEqual(image?.type === "image" ? image.mimeType : "", "image/png")
    }))

  it.effect("a cancelled bash call reports progress, then its processes die with it", () =>
    Effect.gen(function*() {
      const { root } = makeWorkspace()
      execFileSync("mkfifo", [join(root, "alive")])
      const client = yield* sdkClientOf(root, { policy: allowAll })
      // every process of the command holds the FIFO's write end: the reader sees its end only when
      // all of them are gone
      const gone = yield* Deferred.make<void>()
      const reader = createReadStream(join(root, "alive"))
      reader.on("data", () => undefined)
      reader.on("end", () => Deferred.doneUnsafe(gone, Effect.void))
      const started = yield* Deferred.make<void>()
      const controller = new AbortController()
      const pending = client.request(
        {
          method: "tools/call",
          params: { name: "bash", arguments: { command: "exec 3>alive; echo started; sleep 300 & sleep 300" } }
        },
        CallToolResultSchema,
        {
          signal: controller.signal,
          onprogress: (progress) => {
            if (progress.message?.includes("started") === true) Deferred.doneUnsafe(started, Effect.void)
          }
        }
      )
      const outcome = pending.then(() => "answered", () => "cancelled")
      yield* Deferred.await(started)
      controller.abort("the client gave up")
      assert.strictEqual(yield* Effect.promise(() => outcome), "cancelled")
      yield* Deferred.await(gone)
    }))

  it.effect("over HTTP: refuses a Host or Origin that is not loopback", () =>
    Effect.gen(function*() {
      const { root } = makeWorkspace()
      const { url } = yield* served(root)
      const initialize = JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } }
      })
      assert.strictEqual(yield* postRaw(url, { host: "evil.example.com" }, initialize), 403)
      assert.strictEqual(yield* postRaw(url, { origin: "http://evil.example.com" }, initialize), 403)
      assert.strictEqual(yield* postRaw(url, {}, initialize), 200)

      const client = new Client({ name: "sdk-http-client", version: "1.0.0" })
      yield* Effect.promise(() => client.connect(new StreamableHTTPClientTransport(new URL(url))))
      const read = yield* Effect.promise(() =>
        client.callTool({ name: "ls", arguments: {} }) as Promise<CallToolResult>
      )
      assert.include(textOfResult(read), "hello.txt")
      yield* Effect.promise(() => client.close())
    }))

  it.effect("@agentloop/mcp's client runs an agent on the server's tools over HTTP", () =>
    Effect.gen(function*() {
      const { root } = makeWorkspace()
      const { url } = yield* served(root, { policy: allowAll })
      const run = yield* runWithMcp([
        turn.toolCalls([
          toolCall("c1", "agentloop__read", { path: "hello.txt" }),
          toolCall("c2", "agentloop__write", { path: "out.txt", content: "from a remote agent" })
        ]),
        turn.text("done")
      ]).pipe(Effect.provide(serversLayer([{ name: "agentloop", transport: "http", url }])))
      const [read, write] = resultsOf(run.result.messages)
      assert.include(textOf(read!), "hello from the workspace")
      assert.isFalse(write!.isError, textOf(write!))
      assert.strictEqual(readFileSync(join(root, "out.txt"), "utf8"), "from a remote agent")
      assert.strictEqual(run.result.reason, "stop")
    }))
})
