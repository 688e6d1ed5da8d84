/**
 * Which MCP servers to load: the configuration of one server, the `mcpServers` section of a config
 * file in the format Claude Desktop and other agents use, and the `--mcp` / `--mcp-url` flags.
 *
 * ```json
 * { "mcpServers": {
 *     "everything": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"] },
 *     "remote": { "url": "https://mcp.example.com/mcp", "headers": { "Authorization": "Bearer …" } } } }
 * ```
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"
import { McpConfigError } from "./Errors.ts"

/**
 * A server started as a child process and spoken to over its stdin and stdout.
 *
 * The process runs in its own process group, with only `HOME`, `LOGNAME`, `PATH`, `SHELL`,
 * `TERM` and `USER` from this process's environment plus `env` (nothing else, so no secret of the
 * agent leaks to it). `cwd` defaults to this process's working directory.
 *
 * @since 0.1.0
 * @category models
 */
export interface StdioServerConfig {
  readonly name: string
  readonly transport: "stdio"
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly cwd?: string | undefined
  /** A call still running after this many milliseconds is cancelled and answered with a timeout error. */
  readonly timeoutMs?: number | undefined
  /**
   * The most characters of text one result of this server's tools shows the model (default
   * `MCP_MAX_OUTPUT_CHARS`); a longer result keeps its first third and last two thirds around a
   * notice, and its whole text goes to the `OutputStore` when there is one.
   */
  readonly maxOutputChars?: number | undefined
}

/**
 * How an HTTP server is authorized with OAuth (see `Auth.ts`). Everything is optional: by default
 * the client registers itself dynamically (or uses `clientMetadataUrl`) and asks for the scopes
 * the server names.
 *
 * - `clientId` / `clientSecret`: credentials registered with the authorization server beforehand
 *   (no dynamic registration).
 * - `clientMetadataUrl`: the https URL of this client's client ID metadata document, used as its
 *   client ID where the authorization server supports it.
 * - `scope`: the scopes to ask for when neither the server's challenge nor its metadata names any.
 * - `grant: "client_credentials"`: a machine client (no user): `clientId` with `clientSecret`
 *   (`client_secret_basic`) or `privateKey` (a PEM key, `private_key_jwt`, signed with
 *   `signingAlgorithm`, default `ES256`).
 * - `crossAppAccess`: enterprise-managed authorization (SEP-990): the user's ID token from the
 *   enterprise identity provider (`idToken`) is exchanged at the provider's `tokenEndpoint`
 *   (RFC 8693, as `clientId` there) for an identity assertion grant (ID-JAG) for this server's
 *   authorization server and resource, which the client then presents there in a JWT-bearer grant
 *   (RFC 7523) with `clientId` / `clientSecret`. No browser, no user interaction.
 * - `workloadIdentity`: workload identity federation (SEP-1933): the workload's own identity token
 *   (a JWT its platform issues for this authorization server: `token`, or `tokenFile`, read again
 *   for every token request, as platforms rotate it) presented in a JWT-bearer grant (RFC 7523)
 *   as `clientId`. No user.
 *
 * `clientSecret`, `privateKey`, `crossAppAccess.idToken` and the workload's token are secrets: they never appear in
 * errors or events.
 *
 * @since 0.1.0
 * @category models
 */
export interface McpOAuthConfig {
  readonly clientId?: string | undefined
  readonly clientSecret?: string | undefined
  readonly clientMetadataUrl?: string | undefined
  readonly scope?: string | undefined
  readonly grant?: "authorization_code" | "client_credentials" | undefined
  readonly privateKey?: string | undefined
  readonly signingAlgorithm?: string | undefined
  readonly crossAppAccess?: McpCrossAppAccess | undefined
  readonly workloadIdentity?: McpWorkloadIdentity | undefined
}

/**
 * The workload's identity token of `McpOAuthConfig.workloadIdentity` (SEP-1933): `token`, or
 * `tokenFile` (read for every token request).
 *
 * @since 0.1.0
 * @category models
 */
export type McpWorkloadIdentity = { readonly token: string } | { readonly tokenFile: string }

/**
 * The enterprise identity provider of `McpOAuthConfig.crossAppAccess` (SEP-990).
 *
 * @since 0.1.0
 * @category models
 */
