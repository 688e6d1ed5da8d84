/**
 * The provider-independent half of a request: send one JSON POST (redirects never followed),
 * map the HTTP outcome (status, provider error body, content type, transport failure), decode the
 * body as server-sent events under the time limits, feed them to a wire protocol, retry what the
 * retry policy allows (each retry logged and recorded on the span), and turn every other failure
 * into a typed `ModelError` whose message never carries a credential or a stack trace.
 */
import { Model, ModelError } from "@agentloop/core"
import type { AssistantMessage, ModelErrorReason, ModelEvent, ModelRequest } from "@agentloop/core"
import { Array as Arr, Cause, Clock, Duration, Effect, Option, Pull, Random, Result, Stream } from "effect"
import type { Schema } from "effect"
import type { Sse } from "effect/encoding"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"
import type { HttpClientError, HttpClientResponse } from "effect/http"
import { modelInfo, usageCost } from "../Models.ts"
import type { ModelPrices } from "../Models.ts"
import { backoffDelay, retryAfterOf, shouldRetryResponse } from "../Retry.ts"
import type { RetryPolicy } from "../Retry.ts"
import { FINISH_GRACE } from "../Timeouts.ts"
import type { TimeoutPolicy } from "../Timeouts.ts"
import { makeEventParser } from "./sse.ts"
import { makeCleaner, scrub, secretForms } from "./text.ts"
import type { Cleaner } from "./text.ts"

/** Why one attempt failed, before it becomes a `ModelError` (or a retry). */
export interface Failure {
  readonly message: string
  readonly reason: ModelErrorReason
  readonly retryable: boolean
  readonly status?: number | undefined
  readonly retryAfter?: Duration.Duration | undefined
}

/**
 * What a wire protocol makes of one server-sent event (or of the end of the body): go on, the
 * answer is finished, or a failure. The model events themselves go to the array the caller passes
 * (one array per network chunk, not one per event).
 */
export type Step =
  | { readonly _tag: "Emit"; readonly finished: boolean }
  | { readonly _tag: "Fail"; readonly failure: Failure }

/** One attempt's decoder: provider-specific, stateful, made fresh for every attempt. */
export interface WireProtocol {
  /** Decodes one event, appending the model events it makes to `out` (whatever it appended is dropped if it fails). */
  readonly onEvent: (event: Sse.Event, out: Array<ModelEvent>) => Step
  /** The body ended before the protocol saw its end. */
  readonly onEnd: (out: Array<ModelEvent>) => Step
  /** Whether the provider has said why the answer ended: what came is the whole answer. */
  readonly complete: () => boolean
}

/** Everything a request needs; built once per model request. */
export interface ProviderCall {
  /** How messages name the other side, e.g. "Anthropic". */
  readonly provider: string
  readonly model: string
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  /** Credentials (the API key, the header values not marked public): scrubbed from every message. */
  readonly secrets: ReadonlyArray<string>
  readonly retry: RetryPolicy
  readonly timeouts: TimeoutPolicy
  /** Explicit prices; `undefined`: the price table; `false`: no cost. */
  readonly prices: ModelPrices | false | undefined
}

/** The step after an event: go on. */
export const proceed: Step = { _tag: "Emit", finished: false }
/** The step after the protocol's last event: the answer is whole. */
export const finish: Step = { _tag: "Emit", finished: true }
export const fail = (message: string, reason: ModelErrorReason, retryable = false): Step => ({
  _tag: "Fail",
  failure: { message, reason, retryable }
})

/** What `parseJson` gives for text that is not JSON. */
export const notJson: unique symbol = Symbol("notJson")

/** `JSON.parse`, or `notJson` (a sentinel, not a `Result`: this runs for every event of a stream). */
export const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    // JSON.parse is a foreign API that throws; its message is not needed (the data is quoted instead)
    return notJson
  }
}

/** The message for event data that is not JSON (server text cleaned). */
export const notJsonMessage = (provider: string, clean: Cleaner, data: string): string =>
  `malformed event stream from ${provider}: event data is not JSON: ${clean(data, 200)}`

