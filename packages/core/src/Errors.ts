/**
 * Typed failures of the two services the loop drives. Both carry a message meant for people and
 * models alike: never a stack trace.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * Why a model stream failed, as far as the provider can tell:
 *
 * - `auth`: the key was refused (HTTP 401/403).
 * - `rate_limit`: too many requests or tokens, or the quota is spent (HTTP 429).
 * - `overloaded`: the provider is overloaded or unavailable (HTTP 503, Anthropic's 529).
 * - `server`: another server-side failure (HTTP 5xx).
 * - `context_length`: the prompt does not fit the model's context window.
 * - `invalid_request`: the provider refused the request as malformed (other HTTP 4xx).
 * - `not_found`: the endpoint or the model does not exist (HTTP 404).
 * - `content_filter`: the provider's content filter refused the request.
 * - `timeout`: a time limit ran out (the provider's, or one of the client's own limits).
 * - `network`: the connection could not be made or was lost.
 * - `protocol`: the answer was not what the protocol promises (not an event stream, malformed events).
 * - `redirect`: the provider answered with a redirect, which is never followed.
 * - `unknown`: none of the above.
 *
 * @since 0.1.0
 * @category models
 */
export const ModelErrorReason = Schema.Literals([
  "auth",
  "rate_limit",
  "overloaded",
  "server",
  "context_length",
  "invalid_request",
  "not_found",
  "content_filter",
  "timeout",
  "network",
  "protocol",
  "redirect",
  "unknown"
])

/**
 * @since 0.1.0
 * @category models
 */
export type ModelErrorReason = typeof ModelErrorReason.Type

/**
 * A model stream failed (transport, provider error, malformed stream). Ends the run `error`.
 *
 * Only `message` is required. Providers also say why (`reason`), the HTTP `status` when there was
 * one, and whether the request was `retried` (with the number of `attempts` made).
 *
 * @since 0.1.0
 * @category errors
 */
export class ModelError extends Schema.TaggedError<ModelError>()("ModelError", {
  message: Schema.String,
  reason: Schema.optionalKey(ModelErrorReason),
  status: Schema.optionalKey(Schema.Int),
  retried: Schema.optionalKey(Schema.Boolean),
  attempts: Schema.optionalKey(Schema.Int)
}) {}

/**
 * A tool failed in a way it expected. Becomes an error `ToolResultMessage` for that call; the
 * rest of the batch and the run go on.
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolError extends Schema.TaggedError<ToolError>()("ToolError", {
  message: Schema.String
}) {}