export interface McpCrossAppAccess {
  /** The identity provider's token endpoint (where the ID token is exchanged for an ID-JAG). */
  readonly tokenEndpoint: string
  /** This client's id at the identity provider. */
  readonly clientId?: string | undefined
  /** The user's ID token from the identity provider (a secret). */
  readonly idToken: string
}

/**
 * A server reached over MCP's Streamable HTTP transport. `headers` are sent with every request
 * (for an `Authorization` header, say); they never appear in errors or events.
 *
 * A server that asks for authorization (`401`) is authorized with OAuth, unless `headers` has an
 * `Authorization` header or `oauth` is `false`; `oauth` configures how (see `McpOAuthConfig`).
 *
 * @since 0.1.0
 * @category models
 */
export interface HttpServerConfig {
  readonly name: string
  readonly transport: "http"
  readonly url: string
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly oauth?: McpOAuthConfig | false | undefined
  /** A call still running after this many milliseconds is cancelled and answered with a timeout error. */
  readonly timeoutMs?: number | undefined
  /**
   * The most characters of text one result of this server's tools shows the model (default
   * `MCP_MAX_OUTPUT_CHARS`); a longer result keeps its first third and last two thirds around a
   * notice, and its whole text goes to the `OutputStore` when there is one.
   */
  readonly maxOutputChars?: number | undefined
}

/**
 * One MCP server to load. `name` becomes the prefix of its tools' names (see `toolNameFor`).
 *
 * @since 0.1.0
 * @category models
 */
export type McpServerConfig = StdioServerConfig | HttpServerConfig

/**
 * How many characters of text one MCP tool result shows the model unless its server's
 * `maxOutputChars` says otherwise: 30,000, what `bash` shows (`BASH_OUTPUT_HEAD` + `BASH_OUTPUT_TAIL`).
 *
 * @since 0.1.0
 * @category constants
 */
export const MCP_MAX_OUTPUT_CHARS = 30_000

const TimeoutMs = Schema.Finite.check(Schema.isGreaterThan(0))
const MaxOutputChars = Schema.Int.check(Schema.isGreaterThanOrEqualTo(100))

const isHttpUrl = (url: string): boolean => {
  if (!URL.canParse(url)) return false
  const protocol = new URL(url).protocol
  return protocol === "http:" || protocol === "https:"
}

const HttpUrl = Schema.String.check(Schema.makeFilter(isHttpUrl, { expected: "an http:// or https:// URL" }))

/**
 * One stdio entry of `mcpServers`:
 * `{ "command", "args"?, "env"?, "cwd"?, "type"?: "stdio", "timeoutMs"?, "maxOutputChars"? }`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const StdioServerEntry = Schema.Struct({
  type: Schema.optionalKey(Schema.Literal("stdio")),
  command: Schema.NonEmptyString,
  args: Schema.optionalKey(Schema.Array(Schema.String)),
  env: Schema.optionalKey(Schema.Record(Schema.String, Schema.String)),
  cwd: Schema.optionalKey(Schema.String),
  timeoutMs: Schema.optionalKey(TimeoutMs),
  maxOutputChars: Schema.optionalKey(MaxOutputChars)
})

/**
 * The `oauth` of an HTTP entry of `mcpServers` (see `McpOAuthConfig`), or `false`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const McpOAuthEntry = Schema.Union([
  Schema.Struct({
    clientId: Schema.optionalKey(Schema.NonEmptyString),
    clientSecret: Schema.optionalKey(Schema.String),
    clientMetadataUrl: Schema.optionalKey(Schema.String),
    scope: Schema.optionalKey(Schema.String),
    grant: Schema.optionalKey(Schema.Literals(["authorization_code", "client_credentials"])),
    privateKey: Schema.optionalKey(Schema.String),
    signingAlgorithm: Schema.optionalKey(Schema.String),
    crossAppAccess: Schema.optionalKey(Schema.Struct({
      tokenEndpoint: HttpUrl,
      clientId: Schema.optionalKey(Schema.NonEmptyString),
      idToken: Schema.NonEmptyString
    })),
    workloadIdentity: Schema.optionalKey(Schema.Union([
      Schema.Struct({ token: Schema.NonEmptyString }),
      Schema.Struct({ tokenFile: Schema.NonEmptyString })
    ]))
  }),
  Schema.Literal(false)
])

/**
 * One Streamable HTTP entry of `mcpServers`:
 * `{ "url", "headers"?, "oauth"?, "type"?: "http" | "streamable-http", "timeoutMs"?, "maxOutputChars"? }`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const HttpServerEntry = Schema.Struct({
  type: Schema.optionalKey(Schema.Literals(["http", "streamable-http", "streamableHttp"])),
  url: HttpUrl,
  headers: Schema.optionalKey(Schema.Record(Schema.String, Schema.String)),
  oauth: Schema.optionalKey(McpOAuthEntry),
  timeoutMs: Schema.optionalKey(TimeoutMs),
  maxOutputChars: Schema.optionalKey(MaxOutputChars)
})

/**
 * One entry of `mcpServers`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const McpServerEntry = Schema.Union([StdioServerEntry, HttpServerEntry])
/**
 * @since 0.1.0
 * @category models
 */