/**
 * Decodes an event's parsed JSON. `fast` is a hand-written check of the common shapes that returns
 * the value itself when it is sure the schema accepts it (it must never accept what the schema
 * rejects, nor read differently: a differential test checks this); anything else goes through
 * the schema, which also words the error. Decoding every event with the schema cost about a
 * microsecond and a half per event, as much as parsing its JSON.
 */
export const decodeEvent = <A>(
  provider: string,
  clean: Cleaner,
  value: unknown,
  fast: ((u: unknown) => A | undefined) | undefined,
  decode: (u: unknown) => Result.Result<A, Schema.SchemaError>
): Result.Result<A, string> => {
  const quick = fast === undefined ? undefined : fast(value)
  if (quick !== undefined) return Result.succeed(quick)
  return Result.mapError(
    decode(value),
    (error) => `malformed event stream from ${provider}: unexpected event shape: ${clean(error.message, 200)}`
  )
}

/** Parses an event's JSON data with `decode`, or says why it is malformed (server text cleaned). */
export const parseEventData = <A>(
  provider: string,
  clean: Cleaner,
  data: string,
  decode: (u: unknown) => Result.Result<A, Schema.SchemaError>,
  fast?: (u: unknown) => A | undefined
): Result.Result<A, string> => {
  const json = parseJson(data)
  if (json === notJson) return Result.fail(notJsonMessage(provider, clean, data))
  return decodeEvent(provider, clean, json, fast, decode)
}

/** A JSON object (not an array, not null): what the fast checks of event shapes accept as a struct. */
export const isJsonObject = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/** `undefined`, `null` or a string: the fast check of `Schema.optional(Schema.NullOr(Schema.String))`. */
export const isOptionalString = (u: unknown): boolean => u === undefined || u === null || typeof u === "string"

/** `undefined`, `null` or a finite number: the fast check of `Schema.optional(Schema.NullOr(Schema.Finite))`. */
export const isOptionalFinite = (u: unknown): boolean =>
  u === undefined || u === null || (typeof u === "number" && Number.isFinite(u))

/** The URL without credentials or query, for messages. */
export const displayUrl = (url: string): string => {
  const parsed = Result.try(() => new URL(url))
  return Result.isSuccess(parsed) ? `${parsed.success.origin}${parsed.success.pathname}` : "(invalid URL)"
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

/**
 * The readable part of a provider's error body, scrubbed then clipped: `error.message` (OpenAI,
 * Anthropic, llama.cpp, OpenRouter), `error` as a string (Ollama), `message` or `detail` (other
 * servers), else the start of the raw text.
 */
export const providerErrorText = (body: string, clean: Cleaner): string | undefined => {
  const parsed = Result.try((): unknown => JSON.parse(body))
  if (Result.isSuccess(parsed) && isObject(parsed.success)) {
    const json = parsed.success
    const error = json["error"]
    if (typeof error === "string" && error.length > 0) return clean(error)
    if (isObject(error) && typeof error["message"] === "string") {
      const type = typeof error["type"] === "string" ? error["type"] : undefined
      const code = typeof error["code"] === "string" && error["code"] !== type ? error["code"] : undefined
      const label = [type !== "error" ? type : undefined, code].filter((part) => part !== undefined).join(" ")
      return clean(label.length > 0 ? `${label}: ${error["message"]}` : error["message"])
    }
    for (const key of ["message", "detail"]) {
      if (typeof json[key] === "string" && json[key].length > 0) return clean(json[key])
    }
  }
  const trimmed = body.trim()
  return trimmed.length > 0 ? clean(trimmed) : undefined
}

/** The innermost readable reason of a thrown value (fetch wraps the socket error in `cause`). */
const innermostReason = (u: unknown): string | undefined => {
  let reason: string | undefined
  let current: unknown = u
  for (let depth = 0; depth < 6 && isObject(current); depth++) {
    if (typeof current["message"] === "string" && current["message"].length > 0) reason = current["message"]
    current = current["cause"]
  }
  return reason
}

const contextLengthText = new RegExp(
  /context[_ ]length|context window|maximum context|context size|prompt is too long/.source +
    /|too many (input )?tokens|input is too long|reduce the length/.source,
  "i"
)
const contentFilterText = /content[_ ]filter|content[_ ]policy|content management policy|safety system/i

/** What an HTTP error status (and the provider's text) says about the failure. */
export const reasonOfStatus = (status: number, text: string): ModelErrorReason => {
  if (status === 401 || status === 403) return "auth"
  if (status === 402 || status === 429) return "rate_limit"
  if (status === 503 || status === 529) return "overloaded"
  if (status === 408 || status === 504) return "timeout"
  if (status >= 500) return "server"
  if (status === 404) return "not_found"
  if (status === 409) return "server"
  if (contextLengthText.test(text)) return "context_length"
  if (contentFilterText.test(text)) return "content_filter"
  return "invalid_request"
}

/** `effect` bounded by `duration` (no bound when it is infinite): `None` when time ran out. */
const withinOption = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  duration: Duration.Duration
): Effect.Effect<Option.Option<A>, E, R> =>
  Duration.isFinite(duration) ? Effect.timeoutOption(effect, duration) : Effect.asSome(effect)

