/**
 * Settings of `agentloop run` and `agentloop chat`, from (highest precedence first):
 *
 * 1. command-line flags;
 * 2. environment variables (`AGENTLOOP_PROVIDER`, `AGENTLOOP_MODEL`, `AGENTLOOP_BASE_URL`,
 *    `AGENTLOOP_API_KEY_ENV`, `AGENTLOOP_CONTEXT_WINDOW`);
 * 3. the project's `.agentloop/config.json` (in the workspace);
 * 4. the user's `agentloop/config.json` in `$XDG_CONFIG_HOME` (default `~/.config`);
 * 5. built-in defaults.
 *
 * Each field is taken from the first place that sets it. API keys are never in a config file or a
 * flag: they are read from the environment variable named by `apiKeyEnv` (default
 * `OPENAI_API_KEY` / `ANTHROPIC_API_KEY` for the providers' own servers).
 *
 * @since 0.1.0
 */
import { Duration as EffectDuration, Effect, Option, Schema, SchemaAST, SchemaIssue } from "effect"
import { existsSync, readFileSync } from "node:fs"
import { homedir } from "node:os"
import * as nodePath from "node:path"
import { PROVIDER_NAMES, THINKING_LEVELS } from "./internal/Names.ts"
import { PERMISSION_MODES, readRules, RuleError } from "./Permissions.ts"
import type { PermissionMode, PermissionRules } from "./Permissions.ts"
import { stripControl } from "./Sanitize.ts"
import * as WorkspaceIO from "./WorkspaceIO.ts"

/**
 * The providers the CLI knows.
 *
 * @since 0.1.0
 * @category models
 */
export const ProviderName = Schema.Literals(PROVIDER_NAMES)
/**
 * @since 0.1.0
 * @category models
 */
export type ProviderName = typeof ProviderName.Type

const Positive = Schema.Int.check(Schema.isGreaterThan(0))
const ProviderPlace = Schema.Struct({
  baseUrl: Schema.optionalKey(Schema.String),
  apiKeyEnv: Schema.optionalKey(Schema.String)
})
const Duration = Schema.Union([Schema.Finite, Schema.String])

/**
 * The shape of a config file (every field optional; unknown fields are an error, so a typo is
 * caught).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ConfigFile = Schema.Struct({
  provider: Schema.optionalKey(ProviderName),
  model: Schema.optionalKey(Schema.String),
  baseUrl: Schema.optionalKey(Schema.String),
  apiKeyEnv: Schema.optionalKey(Schema.String),
  maxTokens: Schema.optionalKey(Positive),
  maxSteps: Schema.optionalKey(Positive),
  contextWindow: Schema.optionalKey(Positive),
  /** Added to the built-in system prompt (replaces it with `replaceSystemPrompt: true`). */
  systemPrompt: Schema.optionalKey(Schema.String),
  replaceSystemPrompt: Schema.optionalKey(Schema.Boolean),
  timeouts: Schema.optionalKey(Schema.Struct({
    firstByte: Schema.optionalKey(Duration),
    idle: Schema.optionalKey(Duration),
    request: Schema.optionalKey(Duration)
  })),
  /** MCP servers, in the Claude Desktop format (checked by `@agentloop/mcp`'s `decodeMcpServers`). */
  mcpServers: Schema.optionalKey(Schema.Unknown),
  promptCaching: Schema.optionalKey(Schema.Boolean),
  approvalTimeout: Schema.optionalKey(Duration),
  /**
   * Where each provider is, for `/model PROVIDER:NAME` switching to one that is not the session's:
   * `{ "anthropic": { "baseUrl": "…", "apiKeyEnv": "…" } }` (default: the provider's own API and key).
   */
  providers: Schema.optionalKey(Schema.Struct({
    "openai-compat": Schema.optionalKey(ProviderPlace),
    anthropic: Schema.optionalKey(ProviderPlace)
  })),
  /** The model's thinking (reasoning) level: `off`, `low`, `medium`, `high`. */
  thinking: Schema.optionalKey(Schema.Literals(THINKING_LEVELS)),
  /** The permission mode and rules (see `Permissions.ts`): rules of both files apply, the project's mode first. */
  permissions: Schema.optionalKey(Schema.Struct({
    mode: Schema.optionalKey(Schema.Literals(PERMISSION_MODES)),
    allow: Schema.optionalKey(Schema.Array(Schema.String)),
    deny: Schema.optionalKey(Schema.Array(Schema.String))
  }))
})
/**
 * @since 0.1.0
 * @category models
 */
