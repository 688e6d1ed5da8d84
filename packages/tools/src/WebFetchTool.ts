/**
 * `web_fetch`: GET one `http:` or `https:` URL and return it as readable text. It is **not** one of
 * `codingTools`: a program adds it (see the tools guide), and it is not marked `readOnly`, since a
 * URL can carry what the model read out of the workspace to any server.
 *
 * - Only public addresses are fetched: a host that is an IP address, or whose name resolves to an
 *   address, in a loopback, private, link-local (cloud metadata: 169.254.169.254), carrier-grade
 *   NAT, multicast or otherwise special range is refused, unless the program allows that host by
 *   name (`WebFetchOptions.allowHosts`). Names are checked in the lookup of the connection itself,
 *   so the socket connects to the address that was checked.
 * - Redirects are followed by the tool, at most `WEB_FETCH_MAX_REDIRECTS`, each target checked as
 *   above (and `http:`/`https:` only).
 * - At most `WEB_FETCH_MAX_BYTES` of the body are read (the rest is not downloaded; the result
 *   says so), and the whole call, redirects included, ends after `WEB_FETCH_TIMEOUT_MS`.
 * - HTML (and XHTML) becomes plain text with `html-to-text`: headings, paragraphs, lists, tables
 *   and links (made absolute) kept; scripts, styles, images, SVG and templates left out. Other text
 *   (plain, JSON, XML, JavaScript, CSS) is returned as it is; binary content is refused. The text
 *   is returned `WEB_FETCH_MAX_CHARS` characters at a time, with the `offset` to read on from.
 *
 * @since 0.1.0
 */
import { defineTool, ToolError } from "@agentloop/core"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Context, Duration, Effect, Layer, Option, Schema, Stream } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import type { HttpClientError } from "effect/http"
import { convert } from "html-to-text"
import * as NodeZlib from "node:zlib"
import { AddressRefused, guardedLookup, hostKey, refusedLiteral } from "./internal/address.ts"
import { codeOf } from "./internal/confined.ts"
import { NonNegativeInt } from "./internal/search.ts"
import { cutAt, looksBinary } from "./internal/text.ts"

/** @since 0.1.0 @category constants */
export const WEB_FETCH_MAX_BYTES = 5 * 1024 * 1024
/** @since 0.1.0 @category constants */
export const WEB_FETCH_TIMEOUT_MS = 30_000
/** @since 0.1.0 @category constants */
export const WEB_FETCH_MAX_REDIRECTS = 5
/** @since 0.1.0 @category constants */
export const WEB_FETCH_MAX_CHARS = 50_000
/** @since 0.1.0 @category constants */
export const WEB_FETCH_MAX_URL_LENGTH = 8192

/**
 * How `web_fetch` fetches.
 *
 * @since 0.1.0
 * @category models
 */
export interface WebFetchOptions {
  /**
   * Host names (exactly, in any case; IP addresses too, IPv6 without brackets) that may be fetched
   * although they are or resolve to loopback, private or link-local addresses, e.g.
   * `["localhost"]` for a documentation server on this machine.
   */
  readonly allowHosts?: ReadonlyArray<string> | undefined
  /** Bytes of a body read at most (default `WEB_FETCH_MAX_BYTES`). */
  readonly maxBytes?: number | undefined
  /** Milliseconds one call may take, redirects included (default `WEB_FETCH_TIMEOUT_MS`). */
  readonly timeoutMs?: number | undefined
  /** Redirects followed at most (default `WEB_FETCH_MAX_REDIRECTS`). */
  readonly maxRedirects?: number | undefined
  /** The `User-Agent` header (default `agentloop-web-fetch/0.1`). */
  readonly userAgent?: string | undefined
}

/**
 * The `WebFetchOptions` in effect; defaults to none (public addresses only, the default limits).
 *
 * @since 0.1.0
 * @category services
 */
export const WebFetchSettings: Context.Reference<WebFetchOptions> = Context.Reference<WebFetchOptions>(
  "@agentloop/tools/WebFetchSettings",
  { defaultValue: () => ({}) }
)

/**
 * Provides `options` to the `web_fetch` tool.
 *
 * @since 0.1.0
 * @category layers
 */