const statusHint = (status: number): string =>
  status === 401 || status === 403 ?
    " (check the API key)" :
    status === 404 ?
    " (check the base URL and the model name)" :
    ""

/** The most of an error body that is read (a server may send an endless one). */
const MAX_ERROR_BODY = 4 * 1024 * 1024

/** The error body: at most `MAX_ERROR_BODY` characters, read within the idle limit ("" if not). */
const boundedBody = (
  call: ProviderCall,
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<string> => {
  const read = Effect.suspend(() => {
    let text = ""
    return Stream.decodeText(response.stream).pipe(
      Stream.takeUntil((chunk) => (text += chunk).length >= MAX_ERROR_BODY),
      Stream.runDrain,
      Effect.map(() => text.slice(0, MAX_ERROR_BODY))
    )
  })
  return withinOption(read, call.timeouts.idle).pipe(
    Effect.map(Option.getOrElse(() => "")),
    Effect.orElseSucceed(() => "")
  )
}

const statusFailure = (
  call: ProviderCall,
  clean: Cleaner,
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<Failure> =>
  Effect.gen(function*() {
    const text = providerErrorText(yield* boundedBody(call, response), clean)
    const now = yield* Clock.currentTimeMillis
    return {
      message: `${call.provider} answered HTTP ${response.status}${statusHint(response.status)}` +
        (text === undefined ? "" : `: ${text}`),
      reason: reasonOfStatus(response.status, text ?? ""),
      status: response.status,
      retryable: shouldRetryResponse(response.status, response.headers),
      retryAfter: retryAfterOf(response.headers, now)
    }
  })

const redirectFailure = (call: ProviderCall, response: HttpClientResponse.HttpClientResponse): Failure => {
  const location = response.headers["location"]
  const target = location === undefined ? undefined : Result.try(() => new URL(location, call.url))
  const where = target === undefined ?
    "without a Location" :
    Result.isSuccess(target) ?
    `to ${target.success.origin}` :
    "to an invalid address"
  return {
    message: `${call.provider} answered HTTP ${response.status}, a redirect ${where}; redirects are not followed, ` +
      `so credentials are never sent to another address: set baseUrl to the address the provider expects`,
    reason: "redirect",
    status: response.status,
    retryable: false
  }
}

/** The start of a body that is not an event stream, for the message (bounded in size and time). */
const bodySnippet = (
  call: ProviderCall,
  clean: Cleaner,
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<string> =>
  withinOption(Stream.runHead(Stream.decodeText(response.stream)), call.timeouts.idle).pipe(
    Effect.map((head) => Option.getOrElse(Option.flatten(head), () => "")),
    Effect.orElseSucceed(() => ""),
    Effect.map((text) => {
      const flat = text.replace(/\s+/g, " ").trim()
      return flat.length > 0 ? `: ${clean(flat, 200)}` : ""
    })
  )

const wrongContentType = (
  call: ProviderCall,
  clean: Cleaner,
  response: HttpClientResponse.HttpClientResponse,
  contentType: string
): Effect.Effect<Failure> => {
  if (contentType.includes("application/json")) {
    return Effect.succeed({
      message: `${call.provider} answered with JSON instead of an event stream; does it support "stream": true?`,
      reason: "protocol",
      status: response.status,
      retryable: false
    })
  }
  const hint = contentType.includes("text/html") ? " (a login page or a proxy in the way? check the base URL)" : ""
  return Effect.map(bodySnippet(call, clean, response), (snippet) => ({
    message: `${call.provider} answered HTTP ${response.status} with content type "${clean(contentType, 100)}" ` +
      `instead of an event stream${hint}${snippet}`,
    reason: "protocol",
    status: response.status,
    retryable: false
  }))
}

const transportFailure = (call: ProviderCall, clean: Cleaner, error: HttpClientError.HttpClientError): Failure => {
  const reason = error.reason
  if (reason._tag === "InvalidUrlError") {
    return {
      message: `the ${call.provider} URL is not valid: ${clean(displayUrl(call.url))}`,
      reason: "invalid_request",
      retryable: false
    }
  }
  const detail = innermostReason(reason.cause) ?? reason.description ?? reason._tag
  return {
    message: `could not reach ${call.provider} at ${clean(displayUrl(call.url))}: ${clean(detail, 300)}`,
    reason: "network",
    retryable: true
  }
}

const timeoutFailure = (
  call: ProviderCall,
  limit: keyof TimeoutPolicy,
  what: string
): Failure => ({
  message: `${call.provider} ${what} within ${Duration.format(call.timeouts[limit])} (timeouts.${limit})`,
  reason: "timeout",
  retryable: false
})

/** `effect` bounded by `duration` (no bound when it is infinite). */
const within = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  duration: Duration.Duration,
  onTimeout: () => E
): Effect.Effect<A, E, R> =>
  Duration.isFinite(duration)
    ? Effect.timeoutOrElse(effect, { duration, orElse: () => Effect.fail(onTimeout()) })
    : effect

/** Redirects are returned, not followed, by effect's fetch client (other clients do not follow them by default). */
const noRedirects = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(
    Effect.serviceOption(FetchHttpClient.RequestInit),
    (init) =>
      Effect.provideService(effect, FetchHttpClient.RequestInit, {
        ...Option.getOrElse(init, () => ({})),
        redirect: "manual"
      })
  )

/**
 * Sends the request; a redirect, a non-2xx status or a response that is not an event stream is a
 * `Failure`, and so are headers that take longer than `timeouts.firstByte`.
 */
const send = (
  client: HttpClient.HttpClient,
  call: ProviderCall,
  clean: Cleaner
): Effect.Effect<HttpClientResponse.HttpClientResponse, Failure> => {
  const request = HttpClientRequest.post(call.url).pipe(
    HttpClientRequest.setHeaders(call.headers),
    HttpClientRequest.bodyText(call.body, "application/json")
  )
  const headers = client.execute(request).pipe(
    // trace ids are not sent to third-party model APIs
    Effect.provideService(HttpClient.TracerPropagationEnabled, false),
    noRedirects,
    Effect.mapError((error) => transportFailure(call, clean, error))
  )
  return within(headers, call.timeouts.firstByte, () => timeoutFailure(call, "firstByte", "sent no response")).pipe(
    Effect.flatMap((response) => {
      if (response.status >= 300 && response.status < 400) return Effect.fail(redirectFailure(call, response))
      if (response.status < 200 || response.status >= 300) {
        return Effect.flatMap(statusFailure(call, clean, response), Effect.fail)
      }
      const contentType = (response.headers["content-type"] ?? "").toLowerCase()
      if (contentType !== "" && !contentType.includes("text/event-stream")) {
        return Effect.flatMap(wrongContentType(call, clean, response, contentType), Effect.fail)
      }
      return Effect.succeed(response)
    })
  )
}

/**
 * The model events of a response body, decoded a network chunk at a time: each piece of text is
 * fed to the SSE parser (`./sse.ts`), every event it completes goes through the wire protocol at once, and
 * the model events of the chunk leave as one stream chunk. (Decoding event by event, with a
 * stream stage, an effect and a timeout per event, cost 10–20 µs per event: more than parsing it.)
 *
 * `timeouts.idle` bounds the wait for the next *event*, not the next bytes: a server dripping a
 * byte at a time without completing an event still runs out of it. After the protocol's last
 * event nothing more is read; a body ending early gets the protocol's `onEnd`. `retry:`
 * directives are ignored: a model stream is not resumable.
 */
export const modelEvents = (
  call: ProviderCall,
  clean: Cleaner,
  protocol: WireProtocol,
  body: Stream.Stream<Uint8Array, HttpClientError.HttpClientError>,
  state: { finished: boolean }
): Stream.Stream<ModelEvent, Failure> => {
  const text = body.pipe(
    Stream.mapError((error): Failure => ({
      message: `the connection to ${call.provider} was lost while streaming the response (${
        clean(innermostReason(error.reason.cause) ?? error.reason._tag, 300)
      })`,
      reason: "network",
      retryable: true
    })),
    Stream.decodeText
  )
  const idle = () => protocol.complete() ? Duration.min(call.timeouts.idle, FINISH_GRACE) : call.timeouts.idle
  return Stream.transformPull(text, (pull) =>
    Effect.sync(() => {
      // model events decoded but not yet pulled, and what stops the stream once they are
      let events: Array<ModelEvent> = []
      let failure: Failure | undefined
      let ended = false
      let sawEvent = false
      const apply = (decode: (out: Array<ModelEvent>) => Step) => {
        const before = events.length
        const step = decode(events)
        if (step._tag === "Fail") {
          events.length = before
          failure = step.failure
        } else if (step.finished) {
          state.finished = ended = true
        }
      }
      const parser = makeEventParser((event) => {
        if (failure !== undefined || ended) return
        sawEvent = true
        apply((out) => protocol.onEvent(event, out))
      })
      const feed = (texts: ReadonlyArray<string>): Effect.Effect<void, Failure> => {
        for (const text of texts) {
          const error = parser.feed(text)
          if (failure !== undefined || ended) break
          if (error !== undefined) {
            failure = {
              message: `malformed event stream from ${call.provider}: ${clean(error, 200)}`,
              reason: "protocol",
              retryable: false
            }
            break
          }
        }
        return Effect.void
      }
      // reads until at least one event is complete (or the body ends, or something fails)
      const untilEvent: Effect.Effect<void, Failure> = Effect.suspend(function loop(): Effect.Effect<void, Failure> {
        if (sawEvent || failure !== undefined || ended) return Effect.void
        return Effect.flatMap(
          Pull.matchEffect(pull, {
            onSuccess: feed,
            onFailure: Effect.failCause,
            onDone: () => Effect.sync(() => apply(protocol.onEnd))
          }),
          loop
        )
      })
      const nextEvent = Effect.suspend(() => {
        sawEvent = false
        const duration = idle()
        return Duration.isFinite(duration) ?
          Effect.timeoutOrElse(untilEvent, {
            duration,
            orElse: () => Effect.fail(timeoutFailure(call, "idle", "sent no event"))
          }) :
          untilEvent
      })
      return Effect.suspend(function next(): Pull.Pull<Arr.NonEmptyReadonlyArray<ModelEvent>, Failure> {
        if (Arr.isArrayNonEmpty(events)) {
          const out = events
          events = []
          return Effect.succeed(out)
        }
        if (failure !== undefined) return Effect.fail(failure)
        if (ended) return Cause.done()
        return Effect.flatMap(nextEvent, next)
      })
    }))
}

/**
 * One attempt: request, events, protocol steps, under the three time limits. Ends right after the
 * protocol's last event. A connection lost, or a limit reached, once the provider has said why the
 * answer ended keeps the answer: it is complete.
 */
const attempt = (
  client: HttpClient.HttpClient,
  call: ProviderCall,
  clean: Cleaner,
  protocol: WireProtocol
): Stream.Stream<ModelEvent, Failure> => {
  const state = { finished: false }
  const events = Stream.unwrap(
    Effect.map(send(client, call, clean), (response) => modelEvents(call, clean, protocol, response.stream, state))
  )
  const request = call.timeouts.request
  const overall = Duration.isFinite(request) ?
    Stream.interruptWhen(
      Effect.andThen(Effect.sleep(request), Effect.fail(timeoutFailure(call, "request", "did not finish the response")))
    ) :
    <A>(stream: Stream.Stream<A, Failure>) => stream
  return events.pipe(
    overall,
    Stream.catch((failure: Failure) => {
      if (state.finished || !protocol.complete() || (failure.reason !== "network" && failure.reason !== "timeout")) {
        return Stream.fail(failure)
      }
      const out: Array<ModelEvent> = []
      const step = protocol.onEnd(out)
      return step._tag === "Fail" ? Stream.fail(step.failure) : Stream.fromArray(out)
    })
  )
}

const giveUpNote = (attempts: number): string => (attempts > 1 ? ` (gave up after ${attempts} attempts)` : "")

/**
 * Records a retry: a warning in the log (annotated with the attempt, the attempts allowed, the delay
 * and the reason, so an application can show it its own way) and an event on the current span.
 */
const recordRetry = (call: ProviderCall, failure: Failure, attemptNumber: number, delay: Duration.Duration) =>
  Effect.gen(function*() {
    const message = scrub(failure.message, call.secrets)
    yield* Effect.logWarning(
      `${call.provider}: attempt ${attemptNumber} of ${call.retry.maxRetries + 1} failed (${message}); ` +
        `retrying in ${Duration.format(delay)}`
    ).pipe(Effect.annotateLogs({
      "agentloop.provider": call.provider,
      "agentloop.retry.attempt": attemptNumber,
      "agentloop.retry.attempts": call.retry.maxRetries + 1,
      "agentloop.retry.delay_ms": Duration.toMillis(delay),
      "agentloop.error.reason": failure.reason,
      ...(failure.status === undefined ? {} : { "http.response.status_code": failure.status })
    }))
    const span = yield* Effect.option(Effect.currentSpan)
    if (Option.isSome(span)) {
      const now = yield* Clock.currentTimeNanos
      span.value.event("agentloop.provider.retry", now, {
        "agentloop.attempt": attemptNumber,
        "agentloop.error.reason": failure.reason,
        ...(failure.status === undefined ? {} : { "http.response.status_code": failure.status }),
        "agentloop.retry.delay_ms": Duration.toMillis(delay),
        "agentloop.error.message": message
      })
    }
  })

/**
 * The model stream of one request: attempts with retries, then a `ModelError` for whatever
 * failure is left. A failure is retried only while nothing has been emitted.
 */
export const streamProvider = (
  client: HttpClient.HttpClient,
  call: ProviderCall,
  makeProtocol: () => WireProtocol
): Stream.Stream<ModelEvent, ModelError> => {
  const policy = call.retry
  const clean = makeCleaner(call.secrets)
  const toModelError = (failure: Failure, attempts: number, note = "") =>
    new ModelError({
      message: scrub(`${failure.message}${note}${giveUpNote(attempts)}`, call.secrets),
      reason: failure.reason,
      ...(failure.status === undefined ? {} : { status: failure.status }),
      retried: attempts > 1,
      attempts
    })
  const run = (retry: number): Stream.Stream<ModelEvent, ModelError> =>
    Stream.suspend(() => {
      let emitted = false
      return attempt(client, call, clean, makeProtocol()).pipe(
        Stream.mapArray((events) => {
          emitted = true
          return events
        }),
        Stream.catch((failure: Failure) => {
          if (emitted || !failure.retryable || retry >= policy.maxRetries) {
            return Stream.fail(toModelError(failure, retry + 1))
          }
          const retryAfter = failure.retryAfter
          if (retryAfter !== undefined && Duration.isGreaterThan(retryAfter, policy.maxRetryAfter)) {
            const note = ` (the server asked to wait ${Duration.format(retryAfter)}, longer than retry.maxRetryAfter)`
            return Stream.fail(toModelError(failure, retry + 1, note))
          }
          const delay = retryAfter !== undefined ?
            Effect.succeed(retryAfter) :
            Effect.map(Random.next, (random) => backoffDelay(policy, retry, random))
          return Stream.unwrap(Effect.gen(function*() {
            const wait = yield* delay
            yield* recordRetry(call, failure, retry + 1, wait)
            yield* Effect.sleep(wait)
            return run(retry + 1)
          }))
        })
      )
    })
  return run(0).pipe(
    Stream.mapArray((events) =>
      events.some((event) => event.type === "done") ?
        Arr.map(events, (event) =>
          event.type === "done" ? { ...event, message: finalMessage(call, event.message) } : event) :
        events
    ),
    Stream.withSpan("agentloop.provider.stream", {
      kind: "client",
      attributes: {
        "agentloop.span": "agentloop.provider.stream",
        "agentloop.provider": call.provider,
        "agentloop.model": scrub(call.model, call.secrets),
        "url.full": scrub(displayUrl(call.url), call.secrets)
      }
    })
  )
}

/** The final message with its error scrubbed and its cost, when the model's prices are known. */
const finalMessage = (call: ProviderCall, message: AssistantMessage): AssistantMessage => {
  const prices = call.prices === false ?
    undefined :
    call.prices ?? modelInfo(call.model).prices ??
      (message.model === undefined ? undefined : modelInfo(message.model).prices)
  const usage = message.usage
  return {
    ...message,
    ...(message.errorMessage === undefined ? {} : { errorMessage: scrub(message.errorMessage, call.secrets) }),
    ...(usage === undefined || prices === undefined ? {} : { usage: { ...usage, cost: usageCost(usage, prices) } })
  }
}

/** What a provider module gives to `makeProviderModel`. */
export interface ProviderSpec extends Omit<ProviderCall, "body" | "secrets"> {
  /** The provider's name in OpenTelemetry's GenAI conventions (`gen_ai.provider.name`), for `Model.describe`. */
  readonly genAiProvider: string
  /** The JSON request body for a model request. */
  readonly body: (request: ModelRequest) => unknown
  /** Credentials: scrubbed from every message, in every form a server may echo them. */
  readonly secrets: ReadonlyArray<string>
  /** A fresh decoder for one attempt; `idPrefix` names tool calls the provider sent without an id. */
  readonly protocol: (
    context: { readonly timestamp: number; readonly idPrefix: string; readonly clean: Cleaner }
  ) => WireProtocol
}

/** A `Model` sending every request to one provider endpoint. */
export const makeProviderModel = (client: HttpClient.HttpClient, spec: ProviderSpec): typeof Model.Service => {
  const secrets = secretForms(spec.secrets)
  const clean = makeCleaner(secrets)
  const description = { provider: spec.genAiProvider, model: scrub(spec.model, secrets) }
  return Model.of({
    describe: () => description,
    stream: (request) =>
      Stream.unwrap(Effect.gen(function*() {
        const body = Result.try(() => JSON.stringify(spec.body(request)))
        if (Result.isFailure(body)) {
          const message = `the request for ${spec.provider} could not be encoded as JSON`
          return Stream.fail(new ModelError({ message, reason: "invalid_request" }))
        }
        const timestamp = yield* Clock.currentTimeMillis
        const idPrefix = `call_${(yield* Random.nextIntBetween(0, 2 ** 31)).toString(36)}`
        const call: ProviderCall = { ...spec, secrets, body: body.success }
        return streamProvider(client, call, () => spec.protocol({ timestamp, idPrefix, clean }))
      }))
  })
}
