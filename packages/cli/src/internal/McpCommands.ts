/**
 * `agentloop mcp login NAME` and `agentloop mcp logout NAME`: OAuth for the HTTP MCP servers of the
 * config files (`mcpServers`), with `@agentloop/mcp`'s authorization. Login prints the
 * authorization URL (and opens the browser when on a terminal), waits on a loopback redirect, and
 * keeps the tokens in the user's token store (a 0600 file per server under
 * `$XDG_STATE_HOME/agentloop/mcp-oauth/`); they never go to a session file, a log or the screen.
 */
import {
  decodeMcpServers,
  fileTokenStoreLayer,
  loginMcpServer,
  logoutMcpServer,
  loopbackAuthorizationLayer
} from "@agentloop/mcp"
import type { HttpServerConfig } from "@agentloop/mcp"
import { Duration, Effect, Layer, Option } from "effect"
import { spawn } from "node:child_process"
import { CliError } from "../CliError.ts"
import { NO_FLAGS, resolveSettings } from "../Config.ts"
import { stripControl } from "../Sanitize.ts"
import { exitSoon } from "../Terminal.ts"
import { workspaceOf } from "./Setup.ts"

/** How long login waits for the browser to come back. */
const LOGIN_TIMEOUT = Duration.minutes(5)

/** The HTTP server `name` of the config files. */
const httpServer = (root: string, name: string): Effect.Effect<HttpServerConfig, CliError> =>
  Effect.gen(function*() {
    const settings = yield* resolveSettings(NO_FLAGS, root, process.env).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    const servers = settings.mcpServers === undefined ?
      [] :
      yield* decodeMcpServers(settings.mcpServers).pipe(Effect.mapError((e) => new CliError(e.message)))
    const server = servers.find((s) => s.name === name)
    if (server === undefined) {
      const names = servers.map((s) => s.name)
      return yield* Effect.fail(
        new CliError(
          `no MCP server "${stripControl(name)}" in the config's mcpServers (${
            names.length === 0 ? "there are none" : `there are: ${names.join(", ")}`
          })`
        )
      )
    }
    if (server.transport !== "http") {
      return yield* Effect.fail(new CliError(`MCP server "${name}" runs a command; only HTTP servers log in`))
    }
    return server
  })

/** Opens `url` in the user's browser, leaving the opener to itself (it exits once the browser has it). */
const openBrowser = (url: string) => {
  const command = process.platform === "darwin" ? "open" : process.platform === "win32" ? "explorer" : "xdg-open"
  try {
    const child = spawn(command, [url], { stdio: "ignore" })
    child.on("error", () => {})
    child.unref()
  } catch {
    // no opener: the printed URL is there
  }
}

const fail = (e: CliError) =>
  Effect.sync(() => {
    process.stderr.write(`agentloop: ${stripControl(e.message)}\n`)
    process.exitCode = e.message.startsWith("no MCP server") || e.message.includes("only HTTP") ? 2 : 1
  })

/**
 * `agentloop mcp login NAME`.
 *
 * @since 0.1.0
 * @category commands
 */
export const mcpLoginCommand = (options: {
  readonly workspace: Option.Option<string>
  readonly name: string
}): Effect.Effect<void> =>
  Effect.gen(function*() {
    const root = yield* workspaceOf(options.workspace)
    const server = yield* httpServer(root, options.name)
    const authorization = loopbackAuthorizationLayer({
      open: (url) =>
        Effect.sync(() => {
          process.stdout.write(`Open this URL to authorize agentloop for "${server.name}":\n  ${url}\n`)
          if (process.stdout.isTTY === true) openBrowser(url)
        })
    })
    yield* loginMcpServer(server).pipe(
      Effect.provide(Layer.mergeAll(authorization, fileTokenStoreLayer())),
      Effect.timeoutOrElse({
        duration: LOGIN_TIMEOUT,
        orElse: () => Effect.fail(new CliError(`no authorization within ${Duration.format(LOGIN_TIMEOUT)}`))
      }),
      Effect.mapError((e) => (e instanceof CliError ? e : new CliError(e.message)))
    )
    process.stdout.write(`logged in to "${server.name}": its tokens are kept in your token store\n`)
  }).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, fail), Effect.ensuring(exitSoon))

/**
 * `agentloop mcp logout NAME`.
 *
 * @since 0.1.0
 * @category commands
 */
export const mcpLogoutCommand = (options: {
  readonly workspace: Option.Option<string>
  readonly name: string
}): Effect.Effect<void> =>
  Effect.gen(function*() {
    const root = yield* workspaceOf(options.workspace)
    const server = yield* httpServer(root, options.name)
    yield* logoutMcpServer({ server: server.name, url: server.url }).pipe(
      Effect.provide(fileTokenStoreLayer()),
      Effect.mapError((e) => new CliError(e.message))
    )
    process.stdout.write(`logged out of "${server.name}": its tokens are forgotten\n`)
  }).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, fail), Effect.ensuring(exitSoon))