export type ConfigFile = typeof ConfigFile.Type

/**
 * A config file that cannot be read or is not valid; the message names the file and the field.
 *
 * @since 0.1.0
 * @category errors
 */
export class ConfigError extends Schema.TaggedError<ConfigError>()("ConfigError", {
  message: Schema.String
}) {}

/**
 * The project's config file, relative to the workspace: where `a!` / `p!` answers save their rule.
 *
 * @since 0.1.0
 * @category constants
 */
export const PROJECT_CONFIG = ".agentloop/config.json"

/**
 * Where the config files are looked for: the project's, then the user's.
 *
 * @since 0.1.0
 * @category config
 */
export const configFiles = (workspace: string, env: NodeJS.ProcessEnv): ReadonlyArray<string> => {
  const xdg = env["XDG_CONFIG_HOME"]
  const home = env["HOME"] ?? homedir()
  const userFolder = xdg !== undefined && xdg.length > 0 ? xdg : nodePath.join(home, ".config")
  return [nodePath.join(workspace, PROJECT_CONFIG), nodePath.join(userFolder, "agentloop", "config.json")]
}

const decodeConfig = Schema.decodeUnknownEffect(ConfigFile)

/**
 * Reads one config file (`undefined` when there is none).
 *
 * @since 0.1.0
 * @category config
 */
export const readConfigFile = (file: string): Effect.Effect<ConfigFile | undefined, ConfigError> =>
  Effect.gen(function*() {
    if (!existsSync(file)) return undefined
    const text = yield* Effect.try({
      try: () => readFileSync(file, "utf8"),
      catch: (e) => new ConfigError({ message: `cannot read ${file}: ${(e as Error).message}` })
    })
    const json = yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: () => new ConfigError({ message: `${file} is not valid JSON` })
    })
    return yield* decodeConfig(json, { onExcessProperty: "error" }).pipe(
      Effect.mapError((e) =>
        new ConfigError({ message: `${file} is not a valid agentloop config: ${describeConfigIssue(e.issue)}` })
      )
    )
  })

const formatIssue = SchemaIssue.makeFormatterDefault()

/** The first problem of an issue tree, with the path of fields leading to it. */
const firstProblem = (
  issue: SchemaIssue.Issue,
  path: ReadonlyArray<PropertyKey> = []
): { readonly path: ReadonlyArray<PropertyKey>; readonly issue: SchemaIssue.Issue } => {
  switch (issue._tag) {
    case "Pointer":
      return firstProblem(issue.issue, [...path, ...issue.path])
    case "Composite":
      return firstProblem(issue.issues[0], path)
    default:
      return { path, issue }
  }
}

/** The fields a config object at `path` may have (`timeouts` → firstByte, idle, request). */
const fieldsAt = (path: ReadonlyArray<PropertyKey>): ReadonlyArray<string> => {
  let ast: SchemaAST.AST | undefined = ConfigFile.ast
  for (const key of path) {
    ast = ast !== undefined && SchemaAST.isObjects(ast) ?
      ast.propertySignatures.find((p) => p.name === key)?.type :
      undefined
  }
  return ast !== undefined && SchemaAST.isObjects(ast) ? ast.propertySignatures.map((p) => String(p.name)) : []
}

/** How many single-character edits turn `a` into `b`. */
const editDistance = (a: string, b: string): number => {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      row.push(Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)))
    }
    previous = row
  }
  return previous[b.length]!
}

/** The valid field nearest to a misspelt one, when it is close (a few letters apart, case aside). */
const nearestField = (name: string, fields: ReadonlyArray<string>): string | undefined => {
  let best: { readonly field: string; readonly distance: number } | undefined
  for (const field of fields) {
    const distance = editDistance(name.toLowerCase(), field.toLowerCase())
    if (best === undefined || distance < best.distance) best = { field, distance }
  }
  return best !== undefined && best.distance <= Math.max(2, Math.floor(name.length / 3)) ? best.field : undefined
}

/**
 * A config file's first problem in one line, naming the field: an unknown field with the valid one
 * nearest to it (`unknown field "modle" (did you mean "model"?)`), or what a field's value should be.
 */