export type McpServerEntry = typeof McpServerEntry.Type

/**
 * The value of a config file's `mcpServers` key: server name → entry. Put it in a config schema
 * as `mcpServers: Schema.optionalKey(McpServersSection)` and turn it into server configs with
 * `serversFromSection`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const McpServersSection = Schema.Record(Schema.String, McpServerEntry)
/**
 * @since 0.1.0
 * @category models
 */
export type McpServersSection = typeof McpServersSection.Type

/**
 * The server configs of a decoded `mcpServers` section, in its order; each key is a server's name.
 *
 * @since 0.1.0
 * @category constructors
 */
export const serversFromSection = (section: McpServersSection): Array<McpServerConfig> =>
  Object.entries(section).map(([name, entry]): McpServerConfig => {
    const limits = {
      ...(entry.timeoutMs === undefined ? {} : { timeoutMs: entry.timeoutMs }),
      ...(entry.maxOutputChars === undefined ? {} : { maxOutputChars: entry.maxOutputChars })
    }
    if ("command" in entry) {
      return {
        name,
        transport: "stdio",
        command: entry.command,
        args: entry.args ?? [],
        ...(entry.env === undefined ? {} : { env: entry.env }),
        ...(entry.cwd === undefined ? {} : { cwd: entry.cwd }),
        ...limits
      }
    }
    return {
      name,
      transport: "http",
      url: entry.url,
      ...(entry.headers === undefined ? {} : { headers: entry.headers }),
      ...(entry.oauth === undefined ? {} : { oauth: entry.oauth }),
      ...limits
    }
  })

const decodeSection = Schema.decodeUnknownEffect(McpServersSection)

/**
 * Decodes the value of an `mcpServers` key (parsed JSON) into server configs. A malformed section
 * fails with an `McpConfigError` that names the entry and the field.
 *
 * @since 0.1.0
 * @category constructors
 */
export const decodeMcpServers = (input: unknown): Effect.Effect<Array<McpServerConfig>, McpConfigError> =>
  decodeSection(input).pipe(
    Effect.map(serversFromSection),
    Effect.mapError((error) => new McpConfigError({ message: `invalid mcpServers section: ${error.message}` }))
  )

/**
 * Splits a command line into words the way a POSIX shell would for a simple command: blanks
 * separate words, single quotes keep everything, double quotes keep everything but `\"` and `\\`,
 * a backslash outside quotes escapes the next character. Pipes, redirections, variables and globs
 * are not interpreted (they are plain characters).
 *
 * @since 0.1.0
 * @category parsing
 */
export const splitCommandLine = (line: string): { readonly words: Array<string> } | { readonly error: string } => {
  const words: Array<string> = []
  let word = ""
  let inWord = false
  let i = 0
  while (i < line.length) {
    const c = line[i]!
    if (c === " " || c === "\t" || c === "\n") {
      if (inWord) words.push(word)
      word = ""
      inWord = false
      i++
    } else if (c === "'") {
      const end = line.indexOf("'", i + 1)
      if (end < 0) return { error: "a single quote is not closed" }
      word += line.slice(i + 1, end)
      inWord = true
      i = end + 1
    } else if (c === "\"") {
      i++
      inWord = true
      while (true) {
        if (i >= line.length) return { error: "a double quote is not closed" }
        const d = line[i]!
        if (d === "\"") break
        if (d === "\\" && (line[i + 1] === "\"" || line[i + 1] === "\\")) {
          word += line[i + 1]
          i += 2
        } else {
          word += d
          i++
        }
      }
      i++
    } else if (c === "\\") {
      if (i + 1 >= line.length) return { error: "the command line ends with a backslash" }
      word += line[i + 1]
      inWord = true
      i += 2
    } else {
      word += c
      inWord = true
      i++
    }
  }
  if (inWord) words.push(word)
  return { words }
}

