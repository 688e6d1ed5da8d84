/**
 * The viewer's server without a browser: which session it picks, what it answers on loopback,
 * and that it stops serving when interrupted.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Console, Deferred, Effect, Exit, Fiber, Scope } from "effect"
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import * as Http from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { resolveSessionFile, serveSession, viewSession } from "../src/view/index.ts"
import type { ViewError } from "../src/view/index.ts"

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/view/${name}`, import.meta.url))

/**
 * A workspace with sessions `a1` (started first), `b2` (started last, but written to before the
 * others) and `a3`: the latest is the one started last, as `--continue` picks it.
 */
const workspace = () => {
  const root = mkdtempSync(join(tmpdir(), "agentloop-view-ws-"))
  const dir = join(root, ".agentloop", "sessions")
  mkdirSync(dir, { recursive: true })
  const lines = readFileSync(fixture("coding-session.jsonl"), "utf8").split("\n")
  const started: Record<string, number> = { a1: 1000, b2: 3000, a3: 2000 }
  const written: Record<string, number> = { a1: 2000, b2: 1000, a3: 3000 }
  for (const [id, at] of Object.entries(started)) {
    const header = { ...JSON.parse(lines[0]!), id, at }
    writeFileSync(join(dir, `${id}.jsonl`), [JSON.stringify(header), ...lines.slice(1)].join("\n"))
    utimesSync(join(dir, `${id}.jsonl`), written[id]!, written[id]!)
  }
  return { root, dir }
}

/** A GET with a chosen Host header (fetch does not let a caller set it). */
const get = (url: string, host?: string, method = "GET") =>
  Effect.promise(() =>
    new Promise<{ status: number; headers: Http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
      const target = new URL(url)
      const request = Http.request(
        { host: target.hostname, port: target.port, path: target.pathname, method, headers: host ? { host } : {} },
        (response) => {
          let body = ""
          response.setEncoding("utf8")
          response.on("data", (chunk: string) => body += chunk)
          response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }))
        }
      )
      request.on("error", reject)
      request.end()
    })
  )

const failure = <A>(exit: Exit.Exit<A, ViewError>): ViewError => {
  if (Exit.isSuccess(exit)) throw new Error("expected a failure")
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  if (reason === undefined || reason._tag !== "Fail") throw new Error("expected a typed failure")
  return reason.error
}

