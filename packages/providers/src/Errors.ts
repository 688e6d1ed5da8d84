/**
 * The typed error of building a provider: options that cannot work (a missing API key, a base URL
 * that is not an http(s) URL, a negative token budget...). Failures while a model streams are the
 * core `ModelError` (see the provider modules).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * A provider was given options it cannot work with. `message` names the option and what is
 * wrong with it; it never contains an API key.
 *
 * @since 0.1.0
 * @category errors
 */
export class ProviderConfigError extends Schema.TaggedError<ProviderConfigError>()("ProviderConfigError", {
  message: Schema.String
}) {}
