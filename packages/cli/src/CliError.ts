/**
 * The error the commands show the user.
 *
 * @since 0.1.0
 */

/**
 * A failure the user can act on: printed as one line on stderr, exit code 2.
 *
 * @since 0.1.0
 * @category errors
 */
export class CliError extends Error {
  readonly _tag = "CliError"
}