export const webFetchOptionsLayer = (options: WebFetchOptions): Layer.Layer<never> =>
  Layer.succeed(WebFetchSettings, options)

interface Fetched {
  readonly url: URL
  readonly status: number
  readonly contentType: string | undefined
  readonly contentEncoding: string | undefined
  readonly body: Uint8Array
  /** The body was longer than the limit: only its start was read. */
  readonly cut: boolean
  readonly redirects: ReadonlyArray<string>
}

const fail = (message: string) => Effect.fail(new ToolError({ message }))

/** The URL of a request, checked: `http:`/`https:`, no credentials, no refused IP address as host. */
const checkUrl = (url: URL, allowed: ReadonlySet<string>): Effect.Effect<URL, ToolError> => {
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return fail(`${url.href}: only http: and https: URLs are fetched`)
  }
  if (url.username !== "" || url.password !== "") return fail(`${url.origin}: URLs with credentials are refused`)
  const refused = refusedLiteral(url.hostname, allowed)
  return refused === undefined ? Effect.succeed(url) : fail(refused.message)
}

/** The message of a failed request: the refusal of an address, or what went wrong, without a stack. */
const transportMessage = (url: URL, error: HttpClientError.HttpClientError): string => {
  let cause: unknown = error
  for (let i = 0; i < 6 && cause !== undefined && cause !== null; i++) {
    if (cause instanceof AddressRefused) return cause.message
    const code = codeOf(cause)
    if (code !== undefined && code !== "TransportError") return `${url.href}: cannot fetch (${code})`
    cause = typeof cause === "object" && "cause" in cause ? cause.cause : undefined
  }
  return `${url.href}: cannot fetch (${error.reason._tag})`
}

const redirectStatuses = new Set([301, 302, 303, 307, 308])

/** GETs `start`, following redirects (each checked), and reads at most `maxBytes` of the last body. */
const fetchFollowing = (start: URL, options: {
  readonly allowed: ReadonlySet<string>
  readonly maxBytes: number
  readonly maxRedirects: number
  readonly userAgent: string
}) =>
  Effect.gen(function*() {
    const agent = yield* NodeHttpClient.makeAgent({ lookup: guardedLookup(options.allowed), keepAlive: false })
    const client = yield* NodeHttpClient.makeNodeHttp.pipe(Effect.provideService(NodeHttpClient.HttpAgent, agent))
    const redirects: Array<string> = []
    let url = start
    for (;;) {
      yield* checkUrl(url, options.allowed)
      const request = HttpClientRequest.get(url, {
        headers: {
          "user-agent": options.userAgent,
          accept: "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
          "accept-encoding": "identity"
        }
      })
      const response = yield* client.execute(request).pipe(
        Effect.provideService(HttpClient.TracerPropagationEnabled, false),
        Effect.mapError((error) => new ToolError({ message: transportMessage(url, error) }))
      )
      const location = response.headers["location"]
      if (redirectStatuses.has(response.status) && location !== undefined) {
        if (redirects.length >= options.maxRedirects) {
          return yield* fail(`${start.href}: more than ${options.maxRedirects} redirects; not followed further`)
        }
        let next: URL
        try {
          next = new URL(location, url)
        } catch {
          return yield* fail(`${url.href} redirects to ${JSON.stringify(location)}, which is not a valid URL`)
        }
        redirects.push(next.href)
        url = next
        continue
      }
      const chunks: Array<Uint8Array> = []
      let total = 0
      yield* Stream.runForEachWhile(response.stream, (chunk) =>
        Effect.sync(() => {
          chunks.push(chunk)
          total += chunk.length
          return total <= options.maxBytes
        })).pipe(Effect.mapError((error) => new ToolError({ message: transportMessage(url, error) })))
      const body = Buffer.concat(chunks, total)
      return {
        url,
        status: response.status,
        contentType: response.headers["content-type"],
        contentEncoding: response.headers["content-encoding"],
        body: body.subarray(0, Math.min(total, options.maxBytes)),
        cut: total > options.maxBytes,
        redirects
      } satisfies Fetched
    }
  })

