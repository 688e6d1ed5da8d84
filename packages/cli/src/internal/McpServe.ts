/**
 * `agentloop mcp serve`: the coding tools confined to a workspace (and, with `--sub-agents`, an
 * `agent` tool that runs a whole agentloop run on the configured model) offered to other agents
 * over MCP, on stdio or on Streamable HTTP at `http://127.0.0.1:PORT/mcp`.
 *
 * Nobody can be asked for approval here: by default only read-only tools run (`read`, `grep`,
 * `find`, `ls`, and `agent`, whose own run is held to the same rule); `--allow NAME` runs a tool
 * by name, `--yes` runs everything. A call that would need approval is answered with an error
 * saying so. The sub-agent's tools follow the same rule.
 */
import { allow, allowAll, deny, readOnlyPolicy, subAgentTool, toolExecutorLayer } from "@agentloop/core"
import type { ToolPolicy } from "@agentloop/core"
import { serveMcpHttp, serveMcpStdio } from "@agentloop/mcp"
import { bashOptionsLayer, codingTools, outputStoreLayer, workspaceLayer } from "@agentloop/tools"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Effect, Layer, Option } from "effect"
import { CliError } from "../CliError.ts"
import { NO_FLAGS, resolveSettings } from "../Config.ts"
import { stripControl } from "../Sanitize.ts"
import { modelOf, workspaceOf } from "./Setup.ts"

/** The policy of the server (and of its sub-agent's run): what it would ask about is denied. */
const servePolicy = (yes: boolean, allowed: ReadonlyArray<string>): ToolPolicy => {
  if (yes) return allowAll
  const base = readOnlyPolicy(allowed)
  return (call, definition) =>
    base(call, definition) === allow ?
      allow :
      deny(
        `"${call.name}" needs approval, and this MCP server cannot ask anyone: ` +
          `start it with --yes or --allow ${call.name}`
      )
}

/**
 * `agentloop mcp serve [--workspace DIR] [--http PORT] [--yes] [--allow NAME] [--sub-agents]`.
 *
 * @since 0.1.0
 * @category commands
 */
export const mcpServeCommand = (options: {
  readonly workspace: Option.Option<string>
  readonly http: Option.Option<number>
  readonly yes: boolean
  readonly allow: ReadonlyArray<string>
  readonly subAgents: boolean
}): Effect.Effect<void> =>
  Effect.gen(function*() {
    const root = yield* workspaceOf(options.workspace)
    const settings = yield* resolveSettings(NO_FLAGS, root, process.env).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    const policy = servePolicy(options.yes, options.allow)
    const agents = options.subAgents ?
      yield* Effect.gen(function*() {
        if (settings.model === undefined) {
          return yield* Effect.fail(
            new CliError("--sub-agents needs a model: set AGENTLOOP_PROVIDER and AGENTLOOP_MODEL or a config file")
          )
        }
        const model = yield* modelOf(settings, settings.model)
        return [subAgentTool({
          name: "agent",
          description: "Hand a task to an agentloop agent working in this workspace with the coding tools " +
            "(read, write, edit, bash, grep, find, ls); its answer is its final text.",
          tools: codingTools,
          model: Layer.succeedContext(model),
          policy,
          maxSteps: settings.maxSteps,
          // its own run is held to the server's rule: read-only unless --yes
          readOnly: !options.yes
        })]
      }) :
      []
    const hideEnv = settings.apiKeyEnv === undefined ? [] : [settings.apiKeyEnv]
    const tools = toolExecutorLayer([...codingTools, ...agents]).pipe(
      Layer.provide(bashOptionsLayer({ hideEnv })),
      Layer.provide(outputStoreLayer.pipe(Layer.provideMerge(workspaceLayer(root)))),
      Layer.provide(NodeServices.layer)
    )
    const instructions = `Tools of agentloop, confined to the folder ${root}.`
    const port = Option.getOrUndefined(options.http)
    const serve = port !== undefined ?
      Effect.scoped(Effect.gen(function*() {
        const server = yield* serveMcpHttp({ port, policy, instructions })
        process.stderr.write(`agentloop: MCP server for ${root} at ${server.url}\n`)
        return yield* Effect.never
      })) :
      serveMcpStdio({ policy, instructions })
    yield* serve.pipe(
      Effect.provide(tools),
      Effect.mapError((e) => new CliError(e.message))
    )
  }).pipe(
    Effect.scoped,
    Effect.catchIf((e): e is CliError => e instanceof CliError, (e) =>
      Effect.sync(() => {
        process.stderr.write(`agentloop: ${stripControl(e.message)}\n`)
        process.exitCode = 1
      }))
  )
