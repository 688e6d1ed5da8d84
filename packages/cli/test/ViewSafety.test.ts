/**
 * `agentloop view` attacked: links planted in the workspace, paths out of it, files that would
 * hang or exhaust the viewer, markup in the session, and requests from other web pages.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Console, Deferred, Duration, Effect, Exit, Fiber } from "effect"
import { execFileSync } from "node:child_process"
import { linkSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, truncateSync, writeFileSync } from "node:fs"
import * as Http from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { MAX_VIEW_BYTES, resolveSessionFile, serveSession, viewSession } from "../src/view/index.ts"
import type { ViewError } from "../src/view/index.ts"

const session = readFileSync(fileURLToPath(new URL("./fixtures/view/coding-session.jsonl", import.meta.url)), "utf8")

/** A line no session ever holds: if it shows up in an answer, a file outside was read. */
const SECRET = "TOP-SECRET-7f3a9c"
/** A file outside the workspace that looks like a session and carries the secret in its prompt. */
const outsideSession = () => {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-view-outside-"))
  const file = join(dir, "secret.jsonl")
  writeFileSync(
    file,
    session.replace("Fix the failing test in src/math.js", SECRET) +
      `{"role":"user","content":"${SECRET}","timestamp":1}\n`
  )
  return { dir, file }
}
const emptyWorkspace = () => mkdtempSync(join(tmpdir(), "agentloop-view-safe-"))
const sessionsOf = (root: string) => {
  const dir = join(root, ".agentloop", "sessions")
  mkdirSync(dir, { recursive: true })
  return dir
}