/** The body without its content encoding (a server may compress although asked not to). */
const decoded = (fetched: Fetched, maxBytes: number): Effect.Effect<Uint8Array, ToolError> => {
  const encoding = fetched.contentEncoding?.trim().toLowerCase()
  if (encoding === undefined || encoding === "" || encoding === "identity") return Effect.succeed(fetched.body)
  const options = { maxOutputLength: maxBytes, finishFlush: NodeZlib.constants.Z_SYNC_FLUSH }
  const decompress = encoding === "gzip" || encoding === "x-gzip" ?
    NodeZlib.gunzipSync :
    encoding === "deflate" ?
    NodeZlib.inflateSync :
    encoding === "br" ?
    (buffer: Uint8Array, o: typeof options) =>
      NodeZlib.brotliDecompressSync(buffer, {
        maxOutputLength: o.maxOutputLength,
        finishFlush: NodeZlib.constants.BROTLI_OPERATION_FLUSH
      }) :
    undefined
  if (decompress === undefined) return fail(`${fetched.url.href}: the content encoding ${encoding} is not supported`)
  // zlib is a foreign API whose only report of bad or oversized input is an exception
  try {
    return Effect.succeed(decompress(fetched.body, options))
  } catch (error) {
    return fail(
      codeOf(error) === "ERR_BUFFER_TOO_LARGE" ?
        `${fetched.url.href}: the ${encoding} body is over ${maxBytes} bytes once decompressed` :
        `${fetched.url.href}: the ${encoding} body could not be decompressed`
    )
  }
}

const textTypes = /^(text\/|application\/(json|xml|xhtml\+xml|javascript|ecmascript|x-javascript)$)|[+/](json|xml)$/

/** The media type and charset of a `Content-Type` header. */
const parseContentType = (header: string | undefined): { readonly type: string; readonly charset: string } => {
  const [type = "", ...params] = (header ?? "").split(";").map((part) => part.trim())
  const charset = params.find((p) => p.toLowerCase().startsWith("charset="))?.slice(8).replace(/^"|"$/g, "")
  return { type: type.toLowerCase(), charset: charset ?? "utf-8" }
}

const decoderFor = (charset: string) => {
  // TextDecoder is a foreign API whose only report of an unknown charset is an exception
  try {
    return new TextDecoder(charset)
  } catch {
    return new TextDecoder("utf-8")
  }
}

const decodeText = (bytes: Uint8Array, charset: string): string => decoderFor(charset).decode(bytes)

/** HTML as readable text: links made absolute against `base`, what a reader does not see left out. */
const htmlToText = (html: string, base: URL): string => {
  const absolute = (href: string): string => {
    // URL is a foreign API whose only report of a bad href is an exception
    try {
      return new URL(href, base).href
    } catch {
      return href
    }
  }
  const skip = ["img", "picture", "video", "audio", "svg", "canvas", "script", "style", "noscript", "template"]
  const text = convert(html, {
    wordwrap: false,
    baseElements: { selectors: ["body"], returnDomByDefault: true },
    limits: { maxDepth: 256, maxInputLength: WEB_FETCH_MAX_BYTES * 4 },
    selectors: [
      { selector: "a", options: { pathRewrite: absolute, hideLinkHrefIfSameAsText: true, noAnchorUrl: true } },
      ...skip.map((selector) => ({ selector, format: "skip" })),
      ...["h1", "h2", "h3", "h4", "h5", "h6"].map((selector) => ({ selector, options: { uppercase: false } })),
      { selector: "table", format: "dataTable", options: { uppercaseHeaderCells: false } }
    ]
  })
  return text.replace(/\n{3,}/g, "\n\n").trim()
}

const titleOf = (html: string): string | undefined => {
  const match = /<title[^>]*>([^<]{1,300})<\/title>/i.exec(html.slice(0, 64 * 1024))
  return match?.[1] === undefined ? undefined : convert(match[1], { wordwrap: false }).trim() || undefined
}

/**
 * The `web_fetch` tool (off by default: add it to an executor yourself).
 *
 * @since 0.1.0
 * @category tools
 */
