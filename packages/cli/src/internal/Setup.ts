/**
 * What `run` and `chat` set up before a run: the workspace, the model the settings ask for, and
 * the tools.
 */
import { Model } from "@agentloop/core"
import {
  ANTHROPIC_BASE_URL,
  anthropicLayer,
  knownModels,
  listModels,
  modelInfo,
  OPENAI_BASE_URL,
  openAiCompatLayer
} from "@agentloop/providers"
import type { AnthropicOptions, OpenAiCompatOptions, ProviderConfigError } from "@agentloop/providers"
import { bashOptionsLayer, codingTools, codingToolsLayer, outputStoreLayer, workspaceLayer } from "@agentloop/tools"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Context, Effect, Layer, Option, Stream } from "effect"
import type { Duration, Scope } from "effect"
import { realpathSync, statSync } from "node:fs"
import * as nodePath from "node:path"
import { CliError } from "../CliError.ts"
import type { Settings } from "../Config.ts"
import { stripControl } from "../Sanitize.ts"
import { mcpUiLayers } from "./McpPrompts.ts"
import type { McpUi } from "./McpPrompts.ts"
import { THINKING_LEVELS } from "./Names.ts"

/**
 * The HTTP client the providers send with: Node's own (node:http and node:https, connections kept
 * alive between a run's requests, closed with the run's scope). fetch would do the same, but loading
 * Node's fetch (undici) costs a one-turn run about a tenth of its start-up.
 */
const httpClientLayer = NodeHttpClient.layerNodeHttpOptions({ keepAlive: true })

/** The model of a provider with these options, on the CLI's HTTP client (`run`, `chat` and `demo`). */
export const providerModelLayer = (
  provider: "anthropic" | "openai-compat",
  options: OpenAiCompatOptions & AnthropicOptions
): Layer.Layer<Model, ProviderConfigError> =>
  (provider === "anthropic" ? anthropicLayer(options) : openAiCompatLayer(options)).pipe(
    Layer.provide(httpClientLayer)
  )

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

export { THINKING_LEVELS }

/** A `--thinking` level. */
export type Thinking = (typeof THINKING_LEVELS)[number]

/** Anthropic's extended-thinking budget per level (tokens). */
export const THINKING_BUDGETS: Readonly<Record<Exclude<Thinking, "off">, number>> = {
  low: 2048,
  medium: 8192,
  high: 24576
}

/** What a level turns into for a provider: Anthropic's thinking budget (with room left to answer), OpenAI's effort. */
const thinkingOptions = (
  provider: "openai-compat" | "anthropic",
  thinking: Thinking,
  maxTokens: number | undefined
) => {
  if (thinking === "off") return {}
  if (provider === "openai-compat") return { reasoningEffort: thinking }
  const budget = THINKING_BUDGETS[thinking]
  // the budget must be below max_tokens: the answer gets at least 8192 tokens beside it
  return { thinking: { budgetTokens: budget }, maxTokens: Math.max(maxTokens ?? 0, budget + 8192) }
}

/**
 * A model named `provider:model` (`anthropic:claude-sonnet-4-5`) switches provider: to where the
 * config's `providers` says it is, else its own API and key variable.
 */
export const splitModelName = (
  settings: Settings,
  name: string
): { readonly settings: Settings; readonly model: string } => {
  const match = /^(openai-compat|anthropic):(.+)$/.exec(name)
  if (match === null || match[1] === settings.provider) return { settings, model: match?.[2] ?? name }
  const provider = match[1] as "openai-compat" | "anthropic"
  const place = settings.providers[provider]
  return {
    settings: {
      ...settings,
      provider,
      baseUrl: place?.baseUrl,
      apiKeyEnv: place?.apiKeyEnv,
      promptCaching: undefined
    },
    model: match[2]!
  }
}

/**
 * The provider of a model the price table knows (`gpt-4.1`: openai-compat, `claude-sonnet-4-5`:
 * anthropic); undefined for any other name. A suggestion for messages and `/model`'s list, never a
 * choice made for the user.
 */
export const knownProviderOf = (model: string): "openai-compat" | "anthropic" | undefined => {
  if (modelInfo(model).contextWindow === undefined) return undefined
  return /^(?:[a-z0-9_.-]+\/)?claude-/i.test(model.trim()) ? "anthropic" : "openai-compat"
}

/** What the CLI says when no provider is set: the choices, and where to set one. */
const noProviderMessage = (model: string): string => {
  const where = "or set AGENTLOOP_PROVIDER or \"provider\" in .agentloop/config.json"
  if (model.length === 0) {
    return "no model configured: pass --provider openai-compat|anthropic and --model NAME, set AGENTLOOP_PROVIDER " +
      "and AGENTLOOP_MODEL, or write .agentloop/config.json (see agentloop --help and the README)"
  }
  const shown = stripControl(model)
  const known = knownProviderOf(model)
  return known === undefined ?
    `the model ${shown} needs a provider: add --provider openai-compat (OpenAI, Ollama, llama.cpp, vLLM, ` +
    `LM Studio...) or --provider anthropic, ${where}` :
    `the model ${shown} needs a provider: add --provider ${known} (${shown} is ${
      known === "anthropic" ? "an Anthropic" : "an OpenAI"
    } model; the choices are openai-compat and anthropic), ${where}`
}

