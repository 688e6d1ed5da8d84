/**
 * What `grep`, `find` and `ls` share: the walk of a workspace folder and its limits.
 *
 * The walk is confined like `read`: it starts from a folder opened through the workspace's
 * descriptor walk and opens every folder below it relative to its parent's descriptor with
 * `O_NOFOLLOW`, so a symbolic link is never followed (it is listed as a link, at most) and a
 * folder swapped for a link while the walk runs is not entered. Names are sorted by UTF-16 code
 * units, folders walked depth first, so results are the same on every run over the same files.
 * `.gitignore` files inside the workspace are respected (see the tools guide for the rules);
 * `node_modules` and `.agentloop` (agentloop's own sessions and kept output) are skipped unless
 * `includeIgnored` is set or `path` names them, and `.git` is never walked into.
 *
 * @since 0.1.0
 */

/**
 * Folders deeper than this below the searched folder are not walked (and the result says so).
 *
 * @since 0.1.0
 * @category constants
 */
export const SEARCH_MAX_DEPTH = 64

/**
 * Entries (files, folders, links) one call looks at, at most; the walk then stops and says so.
 *
 * @since 0.1.0
 * @category constants
 */
export const SEARCH_MAX_ENTRIES = 100_000

/**
 * How long one `grep` or `find` call searches, in milliseconds, before it stops and returns what
 * it found with a notice.
 *
 * @since 0.1.0
 * @category constants
 */
export const SEARCH_TIME_LIMIT_MS = 30_000

/**
 * How long matching the names of one folder against the `.gitignore` rules and the glob may take,
 * in milliseconds of real time: a rule or a glob crafted to match slowly stops the walk there.
 *
 * @since 0.1.0
 * @category constants
 */
export const SEARCH_NAME_MATCH_TIME_LIMIT_MS = 1000

/**
 * The longest pattern (regular expression or glob) accepted, in characters.
 *
 * @since 0.1.0
 * @category constants
 */
export const SEARCH_MAX_PATTERN_LENGTH = 1000

/**
 * The most output one call returns, in bytes: longer results end with a notice saying which
 * `offset` to continue from.
 *
 * @since 0.1.0
 * @category constants
 */
export const SEARCH_MAX_OUTPUT_BYTES = 50 * 1024

/**
 * `.gitignore` files larger than this are not applied (and the result says so).
 *
 * @since 0.1.0
 * @category constants
 */
export const GITIGNORE_MAX_BYTES = 256 * 1024