export const webFetchTool = defineTool({
  name: "web_fetch",
  description: "Fetch a public http(s) URL with GET and return its content as text (HTML as readable text with " +
    `links; JSON, XML and plain text as they are). At most ${WEB_FETCH_MAX_CHARS} characters per call: use offset ` +
    "to read on. Addresses on this machine or private networks are refused.",
  parameters: Schema.Struct({
    url: Schema.String.annotate({ description: "the http or https URL to fetch" }),
    offset: Schema.optionalKey(
      NonNegativeInt.annotate({ description: "characters of the text to skip, to read on (default 0)" })
    )
  }),
  execute: ({ url: input, offset = 0 }) =>
    Effect.gen(function*() {
      const settings = yield* WebFetchSettings
      const allowed = new Set((settings.allowHosts ?? []).map(hostKey))
      const maxBytes = settings.maxBytes ?? WEB_FETCH_MAX_BYTES
      const timeoutMs = settings.timeoutMs ?? WEB_FETCH_TIMEOUT_MS
      if (input.length > WEB_FETCH_MAX_URL_LENGTH) {
        return yield* fail(`the URL is ${input.length} characters long, over the limit of ${WEB_FETCH_MAX_URL_LENGTH}`)
      }
      let start: URL
      try {
        start = new URL(input)
      } catch {
        return yield* fail(`${JSON.stringify(input)} is not a valid URL (give it whole: https://host/path)`)
      }
      const fetched = yield* Effect.scoped(fetchFollowing(start, {
        allowed,
        maxBytes,
        maxRedirects: settings.maxRedirects ?? WEB_FETCH_MAX_REDIRECTS,
        userAgent: settings.userAgent ?? "agentloop-web-fetch/0.1"
      })).pipe(Effect.timeoutOption(Duration.millis(timeoutMs)))
      if (Option.isNone(fetched)) {
        return yield* fail(`${start.href}: no complete answer within ${timeoutMs / 1000} s`)
      }
      const page = fetched.value
      const bytes = yield* decoded(page, maxBytes)
      const { type, charset } = parseContentType(page.contentType)
      const sniffedHtml = type === "" && /^\s*(<!doctype html|<html)/i.test(decodeText(bytes.subarray(0, 512), "utf-8"))
      const isHtml = type === "text/html" || type === "application/xhtml+xml" || sniffedHtml
      if (!isHtml && !textTypes.test(type) && (type !== "" || looksBinary(bytes))) {
        return yield* fail(
          `${page.url.href} is ${type === "" ? "binary content" : type} (${bytes.length} bytes); ` +
            "web_fetch returns text and HTML only"
        )
      }
      const raw = decodeText(bytes, charset)
      const title = isHtml ? titleOf(raw) : undefined
      let text: string
      // html-to-text throws on input it cannot handle (nesting deeper than the stack)
      try {
        text = isHtml ? htmlToText(raw, page.url) : raw
      } catch {
        return yield* fail(`${page.url.href}: the HTML could not be turned into text`)
      }
      const shown = cutAt(text.slice(offset), WEB_FETCH_MAX_CHARS)
      const end = offset + shown.length
      const header = [
        `URL: ${page.url.href}`,
        ...(page.redirects.length > 0 ? [`Redirected from: ${start.href}`] : []),
        `Status: ${page.status}`,
        ...(page.contentType === undefined ? [] : [`Content-Type: ${page.contentType}`]),
        ...(title === undefined ? [] : [`Title: ${title}`])
      ].join("\n")
      const notices: Array<string> = []
      if (offset > 0 && offset >= text.length) {
        notices.push(`[No text at offset ${offset}: the text has ${text.length} characters.]`)
      } else if (end < text.length) {
        notices.push(`[Showing characters ${offset + 1}-${end} of ${text.length}. Use offset=${end} to read on.]`)
      }
      if (page.cut) {
        notices.push(`[The response is over ${maxBytes} bytes: only its first ${maxBytes} bytes were read.]`)
      }
      return {
        content: [{ type: "text" as const, text: [header, shown, ...notices].filter((s) => s !== "").join("\n\n") }],
        details: {
          url: page.url.href,
          status: page.status,
          contentType: page.contentType ?? null,
          bytes: bytes.length,
          characters: text.length,
          redirects: page.redirects,
          truncated: page.cut || end < text.length
        },
        ...(page.status >= 400 ? { isError: true } : {})
      }
    })
})
