/**
 * The failure paths, against a server of our own that misbehaves (test/fixtures/misbehaving-server.ts):
 * invalid arguments, invalid results, floods of progress, crashes, calls never answered, tool-list
 * changes, and the process tree on close. Every run is checked with `checkInvariants`.
 */
import { ToolConcurrency } from "@agentloop/core"
import { McpTools } from "@agentloop/mcp"
import { toolCall, turn } from "@agentloop/testkit"
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Exit, Layer, Schedule, Scope } from "effect"
import { TestClock } from "effect/testing"
import { fakeServer, isRunning, resultsOf, runWithMcp, serversLayer, startWithMcp, textOf } from "./helpers.ts"

const providerName = /^[a-zA-Z0-9_-]{1,64}$/

/** Calls a tool of the `McpTools` in context directly (outside a run), for checks. */
const callDirect = (name: string, args: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const mcp = yield* McpTools
    return yield* mcp.executor.execute(
      { type: "toolCall", id: `direct-${name}`, name, arguments: args },
      {
        signal: new AbortController().signal,
        reportProgress: () => Effect.void,
        toolCallId: `direct-${name}`,
        toolName: name
      }
    )
  })

describe("a misbehaving server, shared by the tests of this block", { timeout: 30_000 }, () => {
  layer(serversLayer([fakeServer()]), { timeout: "30 seconds" })((it) => {
    it.effect("offers each tool as <server>__<tool>, within what providers accept, with its schema as given", () =>
      Effect.gen(function*() {
        const mcp = yield* McpTools
        const definitions = yield* mcp.definitions
        const names = definitions.map((d) => d.name)
        assert.includeMembers(names, ["fake__echo", "fake__crash", "fake__hang", "fake__flood"])
        for (const name of names) assert.match(name, providerName)
        const weird = names.find((n) => n.startsWith("fake__Weird_Name_with_chars_"))
        assert.isDefined(weird)
        assert.deepStrictEqual(definitions.find((d) => d.name === "fake__echo")!.parameters, {
          type: "object",
          properties: { text: { type: "string" } },
          required: ["text"],
          additionalProperties: false
        })
        // no readOnly unless annotations are trusted
        assert.isTrue(definitions.every((d) => d.readOnly === undefined))
      }))

    it.effect("a run calls tools (a sanitized name too) and gets their results, paired in call order", () =>
      Effect.gen(function*() {
        const mcp = yield* McpTools
        const weird = (yield* mcp.definitions).find((d) => d.name.startsWith("fake__Weird"))!.name
        const run = yield* runWithMcp([
          turn.toolCalls([toolCall("a", "fake__echo", { text: "hi" }), toolCall("b", weird)]),
          turn.text("done")
        ])
        assert.strictEqual(run.result.reason, "stop")
        const results = resultsOf(run.result.messages)
        assert.deepStrictEqual(results.map((r) => [r.toolCallId, textOf(r), r.isError]), [
          ["a", "echo: hi", false],
          ["b", "weird ran", false]
        ])
        assert.deepStrictEqual(results[0]!.details, { mcp: { server: "fake", tool: "echo" } })
        assert.deepStrictEqual(results[1]!.details, { mcp: { server: "fake", tool: "Weird Name.with/chars" } })
        // the model saw the server's tools
        assert.isTrue(run.requests[0]!.tools.some((t) => t.name === "fake__echo"))
      }))

    it.effect("arguments that do not match the schema get an error naming the field; the server is not called", () =>
      Effect.gen(function*() {
        const before = yield* callDirect("fake__calls", { tool: "nested" })
        const run = yield* runWithMcp([
          turn.toolCalls([
            toolCall("a", "fake__nested", { options: { count: 0 } }),
            toolCall("b", "fake__nested", { options: {} }),
            toolCall("c", "fake__nested", { options: { count: 2 }, extra: true }),
            toolCall("d", "fake__nested", { options: "three" })
          ]),
          turn.text("done")
        ])
        const texts = resultsOf(run.result.messages).map((r) => [r.isError, textOf(r)])
        assert.deepStrictEqual(texts, [
          [true, "Invalid arguments for tool \"fake__nested\": options.count: must be >= 1"],
          [true, "Invalid arguments for tool \"fake__nested\": options.count: is required"],
          [true, "Invalid arguments for tool \"fake__nested\": extra: is not allowed"],
          [true, "Invalid arguments for tool \"fake__nested\": options: must be object"]
        ])
        const details = resultsOf(run.result.messages)[0]!.details as { invalidArguments: boolean }
        assert.isTrue(details.invalidArguments)
        // a valid call does reach it: the count can move
        const valid = yield* callDirect("fake__nested", { options: { count: 1 } })
        assert.strictEqual(textOf(valid), "count {\"count\":1}")
        // the server handles requests one at a time, in order: had any of the invalid calls reached
        // it, it would be counted here (nothing else calls `nested`)
        const after = yield* callDirect("fake__calls", { tool: "nested" })
        assert.strictEqual(Number(textOf(after)) - Number(textOf(before)), 1)
      }))

    it.effect("every kind of content becomes text, images and details", () =>
      Effect.gen(function*() {
        const run = yield* runWithMcp([turn.toolCalls([toolCall("m", "fake__mixed")]), turn.text("done")])
        const [result] = resultsOf(run.result.messages)
        assert.isTrue(result!.isError)
        // the two images are a bare PNG signature: by default an image goes as `read` sends it, so these are
        // checked and left out, saying why, in their place
        const leftOut = /^\[the image from fake \(tool mixed\) .*PNG.*; it was left out\.\]$/
        const content = result!.content.map((part, i) =>
          (i === 1 || i === 6) && part.type === "text" && leftOut.test(part.text) ? "left out" : part
        )
        assert.deepStrictEqual(content, [
          { type: "text", text: "plain" },
          "left out",
          { type: "text", text: "[audio (audio/wav), 4 bytes: details.audio[0]]" },
          { type: "text", text: "[resource link notes: file:///notes.txt (text/plain) the notes]" },
          { type: "text", text: "[resource file:///a.txt (text/plain)]\ninside a" },
          { type: "text", text: "[resource file:///b.bin (application/octet-stream), 3 bytes: details.resources[1]]" },
          "left out"
        ])
        assert.deepStrictEqual(result!.details, {
          mcp: { server: "fake", tool: "mixed" },
          structuredContent: { answer: 42 },
          audio: [{ mimeType: "audio/wav", data: "UklGRg==" }],
          resourceLinks: [{
            type: "resource_link",
            uri: "file:///notes.txt",
            name: "notes",
            mimeType: "text/plain",
            description: "the notes"
          }],
          resources: [
            { uri: "file:///a.txt", mimeType: "text/plain" },
            { uri: "file:///b.bin", mimeType: "application/octet-stream", blob: "AAEC" },
            { uri: "file:///c.png", mimeType: "image/png" }
          ]
        })
      }))

    it.effect("an invalid result is an error result, the connection is kept and the run goes on", () =>
      Effect.gen(function*() {
        const run = yield* runWithMcp([
          turn.toolCalls([toolCall("i", "fake__invalid")]),
          turn.toolCalls([toolCall("e", "fake__echo", { text: "still here" })]),
          turn.text("done")
        ])
        const results = resultsOf(run.result.messages)
        assert.deepStrictEqual(results.map((r) => [r.isError, textOf(r)]), [
          [true, "MCP server \"fake\" returned a result that is not a valid MCP tool result."],
          [false, "echo: still here"]
        ])
      }))

    it.effect("a flood of progress notifications becomes tool_progress events and the call still ends", () =>
      Effect.gen(function*() {
        const run = yield* runWithMcp([
          turn.toolCalls([toolCall("f", "fake__flood", { count: 5000 })]),
          turn.text("done")
        ])
        assert.strictEqual(textOf(resultsOf(run.result.messages)[0]!), "flooded 5000")
        const progress = run.events.flatMap((e) => e.type === "tool_progress" ? [e] : [])
        assert.isAbove(progress.length, 0)
        assert.isAtMost(progress.length, 5000)
        assert.isTrue(progress.every((p) => p.toolCallId === "f"))
        // the last notification, which came right before the result, is reported (older ones may be dropped)
        assert.strictEqual((progress[progress.length - 1]!.progress as { progress: number }).progress, 5000)
      }))

    it.effect("a tool the servers do not have is answered with an error listing the tools", () =>
      Effect.gen(function*() {
        const run = yield* runWithMcp([turn.toolCalls([toolCall("u", "fake__nope")]), turn.text("done")])
        const [result] = resultsOf(run.result.messages)
        assert.isTrue(result!.isError)
        assert.match(textOf(result!), /^Unknown tool "fake__nope"\. Available tools: .*fake__echo/)
      }))
  })
})

