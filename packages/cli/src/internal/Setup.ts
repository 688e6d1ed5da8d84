/**
 * What `run` and `chat` set up before a run: the workspace, the model the settings ask for, and
 * the tools.
 */
import { Model } from "@agentloop/core"
import { anthropicFetchLayer, openAiCompatFetchLayer } from "@agentloop/providers"
import { bashOptionsLayer, codingTools, codingToolsLayer, outputStoreLayer, workspaceLayer } from "@agentloop/tools"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Context, Effect, Layer, Option, Stream } from "effect"
import type { Duration, Scope } from "effect"
import { realpathSync, statSync } from "node:fs"
import * as nodePath from "node:path"
import { CliError } from "../CliError.ts"
import type { Settings } from "../Config.ts"

/** The workspace: the folder given (never an empty string) or the current one. */
export const workspaceOf = (given: Option.Option<string>): Effect.Effect<string, CliError> =>
  Effect.suspend(() => {
    if (Option.isSome(given) && given.value.trim().length === 0) {
      return Effect.fail(
        new CliError("--workspace is empty: give a folder (or leave the flag out for the current one)")
      )
    }
    const path = nodePath.resolve(Option.getOrElse(given, () => process.cwd()))
    try {
      if (!statSync(path).isDirectory()) return Effect.fail(new CliError(`--workspace ${path} is not a folder`))
      return Effect.succeed(realpathSync(path))
    } catch {
      return Effect.fail(new CliError(`--workspace ${path} does not exist`))
    }
  })

/** Builds the model the settings ask for. */
export const modelOf = (settings: Settings, model: string) =>
  Effect.gen(function*() {
    const provider = settings.provider
    if (provider === undefined) {
      return yield* Effect.fail(
        new CliError(
          "no model configured: pass --provider openai-compat|anthropic and --model NAME, set AGENTLOOP_PROVIDER and " +
            "AGENTLOOP_MODEL, or write .agentloop/config.json (see agentloop --help and the README)"
        )
      )
    }
    if (provider === "scripted") {
      return yield* Effect.fail(
        new CliError("the scripted model only plays the demo (agentloop demo); choose openai-compat or anthropic")
      )
    }
    let apiKey: string | undefined
    if (settings.apiKeyEnv !== undefined) {
      apiKey = process.env[settings.apiKeyEnv]
      if (apiKey === undefined || apiKey.length === 0) {
        return yield* Effect.fail(new CliError(`the environment variable ${settings.apiKeyEnv} (apiKeyEnv) is not set`))
      }
    }
    const options = {
      model,
      baseUrl: settings.baseUrl,
      apiKey,
      maxTokens: settings.maxTokens,
      ...(provider === "anthropic" && settings.promptCaching !== undefined
        ? { promptCaching: settings.promptCaching }
        : {}),
      ...(Object.keys(settings.timeouts).length > 0 ?
        { timeouts: settings.timeouts as { readonly [K in keyof Settings["timeouts"]]: Duration.Input } } :
        {})
    }
    const layer = provider === "anthropic" ? anthropicFetchLayer(options) : openAiCompatFetchLayer(options)
    const context = yield* Layer.build(layer).pipe(
      Effect.mapError((e) =>
        new CliError(`${e.message} (the CLI reads API keys from the environment: see --api-key-env)`)
      )
    )
    return context
  })

/**
 * The tools: the coding tools (bash never sees the known provider keys nor the one named by
 * apiKeyEnv), plus the tools of the MCP servers of the config file's `mcpServers` and of
 * `--mcp` / `--mcp-url`.
 */
export const toolsLayer = (
  root: string,
  settings: Settings,
  flags: { readonly mcp: ReadonlyArray<string>; readonly mcpUrl: ReadonlyArray<string> }
) =>
  Effect.gen(function*() {
    const hideEnv = settings.apiKeyEnv === undefined ? [] : [settings.apiKeyEnv]
    const coding = codingToolsLayer(root, { bash: { hideEnv } })
    // the MCP client (and its SDK) loads only when a server is configured
    if (settings.mcpServers === undefined && flags.mcp.length === 0 && flags.mcpUrl.length === 0) return coding
    const { decodeMcpServers, mcpExecutorLayer, mcpToolsLayer, serversFromFlags } = yield* Effect.promise(() =>
      import("@agentloop/mcp")
    )
    const fromFile = settings.mcpServers === undefined ? [] : yield* decodeMcpServers(settings.mcpServers)
    const fromFlags = yield* serversFromFlags({ mcp: flags.mcp, mcpUrl: flags.mcpUrl }, fromFile.map((s) => s.name))
    const servers = [...fromFile, ...fromFlags]
    if (servers.length === 0) return coding
    return mcpExecutorLayer(codingTools).pipe(
      Layer.provideMerge(mcpToolsLayer(servers)),
      // cut outputs (bash's, the MCP servers') are kept in the workspace, as codingToolsLayer keeps them
      Layer.provide(outputStoreLayer),
      Layer.provide(workspaceLayer(root)),
      Layer.provide(bashOptionsLayer({ hideEnv })),
      Layer.provide(NodeServices.layer)
    )
  })

/** The model in use now, and its name: `/model` switches it for the next requests. */
export interface ModelSwitch {
  readonly name: () => string | undefined
  /** Streams with the model in use when a request is sent. */
  readonly model: Model["Service"]
  readonly set: (name: string) => Effect.Effect<void, CliError, Scope.Scope>
}

/** The model the settings ask for (named `name`), switchable. */
export const makeModelSwitch = (
  settings: Settings,
  name: string | undefined
): Effect.Effect<ModelSwitch, CliError, Scope.Scope> =>
  Effect.map(modelOf(settings, name ?? ""), (initial) => {
    const current = { name, context: initial }
    return {
      name: () => current.name,
      model: Model.of({
        stream: (request) => Stream.suspend(() => Context.get(current.context, Model).stream(request))
      }),
      set: (next) =>
        Effect.map(modelOf(settings, next), (context) => {
          current.context = context
          current.name = next
        })
    }
  })