const describeConfigIssue = (issue: SchemaIssue.Issue): string => {
  const found = firstProblem(issue)
  const name = found.path.map(String).join(".")
  if (found.issue._tag === "UnexpectedKey") {
    const parent = found.path.slice(0, -1)
    const fields = fieldsAt(parent)
    const nearest = nearestField(String(found.path[found.path.length - 1] ?? ""), fields)
    const prefix = parent.length === 0 ? "" : `${parent.map(String).join(".")}.`
    // (no close name: the fields of a nested object are few enough to list; the top level's are in the README)
    const hint = nearest !== undefined ?
      ` (did you mean "${prefix}${nearest}"?)` :
      parent.length > 0 && fields.length > 0 ?
      ` (the fields of ${prefix.slice(0, -1)}: ${fields.join(", ")})` :
      " (the README's Configuration section lists the fields)"
    return `unknown field "${stripControl(name)}"${hint}`
  }
  // (the first line: the path is named here)
  const what = formatIssue(found.issue).split("\n")[0]!
  return name.length === 0 ? stripControl(what) : `the field "${stripControl(name)}": ${stripControl(what)}`
}

/**
 * What the flags of `run` / `chat` say (unset flags are `None`).
 *
 * @since 0.1.0
 * @category models
 */
export interface FlagSettings {
  readonly provider: Option.Option<ProviderName>
  readonly model: Option.Option<string>
  readonly baseUrl: Option.Option<string>
  readonly apiKeyEnv: Option.Option<string>
  readonly maxTokens: Option.Option<number>
  readonly maxSteps: Option.Option<number>
  readonly contextWindow: Option.Option<number>
  readonly firstByteTimeout: Option.Option<string>
  readonly idleTimeout: Option.Option<string>
  readonly requestTimeout: Option.Option<string>
  /** `--prompt-cache` / `--no-prompt-cache` (Anthropic's cache breakpoints). */
  readonly promptCache: Option.Option<boolean>
  /** `--approval-timeout DURATION`. */
  readonly approvalTimeout: Option.Option<string>
  /** `--system-prompt TEXT`: replaces the built-in system prompt. */
  readonly systemPrompt: Option.Option<string>
  /** `--mode MODE` (`--yes` is `--mode yes`). */
  readonly mode?: Option.Option<PermissionMode> | undefined
  /** `--thinking LEVEL`. */
  readonly thinking?: Option.Option<(typeof THINKING_LEVELS)[number]> | undefined
}

/**
 * The settings in effect, with where each provider setting came from (for messages).
 *
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  readonly provider: ProviderName | undefined
  readonly model: string | undefined
  readonly baseUrl: string | undefined
  readonly apiKeyEnv: string | undefined
  readonly maxTokens: number | undefined
  readonly maxSteps: number
  readonly contextWindow: number | undefined
  /** Added to the built-in system prompt (the config's `systemPrompt`). */
  readonly systemPrompt: string | undefined
  /**
   * Stands instead of the built-in system prompt: `--system-prompt`, or the config's `systemPrompt`
   * with `replaceSystemPrompt: true`.
   */
  readonly systemPromptReplacement: string | undefined
  readonly timeouts: {
    readonly firstByte?: number | string
    readonly idle?: number | string
    readonly request?: number | string
  }
  readonly mcpServers: unknown
  /** Anthropic's prompt caching (`promptCaching`); undefined: the provider's default (on). */
  readonly promptCaching: boolean | undefined
  /** A question for approval not answered within this time is answered denied; undefined: no limit. */
  readonly approvalTimeout: EffectDuration.Duration | undefined
  /** Where the other providers are (the config's `providers`), for switching to one. */
  readonly providers: {
    readonly [P in "openai-compat" | "anthropic"]?: { readonly baseUrl?: string; readonly apiKeyEnv?: string }
  }
  /** The thinking level (`--thinking`, the config's `thinking`); undefined: off. */
  readonly thinking: (typeof THINKING_LEVELS)[number] | undefined
  /** The permission mode the flags or a config file name; undefined: `ask`. */
  readonly permissionMode: PermissionMode | undefined
  /** The permission rules of every config file found, each with its file. */
  readonly rules: PermissionRules
  /** The config files that were found, in precedence order. */
  readonly files: ReadonlyArray<string>
}

