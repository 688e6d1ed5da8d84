/**
 * Terminal styling: ANSI colours when the output is a terminal that wants them, plain text when
 * `NO_COLOR` is set, `TERM=dumb`, or the output is not a terminal.
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 * @category models
 */
export interface Style {
  readonly color: boolean
  readonly bold: (s: string) => string
  readonly dim: (s: string) => string
  readonly red: (s: string) => string
  readonly green: (s: string) => string
  readonly yellow: (s: string) => string
  readonly cyan: (s: string) => string
}

/**
 * Whether to colour output written to a stream with this `isTTY`, in this environment.
 *
 * @since 0.1.0
 * @category constructors
 */
export const wantsColor = (isTTY: boolean | undefined, env: NodeJS.ProcessEnv): boolean =>
  isTTY === true && env["NO_COLOR"] === undefined && env["TERM"] !== "dumb"

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeStyle = (color: boolean): Style => {
  const paint = (code: number) => (s: string) => (color ? `\u001b[${code}m${s}\u001b[0m` : s)
  return { color, bold: paint(1), dim: paint(2), red: paint(31), green: paint(32), yellow: paint(33), cyan: paint(36) }
}