const launchers = new Set([
  "npx",
  "bunx",
  "pnpx",
  "uvx",
  "node",
  "bun",
  "deno",
  "python",
  "python3",
  "uv",
  "pnpm",
  "yarn",
  "npm",
  "docker",
  "podman",
  "run",
  "exec",
  "dlx",
  "x",
  "tool"
])

/**
 * The server name a `--mcp` command line gets: the first word that is not an option nor a known
 * launcher (`npx`, `node`, `uvx`, `docker run`, …), without its scope, version, directory and
 * extension, and without an `mcp-server-`, `server-` or `mcp-` prefix and a `-mcp-server`,
 * `-server` or `-mcp` suffix. `npx -y @modelcontextprotocol/server-everything` → `everything`,
 * `uvx mcp-server-git` → `git`, `node ./weather-server.js` → `weather`.
 *
 * @since 0.1.0
 * @category naming
 */
export const serverNameForCommand = (words: ReadonlyArray<string>): string => {
  const word = words.find((w, i) => !w.startsWith("-") && !(launchers.has(w) && i < words.length - 1)) ?? words[0] ?? ""
  let name = word.replace(/\/+$/, "")
  name = name.slice(name.lastIndexOf("/") + 1) // drops an npm scope and directories
  name = name.replace(/@[^@]*$/, (m) => (m === name ? m : "")) // drops a version (`pkg@1.2.3`)
  name = name.replace(/\.(m?[jt]s|c?js|py|exe|sh)$/, "")
  name = name.replace(/^(mcp-server-|mcp_server_|server-|mcp-)/, "").replace(/(-mcp-server|-server|-mcp)$/, "")
  return name.length === 0 ? "mcp" : name
}

/**
 * The server name a `--mcp-url` gets: its host name (without a leading `www.` or `mcp.`).
 * `https://mcp.example.com/mcp` → `example.com` (`example_com` as a tool prefix).
 *
 * @since 0.1.0
 * @category naming
 */
export const serverNameForUrl = (url: string): string => {
  const host = URL.canParse(url) ? new URL(url).hostname : url
  const name = host.replace(/^\[|\]$/g, "").replace(/^(www|mcp)\./, "")
  return name.length === 0 ? "mcp" : name
}

const unique = (name: string, taken: Set<string>): string => {
  let candidate = name
  for (let n = 2; taken.has(candidate); n++) candidate = `${name}_${n}`
  taken.add(candidate)
  return candidate
}

/**
 * Server configs from the command-line flags: each `--mcp "command args"` is a stdio server (the
 * line split like a shell's, see `splitCommandLine`), each `--mcp-url URL` a Streamable HTTP
 * server. Names come from `serverNameForCommand` / `serverNameForUrl`; one already in `taken` (the
 * config file's servers, say) or given to an earlier flag gets `_2`, `_3`, …
 *
 * @since 0.1.0
 * @category constructors
 */
export const serversFromFlags = (
  flags: { readonly mcp?: ReadonlyArray<string> | undefined; readonly mcpUrl?: ReadonlyArray<string> | undefined },
  taken: ReadonlyArray<string> = []
): Effect.Effect<Array<McpServerConfig>, McpConfigError> =>
  Effect.suspend(() => {
    const names = new Set(taken)
    const servers: Array<McpServerConfig> = []
    for (const line of flags.mcp ?? []) {
      const split = splitCommandLine(line)
      if ("error" in split) return Effect.fail(new McpConfigError({ message: `--mcp "${line}": ${split.error}` }))
      const [command, ...args] = split.words
      if (command === undefined) return Effect.fail(new McpConfigError({ message: "--mcp needs a command" }))
      servers.push({ name: unique(serverNameForCommand(split.words), names), transport: "stdio", command, args })
    }
    for (const url of flags.mcpUrl ?? []) {
      if (!isHttpUrl(url)) {
        return Effect.fail(new McpConfigError({ message: `--mcp-url "${url}" is not an http:// or https:// URL` }))
      }
      servers.push({ name: unique(serverNameForUrl(url), names), transport: "http", url })
    }
    return Effect.succeed(servers)
  })