/**
 * The default largest number of model requests per run.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_RUN_MAX_STEPS = 50

const envInt = (env: NodeJS.ProcessEnv, name: string): Effect.Effect<number | undefined, ConfigError> => {
  const raw = env[name]
  if (raw === undefined || raw === "") return Effect.succeed(undefined)
  const n = Number(raw)
  return Number.isInteger(n) && n > 0 ?
    Effect.succeed(n) :
    Effect.fail(new ConfigError({ message: `${name} must be a positive whole number, got "${raw}"` }))
}

const envProvider = (env: NodeJS.ProcessEnv): Effect.Effect<ProviderName | undefined, ConfigError> => {
  const raw = env["AGENTLOOP_PROVIDER"]
  if (raw === undefined || raw === "") return Effect.succeed(undefined)
  return Schema.is(ProviderName)(raw) ?
    Effect.succeed(raw) :
    Effect.fail(
      new ConfigError({ message: `AGENTLOOP_PROVIDER must be scripted, openai-compat or anthropic, got "${raw}"` })
    )
}

/** A positive duration: seconds (a number, or digits) or e.g. "3 days", "90 seconds". */
const approvalTimeoutOf = (
  value: number | string | undefined,
  where: string
): Effect.Effect<EffectDuration.Duration | undefined, ConfigError> => {
  if (value === undefined) return Effect.succeed(undefined)
  const input = typeof value === "number" || /^\d+(\.\d+)?$/.test(value.trim())
    ? `${Number(value)} seconds`
    : value.trim()
  const parsed = EffectDuration.fromInput(input as EffectDuration.Input)
  return Option.isSome(parsed) && EffectDuration.isFinite(parsed.value) && EffectDuration.toMillis(parsed.value) > 0 ?
    Effect.succeed(parsed.value) :
    Effect.fail(
      new ConfigError({
        message: `${where} must be a positive duration (seconds, or e.g. "3 days", "90 minutes"), got "${value}"`
      })
    )
}

const nonEmpty = (s: string | undefined) => (s === undefined || s === "" ? undefined : s)

/**
 * Resolves the settings from flags, environment and config files (see the module's description).
 *
 * @since 0.1.0
 * @category config
 */
export const resolveSettings = (
  flags: FlagSettings,
  workspace: string,
  env: NodeJS.ProcessEnv
): Effect.Effect<Settings, ConfigError> =>
  Effect.gen(function*() {
    const candidates = configFiles(workspace, env)
    const files: Array<ConfigFile> = []
    const found: Array<string> = []
    for (const file of candidates) {
      const config = yield* readConfigFile(file)
      if (config !== undefined) {
        files.push(config)
        found.push(file)
      }
    }
    const fromFiles = <K extends keyof ConfigFile>(key: K): ConfigFile[K] | undefined => {
      for (const f of files) if (f[key] !== undefined) return f[key]
      return undefined
    }
    const pick = <A>(flag: Option.Option<A>, fromEnv: A | undefined, key: keyof ConfigFile): A | undefined =>
      Option.isSome(flag) ? flag.value : fromEnv !== undefined ? fromEnv : (fromFiles(key) as A | undefined)
    const fileTimeouts = fromFiles("timeouts") ?? {}
    const timeout = (flag: Option.Option<string>, key: "firstByte" | "idle" | "request") => {
      const value = Option.isSome(flag) ? flag.value : fileTimeouts[key]
      return value === undefined
        ? {}
        : { [key]: typeof value === "string" && /^\d+(\.\d+)?$/.test(value) ? `${value} seconds` : value }
    }
    return {
      provider: pick(flags.provider, yield* envProvider(env), "provider"),
      model: pick(flags.model, nonEmpty(env["AGENTLOOP_MODEL"]), "model"),
      baseUrl: pick(flags.baseUrl, nonEmpty(env["AGENTLOOP_BASE_URL"]), "baseUrl"),
      apiKeyEnv: pick(flags.apiKeyEnv, nonEmpty(env["AGENTLOOP_API_KEY_ENV"]), "apiKeyEnv"),
      maxTokens: pick(flags.maxTokens, undefined, "maxTokens"),
      maxSteps: pick(flags.maxSteps, undefined, "maxSteps") ?? DEFAULT_RUN_MAX_STEPS,
      contextWindow: pick(flags.contextWindow, yield* envInt(env, "AGENTLOOP_CONTEXT_WINDOW"), "contextWindow"),
      systemPrompt: fromFiles("replaceSystemPrompt") === true ? undefined : fromFiles("systemPrompt"),
      systemPromptReplacement: Option.isSome(flags.systemPrompt) ?
        flags.systemPrompt.value :
        fromFiles("replaceSystemPrompt") === true ?
        fromFiles("systemPrompt") :
        undefined,
      timeouts: {
        ...timeout(flags.firstByteTimeout, "firstByte"),
        ...timeout(flags.idleTimeout, "idle"),
        ...timeout(flags.requestTimeout, "request")
      },
      mcpServers: fromFiles("mcpServers"),
      promptCaching: pick(flags.promptCache, undefined, "promptCaching"),
      approvalTimeout: yield* approvalTimeoutOf(
        Option.isSome(flags.approvalTimeout) ? flags.approvalTimeout.value : fromFiles("approvalTimeout"),
        Option.isSome(flags.approvalTimeout) ? "--approval-timeout" : "approvalTimeout"
      ),
      providers: fromFiles("providers") ?? {},
      thinking: flags.thinking !== undefined && Option.isSome(flags.thinking)
        ? flags.thinking.value
        : fromFiles("thinking"),
      permissionMode: flags.mode !== undefined && Option.isSome(flags.mode) ?
        flags.mode.value :
        fromFiles("permissions")?.mode ??
          files.map((f) => f.permissions?.mode).find((m) => m !== undefined),
      rules: yield* rulesOf(files, found),
      files: found
    }
  })