/**
 * The environment variable the CLI reads a provider's key from when no `apiKeyEnv` is set: the
 * provider's own (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`), and only for the provider's own server
 * (the host of its default API root), so that key never goes to another host.
 */
const defaultKeyVariable = (provider: "openai-compat" | "anthropic", baseUrl: URL): string | undefined =>
  provider === "anthropic" ?
    baseUrl.hostname === new URL(ANTHROPIC_BASE_URL).hostname ? "ANTHROPIC_API_KEY" : undefined :
    baseUrl.hostname === new URL(OPENAI_BASE_URL).hostname
    ? "OPENAI_API_KEY"
    : undefined

/** The API root to use, checked in the CLI's words (`--base-url`, the config's `baseUrl`). */
const baseUrlOf = (settings: Settings, provider: "openai-compat" | "anthropic"): Effect.Effect<URL, CliError> =>
  Effect.suspend(() => {
    const given = settings.baseUrl ?? (provider === "anthropic" ? ANTHROPIC_BASE_URL : OPENAI_BASE_URL)
    let url: URL | undefined
    try {
      url = new URL(given)
    } catch {
      url = undefined
    }
    if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) {
      return Effect.fail(
        new CliError(
          `the API root (--base-url, baseUrl) must be an http:// or https:// URL, got "${stripControl(given)}"`
        )
      )
    }
    if (url.username !== "" || url.password !== "") {
      // (the URL is not repeated: it holds a secret)
      return Effect.fail(
        new CliError(
          "the API root (--base-url, baseUrl) must not contain credentials: put the API key in an environment " +
            "variable and name it with --api-key-env (apiKeyEnv in .agentloop/config.json)"
        )
      )
    }
    return Effect.succeed(url)
  })

