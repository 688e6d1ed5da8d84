/**
 * The provider-independent half of a request: send one JSON POST, map the HTTP outcome (status,
 * provider error body, transport failure), decode the body as server-sent events, feed them to
 * a wire protocol, retry what the retry policy allows, and turn every other failure into a
 * `ModelError` whose message never carries an API key or a stack trace.
 */
import { Clock, Duration, Effect, Random, Result, Stream } from "effect"
import type { Schema } from "effect"
import { Model, ModelError } from "@agentloop/core"
import type { ModelEvent, ModelRequest } from "@agentloop/core"
import { Sse } from "effect/encoding"
import { HttpClient, HttpClientRequest } from "effect/http"
import type { HttpClientError, HttpClientResponse } from "effect/http"
import { backoffDelay, retryAfterOf, shouldRetryResponse } from "../Retry.ts"
import type { RetryPolicy } from "../Retry.ts"
import { clip, scrub } from "./text.ts"

/** Why one attempt failed, before it becomes a `ModelError` (or a retry). */
export interface Failure {
  readonly message: string
  readonly retryable: boolean
  readonly retryAfter?: Duration.Duration | undefined
}

/** What a wire protocol makes of one server-sent event (or of the end of the body). */
export type Step =
  | { readonly _tag: "Emit"; readonly events: ReadonlyArray<ModelEvent>; readonly finished: boolean }
  | { readonly _tag: "Fail"; readonly failure: Failure }

/** One attempt's decoder: provider-specific, stateful, made fresh for every attempt. */
export interface WireProtocol {
  readonly onEvent: (event: Sse.Event) => Step
  /** The body ended before the protocol saw its end. */
  readonly onEnd: () => Step
}

/** Everything a request needs; built once per model request. */
export interface ProviderCall {
  /** How messages name the other side, e.g. "Anthropic". */
  readonly provider: string
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  /** Values scrubbed from every message (the API key). */
  readonly secrets: ReadonlyArray<string>
  readonly retry: RetryPolicy
}

export const emit = (events: ReadonlyArray<ModelEvent>, finished = false): Step => ({ _tag: "Emit", events, finished })
export const fail = (message: string, retryable = false): Step => ({ _tag: "Fail", failure: { message, retryable } })

/** Parses an event's JSON data with `decode`, or says why it is malformed. */
export const parseEventData = <A>(
  provider: string,
  data: string,
  decode: (u: unknown) => Result.Result<A, Schema.SchemaError>
): Result.Result<A, string> => {
  const json = Result.try((): unknown => JSON.parse(data))
  if (Result.isFailure(json)) {
    return Result.fail(`malformed event stream from ${provider}: event data is not JSON: ${clip(data, 200)}`)
  }
  return Result.mapError(
    decode(json.success),
    (error) => `malformed event stream from ${provider}: unexpected event shape: ${clip(error.message, 200)}`
  )
}