const get = (url: string, headers: Record<string, string> = {}) =>
  Effect.promise(() =>
    new Promise<{ status: number; headers: Http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
      const target = new URL(url)
      const request = Http.request(
        { host: target.hostname, port: target.port, path: target.pathname, headers },
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

/** Serving must fail (bounded in time: a FIFO or a device must not block it) with a typed error. */
const refused = (options: { workspace: string; session?: string }) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(
      Effect.scoped(serveSession(options)).pipe(
        Effect.timeoutOrElse({ duration: Duration.seconds(5), orElse: () => Effect.die("the viewer blocked") })
      )
    )
    if (Exit.isSuccess(exit)) return assert.fail(`served ${exit.value.file}`)
    const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
    if (reason === undefined || reason._tag !== "Fail") return assert.fail(`not a typed failure: ${String(exit.cause)}`)
    const error: ViewError = reason.error
    assert.notInclude(error.message, SECRET)
    return error
  })

describe("agentloop view reads nothing outside the workspace", () => {
  it.live("a .agentloop/sessions that is a link out of the workspace is not listed, picked or read", () =>
    Effect.gen(function*() {
      const root = emptyWorkspace()
      const outside = outsideSession()
      mkdirSync(join(root, ".agentloop"))
      symlinkSync(outside.dir, join(root, ".agentloop", "sessions"))
      const latest = yield* refused({ workspace: root })
      assert.strictEqual(latest.reason, "Unreadable")
      assert.include(latest.message, "symbolic link")
      const byId = yield* refused({ workspace: root, session: "secret" })
      assert.include(byId.message, "symbolic link")
      const byPath = yield* refused({ workspace: root, session: ".agentloop/sessions/secret.jsonl" })
      assert.strictEqual(byPath.reason, "Unreadable")
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("a .agentloop that is a link out of the workspace is not listed, picked or read", () =>
    Effect.gen(function*() {
      const root = emptyWorkspace()
      const outside = outsideSession()
      mkdirSync(join(outside.dir, "sessions"))
      writeFileSync(join(outside.dir, "sessions", "s1.jsonl"), readFileSync(outside.file))
      symlinkSync(outside.dir, join(root, ".agentloop"))
      assert.include((yield* refused({ workspace: root })).message, "symbolic link")
      assert.include((yield* refused({ workspace: root, session: "s1" })).message, "symbolic link")
      assert.strictEqual(
        (yield* refused({ workspace: root, session: ".agentloop/sessions/s1.jsonl" })).reason,
        "Unreadable"
      )
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("a session file that is a symbolic link or a hard link to a file outside is refused", () =>
    Effect.gen(function*() {
      const root = emptyWorkspace()
      const dir = sessionsOf(root)
      const outside = outsideSession()
      symlinkSync(outside.file, join(dir, "soft.jsonl"))
      const soft = yield* refused({ workspace: root, session: "soft" })
      assert.strictEqual(soft.reason, "Unreadable")
      assert.include(soft.message, join(dir, "soft.jsonl"))
      // The only session is the link: picking the latest reads nothing through it either.
      assert.strictEqual((yield* refused({ workspace: root })).reason, "Unreadable")

      const other = emptyWorkspace()
      const hardDir = sessionsOf(other)
      linkSync(outside.file, join(hardDir, "hard.jsonl"))
      const hard = yield* refused({ workspace: other, session: "hard" })
      assert.include(hard.message, "link")
      assert.strictEqual((yield* refused({ workspace: other })).reason, "Unreadable")
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("../../etc/passwd, an absolute path and ids with / or .. name nothing outside the workspace", () =>
    Effect.gen(function*() {
      const root = emptyWorkspace()
      writeFileSync(join(sessionsOf(root), "s.jsonl"), session)
      for (
        // check-paths: outside on purpose (an attacker's session names)
        const name of ["../../etc/passwd", "/etc/passwd", "../../../../../../etc/shadow", "..", "../x", "/dev/zero"]
      ) {
        const error = yield* refused({ workspace: root, session: name })
        assert.strictEqual(error.reason, "SessionNotFound", name)
      }
      assert.include(
        (yield* refused({ workspace: root, session: "../../etc/passwd" })).message,
        "is outside the workspace"
      )
      // An explicit .jsonl path outside is the user's own choice (documented), but a link there is
      // still not followed.
      const outside = outsideSession()
      const named = mkdtempSync(join(tmpdir(), "agentloop-view-named-"))
      symlinkSync(outside.file, join(named, "link.jsonl"))
      assert.strictEqual((yield* refused({ workspace: root, session: join(named, "link.jsonl") })).reason, "Unreadable")
      assert.strictEqual(yield* resolveSessionFile(root, "s"), join(root, ".agentloop", "sessions", "s.jsonl"))
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("a link planted after the viewer started is not followed on the next request", () =>
    Effect.gen(function*() {
      const root = emptyWorkspace()
      const dir = sessionsOf(root)
      writeFileSync(join(dir, "s.jsonl"), session)
      const view = yield* serveSession({ workspace: root, session: "s" })
      assert.strictEqual((yield* get(`${view.url}api/session`, { host: new URL(view.url).host })).status, 200)
      const outside = outsideSession()
      execFileSync("rm", [join(dir, "s.jsonl")])
      symlinkSync(outside.file, join(dir, "s.jsonl"))
      const host = { host: new URL(view.url).host }
      for (const path of ["", "api/session", "api/version"]) {
        const answer = yield* get(`${view.url}${path}`, host)
        assert.notInclude(answer.body, SECRET, path)
        // The version of a file it cannot read is empty (the page then keeps what it shows).
        if (path === "api/version") assert.strictEqual(answer.body, "")
        else assert.strictEqual(answer.status, 500, path)
      }
    }).pipe(Effect.provide(NodeServices.layer)))
})

describe("agentloop view does not hang or exhaust memory on a hostile file", () => {
  it.live("a FIFO and a device named as sessions are refused without blocking", () =>
    Effect.gen(function*() {
      const root = emptyWorkspace()
      const dir = sessionsOf(root)
      execFileSync("mkfifo", [join(dir, "fifo.jsonl")])
      const fifo = yield* refused({ workspace: root, session: "fifo" })
      assert.strictEqual(fifo.reason, "Unreadable")
      assert.include(fifo.message, "not a regular file")
      // The latest session is the FIFO (the only one): choosing it must not block either.
      assert.strictEqual((yield* refused({ workspace: root })).reason, "Unreadable")

      const devices = emptyWorkspace()
      execFileSync("mknod", [join(sessionsOf(devices), "zero.jsonl"), "c", "1", "5"])
      assert.strictEqual((yield* refused({ workspace: devices, session: "zero" })).reason, "Unreadable")
      const linked = emptyWorkspace()
      symlinkSync("/dev/zero", join(sessionsOf(linked), "zero.jsonl"))
      assert.strictEqual((yield* refused({ workspace: linked, session: "zero" })).reason, "Unreadable")
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("a session file over the limit is refused with an error naming its size and the limit", () =>
    Effect.gen(function*() {
      const root = emptyWorkspace()
      const file = join(sessionsOf(root), "huge.jsonl")
      writeFileSync(file, session)
      truncateSync(file, MAX_VIEW_BYTES + 1)
      const huge = yield* refused({ workspace: root, session: "huge" })
      assert.strictEqual(huge.reason, "Unreadable")
      assert.include(huge.message, `${MAX_VIEW_BYTES + 1} bytes, over the limit of ${MAX_VIEW_BYTES} bytes`)
      truncateSync(file, MAX_VIEW_BYTES)
      const view = yield* Effect.scoped(serveSession({ workspace: root, session: "huge" }))
      assert.strictEqual(view.file, file)
    }).pipe(Effect.provide(NodeServices.layer)))
})

describe("the served page and API", () => {
  const PAYLOAD = `"'><img src=x onerror=alert(1)><script>alert(2)</script>`
  const hostile = () => {
    const p = JSON.stringify(PAYLOAD).slice(1, -1)
    return [
      `{"type":"session","version":1,"id":"${p}","at":1795000000000,"cwd":"${p}","provider":"${p}",` +
      `"model":"${p}","systemPrompt":"${p}"}`,
      `{"type":"run_start","at":1795000000100,"prompt":"${p}"}`,
      `{"role":"user","content":"${p}","timestamp":1795000000100}`,
      `{"type":"turn_start","at":1795000000120,"step":1}`,
      `{"role":"assistant","content":[{"type":"text","text":"${p}"},{"type":"toolCall","id":"${p}","name":"${p}",` +
      `"arguments":{"${p}":"${p}"}}],"stopReason":"toolUse","model":"${p}","timestamp":1795000000140}`,
      `{"type":"tool_start","at":1795000000150,"toolCallId":"${p}","name":"${p}"}`,
      `{"type":"approval","at":1795000000151,"toolCallId":"${p}","name":"${p}","decision":"denied","by":"${p}",` +
      `"reason":"${p}"}`,
      `{"type":"tool_end","at":1795000000160,"toolCallId":"${p}","isError":true}`,
      `{"role":"toolResult","toolCallId":"${p}","toolName":"${p}","content":[{"type":"text","text":"${p}"}],` +
      `"details":{"reason":"${p}"},"isError":true,"timestamp":1795000000160}`,
      `{"type":"model","at":1795000000170,"model":"${p}"}`,
      `{"type":"compaction","at":1795000000180,"summarized":1}`,
      `{"type":"run_end","at":1795000000200,"reason":"error","steps":1,"error":"${p}"}`,
      `{"type":"${p}","at":1}`,
      `{"type":"tool_end","at":"${p}"}`,
      `not json ${p}`,
      ""
    ].join("\n")
  }

  it.live("markup in every field of the session (text, tool names, ids, arguments, errors) is shown as text", () =>
    Effect.gen(function*() {
      const root = emptyWorkspace()
      writeFileSync(join(sessionsOf(root), "x.jsonl"), hostile())
      const view = yield* serveSession({ workspace: root, session: "x" })
      const page = yield* get(view.url, { host: new URL(view.url).host })
      assert.strictEqual(page.status, 200)
      assert.notInclude(page.body, "<img")
      assert.notInclude(page.body, "onerror=alert(1)>")
      assert.notInclude(page.body, "<script>alert")
      assert.notMatch(page.body, /="[^"]*"'>/, "no attribute closed by the session's text")
      assert.include(
        page.body,
        "&quot;&#39;&gt;&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)&lt;/script&gt;"
      )
      // Exactly one script element: the page's own (allowed by its hash in the policy).
      assert.strictEqual(page.body.split("<script").length - 1, 1)
      const api = yield* get(`${view.url}api/session`, { host: new URL(view.url).host })
      assert.strictEqual(api.status, 200)
      assert.match(String(api.headers["content-type"]), /^application\/json/)
      assert.strictEqual(api.headers["x-content-type-options"], "nosniff")
      assert.include(api.body, "onerror=alert(1)", "the JSON carries the text as data, for a script to show as text")
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("other web pages cannot read it: other Host names are refused on every path, no CORS header is sent", () =>
    Effect.gen(function*() {
      const root = emptyWorkspace()
      writeFileSync(join(sessionsOf(root), "s.jsonl"), session)
      const view = yield* serveSession({ workspace: root })
      const port = new URL(view.url).port
      for (const path of ["", "api/session", "api/version", "nothing"]) {
        for (const host of [`evil.example:${port}`, "evil.example", `127.0.0.1.evil.example:${port}`, "127.0.0.1"]) {
          const answer = yield* get(`${view.url}${path}`, { host })
          assert.strictEqual(answer.status, 403, `${path} with Host "${host}"`)
          assert.notInclude(answer.body, "Fix the failing test")
        }
        const own = yield* get(`${view.url}${path}`, { host: `localhost:${port}`, origin: "http://evil.example" })
        assert.isUndefined(own.headers["access-control-allow-origin"], path)
      }
      const api = yield* get(`${view.url}api/session`, { host: `127.0.0.1:${port}`, origin: "http://evil.example" })
      assert.strictEqual(api.status, 200)
      assert.include(api.body, "Fix the failing test")
    }).pipe(Effect.provide(NodeServices.layer)))
})

describe("the terminal", () => {
  // OSC 52 writes the clipboard, ESC[2J clears the screen: a file name in a cloned repository may carry either.
  const EVIL = "\u001b]52;c;cm0gLXJmIH4=\u0007\u001b[2J"

  it.live("a session file name with control sequences is printed without them (the file, and errors naming it)", () =>
    Effect.gen(function*() {
      const root = emptyWorkspace()
      const dir = sessionsOf(root)
      writeFileSync(join(dir, `a${EVIL}1.jsonl`), session)
      writeFileSync(join(dir, `a${EVIL}2.jsonl`), session)
      const ambiguous = yield* refused({ workspace: root, session: "a" })
      assert.include(ambiguous.message, "matches 2 sessions")
      assert.notMatch(ambiguous.message, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/)
      mkdirSync(join(dir, `b${EVIL}.jsonl`))
      const folder = yield* refused({ workspace: root, session: `.agentloop/sessions/b${EVIL}.jsonl` })
      assert.notMatch(folder.message, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/)

      const printed = yield* Deferred.make<string>()
      const console: Console.Console = {
        ...globalThis.console,
        log: (...args: ReadonlyArray<unknown>) => {
          Deferred.doneUnsafe(printed, Exit.succeed(args.join(" ")))
        }
      }
      const fiber = yield* viewSession({ workspace: root, session: `a${EVIL}1` }).pipe(
        Effect.provideService(Console.Console, console),
        Effect.forkChild
      )
      const line = yield* Deferred.await(printed)
      yield* Fiber.interrupt(fiber)
      assert.include(line, `agentloop view: ${join(dir, "a1.jsonl")}`, "the name with its sequences taken out")
      assert.notMatch(line, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/)
    }).pipe(Effect.provide(NodeServices.layer)))
})