/** Builds the model the settings ask for. */
export const modelOf = (settings: Settings, model: string, thinking: Thinking = settings.thinking ?? "off") =>
  Effect.gen(function*() {
    const provider = settings.provider
    if (provider === undefined) return yield* Effect.fail(new CliError(noProviderMessage(model)))
    if (provider === "scripted") {
      return yield* Effect.fail(
        new CliError("the scripted model only plays the demo (agentloop demo); choose openai-compat or anthropic")
      )
    }
    const baseUrl = yield* baseUrlOf(settings, provider)
    // the key: from the variable apiKeyEnv names, else from the provider's own one for its own server
    const keyVariable = settings.apiKeyEnv ?? defaultKeyVariable(provider, baseUrl)
    let apiKey: string | undefined
    if (keyVariable !== undefined) {
      apiKey = process.env[keyVariable]
      if (apiKey === undefined || apiKey.length === 0) {
        return yield* Effect.fail(
          new CliError(
            settings.apiKeyEnv !== undefined ?
              `the environment variable ${keyVariable} (named by --api-key-env or apiKeyEnv) is not set` :
              `no API key for ${baseUrl.host}: set ${keyVariable}, or name the variable that holds the key with ` +
              "--api-key-env (apiKeyEnv in .agentloop/config.json)"
          )
        )
      }
    }
    const options = {
      model,
      baseUrl: settings.baseUrl,
      apiKey,
      maxTokens: settings.maxTokens,
      ...thinkingOptions(provider, thinking, settings.maxTokens),
      ...(provider === "anthropic" && settings.promptCaching !== undefined
        ? { promptCaching: settings.promptCaching }
        : {}),
      ...(Object.keys(settings.timeouts).length > 0 ?
        { timeouts: settings.timeouts as { readonly [K in keyof Settings["timeouts"]]: Duration.Input } } :
        {})
    }
    const layer = providerModelLayer(provider, options)
    const context = yield* Layer.build(layer).pipe(Effect.mapError((e) => new CliError(e.message)))
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
  flags: { readonly mcp: ReadonlyArray<string>; readonly mcpUrl: ReadonlyArray<string> },
  /** How the servers' questions and sampling requests reach the user and the model. */
  mcpAnswers?: { readonly ui: McpUi; readonly model: Model["Service"] }
) =>
  Effect.gen(function*() {
    const hideEnv = settings.apiKeyEnv === undefined ? [] : [settings.apiKeyEnv]
    const coding = codingToolsLayer(root, { bash: { hideEnv } })
    // the MCP client (and its SDK) loads only when a server is configured
    if (settings.mcpServers === undefined && flags.mcp.length === 0 && flags.mcpUrl.length === 0) return coding
    const { decodeMcpServers, mcpExecutorLayer, mcpToolsLayer, rootOfDirectory, serversFromFlags } = yield* Effect
      .promise(() => import("@agentloop/mcp"))
    const fromFile = settings.mcpServers === undefined ? [] : yield* decodeMcpServers(settings.mcpServers)
    const fromFlags = yield* serversFromFlags({ mcp: flags.mcp, mcpUrl: flags.mcpUrl }, fromFile.map((s) => s.name))
    const servers = [...fromFile, ...fromFlags]
    if (servers.length === 0) return coding
    // the servers' roots are the workspace; their questions and sampling requests go to the user
    const answers = mcpAnswers === undefined ? Layer.empty : yield* mcpUiLayers(mcpAnswers.ui, mcpAnswers.model)
    return mcpExecutorLayer(codingTools).pipe(
      Layer.provideMerge(mcpToolsLayer(servers, { roots: [rootOfDirectory(root)] }).pipe(Layer.provide(answers))),
      // cut outputs (bash's, the MCP servers') are kept in the workspace, as codingToolsLayer keeps them
      Layer.provide(outputStoreLayer),
      Layer.provide(workspaceLayer(root)),
      Layer.provide(bashOptionsLayer({ hideEnv })),
      Layer.provide(NodeServices.layer)
    )
  })

/** The model in use now, and its name: `/model` switches it for the next requests, `/thinking` its level. */
export interface ModelSwitch {
  readonly name: () => string | undefined
  /** The provider in use now (`/model anthropic:…` switches it). */
  readonly provider: () => string | undefined
  readonly thinking: () => Thinking
  /** Streams with the model in use when a request is sent. */
  readonly model: Model["Service"]
  /** Switches to `name` (`provider:model` switches provider too). */
  readonly set: (name: string) => Effect.Effect<void, CliError, Scope.Scope>
  readonly setThinking: (level: Thinking) => Effect.Effect<void, CliError, Scope.Scope>
  /** The settings of the provider in use now. */
  readonly settings: () => Settings
}

/** The model the settings ask for (named `name`), switchable. */
export const makeModelSwitch = (
  settings: Settings,
  name: string | undefined
): Effect.Effect<ModelSwitch, CliError, Scope.Scope> =>
  Effect.map(modelOf(settings, name ?? ""), (initial) => {
    const current = { name, settings, thinking: settings.thinking ?? ("off" as Thinking), context: initial }
    return {
      name: () => current.name,
      provider: () => current.settings.provider,
      thinking: () => current.thinking,
      model: Model.of({
        stream: (request) => Stream.suspend(() => Context.get(current.context, Model).stream(request)),
        // (for traces: the model in use now)
        describe: () => Context.get(current.context, Model).describe?.()
      }),
      set: (next) => {
        const chosen = splitModelName(current.settings, next)
        return Effect.map(modelOf(chosen.settings, chosen.model, current.thinking), (context) => {
          current.context = context
          current.name = chosen.model
          current.settings = chosen.settings
        })
      },
      setThinking: (level) =>
        Effect.map(modelOf(current.settings, current.name ?? "", level), (context) => {
          current.context = context
          current.thinking = level
        }),
      settings: () => current.settings
    }
  })

const tokens = (
  n: number
) => (n >= 1_000_000 ? `${(n / 1_000_000).toFixed(n % 1_000_000 === 0 ? 0 : 2)}M` : `${Math.round(n / 1000)}k`)

/**
 * What `/model` shows: the model in use, the models the provider's server lists (its model-list
 * endpoint; a server that cannot list says why), and the models the price table knows, by provider.
 */
export const modelsOverview = (models: ModelSwitch): Effect.Effect<string> =>
  Effect.gen(function*() {
    const settings = models.settings()
    const provider = settings.provider
    const at = settings.baseUrl === undefined ? "" : ` at ${settings.baseUrl}`
    const lines = [`model: ${provider ?? "?"} ${models.name() ?? "?"}${at} · thinking ${models.thinking()}`]
    if (provider === "openai-compat" || provider === "anthropic") {
      const apiKey = settings.apiKeyEnv === undefined ? undefined : process.env[settings.apiKeyEnv]
      const listed = yield* Effect.result(listModels({ provider, baseUrl: settings.baseUrl, apiKey }))
      const where = settings.baseUrl ?? (provider === "anthropic" ? ANTHROPIC_BASE_URL : OPENAI_BASE_URL)
      if (listed._tag === "Success") {
        const ids = listed.success.map((m) => m.id)
        lines.push(`${provider} at ${where} lists ${ids.length} model(s):`)
        for (let i = 0; i < Math.min(ids.length, 60); i += 4) lines.push(`  ${ids.slice(i, i + 4).join("  ")}`)
        if (ids.length > 60) lines.push(`  … and ${ids.length - 60} more`)
      } else {
        lines.push(`${provider} at ${where}: no model list (${listed.failure.message})`)
      }
    }
    lines.push("known models (context window, prices in the price table):")
    const known = Object.entries(knownModels).map(([name, info]) =>
      `${knownProviderOf(name) ?? "openai-compat"}:${name} (${tokens(info.contextWindow ?? 0)})`
    )
    for (let i = 0; i < known.length; i += 3) lines.push(`  ${known.slice(i, i + 3).join("  ")}`)
    lines.push("switch: /model NAME (same provider) or /model PROVIDER:NAME; /thinking off|low|medium|high")
    return lines.map(stripControl).join("\n")
  })