/** The rules of every config file, each with its file; a rule that cannot be read fails naming it. */
const rulesOf = (files: ReadonlyArray<ConfigFile>, found: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const allow: Array<PermissionRules["allow"][number]> = []
    const deny: Array<PermissionRules["deny"][number]> = []
    for (let i = 0; i < files.length; i++) {
      const lists = files[i]!.permissions
      if (lists === undefined) continue
      const read = readRules(lists, found[i]!)
      if (read instanceof RuleError) return yield* Effect.fail(new ConfigError({ message: read.message }))
      allow.push(...read.allow)
      deny.push(...read.deny)
    }
    return { allow, deny } satisfies PermissionRules
  })

/**
 * Adds an allow rule to the project's config (`.agentloop/config.json`, created when missing),
 * keeping the rest of the file; written through the confined writer (never through a link, never
 * outside the workspace). Returns the file's path relative to the workspace.
 *
 * @since 0.1.0
 * @category config
 */
export const saveAllowRule = (workspace: string, rule: string): Effect.Effect<string, ConfigError> =>
  Effect.gen(function*() {
    const relative = PROJECT_CONFIG
    const file = nodePath.join(workspace, relative)
    const existing = yield* readConfigFile(file)
    const raw = existing === undefined ? {} : (JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>)
    const permissions = (raw["permissions"] ?? {}) as { allow?: Array<string> }
    const allow = permissions.allow ?? []
    if (!allow.includes(rule)) allow.push(rule)
    const next = { ...raw, permissions: { ...permissions, allow } }
    yield* WorkspaceIO.makeDirectory(workspace, ".agentloop").pipe(
      Effect.andThen(WorkspaceIO.writeFile(workspace, relative, `${JSON.stringify(next, null, 2)}\n`)),
      Effect.mapError((e) => new ConfigError({ message: `cannot save the rule to ${file}: ${e.message}` }))
    )
    return relative
  })

/**
 * Flag settings with no flag given: for the commands that read the config without `run`'s and
 * `chat`'s flags (`mcp login`, `mcp serve`, `replay`).
 *
 * @since 0.1.0
 * @category config
 */
export const NO_FLAGS: FlagSettings = {
  provider: Option.none(),
  model: Option.none(),
  baseUrl: Option.none(),
  apiKeyEnv: Option.none(),
  maxTokens: Option.none(),
  maxSteps: Option.none(),
  contextWindow: Option.none(),
  firstByteTimeout: Option.none(),
  idleTimeout: Option.none(),
  requestTimeout: Option.none(),
  promptCache: Option.none(),
  approvalTimeout: Option.none(),
  systemPrompt: Option.none()
}