describe("resolveSessionFile", () => {
  it.live("picks the latest session (as --continue does), an id, a unique prefix, or a path", () =>
    Effect.gen(function*() {
      const { dir, root } = workspace()
      assert.strictEqual(yield* resolveSessionFile(root, undefined), join(dir, "b2.jsonl"))
      assert.strictEqual(yield* resolveSessionFile(root, "a3"), join(dir, "a3.jsonl"))
      assert.strictEqual(yield* resolveSessionFile(root, "b"), join(dir, "b2.jsonl"))
      assert.strictEqual(yield* resolveSessionFile(root, ".agentloop/sessions/a1.jsonl"), join(dir, "a1.jsonl"))
      assert.strictEqual(
        yield* resolveSessionFile(tmpdir(), fixture("killed-mid-batch.jsonl")),
        fixture("killed-mid-batch.jsonl")
      )
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("names what is wrong: no sessions, unknown id, ambiguous prefix, missing file", () =>
    Effect.gen(function*() {
      const { dir, root } = workspace()
      const empty = mkdtempSync(join(tmpdir(), "agentloop-view-empty-"))
      const none = failure(yield* Effect.exit(resolveSessionFile(empty, undefined)))
      assert.strictEqual(none.reason, "NoSessions")
      assert.include(none.message, join(empty, ".agentloop", "sessions"))
      const unknown = failure(yield* Effect.exit(resolveSessionFile(root, "zz")))
      assert.strictEqual(unknown.reason, "SessionNotFound")
      assert.strictEqual(unknown.message, `no session "zz" in ${dir} (\`agentloop sessions\` lists them)`)
      const ambiguous = failure(yield* Effect.exit(resolveSessionFile(root, "a")))
      assert.strictEqual(ambiguous.reason, "SessionNotFound")
      assert.include(ambiguous.message, `"a" matches 2 sessions`)
      const missing = failure(yield* Effect.exit(resolveSessionFile(root, "nowhere/x.jsonl")))
      assert.strictEqual(missing.message, `no session file at ${join(root, "nowhere/x.jsonl")}`)
    }).pipe(Effect.provide(NodeServices.layer)))
})

describe("serveSession", () => {
  it.live("serves the page and the JSON on 127.0.0.1, with a policy that forbids loading anything else", () =>
    Effect.gen(function*() {
      const { dir, root } = workspace()
      const view = yield* serveSession({ workspace: root })
      assert.match(view.url, /^http:\/\/127\.0\.0\.1:\d+\/$/)
      assert.strictEqual(view.file, join(dir, "b2.jsonl"))

      const page = yield* get(view.url)
      assert.strictEqual(page.status, 200)
      assert.strictEqual(page.headers["content-type"], "text/html; charset=utf-8")
      const policy = String(page.headers["content-security-policy"])
      assert.include(policy, "default-src 'none'")
      // Only the page's own script may run (by its hash): no inline script that found its way into the text.
      assert.match(policy, /script-src 'sha256-[A-Za-z0-9+/]+=*';/)
      assert.notInclude(policy, "script-src 'unsafe-inline'")
      assert.include(page.body, "<title>agentloop · b2</title>")
      // Self-contained: no external script, style sheet, image or font.
      assert.notMatch(page.body, /<(script|link|img)[^>]+(src|href)=/)
      assert.notMatch(page.body, /https?:\/\//)

      const api = yield* get(`${view.url}api/session`)
      assert.strictEqual(api.status, 200)
      const data = JSON.parse(api.body) as { file: string; timeline: { totals: { turns: number; toolCalls: number } } }
      assert.strictEqual(data.file, view.file)
      assert.strictEqual(data.timeline.totals.turns, 5)
      assert.strictEqual(data.timeline.totals.toolCalls, 6)

      assert.strictEqual((yield* get(`${view.url}nothing`)).status, 404)
      assert.strictEqual((yield* get(view.url, undefined, "POST")).status, 405)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("refuses requests for another host name (DNS rebinding) and accepts localhost", () =>
    Effect.gen(function*() {
      const { root } = workspace()
      const view = yield* serveSession({ workspace: root })
      const port = new URL(view.url).port
      assert.strictEqual((yield* get(view.url, `evil.example:${port}`)).status, 403)
      assert.strictEqual((yield* get(view.url, `127.0.0.1:${port}`)).status, 200)
      assert.strictEqual((yield* get(view.url, `localhost:${port}`)).status, 200)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("reads the file again on each request, so a session still being written shows its new lines", () =>
    Effect.gen(function*() {
      const { dir, root } = workspace()
      const view = yield* serveSession({ workspace: root, session: "b2" })
      const before = (yield* get(`${view.url}api/version`)).body
      appendFileSync(
        join(dir, "b2.jsonl"),
        JSON.stringify({ type: "run_start", at: 1795000100000, prompt: "One more thing" }) + "\n"
      )
      const after = (yield* get(`${view.url}api/version`)).body
      assert.notStrictEqual(after, before)
      assert.include((yield* get(view.url)).body, "One more thing")
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("fails with a Listen error when the port is taken, and checks the port number", () =>
    Effect.gen(function*() {
      const { root } = workspace()
      const first = yield* serveSession({ workspace: root })
      const port = Number(new URL(first.url).port)
      const taken = failure(yield* Effect.exit(serveSession({ workspace: root, port })))
      assert.strictEqual(taken.reason, "Listen")
      assert.include(taken.message, `cannot listen on 127.0.0.1:${port}`)
      const bad = failure(yield* Effect.exit(serveSession({ workspace: root, port: 70000 })))
      assert.strictEqual(bad.message, "port must be an integer from 0 to 65535, got 70000")
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("fails before listening when the session file cannot be read", () =>
    Effect.gen(function*() {
      const root = mkdtempSync(join(tmpdir(), "agentloop-view-dir-"))
      mkdirSync(join(root, "folder.jsonl"))
      const error = failure(yield* Effect.exit(serveSession({ workspace: root, session: "folder.jsonl" })))
      assert.strictEqual(error.reason, "SessionNotFound")
      writeFileSync(join(root, "s.jsonl"), "")
      const empty = yield* serveSession({ workspace: root, session: "s.jsonl" })
      assert.include((yield* get(empty.url)).body, "This session has no runs yet.")
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("answers 500 naming the file when the session file has gone since it started", () =>
    Effect.gen(function*() {
      const { dir, root } = workspace()
      const view = yield* serveSession({ workspace: root, session: "a1" })
      rmSync(join(dir, "a1.jsonl"))
      const page = yield* get(view.url)
      assert.strictEqual(page.status, 500)
      assert.match(page.body, new RegExp(`^cannot read ${join(dir, "a1.jsonl")}: `))
      assert.notInclude(page.body, "    at ", "no stack trace")
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("stops serving when its scope closes", () =>
    Effect.gen(function*() {
      const { root } = workspace()
      const scope = yield* Scope.make()
      const view = yield* serveSession({ workspace: root }).pipe(Scope.provide(scope))
      assert.strictEqual((yield* get(view.url)).status, 200)
      yield* Scope.close(scope, Exit.void)
      const after = yield* Effect.exit(Effect.tryPromise(() => fetch(view.url)))
      assert.isTrue(Exit.isFailure(after), "the port no longer answers")
    }).pipe(Effect.provide(NodeServices.layer)))
})

describe("viewSession", () => {
  it.live("prints the file and the URL, serves until interrupted, then closes the server", () =>
    Effect.gen(function*() {
      const { dir, root } = workspace()
      const printed = yield* Deferred.make<string>()
      const console: Console.Console = {
        ...globalThis.console,
        log: (...args: ReadonlyArray<unknown>) => {
          Deferred.doneUnsafe(printed, Exit.succeed(args.join(" ")))
        }
      }
      const fiber = yield* viewSession({ workspace: root }).pipe(
        Effect.provideService(Console.Console, console),
        Effect.forkChild
      )
      const line = yield* Deferred.await(printed)
      const url = /open (http:\/\/127\.0\.0\.1:\d+\/)/.exec(line)?.[1]
      assert.isDefined(url, line)
      assert.include(line, `agentloop view: ${join(dir, "b2.jsonl")}`)
      assert.include(line, "(Ctrl-C to stop)")
      assert.strictEqual((yield* get(url!)).status, 200)
      yield* Fiber.interrupt(fiber)
      const after = yield* Effect.exit(Effect.tryPromise(() => fetch(url!)))
      assert.isTrue(Exit.isFailure(after), "the server closed when the command was interrupted")
    }).pipe(Effect.provide(NodeServices.layer)))
})
