/**
 * The error of every confined file operation (`WorkspaceFiles` and the tools underneath).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * Why a confined file operation failed.
 *
 * @since 0.1.0
 * @category models
 */
export const WorkspaceFileErrorReason = Schema.Literals([
  "Outside",
  "NotFound",
  "AlreadyExists",
  "IsDirectory",
  "NotRegularFile",
  "HardLinked",
  "TooLarge",
  "TooManyLinks",
  "InvalidPath",
  "Io"
])

/**
 * A confined file operation failed. `path` is the path as the caller gave it (or as shown inside
 * the workspace), `message` is one line without a stack trace, fit for a model or a terminal.
 *
 * @since 0.1.0
 * @category errors
 */
export class WorkspaceFileError extends Schema.TaggedError<WorkspaceFileError>()("WorkspaceFileError", {
  path: Schema.String,
  reason: WorkspaceFileErrorReason,
  message: Schema.String
}) {}
