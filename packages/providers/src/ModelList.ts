/**
 * The models a provider's server offers, from its model-list endpoint: `GET <baseUrl>/models` for
 * OpenAI-compatible servers (OpenAI, Ollama, llama.cpp, vLLM, LM Studio answer it) and
 * `GET <baseUrl>/v1/models` for Anthropic. The key goes where the provider sends it (never to
 * another host: the same rules as the providers' own requests); a failure names the server and the
 * status, never the key nor the body.
 *
 * @since 0.1.0
 */
import { Duration, Effect, Option, Redacted, Schema } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"
import { ANTHROPIC_BASE_URL } from "./Anthropic.ts"
import { ProviderConfigError } from "./Errors.ts"
import { endpoint, resolveApiKey } from "./internal/options.ts"
import { OPENAI_BASE_URL } from "./OpenAiCompat.ts"

/**
 * A model the server lists.
 *
 * @since 0.1.0
 * @category models
 */
export interface ListedModel {
  readonly id: string
  /** A display name, when the server gives one (Anthropic's `display_name`). */
  readonly name?: string | undefined
}

/**
 * The model list could not be had (the server is down, refuses the key, or answers something
 * else): the message names the server and what happened.
 *
 * @since 0.1.0
 * @category errors
 */
export class ModelListError extends Schema.TaggedError<ModelListError>()("ModelListError", {
  message: Schema.String
}) {}

const ListBody = Schema.Struct({
  data: Schema.Array(Schema.Struct({ id: Schema.String, display_name: Schema.optionalKey(Schema.String) }))
})

/**
 * The models of a provider's server, sorted by id.
 *
 * @since 0.1.0
 * @category models
 */
export const listModels = (options: {
  readonly provider: "openai-compat" | "anthropic"
  readonly baseUrl?: string | undefined
  readonly apiKey?: string | Redacted.Redacted<string> | undefined
  /** The longest wait for the answer (default 10 seconds). */
  readonly timeout?: Duration.Input | undefined
}): Effect.Effect<ReadonlyArray<ListedModel>, ModelListError | ProviderConfigError> =>
  Effect.gen(function*() {
    const anthropic = options.provider === "anthropic"
    const base = yield* Effect.try({
      try: () => new URL(options.baseUrl ?? (anthropic ? ANTHROPIC_BASE_URL : OPENAI_BASE_URL)),
      catch: () => new ProviderConfigError({ message: `baseUrl is not a URL: ${options.baseUrl}` })
    })
    const own = base.hostname === (anthropic ? "api.anthropic.com" : "api.openai.com")
    const key = yield* resolveApiKey({
      apiKey: options.apiKey,
      envVar: anthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY",
      useEnv: own,
      required: own
    })
    const value = Option.map(key, Redacted.value)
    const url = endpoint(base, anthropic ? "/v1/models" : "/models")
    const where = `${base.origin}${anthropic ? "/v1/models" : new URL(url).pathname}`
    let request = HttpClientRequest.get(url).pipe(HttpClientRequest.setUrlParam("limit", "1000"))
    if (Option.isSome(value)) {
      request = anthropic ?
        HttpClientRequest.setHeaders(request, { "x-api-key": value.value, "anthropic-version": "2023-06-01" }) :
        HttpClientRequest.bearerToken(request, value.value)
    } else if (anthropic) {
      request = HttpClientRequest.setHeader(request, "anthropic-version", "2023-06-01")
    }
    const client = yield* HttpClient.HttpClient
    const response = yield* client.execute(request).pipe(
      Effect.timeoutOrElse({
        duration: options.timeout ?? Duration.seconds(10),
        orElse: () => Effect.fail(new ModelListError({ message: `${where} did not answer in time` }))
      }),
      Effect.mapError((e) =>
        e._tag === "ModelListError" ? e : new ModelListError({ message: `${where} cannot be reached` })
      )
    )
    if (response.status !== 200) {
      return yield* new ModelListError({ message: `${where} answered HTTP ${response.status}` })
    }
    const body = yield* response.json.pipe(
      Effect.flatMap(Schema.decodeUnknownEffect(ListBody)),
      Effect.mapError(() => new ModelListError({ message: `${where} did not answer with a model list` }))
    )
    return body.data
      .map((m) => (m.display_name === undefined ? { id: m.id } : { id: m.id, name: m.display_name }))
      .sort((a, b) => a.id.localeCompare(b.id))
  }).pipe(Effect.provide(FetchHttpClient.layer))
