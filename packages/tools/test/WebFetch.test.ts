/**
 * web_fetch against servers on the loopback interface that each test starts itself: never the
 * internet, and never another address (the refusals of private and metadata addresses are shown
 * on loopback ones, and on the pure address checks below).
 */
import { codingTools, webFetchOptionsLayer, webFetchTool } from "@agentloop/tools"
import type { WebFetchOptions } from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { createServer } from "node:http"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { gzipSync } from "node:zlib"
import { guardedLookup, refusedLiteral, refusedRange } from "../src/internal/address.ts"
import { context, details, failed, text } from "./helpers.ts"

const ctx = context()

/** A server on 127.0.0.1 answering with `handler`; the paths it was asked for are in `hits`. */
const serve = (handler: (request: IncomingMessage, response: ServerResponse) => void) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly port: number; readonly hits: Array<string>; readonly close: () => void }>((resume) => {
      const hits: Array<string> = []
      const server = createServer((request, response) => {
        hits.push(request.url ?? "")
        handler(request, response)
      })
      server.listen(0, "127.0.0.1", () =>
        resume(Effect.succeed({
          port: (server.address() as AddressInfo).port,
          hits,
          close: () => {
            server.closeAllConnections()
            server.close()
          }
        })))
    }),
    ({ close }) => Effect.sync(close)
  )

const fetch = (url: string, options: WebFetchOptions = {}, offset?: number) =>
  webFetchTool.execute(offset === undefined ? { url } : { url, offset }, ctx).pipe(
    Effect.provide(webFetchOptionsLayer(options))
  )

const local = { allowHosts: ["localhost"] }

const page = `<!doctype html><html><head><title>Release &amp; notes</title><style>p { color: red }</style>
<script>window.secret = "script text"</script></head><body>
<nav><a href="/">Home</a></nav>
<h1>Version 2</h1>
<p>It has <b>bold</b> text and a <a href="docs/intro.html">relative link</a>.</p>
<ul><li>first</li><li>second</li></ul>
<img src="x.png" alt="a picture"><svg><text>drawn</text></svg><noscript>no script</noscript>
</body></html>`

