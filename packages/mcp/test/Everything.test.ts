/**
 * `@modelcontextprotocol/server-everything` from the npm registry, over stdio and over Streamable
 * HTTP on loopback, each started once for this file. The same scripted session runs against both:
 * every kind of result it has (text, image, structured content, resource links, embedded
 * resources, progress), arguments refused before the call, and its environment.
 */
import { acceptDefaults, elicitationLayer, McpTools, modelSamplingLayer, rootOfDirectory } from "@agentloop/mcp"
import type { McpServerConfig } from "@agentloop/mcp"
import { scriptedModelLayer, toolCall, turn } from "@agentloop/testkit"
import { NodeServices } from "@effect/platform-node"
import { afterAll, assert, describe, layer } from "@effect/vitest"
import { Deferred, Effect, Exit, Layer, Scope, Stream } from "effect"
import { ChildProcess } from "effect/process"
import { fileURLToPath } from "node:url"
import { node, resultsOf, runWithMcp, serverBin, serversLayer, startWithMcp, stripTypes, textOf } from "./helpers.ts"

const everything = serverBin("@modelcontextprotocol/server-everything")
const loopback = fileURLToPath(new URL("./fixtures/loopback.ts", import.meta.url))
const SECRET = "AGENTLOOP_TEST_SECRET"
// in this process's environment before any server starts: a stdio server must not get it
process.env[SECRET] = "do-not-leak"
afterAll(() => {
  delete process.env[SECRET]
})

/** Starts the Streamable HTTP server on a loopback port (a free one for 0); its URL. Stopped with the scope. */
const startHttpServerOn = (requested: number) =>
  Effect.gen(function*() {
    const handle = yield* ChildProcess.make(node, [...stripTypes, "--import", loopback, everything, "streamableHttp"], {
      env: { PORT: String(requested) },
      extendEnv: true,
      detached: true,
      killSignal: "SIGTERM",
      forceKillAfter: "2 seconds"
    })
    const port = yield* Deferred.make<number>()
    yield* Effect.forkScoped(Stream.runDrain(handle.stdout))
    yield* Effect.forkScoped(Stream.runForEach(Stream.splitLines(Stream.decodeText(handle.stderr)), (line) => {
      const match = /^LOOPBACK_PORT (\d+)$/.exec(line)
      return match === null ? Effect.void : Deferred.succeed(port, Number(match[1]))
    }))
    return `http://127.0.0.1:${yield* Deferred.await(port)}/mcp`
  })
const startHttpServer = startHttpServerOn(0)

const stdioLayer = serversLayer([
  { name: "everything", transport: "stdio", command: node, args: [everything, "stdio"] }
])

const httpLayer = Layer.unwrap(
  Effect.map(startHttpServer, (url) =>
    serversLayer([
      { name: "everything", transport: "http", url, headers: { "X-Test": "1" } } satisfies McpServerConfig
    ]))
).pipe(Layer.provide(NodeServices.layer))

