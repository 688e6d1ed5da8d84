import { callbackSinkLayer, Executor, runAgentLoop } from "@agentloop/core"
import type {
  AgentLoopOptions,
  AgentRunResult,
  LoopEvent,
  Message,
  ToolContext,
  ToolResultMessage
} from "@agentloop/core"
import { McpTools, mcpToolsLayer } from "@agentloop/mcp"
import type { McpServerConfig, McpToolsOptions } from "@agentloop/mcp"
import { checkInvariants, makeScriptedModel, runScripted, user } from "@agentloop/testkit"
import type { ScriptedRun, ScriptedTurn } from "@agentloop/testkit"
import { NodeServices } from "@effect/platform-node"
import { assert } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer } from "effect"
import { existsSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"

const require = createRequire(import.meta.url)

export const node = process.execPath

/**
 * Node flags to run the TypeScript fixtures: types are stripped by default from Node 22.18 on;
 * the flag keeps older 22.x working, and its experimental warning is silenced.
 */
export const stripTypes = ["--experimental-strip-types", "--disable-warning=ExperimentalWarning"]

/** The misbehaving fixture server as a stdio server config. */
export const fakeServer = (name = "fake", extra: Partial<McpServerConfig> = {}): McpServerConfig => ({
  name,
  transport: "stdio",
  command: node,
  args: [...stripTypes, fileURLToPath(new URL("./fixtures/misbehaving-server.ts", import.meta.url))],
  ...extra
} as McpServerConfig)

/** The capable fixture server (resources, prompts, roots and sampling) as a stdio server config. */
export const capableServer = (name = "capable", extra: Partial<McpServerConfig> = {}): McpServerConfig => ({
  name,
  transport: "stdio",
  command: node,
  args: [...stripTypes, fileURLToPath(new URL("./fixtures/capable-server.ts", import.meta.url))],
  ...extra
} as McpServerConfig)

/** A tool context for calling an executor directly (no run). */
export const toolContext = (name: string): ToolContext => ({
  signal: new AbortController().signal,
  reportProgress: () => Effect.void,
  toolCallId: `call-${name}`,
  toolName: name
})

/** Calls a tool of the `McpTools` in context directly, without a run. */
export const callTool = (name: string, args: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const mcp = yield* McpTools
    return yield* mcp.executor.execute(
      { type: "toolCall", id: `call-${name}`, name, arguments: args },
      toolContext(name)
    )
  })

/** The entry script of a server package from the registry. */
export const serverBin = (pkg: string): string => require.resolve(`${pkg}/dist/index.js`)

/** The layer of the given servers with a Node child-process spawner. */
export const serversLayer = (servers: ReadonlyArray<McpServerConfig>, options?: McpToolsOptions) =>
  mcpToolsLayer(servers, options).pipe(Layer.provide(NodeServices.layer))

/** The MCP executor of the `McpTools` in context, as a layer for one run. */
export const mcpExecutor = Effect.gen(function*() {
  const mcp = yield* McpTools
  return Layer.succeed(Executor, mcp.executor)
})

/** A scripted run against the MCP tools in context, checked for the three invariants. */
export const runWithMcp = (
  script: ReadonlyArray<ScriptedTurn>,
  options: Partial<AgentLoopOptions> = {}
): Effect.Effect<ScriptedRun, never, McpTools> =>
  Effect.gen(function*() {
    const executor = yield* mcpExecutor
    const run = yield* runScripted(script, { ...options, executor })
    assert.deepStrictEqual(run.violations, [])
    return run
  })

/** The tool results of a transcript, in order. */
export const resultsOf = (messages: ReadonlyArray<Message>): Array<ToolResultMessage> =>
  messages.flatMap((m) => (m.role === "toolResult" ? [m] : []))

/** The text of a result's content. */
export const textOf = (result: ToolResultMessage): string =>
  result.content.map((c) => (c.type === "text" ? c.text : `[image ${c.mimeType}]`)).join("\n")

/**
 * A run started in the background against the MCP tools in context, with a way to wait for an
 * event (on a Deferred, no polling) and to finish it with the invariant check.
 */
export const startWithMcp = (script: ReadonlyArray<ScriptedTurn>, options: Partial<AgentLoopOptions> = {}) =>
  Effect.gen(function*() {
    const executor = yield* mcpExecutor
    const model = yield* makeScriptedModel(script)
    const events: Array<LoopEvent> = []
    const waiters: Array<{ readonly test: (e: LoopEvent) => boolean; readonly done: Deferred.Deferred<void> }> = []
    const sink = callbackSinkLayer((event) => {
      events.push(event)
      for (const w of waiters) if (w.test(event)) Deferred.doneUnsafe(w.done, Exit.void)
    })
    const input = options.messages ?? [user("go")]
    const fiber = yield* runAgentLoop({ ...options, messages: input }).pipe(
      Effect.provide(Layer.mergeAll(model.layer, sink, executor)),
      Effect.forkChild
    )
    const awaitEvent = (test: (e: LoopEvent) => boolean) =>
      Effect.suspend(() => {
        if (events.some(test)) return Effect.void
        const done = Deferred.makeUnsafe<void>()
        waiters.push({ test, done })
        return Deferred.await(done)
      })
    const finish: Effect.Effect<{ result: AgentRunResult; events: ReadonlyArray<LoopEvent> }> = Effect.gen(function*() {
      const result = yield* Fiber.join(fiber)
      const violations = checkInvariants({ input, result, events, requests: yield* model.requests })
      assert.deepStrictEqual(violations, [])
      return { result, events }
    })
    return { fiber, events, awaitEvent, finish }
  })

/** Whether a process is running (a zombie, or a process that is gone, is not). */
export const isRunning = (pid: number): boolean => {
  const path = `/proc/${pid}/stat`
  if (!existsSync(path)) return false
  try {
    const stat = readFileSync(path, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z"
  } catch {
    return false
  }
}
