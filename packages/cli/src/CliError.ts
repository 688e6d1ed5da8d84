/**
 * The error the commands show the user.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { stripControl } from "./Sanitize.ts"

/**
 * A failure the user can act on: printed as one line on stderr, exit code 2.
 *
 * @since 0.1.0
 * @category errors
 */
export class CliError extends Error {
  readonly _tag = "CliError"
}

/**
 * Shows a `CliError` as one line on stderr (without control sequences: ids and paths may come
 * from files anyone wrote) and sets exit code 2.
 *
 * @since 0.1.0
 * @category errors
 */
export const reportCliError = (error: CliError): Effect.Effect<void> =>
  Effect.sync(() => {
    process.stderr.write(`agentloop: ${stripControl(error.message.split("\n")[0]!)}\n`)
    process.exitCode = 2
  })
