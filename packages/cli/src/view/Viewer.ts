/**
 * `agentloop view`: serves one session's timeline on 127.0.0.1 until interrupted.
 *
 * The server is `@effect/platform-node`'s `NodeHttpServer` over `node:http`, so its lifetime is a
 * scope: interrupting the fiber (Ctrl-C under `NodeRuntime.runMain`) closes the socket. It binds
 * the loopback address only, answers only requests whose `Host` is that address (a web page on
 * another site cannot read the session through DNS rebinding), and reads the session file again
 * on every request, so reloading shows a session that is still being written.
 *
 * @since 0.1.0
 */
import { Console, Effect, FileSystem, Option, Path, Schema } from "effect"
import type { Scope } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { NodeHttpServer } from "@effect/platform-node"
import * as Http from "node:http"
import { SESSIONS_FOLDER } from "../Sessions.ts"
import { pageScriptSource, renderPage } from "./Page.ts"
import { parseSessionText } from "./SessionFile.ts"
import type { SessionLine } from "./SessionFile.ts"
import { buildTimeline } from "./Timeline.ts"
import type { Timeline } from "./Timeline.ts"

/**
 * What went wrong, for the person who typed the command.
 *
 * @since 0.1.0
 * @category errors
 */
export class ViewError extends Schema.TaggedError<ViewError>()("ViewError", {
  reason: Schema.Literals(["NoSessions", "SessionNotFound", "Unreadable", "Listen"]),
  message: Schema.String
}) {}

/**
 * @since 0.1.0
 * @category models
 */
export interface ViewOptions {
  /** The project folder whose `.agentloop/sessions/` holds the sessions. */
  readonly workspace: string
  /** A session id (its file name without `.jsonl`, or a unique prefix of it) or a path to a session file. */
  readonly session?: string | undefined
  /** The port on 127.0.0.1; 0 or absent: a free one. */
  readonly port?: number | undefined
}

/**
 * A running viewer.
 *
 * @since 0.1.0
 * @category models
 */
export interface ViewServer {
  /** The page, e.g. `http://127.0.0.1:41234/`. */
  readonly url: string
  /** The session file served (absolute). */
  readonly file: string
}

const HOST = "127.0.0.1"

/** The `at` of a session's header (its first line), or 0 when it has none. */
const headerTime = (text: string): number => {
  const end = text.indexOf("\n")
  const first = parseSessionText(end === -1 ? text : text.slice(0, end + 1))[0]
  return first?._tag === "Record" && first.record.type === "session" ? first.record.at : 0
}

/**
 * Finds the session file to show: a path (absolute, or relative to the workspace) when
 * `session` names an existing file or ends with `.jsonl`; otherwise an id in the workspace's
 * sessions folder (exact, then a unique prefix); without `session`, the latest session there (the
 * latest header time, as `--continue` picks it).
 *
 * @since 0.1.0
 * @category sessions
 */
export const resolveSessionFile = Effect.fn("Viewer.resolveSessionFile")(function*(
  workspace: string,
  session: string | undefined
) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const root = path.resolve(workspace)
  const dir = path.join(root, SESSIONS_FOLDER)
  const exists = (file: string) => fs.exists(file).pipe(Effect.orElseSucceed(() => false))
  const isFile = (file: string) =>
    fs.stat(file).pipe(Effect.map((info) => info.type === "File"), Effect.orElseSucceed(() => false))
  const listSessions = fs.readDirectory(dir).pipe(
    Effect.map((names) => names.filter((name) => name.endsWith(".jsonl"))),
    Effect.orElseSucceed((): Array<string> => [])
  )

  if (session !== undefined && session !== "") {
    const asPath = path.resolve(root, session)
    if (yield* isFile(asPath)) return asPath
    const looksLikePath = session.includes("/") || session.includes(path.sep) || session.endsWith(".jsonl")
    if (looksLikePath) {
      return yield* new ViewError({ reason: "SessionNotFound", message: `no session file at ${asPath}` })
    }
    const exact = path.join(dir, `${session}.jsonl`)
    if (yield* exists(exact)) return exact
    const names = yield* listSessions
    const matches = names.filter((name) => name.startsWith(session))
    if (matches.length === 1) return path.join(dir, matches[0]!)
    return yield* new ViewError({
      reason: "SessionNotFound",
      message: matches.length === 0 ?
        `no session "${session}" in ${dir} (\`agentloop sessions\` lists them)` :
        `"${session}" matches ${matches.length} sessions (${matches.slice(0, 5).join(", ")}): give more of the id`
    })
  }

  const names = yield* listSessions
  if (names.length === 0) {
    return yield* new ViewError({
      reason: "NoSessions",
      message: `no sessions in ${dir}: run \`agentloop run\` or \`agentloop chat\` in ${root} first, or name a session file`
    })
  }
  // The latest is the one `--continue` picks: the latest header time, then the largest id.
  const dated = yield* Effect.forEach(names, (name) =>
    fs.readFileString(path.join(dir, name)).pipe(
      Effect.map((text) => ({ name, at: headerTime(text) })),
      Effect.orElseSucceed(() => ({ name, at: -1 }))
    ))
  dated.sort((a, b) => b.at - a.at || (a.name < b.name ? 1 : a.name > b.name ? -1 : 0))
  return path.join(dir, dated[0]!.name)
})