describe("web_fetch", () => {
  it.effect("turns HTML into readable text: title, headings, lists, absolute links; no script, style or images", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* serve((_, response) => {
        response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
        response.end(page)
      })
      const result = yield* fetch(`http://localhost:${server.port}/release/notes.html`, local)
      const base = `http://localhost:${server.port}`
      assert.strictEqual(
        text(result),
        `URL: ${base}/release/notes.html\nStatus: 200\nContent-Type: text/html; charset=utf-8\n` +
          `Title: Release & notes\n\nHome [${base}/]\n\nVersion 2\n\n` +
          `It has bold text and a relative link [${base}/release/docs/intro.html].\n\n * first\n * second`
      )
      assert.deepStrictEqual(details(result), {
        url: `${base}/release/notes.html`,
        status: 200,
        contentType: "text/html; charset=utf-8",
        bytes: Buffer.byteLength(page),
        characters: text(result).split("\n\n").slice(1).join("\n\n").length,
        redirects: [],
        truncated: false
      })
    })))

  it.effect("refuses loopback addresses, by name or as an address, without connecting, unless allowed by name", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* serve((_, response) => response.end("served"))
      const refusal = "address; web_fetch refuses addresses that are not public (a program can allow a host by " +
        "name with allowHosts)"
      const byName = yield* failed(fetch(`http://localhost:${server.port}/`))
      assert.match(byName.message, /^localhost resolves to (127\.0\.0\.1|::1), which is a loopback address; /)
      assert.isTrue(byName.message.endsWith(refusal))
      assert.strictEqual(
        (yield* failed(fetch(`http://127.0.0.1:${server.port}/`))).message,
        `127.0.0.1 is a loopback ${refusal}`
      )
      // other spellings of 127.0.0.1 are the same address once the URL is parsed
      for (const host of ["0x7f.1", "2130706433", "127.1", "LOCALHOST"]) {
        assert.match((yield* failed(fetch(`http://${host}:${server.port}/`))).message, /loopback address/, host)
      }
      assert.strictEqual((yield* failed(fetch(`http://[::1]:${server.port}/`))).message, `::1 is a loopback ${refusal}`)
      assert.strictEqual(
        (yield* failed(fetch(`http://0.0.0.0:${server.port}/`))).message,
        `0.0.0.0 is a unspecified ${refusal}`
      )
      assert.deepStrictEqual(server.hits, [], "nothing reached the server")
      // allowed by name: the name, not the address, is what the program allowed
      assert.include(text(yield* fetch(`http://localhost:${server.port}/`, local)), "served")
      assert.include(text(yield* fetch(`http://127.0.0.1:${server.port}/`, { allowHosts: ["127.0.0.1"] })), "served")
      assert.match(
        (yield* failed(fetch(`http://127.0.0.1:${server.port}/`, local))).message,
        /^127\.0\.0\.1 is a loopback address/
      )
    })))

  it.effect("checks every redirect again: a redirect to a refused address is not followed", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* serve((request, response) => {
        if (request.url === "/start") {
          response.writeHead(302, { location: `http://127.0.0.1:${(request.socket.address() as AddressInfo).port}/s` })
        } else if (request.url === "/to-file") response.writeHead(301, { location: "file:///etc/passwd" })
        else if (request.url === "/with-credentials") response.writeHead(307, { location: "http://u:p@localhost/" })
        else response.writeHead(200)
        response.end("body")
      })
      const base = `http://localhost:${server.port}`
      assert.match((yield* failed(fetch(`${base}/start`, local))).message, /^127\.0\.0\.1 is a loopback address/)
      assert.strictEqual(
        (yield* failed(fetch(`${base}/to-file`, local))).message,
        "file:///etc/passwd: only http: and https: URLs are fetched"
      )
      assert.strictEqual(
        (yield* failed(fetch(`${base}/with-credentials`, local))).message,
        "http://localhost: URLs with credentials are refused"
      )
      assert.deepStrictEqual(server.hits, ["/start", "/to-file", "/with-credentials"], "no redirect was followed")
    })))

  it.effect("follows redirects, at most five", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* serve((request, response) => {
        const n = Number(request.url?.slice(1))
        if (n < 10) response.writeHead(n % 2 === 0 ? 301 : 307, { location: `/${n + 1}` })
        else response.writeHead(200, { "content-type": "text/plain" })
        response.end(`page ${n}`)
      })
      const base = `http://localhost:${server.port}`
      const result = yield* fetch(`${base}/5`, local)
      assert.strictEqual(
        text(result),
        `URL: ${base}/10\nRedirected from: ${base}/5\nStatus: 200\nContent-Type: text/plain\n\npage 10`
      )
      assert.deepStrictEqual(details(result)["redirects"], [6, 7, 8, 9, 10].map((n) => `${base}/${n}`))
      server.hits.length = 0
      assert.strictEqual(
        (yield* failed(fetch(`${base}/0`, local))).message,
        `${base}/0: more than 5 redirects; not followed further`
      )
      assert.deepStrictEqual(server.hits, ["/0", "/1", "/2", "/3", "/4", "/5"])
    })))

  it.effect("reads at most maxBytes of a body, also of an endless one, and says so", () =>
    Effect.scoped(Effect.gen(function*() {
      const closed = yield* Deferred.make<void>()
      const server = yield* serve((_, response) => {
        response.writeHead(200, { "content-type": "text/plain" })
        const more = () => {
          while (!response.destroyed && response.write("x".repeat(1024)));
          if (!response.destroyed) response.once("drain", more)
        }
        response.on("close", () => Deferred.doneUnsafe(closed, Effect.void))
        more()
      })
      const result = yield* fetch(`http://localhost:${server.port}/`, { ...local, maxBytes: 5000 })
      assert.strictEqual(
        text(result),
        `URL: http://localhost:${server.port}/\nStatus: 200\nContent-Type: text/plain\n\n${"x".repeat(5000)}\n\n` +
          "[The response is over 5000 bytes: only its first 5000 bytes were read.]"
      )
      assert.isTrue(details(result)["truncated"])
      yield* Deferred.await(closed)
    })))

  it.effect("ends a call that gets no complete answer within the time limit (TestClock)", () =>
    Effect.scoped(Effect.gen(function*() {
      const paths = ["/silent", "/slow-body"]
      const gates = new Map<string, { asked: Deferred.Deferred<void>; closed: Deferred.Deferred<void> }>()
      for (const path of paths) {
        gates.set(path, { asked: yield* Deferred.make<void>(), closed: yield* Deferred.make<void>() })
      }
      const server = yield* serve((request, response) => {
        const gate = gates.get(request.url ?? "")!
        request.socket.on("close", () => Deferred.doneUnsafe(gate.closed, Effect.void))
        if (request.url === "/slow-body") {
          response.writeHead(200, { "content-type": "text/plain" })
          response.write("the start, and then nothing")
        }
        Deferred.doneUnsafe(gate.asked, Effect.void)
      })
      for (const path of paths) {
        const gate = gates.get(path)!
        const fiber = yield* failed(fetch(`http://localhost:${server.port}${path}`, { ...local, timeoutMs: 10_000 }))
          .pipe(Effect.forkChild)
        yield* Deferred.await(gate.asked)
        yield* TestClock.adjust(9_999)
        assert.isUndefined(fiber.pollUnsafe(), "still waiting before the limit")
        yield* TestClock.adjust(1)
        assert.strictEqual(
          (yield* Fiber.join(fiber)).message,
          `http://localhost:${server.port}${path}: no complete answer within 10 s`
        )
        yield* Deferred.await(gate.closed)
      }
    })))

  it.effect("an interrupted call closes its connection", () =>
    Effect.scoped(Effect.gen(function*() {
      const asked = yield* Deferred.make<void>()
      const closed = yield* Deferred.make<void>()
      const server = yield* serve((request) => {
        request.socket.on("close", () => Deferred.doneUnsafe(closed, Effect.void))
        Deferred.doneUnsafe(asked, Effect.void)
      })
      const fiber = yield* fetch(`http://localhost:${server.port}/`, local).pipe(Effect.forkChild)
      yield* Deferred.await(asked)
      yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.hasInterrupts(yield* Fiber.await(fiber)))
      yield* Deferred.await(closed)
    })))

  it.effect("returns JSON and plain text as they are (in their charset), refuses binary content", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* serve((request, response) => {
        const answers: Record<string, readonly [Record<string, string>, Uint8Array | string]> = {
          "/json": [{ "content-type": "application/json" }, `{"a": [1, 2]}`],
          "/latin1": [{ "content-type": "text/plain; charset=iso-8859-1" }, new Uint8Array([0x63, 0x61, 0x66, 0xe9])],
          "/png": [{ "content-type": "image/png" }, new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0, 0])],
          "/untyped-binary": [{}, new Uint8Array([1, 0, 2])],
          "/untyped-html": [{}, "<!DOCTYPE html><p>sniffed</p>"],
          "/gzip": [{ "content-type": "text/plain", "content-encoding": "gzip" }, gzipSync("compressed anyway")],
          "/missing": [{ "content-type": "text/plain" }, "not here"]
        }
        const [headers, body] = answers[request.url ?? ""]!
        response.writeHead(request.url === "/missing" ? 404 : 200, headers)
        response.end(body)
      })
      const base = `http://localhost:${server.port}`
      const body = (output: { readonly content: ReadonlyArray<unknown> } | string) =>
        text(output as never).split("\n\n").slice(1).join("\n\n")
      assert.strictEqual(body(yield* fetch(`${base}/json`, local)), `{"a": [1, 2]}`)
      assert.strictEqual(body(yield* fetch(`${base}/latin1`, local)), "café")
      assert.strictEqual(body(yield* fetch(`${base}/untyped-html`, local)), "sniffed")
      assert.strictEqual(body(yield* fetch(`${base}/gzip`, local)), "compressed anyway")
      assert.strictEqual(
        (yield* failed(fetch(`${base}/png`, local))).message,
        `${base}/png is image/png (6 bytes); web_fetch returns text and HTML only`
      )
      assert.strictEqual(
        (yield* failed(fetch(`${base}/untyped-binary`, local))).message,
        `${base}/untyped-binary is binary content (3 bytes); web_fetch returns text and HTML only`
      )
      const missing = yield* fetch(`${base}/missing`, local)
      assert.isTrue(typeof missing !== "string" && missing.isError === true)
      assert.strictEqual(text(missing), `URL: ${base}/missing\nStatus: 404\nContent-Type: text/plain\n\nnot here`)
    })))

  it.effect("returns long text 50,000 characters at a time, with the offset to read on", () =>
    Effect.scoped(Effect.gen(function*() {
      const long = Array.from({ length: 12_000 }, (_, i) => `line ${String(i).padStart(5, "0")}`).join("\n")
      const server = yield* serve((_, response) => {
        response.writeHead(200, { "content-type": "text/plain" })
        response.end(long)
      })
      const url = `http://localhost:${server.port}/`
      const first = text(yield* fetch(url, local))
      assert.isTrue(first.includes(long.slice(0, 50_000)))
      assert.isTrue(first.endsWith(`\n\n[Showing characters 1-50000 of ${long.length}. Use offset=50000 to read on.]`))
      const last = text(yield* fetch(url, local, 100_000))
      assert.isTrue(last.endsWith(`\n\n${long.slice(100_000)}`))
      assert.isTrue(
        text(yield* fetch(url, local, 200_000)).endsWith(
          `[No text at offset 200000: the text has ${long.length} characters.]`
        )
      )
    })))

  it.effect("refuses other schemes, credentials, bad and overlong URLs before anything is sent", () =>
    Effect.gen(function*() {
      const message = (url: string) => Effect.map(failed(fetch(url)), (e) => e.message)
      assert.strictEqual(
        yield* message("file:///etc/passwd"),
        "file:///etc/passwd: only http: and https: URLs are fetched"
      )
      assert.strictEqual(
        yield* message("ftp://localhost/x"),
        "ftp://localhost/x: only http: and https: URLs are fetched"
      )
      assert.strictEqual(
        yield* message("http://user:secret@localhost/"),
        "http://localhost: URLs with credentials are refused"
      )
      assert.strictEqual(
        yield* message("not a url"),
        "\"not a url\" is not a valid URL (give it whole: https://host/path)"
      )
      assert.strictEqual(
        yield* message(`http://localhost/${"a".repeat(9000)}`),
        "the URL is 9017 characters long, over the limit of 8192"
      )
    }))

  it("is not read-only (a URL can carry data out) and not among codingTools", () => {
    assert.strictEqual(webFetchTool.definition.name, "web_fetch")
    assert.isUndefined(webFetchTool.definition.readOnly)
    assert.notInclude(codingTools.map((t) => t.name), "web_fetch")
  })
})

