/**
 * The name of an embedded database's runner lock file, in a module that imports nothing, so a
 * program that only needs to know whether a run's process is alive (the CLI's `agentloop runs`,
 * `chat --continue`) does not load the engines to learn it.
 *
 * @since 0.1.0
 */

/**
 * The file that marks which process is the runner of an embedded database file: `<filename>-runner`.
 *
 * @since 0.1.0
 * @category constants
 */
export const runnerLockFileOf = (filename: string): string => `${filename}-runner`