const unreadable = (file: string) => (error: { readonly message: string }) =>
  new ViewError({ reason: "Unreadable", message: `cannot read ${file}: ${error.message}` })

/**
 * A token that changes when the session file changes (its size and modification time), found
 * without reading the file: the page asks for it every two seconds.
 *
 * @since 0.1.0
 * @category sessions
 */
export const sessionVersion = Effect.fn("Viewer.sessionVersion")(function*(file: string) {
  const fs = yield* FileSystem.FileSystem
  const info = yield* fs.stat(file).pipe(Effect.mapError(unreadable(file)))
  return `${info.size}-${Option.getOrElse(Option.map(info.mtime, (d) => d.getTime()), () => 0)}`
})

/**
 * Reads and parses a session file, with its version (taken before reading, so a change made
 * while reading shows as a newer version on the next poll).
 *
 * @since 0.1.0
 * @category sessions
 */
export const readSession = Effect.fn("Viewer.readSession")(function*(file: string) {
  const fs = yield* FileSystem.FileSystem
  const version = yield* sessionVersion(file)
  const text = yield* fs.readFileString(file).pipe(Effect.mapError(unreadable(file)))
  const lines: Array<SessionLine> = parseSessionText(text)
  return { lines, version }
})

/**
 * Reads a session file into its timeline.
 *
 * @since 0.1.0
 * @category sessions
 */
export const loadTimeline = (file: string): Effect.Effect<Timeline, ViewError, FileSystem.FileSystem> =>
  Effect.map(readSession(file), ({ lines }) => buildTimeline(lines))

const SECURITY_HEADERS = {
  // Nothing may load from anywhere: the page is one document with inline style and its one script.
  "content-security-policy":
    `default-src 'none'; style-src 'unsafe-inline'; script-src ${pageScriptSource}; connect-src 'self'; img-src data:; ` +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store"
}

const respond = (body: string, contentType: string, status = 200) =>
  HttpServerResponse.text(body, { status, contentType, headers: SECURITY_HEADERS })

const handler = (file: string, allowedHosts: ReadonlySet<string>) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const host = request.headers["host"] ?? ""
    if (!allowedHosts.has(host.toLowerCase())) return respond("unknown host\n", "text/plain", 403)
    if (request.method !== "GET" && request.method !== "HEAD") return respond("method not allowed\n", "text/plain", 405)
    const pathname = request.url.split("?")[0]
    switch (pathname) {
      case "/": {
        const session = yield* Effect.result(readSession(file))
        if (session._tag === "Failure") return respond(`${session.failure.message}\n`, "text/plain", 500)
        const timeline = buildTimeline(session.success.lines)
        return respond(renderPage(timeline, { file, version: session.success.version }), "text/html; charset=utf-8")
      }
      case "/api/session": {
        const session = yield* Effect.result(readSession(file))
        if (session._tag === "Failure") return respond(`${session.failure.message}\n`, "text/plain", 500)
        return HttpServerResponse.jsonUnsafe({ file, timeline: buildTimeline(session.success.lines) }, {
          headers: SECURITY_HEADERS
        })
      }
      case "/api/version": {
        const version = yield* Effect.result(sessionVersion(file))
        return respond(version._tag === "Failure" ? "" : version.success, "text/plain")
      }
      default:
        return respond("not found\n", "text/plain", 404)
    }
  })

/**
 * Starts the viewer in the current scope and returns its address; the server closes with the
 * scope.
 *
 * @since 0.1.0
 * @category servers
 */
export const serveSession = (
  options: ViewOptions
): Effect.Effect<ViewServer, ViewError, FileSystem.FileSystem | Path.Path | Scope.Scope> =>
  Effect.gen(function*() {
    const file = yield* resolveSessionFile(options.workspace, options.session)
    // Fail now, not at the first request, when the file cannot be read.
    yield* readSession(file)
    const port = options.port ?? 0
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      return yield* new ViewError({ reason: "Listen", message: `port must be an integer from 0 to 65535, got ${port}` })
    }
    const server = yield* NodeHttpServer.make(() => Http.createServer(), { port, host: HOST }).pipe(
      Effect.mapError((error) =>
        new ViewError({
          reason: "Listen",
          message: `cannot listen on ${HOST}:${port}: ${error.cause instanceof Error ? error.cause.message : String(error.cause)}`
        })
      )
    )
    const address = server.address
    const boundPort = address._tag === "UnixPathAddress" ? port : address.port
    const allowedHosts = new Set([`${HOST}:${boundPort}`, `localhost:${boundPort}`])
    const fs = yield* FileSystem.FileSystem
    yield* server.serve(Effect.provideService(handler(file, allowedHosts), FileSystem.FileSystem, fs))
    return { url: `http://${HOST}:${boundPort}/`, file }
  })

/**
 * `agentloop view [SESSION]`: serves the session's timeline on 127.0.0.1, prints where, and
 * serves until interrupted.
 *
 * @since 0.1.0
 * @category servers
 */
export const viewSession = (options: ViewOptions): Effect.Effect<never, ViewError, FileSystem.FileSystem | Path.Path> =>
  Effect.scoped(Effect.gen(function*() {
    const view = yield* serveSession(options)
    yield* Console.log(`agentloop view: ${view.file}\n  open ${view.url}  (Ctrl-C to stop)`)
    return yield* Effect.never
  }))