const session = (transport: string) =>
  Effect.gen(function*() {
    const run = yield* runWithMcp([
      turn.toolCalls([
        toolCall("echo", "everything__echo", { message: `hello over ${transport}` }),
        toolCall("sum", "everything__get-sum", { a: 2, b: 3 }),
        toolCall("image", "everything__get-tiny-image"),
        toolCall("structured", "everything__get-structured-content", { location: "Chicago" }),
        toolCall("links", "everything__get-resource-links", { count: 2 }),
        toolCall("embedded", "everything__get-resource-reference", { resourceType: "Text", resourceId: 1 }),
        toolCall("bad", "everything__get-sum", { a: "two" })
      ]),
      turn.toolCalls([
        toolCall("long", "everything__trigger-long-running-operation", { duration: 0.3, steps: 3 }),
        toolCall("env", "everything__get-env")
      ]),
      turn.text("done")
    ])
    assert.strictEqual(run.result.reason, "stop")
    const results = new Map(resultsOf(run.result.messages).map((r) => [r.toolCallId, r]))
    const get = (id: string) => results.get(id)!

    assert.strictEqual(textOf(get("echo")), `Echo: hello over ${transport}`)
    assert.isFalse(get("echo").isError)
    assert.match(textOf(get("sum")), /5/)

    const image = get("image").content.find((c) => c.type === "image")
    assert.isDefined(image)
    assert.strictEqual(image!.type === "image" ? image.mimeType : "", "image/png")

    const structured = get("structured").details as { structuredContent: { temperature: number } }
    assert.isNumber(structured.structuredContent.temperature)

    const links = get("links").details as { resourceLinks: ReadonlyArray<{ uri: string }> }
    assert.strictEqual(links.resourceLinks.length, 2)
    assert.match(textOf(get("links")), /\[resource link .*: demo:\/\//)

    const embedded = get("embedded").details as { resources: ReadonlyArray<{ uri: string }> }
    assert.strictEqual(embedded.resources.length, 1)
    assert.match(textOf(get("embedded")), /\[resource .*\(text\/plain\)\]\n/)

    assert.isTrue(get("bad").isError)
    assert.strictEqual(
      textOf(get("bad")),
      "Invalid arguments for tool \"everything__get-sum\": b: is required; a: must be number"
    )

    assert.isFalse(get("long").isError)
    assert.match(textOf(get("long")), /completed/i)
    const progress = run.events.flatMap((e) =>
      e.type === "tool_progress" && e.toolCallId === "long" ? [e.progress] : []
    )
    assert.deepStrictEqual(progress.map((p) => (p as { progress: number }).progress), [1, 2, 3])
    assert.deepStrictEqual(progress.map((p) => (p as { total: number }).total), [3, 3, 3])

    // stdio servers get a minimal environment, never this process's secrets
    if (transport === "stdio") {
      assert.include(textOf(get("env")), "\"PATH\"")
      assert.notInclude(textOf(get("env")), SECRET)
    }
    return run
  })

describe("server-everything over stdio", { timeout: 30_000 }, () => {
  layer(stdioLayer, { timeout: "60 seconds" })((it) => {
    it.effect("a session uses its tools: text, image, structured content, links, resources, progress", () =>
      Effect.asVoid(session("stdio")))

    it.effect("tool names are prefixed and its JSON Schemas are passed on as they are", () =>
      Effect.gen(function*() {
        const definitions = yield* (yield* McpTools).definitions
        const echo = definitions.find((d) => d.name === "everything__echo")
        assert.deepStrictEqual(echo?.parameters, {
          type: "object",
          properties: { message: { type: "string", description: "Message to echo" } },
          required: ["message"],
          $schema: "http://json-schema.org/draft-07/schema#"
        })
        assert.isTrue(definitions.every((d) => d.name.startsWith("everything__")))
        // a tool that can only run as an MCP task is not offered
        const status = (yield* (yield* McpTools).servers)[0]!
        assert.include(status.tools, "simulate-research-query")
        assert.notInclude(definitions.map((d) => d.name), "everything__simulate-research-query")
      }))
  })
})

describe("server-everything with a client that answers what servers ask", { timeout: 30_000 }, () => {
  const answering = Layer.mergeAll(
    elicitationLayer((request) => Effect.succeed(acceptDefaults(request))),
    modelSamplingLayer().pipe(Layer.provide(scriptedModelLayer([])))
  )
  const clientLayer = serversLayer([
    { name: "everything", transport: "stdio", command: node, args: [everything, "stdio"] }
  ], { roots: [rootOfDirectory(process.cwd())] }).pipe(Layer.provide(answering))

  layer(clientLayer, { timeout: "60 seconds" })((it) => {
    it.effect("every tool is offered but URL elicitation and the tools that need MCP tasks", () =>
      Effect.gen(function*() {
        const mcp = yield* McpTools
        const offered = new Set((yield* mcp.definitions).map((d) => d.name))
        const [status] = yield* mcp.servers
        const left = status!.tools.filter((tool) => !offered.has(`everything__${tool}`))
        assert.deepStrictEqual(left, ["simulate-research-query"])
        for (const tool of ["get-roots-list", "trigger-elicitation-request", "trigger-sampling-request"]) {
          assert.isTrue(offered.has(`everything__${tool}`), tool)
        }
        // the server lists neither URL elicitation nor the async tools to a client without them
        assert.notInclude(status!.tools, "trigger-url-elicitation")
        assert.notInclude(status!.tools, "trigger-sampling-request-async")
        assert.isTrue(offered.has("everything__list_resources") && offered.has("everything__read_resource"))
      }))
  })
})

describe("server-everything over Streamable HTTP on loopback", { timeout: 30_000 }, () => {
  layer(httpLayer, { timeout: "60 seconds" })((it) => {
    it.effect("the same session works over HTTP", () => Effect.asVoid(session("http")))

    it.effect("the server is reached over HTTP, not started as a process", () =>
      Effect.gen(function*() {
        const [status] = yield* (yield* McpTools).servers
        assert.deepInclude(status!, { name: "everything", transport: "http", connected: true, pid: undefined })
      }))
  })
})

describe("a Streamable HTTP server that is not there", { timeout: 30_000 }, () => {
  layer(NodeServices.layer)((it) => {
    it.effect("fails the layer with a connect error naming the server and its address, not its headers", () =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(Layer.build(mcpLayerFor({
          name: "nowhere",
          transport: "http",
          url: "http://user:pw@127.0.0.1:9/mcp?token=abc",
          headers: { Authorization: "Bearer secret-token" }
        })))
        const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail")?.error : undefined
        assert.strictEqual((error as { _tag: string })._tag, "McpConnectError")
        const message = (error as Error).message
        assert.match(message, /^MCP server "nowhere" \(http:\/\/127\.0\.0\.1:9\/mcp\): could not connect/)
        assert.notInclude(message, "secret-token")
        assert.notInclude(message, "pw")
        assert.notInclude(message, "abc")
      }).pipe(Effect.scoped))
  })
})

