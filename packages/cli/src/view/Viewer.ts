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
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Console, Effect, FileSystem, Path, Schema } from "effect"
import type { Scope } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { createHash } from "node:crypto"
import { lstatSync } from "node:fs"
import * as Http from "node:http"
import * as NodePath from "node:path"
import { stripControl } from "../Sanitize.ts"
import { SESSIONS_FOLDER } from "../Sessions.ts"
import { readTextFile } from "../WorkspaceIO.ts"
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
  /**
   * A session id (its file name without `.jsonl`, or a unique prefix of it) or a path to a session
   * file: inside the workspace any file, outside it only a `.jsonl` file (`../../etc/passwd` is refused).
   */
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
 * `session` names an existing file or has a `/` or ends with `.jsonl` (outside the workspace only a
 * `.jsonl` file); otherwise an id in the workspace's sessions folder (exact, then a unique prefix);
 * without `session`, the latest session there (the latest header time, as `--continue` picks it).
 * The sessions folder is not listed when `.agentloop` or `.agentloop/sessions` is a symbolic link.
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
  // A kind found without following a link at the end (`lstat`): a link is never taken for a file.
  const kind = (file: string) =>
    Effect.try({ try: () => lstatSync(file), catch: () => undefined }).pipe(
      Effect.map((info) => info.isSymbolicLink() ? "Link" : info.isFile() ? "File" : "Other"),
      Effect.orElseSucceed(() => "Missing" as const)
    )
  // The sessions folder is listed only when `.agentloop` and `.agentloop/sessions` are real
  // folders: a link there would list (and pick from) a folder outside the workspace.
  const listSessions = Effect.gen(function*() {
    const agentloop = path.join(root, ".agentloop")
    if ((yield* kind(agentloop)) === "Link" || (yield* kind(dir)) === "Link") {
      return yield* new ViewError({
        reason: "Unreadable",
        message: `${dir} leads through a symbolic link: refused (sessions are read only inside ${root})`
      })
    }
    return yield* fs.readDirectory(dir).pipe(
      Effect.map((names) => names.filter((name) => name.endsWith(".jsonl"))),
      Effect.orElseSucceed((): Array<string> => [])
    )
  })

  if (session !== undefined && session !== "") {
    const asPath = path.resolve(root, session)
    const looksLikePath = session.includes("/") || session.includes(path.sep) || session.endsWith(".jsonl")
    if (looksLikePath || (yield* kind(asPath)) === "File") {
      if (!isInside(root, asPath) && !asPath.endsWith(".jsonl")) {
        return yield* new ViewError({
          reason: "SessionNotFound",
          message: `${asPath} is outside the workspace ${root} and is not a .jsonl session file: refused`
        })
      }
      const found = yield* kind(asPath)
      if (found === "File" || found === "Link") return asPath
      return yield* new ViewError({ reason: "SessionNotFound", message: `no session file at ${asPath}` })
    }
    const names = yield* listSessions
    if (names.includes(`${session}.jsonl`)) return path.join(dir, `${session}.jsonl`)
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
      message:
        `no sessions in ${dir}: run \`agentloop run\` or \`agentloop chat\` in ${root} first, or name a session file`
    })
  }
  // The latest is the one `--continue` picks: the latest header time, then the largest id.
  const dated = yield* Effect.forEach(
    names,
    (name) =>
      readTextFile(root, `${SESSIONS_FOLDER}/${name}`, MAX_VIEW_BYTES).pipe(
        Effect.map((text) => ({ name, at: headerTime(text) })),
        Effect.orElseSucceed(() => ({ name, at: -1 }))
      )
  )
  dated.sort((a, b) => b.at - a.at || (a.name < b.name ? 1 : a.name > b.name ? -1 : 0))
  return path.join(dir, dated[0]!.name)
})

const isInside = (root: string, file: string): boolean => {
  const relative = NodePath.relative(root, file)
  return relative !== "" && !relative.startsWith("..") && !NodePath.isAbsolute(relative)
}

/**
 * The largest session file the viewer reads (64 MiB): the page renders the whole timeline, and
 * the file is read again on every request; a larger file is refused with an error naming its size.
 *
 * @since 0.1.0
 * @category sessions
 */
export const MAX_VIEW_BYTES = 64 * 1024 * 1024

/**
 * Reads the session file `file` as text through the CLI's confined reader (`WorkspaceIO`): a file
 * inside `workspace` is walked from the workspace root, any other from its own folder; either way
 * no symbolic link is followed (in the folders inside the workspace, or as the file itself), a
 * file with more than one hard link, a FIFO, a device or a folder is refused without blocking,
 * and so is a file over `MAX_VIEW_BYTES`.
 *
 * @since 0.1.0
 * @category sessions
 */
