/**
 * `agentloop mcp serve` as a real process: `@agentloop/mcp`'s client starts it over stdio (the two
 * halves of agentloop talking to each other) and an agent runs on its tools; the official SDK's
 * client reaches `--http` on loopback; `--sub-agents` offers an `agent` tool whose run uses the
 * configured model (a loopback script server) and the same confined tools.
 */
import { Executor } from "@agentloop/core"
import { mcpToolsLayer } from "@agentloop/mcp"
import { McpTools } from "@agentloop/mcp"
import type { McpServerConfig } from "@agentloop/mcp"
import { runScripted, toolCall, turn } from "@agentloop/testkit"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { Deferred, Effect, Exit, Layer } from "effect"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { bin, makeWorkspace, scriptServer, startCli, testEnv } from "./helpers/agent.ts"

/** `agentloop mcp serve ARGS` as a stdio MCP server of the config. */
const served = (workspace: string, args: ReadonlyArray<string>, env: Record<string, string> = {}): McpServerConfig => ({
  name: "agentloop",
  transport: "stdio",
  command: process.execPath,
  args: ["--conditions=agentloop-source", bin, "mcp", "serve", "--workspace", workspace, ...args],
  env: { XDG_CONFIG_HOME: join(workspace, ".no-user-config"), XDG_STATE_HOME: join(workspace, ".no-state"), ...env }
})

/** A scripted agent run on the served tools. */
const runOn = (config: McpServerConfig, script: Parameters<typeof runScripted>[0]) =>
  Effect.gen(function*() {
    const mcp = yield* McpTools
    return yield* runScripted(script, { executor: Layer.succeed(Executor, mcp.executor) })
  }).pipe(Effect.provide(mcpToolsLayer([config]).pipe(Layer.provide(NodeServices.layer))))

const texts = (messages: ReadonlyArray<{ role: string; content?: unknown }>) =>
  messages.flatMap((m) =>
    m.role === "toolResult" ?
      [(m.content as Array<{ type: string; text?: string }>).map((c) => c.text ?? "").join("")] :
      []
  )

describe("agentloop mcp serve", () => {
  it.effect("over stdio: an agent of @agentloop/mcp reads, and is refused a write without --yes", () =>
    Effect.gen(function*() {
      const workspace = makeWorkspace()
      writeFileSync(join(workspace, "notes.txt"), "served over stdio\n")
      const run = yield* runOn(served(workspace, []), [
        turn.toolCalls([
          toolCall("c1", "agentloop__read", { path: "notes.txt" }),
          toolCall("c2", "agentloop__write", { path: "new.txt", content: "no" })
        ]),
        turn.text("done")
      ])
      const [read, write] = texts(run.result.messages)
      assert.include(read, "served over stdio")
      assert.include(write, "--yes")
      assert.isFalse(existsSync(join(workspace, "new.txt")))

      const allowed = yield* runOn(served(workspace, ["--allow", "write"]), [
        turn.toolCalls([toolCall("c1", "agentloop__write", { path: "new.txt", content: "yes" })]),
        turn.text("done")
      ])
      assert.strictEqual(readFileSync(join(workspace, "new.txt"), "utf8"), "yes", texts(allowed.result.messages)[0])
    }))

  it.effect("--http: the official SDK's client lists and calls the tools on loopback", () =>
    Effect.gen(function*() {
      const workspace = makeWorkspace()
      writeFileSync(join(workspace, "a.txt"), "over http\n")
      const cli = startCli(["mcp", "serve", "--workspace", workspace, "--http", "0"], {
        cwd: workspace,
        env: testEnv(workspace)
      })
      yield* Effect.addFinalizer(() =>
        Effect.promise(() => {
          cli.child.kill("SIGTERM")
          return cli.exited
        })
      )
      const pattern = /MCP server for .* at (http:\/\/127\.0\.0\.1:\d+\/mcp)/
      // the address is announced on stderr (stdout stays free, as on stdio)
      const announced = yield* Deferred.make<string>()
      const look = () => {
        const match = pattern.exec(cli.stderr())
        if (match !== null) Deferred.doneUnsafe(announced, Exit.succeed(match[1]!))
      }
      cli.child.stderr!.on("data", look)
      look()
      const url = yield* Deferred.await(announced)
      const client = new Client({ name: "sdk", version: "1.0.0" })
      yield* Effect.promise(() => client.connect(new StreamableHTTPClientTransport(new URL(url))))
      const { tools } = yield* Effect.promise(() => client.listTools())
      assert.deepStrictEqual(tools.map((t) => t.name), ["read", "write", "edit", "bash", "grep", "find", "ls"])
      const result = yield* Effect.promise(() =>
        client.callTool({ name: "read", arguments: { path: "a.txt" } }) as Promise<CallToolResult>
      )
      assert.include(JSON.stringify(result.content), "over http")
      yield* Effect.promise(() => client.close())
    }))

  it.effect("--sub-agents: the agent tool runs the configured model on the same confined tools", () =>
    Effect.gen(function*() {
      const workspace = makeWorkspace()
      writeFileSync(join(workspace, "secret-plan.txt"), "the plan is in the workspace\n")
      const model = yield* Effect.promise(() =>
        scriptServer([
          { calls: [{ id: "s1", name: "read", args: { path: "secret-plan.txt" } }] },
          { text: "I read it: the plan is in the workspace" }
        ])
      )
      yield* Effect.addFinalizer(() => Effect.promise(() => model.close()))
      const run = yield* runOn(
        served(workspace, ["--sub-agents"], {
          AGENTLOOP_PROVIDER: "openai-compat",
          AGENTLOOP_MODEL: "test-model",
          AGENTLOOP_BASE_URL: `${model.url}/v1`
        }),
        [turn.toolCalls([toolCall("c1", "agentloop__agent", { task: "read secret-plan.txt" })]), turn.text("ok")]
      )
      const [answer] = texts(run.result.messages)
      assert.include(answer, "I read it: the plan is in the workspace")
      // the sub-agent's own request carried the file's text as its read result
      assert.include(JSON.stringify(model.bodies[1]?.body), "the plan is in the workspace")
    }))
})