describe("a server of one's own per test", { timeout: 30_000 }, () => {
  it.effect("tools/list_changed applies at the next turn, never in the middle of a batch", () =>
    Effect.gen(function*() {
      const run = yield* runWithMcp([
        // one call at a time, in call order: `late` runs after `add_tool` has answered (and the
        // new list has been fetched), in the same batch
        turn.toolCalls([toolCall("a", "fake__add_tool"), toolCall("l", "fake__late")]),
        turn.toolCalls([toolCall("l2", "fake__late")]),
        turn.text("done")
      ])
      const results = resultsOf(run.result.messages)
      assert.deepStrictEqual(results.map((r) => [r.toolCallId, r.isError]), [["a", false], ["l", true], ["l2", false]])
      assert.match(textOf(results[1]!), /^Unknown tool "fake__late"/)
      assert.strictEqual(textOf(results[2]!), "late tool ran")
      const offered = run.requests.map((r) => r.tools.some((t) => t.name === "fake__late"))
      assert.deepStrictEqual(offered, [false, true, true])
    }).pipe(Effect.provide(serversLayer([fakeServer()])), Effect.provideService(ToolConcurrency, 1)))

  it.effect("a server that crashes answers every call in flight with an error; the next call starts it again", () =>
    Effect.gen(function*() {
      const first = Number(textOf(yield* callDirect("fake__pid")))
      assert.isTrue(isRunning(first))
      const run = yield* runWithMcp([
        // the server exits once both `hang` calls have reached it: three calls in flight
        turn.toolCalls([
          toolCall("c", "fake__crash", { afterHangs: 2 }),
          toolCall("h1", "fake__hang"),
          toolCall("h2", "fake__hang")
        ]),
        turn.toolCalls([toolCall("p", "fake__pid")]),
        turn.text("done")
      ])
      const results = resultsOf(run.result.messages)
      assert.deepStrictEqual(results.map((r) => r.toolCallId), ["c", "h1", "h2", "p"])
      for (const result of results.slice(0, 3)) {
        assert.isTrue(result.isError)
        assert.match(textOf(result), /^MCP server "fake" disconnected before answering/)
        assert.deepInclude(result.details as object, { disconnected: true })
      }
      assert.isFalse(results[3]!.isError)
      const second = Number(textOf(results[3]!))
      assert.notStrictEqual(second, first)
      assert.isFalse(isRunning(first))
      assert.isTrue(isRunning(second))
      const servers = yield* (yield* McpTools).servers
      assert.strictEqual(servers[0]!.pid, second)
    }).pipe(Effect.provide(serversLayer([fakeServer()]))))

  it.live("a server that dies between calls is started again by the next call, which succeeds", () =>
    Effect.gen(function*() {
      const mcp = yield* McpTools
      const first = Number(textOf(yield* callDirect("fake__pid")))
      process.kill(first, "SIGKILL")
      // an outside process's death can only be watched for: until the connection has seen it
      yield* Effect.repeat(mcp.servers, {
        until: (servers) => !servers[0]!.connected,
        schedule: Schedule.spaced("10 millis")
      })
      const run = yield* runWithMcp([turn.toolCalls([toolCall("p", "fake__pid")]), turn.text("done")])
      const [result] = resultsOf(run.result.messages)
      assert.isFalse(result!.isError, textOf(result!))
      const second = Number(textOf(result!))
      assert.notStrictEqual(second, first)
      assert.isTrue(isRunning(second))
    }).pipe(Effect.provide(serversLayer([fakeServer()]))))

  it.effect("an abort sends notifications/cancelled and the call is paired as interrupted", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      const live = yield* startWithMcp([turn.toolCalls([toolCall("h", "fake__hang")])], { signal: controller.signal })
      // the server reports progress once the call reached it
      yield* live.awaitEvent((e) => e.type === "tool_progress" && e.toolCallId === "h")
      controller.abort()
      const { result } = yield* live.finish
      assert.strictEqual(result.reason, "aborted")
      const [answer] = resultsOf(result.messages)
      assert.deepStrictEqual(answer!.details, { interrupted: true })
      // the server handles messages in order: the cancellation came before this call
      const cancelled = JSON.parse(textOf(yield* callDirect("fake__cancelled"))) as Array<unknown>
      assert.strictEqual(cancelled.length, 1)
    }).pipe(Effect.provide(serversLayer([fakeServer()]))))

  it.effect("a call past the server's timeoutMs is cancelled and answered as timed out", () =>
    Effect.gen(function*() {
      const live = yield* startWithMcp([turn.toolCalls([toolCall("h", "fake__hang")]), turn.text("gave up")])
      yield* live.awaitEvent((e) => e.type === "tool_progress" && e.toolCallId === "h")
      yield* TestClock.adjust("5 seconds")
      const { result } = yield* live.finish
      assert.strictEqual(result.reason, "stop")
      const [answer] = resultsOf(result.messages)
      assert.deepInclude(answer!.details as object, { timedOut: true, timeoutMs: 5000 })
      const cancelled = JSON.parse(textOf(yield* callDirect("fake__cancelled"))) as Array<unknown>
      assert.strictEqual(cancelled.length, 1)
    }).pipe(Effect.provide(serversLayer([fakeServer("fake", { timeoutMs: 5000 })]))))

  it.live("closing the scope stops the server's whole process tree", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(serversLayer([fakeServer()]), scope)
      const ids = yield* Effect.gen(function*() {
        const child = Number(textOf(yield* callDirect("fake__spawn_child")))
        const server = Number(textOf(yield* callDirect("fake__pid")))
        return { child, server }
      }).pipe(Effect.provide(context))
      assert.isTrue(isRunning(ids.server))
      assert.isTrue(isRunning(ids.child))
      yield* Scope.close(scope, Exit.void)
      assert.isFalse(isRunning(ids.server), "the server survived")
      assert.isFalse(isRunning(ids.child), "the server's child survived")
    }))

  it.effect("a server that cannot start fails the layer with an error naming it", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Layer.build(serversLayer([
        { name: "ghost", transport: "stdio", command: "/nonexistent/mcp-server", args: [] }
      ])))
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail")?.error : undefined
      assert.strictEqual((error as { _tag: string })._tag, "McpConnectError")
      assert.match((error as Error).message, /^MCP server "ghost" \(`\/nonexistent\/mcp-server`\): could not connect/)
    }).pipe(Effect.scoped))

  it.effect("two servers whose names give the same prefix are refused", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Layer.build(serversLayer([fakeServer("my.server"), fakeServer("my server")])))
      const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail")?.error : undefined
      assert.strictEqual((error as { _tag: string })._tag, "McpConfigError")
      assert.match(
        (error as Error).message,
        /"my\.server" and "my server" would both name their tools "my_server__…"/
      )
    }).pipe(Effect.scoped))
})