/** The URL without credentials or query, for messages. */
export const displayUrl = (url: string): string => {
  const parsed = Result.try(() => new URL(url))
  return Result.isSuccess(parsed) ? `${parsed.success.origin}${parsed.success.pathname}` : "(invalid URL)"
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

/**
 * The readable part of a provider's error body: `error.message` (OpenAI, Anthropic, llama.cpp,
 * OpenRouter), `error` as a string (Ollama), `message` or `detail` (other servers), else the
 * start of the raw text.
 */
export const providerErrorText = (body: string): string | undefined => {
  const parsed = Result.try((): unknown => JSON.parse(body))
  if (Result.isSuccess(parsed) && isObject(parsed.success)) {
    const json = parsed.success
    const error = json["error"]
    if (typeof error === "string" && error.length > 0) return error
    if (isObject(error) && typeof error["message"] === "string") {
      const type = typeof error["type"] === "string" ? error["type"] : undefined
      return type !== undefined && type !== "error" ? `${type}: ${error["message"]}` : error["message"]
    }
    for (const key of ["message", "detail"]) {
      if (typeof json[key] === "string" && json[key].length > 0) return json[key]
    }
  }
  const trimmed = body.trim()
  return trimmed.length > 0 ? clip(trimmed) : undefined
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

const statusHint = (status: number): string =>
  status === 401 || status === 403 ?
    " (check the API key)" :
    status === 404 ?
    " (check the base URL and the model name)" :
    ""

const statusFailure = (
  call: ProviderCall,
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<Failure> =>
  Effect.gen(function*() {
    const body = yield* Effect.orElseSucceed(response.text, () => "")
    const text = providerErrorText(body)
    const now = yield* Clock.currentTimeMillis
    return {
      message: `${call.provider} answered HTTP ${response.status}${statusHint(response.status)}` +
        (text === undefined ? "" : `: ${text}`),
      retryable: shouldRetryResponse(response.status, response.headers),
      retryAfter: retryAfterOf(response.headers, now)
    }
  })

const transportFailure = (call: ProviderCall, error: HttpClientError.HttpClientError): Failure => {
  const reason = error.reason
  if (reason._tag === "InvalidUrlError") {
    return { message: `the ${call.provider} URL is not valid: ${displayUrl(call.url)}`, retryable: false }
  }
  const detail = innermostReason(reason.cause) ?? reason.description ?? reason._tag
  return { message: `could not reach ${call.provider} at ${displayUrl(call.url)}: ${detail}`, retryable: true }
}

/** Sends the request; a non-2xx status or a response that is not an event stream is a `Failure`. */
const send = (
  client: HttpClient.HttpClient,
  call: ProviderCall
): Effect.Effect<HttpClientResponse.HttpClientResponse, Failure> => {
  const request = HttpClientRequest.post(call.url).pipe(
    HttpClientRequest.setHeaders(call.headers),
    HttpClientRequest.bodyText(call.body, "application/json")
  )
  return client.execute(request).pipe(
    // trace ids are not sent to third-party model APIs
    Effect.provideService(HttpClient.TracerPropagationEnabled, false),
    Effect.mapError((error) => transportFailure(call, error)),
    Effect.flatMap((response) => {
      if (response.status < 200 || response.status >= 300) {
        return Effect.flatMap(statusFailure(call, response), Effect.fail)
      }
      const contentType = response.headers["content-type"] ?? ""
      if (contentType.includes("application/json")) {
        return Effect.fail({
          message: `${call.provider} answered with JSON instead of an event stream; does it support "stream": true?`,
          retryable: false
        })
      }
      return Effect.succeed(response)
    })
  )
}

/** The body as server-sent events. `retry:` directives are ignored: a model stream is not resumable. */
const sseEvents = (
  call: ProviderCall,
  body: Stream.Stream<Uint8Array, HttpClientError.HttpClientError>
): Stream.Stream<Sse.Event, Failure> =>
  Stream.suspend(() => {
    let parsed: Array<Sse.Event> = []
    const parser = Sse.makeParser((event) => {
      if (event._tag === "Event") parsed.push(event)
    })
    return body.pipe(
      Stream.mapError((error): Failure => ({
        message: `the connection to ${call.provider} was lost while streaming the response (${
          innermostReason(error.reason.cause) ?? error.reason._tag
        })`,
        retryable: true
      })),
      Stream.decodeText,
      Stream.mapEffect((text) => {
        const error = parser.feed(text)
        if (error !== undefined) {
          return Effect.fail<Failure>({
            message: `malformed event stream from ${call.provider}: ${error.message}`,
            retryable: false
          })
        }
        const out = parsed
        parsed = []
        return Effect.succeed(out)
      }),
      Stream.flattenIterable
    )
  })

/** One attempt: request, events, protocol steps. Ends right after the protocol's last event. */
const attempt = (
  client: HttpClient.HttpClient,
  call: ProviderCall,
  protocol: WireProtocol
): Stream.Stream<ModelEvent, Failure> => {
  let finished = false
  const stepEvents = (step: Step): Effect.Effect<ReadonlyArray<ModelEvent>, Failure> => {
    if (step._tag === "Fail") return Effect.fail(step.failure)
    finished ||= step.finished
    return Effect.succeed(step.events)
  }
  const events = Stream.unwrap(Effect.map(send(client, call), (response) => sseEvents(call, response.stream)))
  return events.pipe(
    Stream.mapEffect((event) => stepEvents(protocol.onEvent(event))),
    Stream.takeUntil(() => finished),
    Stream.concat(Stream.suspend(() => (finished ? Stream.empty : Stream.fromEffect(stepEvents(protocol.onEnd()))))),
    Stream.flattenIterable
  )
}

const giveUpNote = (attempts: number): string => (attempts > 1 ? ` (gave up after ${attempts} attempts)` : "")

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
  const toModelError = (failure: Failure, attempts: number, note = "") =>
    new ModelError({ message: scrub(`${failure.message}${note}${giveUpNote(attempts)}`, call.secrets) })
  const run = (retry: number): Stream.Stream<ModelEvent, ModelError> =>
    Stream.suspend(() => {
      let emitted = false
      return attempt(client, call, makeProtocol()).pipe(
        Stream.tap(() => Effect.sync(() => void (emitted = true))),
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
          return Stream.unwrap(Effect.as(Effect.flatMap(delay, Effect.sleep), run(retry + 1)))
        })
      )
    })
  return run(0)
}

/** What a provider module gives to `makeProviderModel`. */
export interface ProviderSpec extends Omit<ProviderCall, "body"> {
  /** The JSON request body for a model request. */
  readonly body: (request: ModelRequest) => unknown
  /** A fresh decoder for one attempt; `idPrefix` names tool calls the provider sent without an id. */
  readonly protocol: (context: { readonly timestamp: number; readonly idPrefix: string }) => WireProtocol
}

/** A `Model` sending every request to one provider endpoint. */
export const makeProviderModel = (client: HttpClient.HttpClient, spec: ProviderSpec): typeof Model.Service =>
  Model.of({
    stream: (request) =>
      Stream.unwrap(Effect.gen(function*() {
        const body = Result.try(() => JSON.stringify(spec.body(request)))
        if (Result.isFailure(body)) {
          const message = `the request for ${spec.provider} could not be encoded as JSON`
          return Stream.fail(new ModelError({ message }))
        }
        const timestamp = yield* Clock.currentTimeMillis
        const idPrefix = `call_${(yield* Random.nextIntBetween(0, 2 ** 31)).toString(36)}`
        const call: ProviderCall = { ...spec, body: body.success }
        return streamProvider(client, call, () => spec.protocol({ timestamp, idPrefix }))
      }))
  })
