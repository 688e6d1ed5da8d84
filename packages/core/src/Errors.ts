/**
 * Typed failures of the two services the loop drives. Both carry a message meant for people and
 * models alike: never a stack trace.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * A model stream failed (transport, provider error, malformed stream). Ends the run `error`.
 *
 * @since 0.1.0
 * @category errors
 */
export class ModelError extends Schema.TaggedError<ModelError>()("ModelError", {
  message: Schema.String
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