export const readSessionText = (file: string, workspace?: string): Effect.Effect<string, ViewError> => {
  const root = workspace !== undefined && isInside(NodePath.resolve(workspace), file) ?
    NodePath.resolve(workspace) :
    NodePath.dirname(file)
  return readTextFile(root, NodePath.relative(root, file), MAX_VIEW_BYTES).pipe(
    Effect.mapError((error) =>
      new ViewError({ reason: "Unreadable", message: `cannot read ${file}: ${error.message}` })
    )
  )
}

const versionOf = (text: string): string =>
  `${text.length}-${createHash("sha1").update(text).digest("hex").slice(0, 16)}`

/**
 * A token that changes when the session file changes (its length and a digest of its text), read
 * through the same confined reader as the session: the page asks for it every two seconds.
 *
 * @since 0.1.0
 * @category sessions
 */
export const sessionVersion = (file: string, workspace?: string): Effect.Effect<string, ViewError> =>
  Effect.map(readSessionText(file, workspace), versionOf)

/**
 * Reads and parses a session file (see `readSessionText` for what is refused), with its version.
 *
 * @since 0.1.0
 * @category sessions
 */
export const readSession = (
  file: string,
  workspace?: string
): Effect.Effect<{ readonly lines: Array<SessionLine>; readonly version: string }, ViewError> =>
  Effect.map(readSessionText(file, workspace), (text) => ({ lines: parseSessionText(text), version: versionOf(text) }))

/**
 * Reads a session file into its timeline.
 *
 * @since 0.1.0
 * @category sessions
 */
export const loadTimeline = (file: string, workspace?: string): Effect.Effect<Timeline, ViewError> =>
  Effect.map(readSession(file, workspace), ({ lines }) => buildTimeline(lines))

const SECURITY_HEADERS = {
  // Nothing may load from anywhere: the page is one document with inline style and its one script.
  "content-security-policy":
    `default-src 'none'; style-src 'unsafe-inline'; script-src ${pageScriptSource}; connect-src 'self'; img-src ` +
    `data:; ` +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store"
}

const respond = (body: string, contentType: string, status = 200) =>
  HttpServerResponse.text(body, { status, contentType, headers: SECURITY_HEADERS })

const handler = (file: string, workspace: string, allowedHosts: ReadonlySet<string>) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const host = request.headers["host"] ?? ""
    if (!allowedHosts.has(host.toLowerCase())) return respond("unknown host\n", "text/plain", 403)
    if (request.method !== "GET" && request.method !== "HEAD") return respond("method not allowed\n", "text/plain", 405)
    const pathname = request.url.split("?")[0]
    switch (pathname) {
      case "/": {
        const session = yield* Effect.result(readSession(file, workspace))
        if (session._tag === "Failure") return respond(`${session.failure.message}\n`, "text/plain", 500)
        const timeline = buildTimeline(session.success.lines)
        return respond(renderPage(timeline, { file, version: session.success.version }), "text/html; charset=utf-8")
      }
      case "/api/session": {
        const session = yield* Effect.result(readSession(file, workspace))
        if (session._tag === "Failure") return respond(`${session.failure.message}\n`, "text/plain", 500)
        return HttpServerResponse.jsonUnsafe({ file, timeline: buildTimeline(session.success.lines) }, {
          headers: SECURITY_HEADERS
        })
      }
      case "/api/version": {
        const version = yield* Effect.result(sessionVersion(file, workspace))
        return respond(version._tag === "Failure" ? "" : version.success, "text/plain")
      }
      default:
        return respond("not found\n", "text/plain", 404)
    }
  })

const printable = (error: ViewError) => new ViewError({ reason: error.reason, message: stripControl(error.message) })

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
    // File names are text anyone could have written (a cloned repository): no control sequences
    // reach the terminal through an error that names them.
    const file = yield* resolveSessionFile(options.workspace, options.session).pipe(Effect.mapError(printable))
    // Fail now, not at the first request, when the file cannot be read.
    yield* readSession(file, options.workspace).pipe(Effect.mapError(printable))
    const port = options.port ?? 0
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      return yield* new ViewError({ reason: "Listen", message: `port must be an integer from 0 to 65535, got ${port}` })
    }
    const server = yield* NodeHttpServer.make(() => Http.createServer(), { port, host: HOST }).pipe(
      Effect.mapError((error) =>
        new ViewError({
          reason: "Listen",
          message: `cannot listen on ${HOST}:${port}: ${
            error.cause instanceof Error ? error.cause.message : String(error.cause)
          }`
        })
      )
    )
    const address = server.address
    const boundPort = address._tag === "UnixPathAddress" ? port : address.port
    const allowedHosts = new Set([`${HOST}:${boundPort}`, `localhost:${boundPort}`])
    yield* server.serve(handler(file, options.workspace, allowedHosts))
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
    yield* Console.log(`agentloop view: ${stripControl(view.file)}\n  open ${view.url}  (Ctrl-C to stop)`)
    return yield* Effect.never
  }))