const mcpLayerFor = (server: McpServerConfig) => serversLayer([server])

describe("a Streamable HTTP server that goes away", { timeout: 30_000 }, () => {
  layer(NodeServices.layer)((it) => {
    it.effect("answers the call in flight with an error, and the next call reconnects to the restarted server", () =>
      Effect.gen(function*() {
        const first = yield* Scope.make()
        const url = yield* startHttpServer.pipe(Scope.provide(first))
        const port = Number(new URL(url).port)
        const tools = yield* Layer.build(serversLayer([{ name: "everything", transport: "http", url }]))
        yield* Effect.gen(function*() {
          const restarted = yield* Deferred.make<void>()
          const live = yield* startWithMcp([
            turn.toolCalls([
              toolCall("long", "everything__trigger-long-running-operation", { duration: 20, steps: 20 })
            ]),
            // the model's next turn waits until the server is back
            (request) =>
              Stream.unwrap(Effect.as(
                Deferred.await(restarted),
                turn.toolCalls([toolCall("echo", "everything__echo", { message: "again" })])(request)
              )),
            turn.text("done")
          ])
          // the call is running on the server: it reports progress
          yield* live.awaitEvent((e) => e.type === "tool_progress" && e.toolCallId === "long")
          yield* Scope.close(first, Exit.void)
          // the server is back on the same port before the model's next turn can call it
          yield* live.awaitEvent((e) => e.type === "tool_end" && e.result.toolCallId === "long")
          yield* startHttpServerOn(port)
          yield* Deferred.succeed(restarted, undefined)
          const { result } = yield* live.finish
          const [long, echo] = resultsOf(result.messages)
          assert.isTrue(long!.isError)
          assert.match(textOf(long!), /MCP server "everything"/)
          assert.deepInclude(long!.details as object, { disconnected: true })
          assert.isFalse(echo!.isError)
          assert.strictEqual(textOf(echo!), "Echo: again")
        }).pipe(Effect.provide(tools))
      }).pipe(Effect.scoped))

    it.effect("a server restarted between calls is reconnected by the next call, which succeeds", () =>
      Effect.gen(function*() {
        const first = yield* Scope.make()
        const url = yield* startHttpServer.pipe(Scope.provide(first))
        const tools = yield* Layer.build(serversLayer([{ name: "everything", transport: "http", url }]))
        yield* Effect.gen(function*() {
          const echo = (id: string, message: string) =>
            runWithMcp([turn.toolCalls([toolCall(id, "everything__echo", { message })]), turn.text("ok")])
          const before = yield* echo("a", "one")
          assert.strictEqual(textOf(resultsOf(before.result.messages)[0]!), "Echo: one")
          yield* Scope.close(first, Exit.void)
          yield* startHttpServerOn(Number(new URL(url).port))
          // the old session is unknown to the new server (HTTP 404): the call is sent again on a new one
          const after = yield* echo("b", "two")
          const [result] = resultsOf(after.result.messages)
          assert.isFalse(result!.isError, textOf(result!))
          assert.strictEqual(textOf(result!), "Echo: two")
        }).pipe(Effect.provide(tools))
      }).pipe(Effect.scoped))
  })
})