describe("the address checks (no connection is made)", () => {
  it("refuses every address that is not public, IPv4 and IPv6, mapped and embedded forms included", () => {
    const refused: Record<string, string> = {
      "127.0.0.1": "loopback",
      "127.255.0.9": "loopback",
      "::1": "loopback",
      "::ffff:127.0.0.1": "loopback",
      "0.0.0.0": "unspecified",
      "::": "unspecified",
      "10.1.2.3": "private",
      "172.16.0.1": "private",
      "172.31.255.255": "private",
      "192.168.1.1": "private",
      "fd12:3456::1": "private",
      "fec0::1": "private",
      "169.254.169.254": "link-local (where cloud metadata services answer)",
      "::ffff:169.254.169.254": "link-local (where cloud metadata services answer)",
      "fe80::1%eth0": "link-local (where cloud metadata services answer)",
      "fd00:ec2::254": "private",
      "100.64.0.1": "carrier-grade NAT",
      "224.0.0.1": "multicast",
      "ff02::1": "multicast",
      "::127.0.0.1": "an IPv6 form of an IPv4 address",
      "64:ff9b::a9fe:a9fe": "an IPv6 form of an IPv4 address",
      "2002:a9fe:a9fe::1": "an IPv6 form of an IPv4 address",
      "2001:0:4136:e378::1": "reserved or special-purpose",
      "2001:db8::1": "reserved or special-purpose",
      "192.0.2.1": "reserved or special-purpose",
      "198.18.0.1": "reserved or special-purpose",
      "255.255.255.255": "reserved or special-purpose",
      "not-an-ip": "not an IP address"
    }
    for (const [address, range] of Object.entries(refused)) assert.strictEqual(refusedRange(address), range, address)
    for (
      const address of ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]
    ) {
      assert.isUndefined(refusedRange(address), address)
    }
    assert.match(refusedLiteral("169.254.169.254", new Set())!.message, /^169\.254\.169\.254 is a link-local/)
    assert.match(refusedLiteral("[fd00:ec2::254]", new Set())!.message, /^fd00:ec2::254 is a private address/)
    assert.isUndefined(refusedLiteral("169.254.169.254", new Set(["169.254.169.254"])), "allowed by name")
    assert.isUndefined(refusedLiteral("example.com", new Set()), "names are checked when they resolve")
  })

  it("the connection's lookup refuses a name when any of its addresses is refused, answers in the asked shape", () => {
    const resolveTo = (addresses: ReadonlyArray<string>) =>
    (
      _host: string,
      _options: unknown,
      callback: (error: null, addresses: Array<{ address: string; family: number }>) => void
    ) => callback(null, addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 })))
    const answers: Array<unknown> = []
    const record = (...args: Array<unknown>) => void answers.push(args)
    guardedLookup(new Set(), resolveTo(["93.184.215.14", "169.254.169.254"]))("rebind.example", {}, record)
    guardedLookup(new Set(), resolveTo(["93.184.215.14"]))("public.example", {}, record)
    guardedLookup(new Set(), resolveTo(["93.184.215.14", "2606:2800::1"]))("public.example", { all: true }, record)
    guardedLookup(new Set(["metadata.internal"]), resolveTo(["169.254.169.254"]))("Metadata.Internal", {}, record)
    const [rebound, one, all, allowed] = answers as Array<Array<unknown>>
    assert.strictEqual(
      (rebound![0] as Error).message,
      "rebind.example resolves to 169.254.169.254, which is a link-local (where cloud metadata services answer) " +
        "address; web_fetch refuses addresses that are not public (a program can allow a host by name with allowHosts)"
    )
    assert.deepStrictEqual(one, [null, "93.184.215.14", 4])
    assert.deepStrictEqual(all, [null, [{ address: "93.184.215.14", family: 4 }, {
      address: "2606:2800::1",
      family: 6
    }]])
    assert.deepStrictEqual(allowed, [null, "169.254.169.254", 4])
  })
})
