/**
 * The prompt history of `chat`, kept per project across sessions: what was sent at the prompt,
 * whole (a multi-line entry comes back as it was typed), newest last.
 *
 * Where: the user's state folder, not the project — `$XDG_STATE_HOME/agentloop/history/` (default
 * `~/.local/state/agentloop/history/`), one file per workspace named by a hash of its real path. A
 * history in the workspace could be committed with it, and a cloned repository could plant a link
 * there.
 *
 * The file is JSON lines (one string each), mode 0600 in a 0700 folder. Each entry is appended
 * with one `write` on a file opened for appending, so sessions running at once interleave whole
 * entries; a line that does not parse (a crash mid-write) is skipped. Past `HISTORY_LIMIT * 2`
 * entries the file is rewritten to its last `HISTORY_LIMIT` (to a temporary file, then renamed:
 * a reader sees the old file or the new one; an entry another session appends meanwhile may be
 * lost, never torn).
 *
 * Never kept: what is typed at an approval question (those reads skip the history), blank lines,
 * and lines that look like they hold a credential (an API key or token pasted by mistake).
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { appendFileSync, chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs"
import { homedir } from "node:os"
import * as nodePath from "node:path"

/**
 * How many entries the history keeps.
 *
 * @since 0.1.0
 * @category constants
 */
export const HISTORY_LIMIT = 1000

/**
 * @since 0.1.0
 * @category models
 */
export interface History {
  /** The entries, oldest first. */
  readonly entries: () => ReadonlyArray<string>
  /** Adds an entry (kept in memory and appended to the file), unless it must not be kept. */
  readonly add: (text: string) => void
}

/**
 * The history file of a workspace.
 *
 * @since 0.1.0
 * @category history
 */
export const historyFile = (root: string, env: NodeJS.ProcessEnv): string => {
  const state = env["XDG_STATE_HOME"] !== undefined && env["XDG_STATE_HOME"].length > 0 ?
    env["XDG_STATE_HOME"] :
    nodePath.join(homedir(), ".local", "state")
  const key = createHash("sha256").update(root).digest("hex").slice(0, 24)
  return nodePath.join(state, "agentloop", "history", `${key}.jsonl`)
}

const CREDENTIAL = new RegExp(
  [
    /sk-[A-Za-z0-9_-]{20,}/.source,
    /gh[pousr]_[A-Za-z0-9]{30,}/.source,
    /github_pat_[A-Za-z0-9_]{30,}/.source,
    /AKIA[0-9A-Z]{16}/.source,
    /xox[abprs]-[A-Za-z0-9-]{10,}/.source,
    /AIza[0-9A-Za-z_-]{35}/.source,
    /_(API_)?KEY=\S{8,}/.source
  ].join("|")
)

/**
 * Whether an entry may be kept: not blank, and nothing in it looks like a credential.
 *
 * @since 0.1.0
 * @category history
 */
export const keepable = (text: string): boolean => text.trim().length > 0 && !CREDENTIAL.test(text)

const parse = (content: string): Array<string> => {
  const entries: Array<string> = []
  for (const line of content.split("\n")) {
    if (line.length === 0) continue
    try {
      const value: unknown = JSON.parse(line)
      if (typeof value === "string") entries.push(value)
    } catch {
      // a torn line (a crash mid-write): skipped
    }
  }
  return entries
}

/**
 * Opens (creating when needed) the history in `file`. It never fails: a history that cannot be
 * read or written is an empty one kept in memory, with one notice through `report`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const openHistory = (
  file: string,
  report: (message: string) => void,
  limit: number = HISTORY_LIMIT
): Effect.Effect<History> =>
  Effect.sync(() => {
    let broken = false
    const fail = (what: string, error: unknown) => {
      if (!broken) {
        report(`the prompt history ${file} cannot be ${what} (${(error as { code?: string }).code ?? error})`)
      }
      broken = true
    }
    let entries: Array<string> = []
    try {
      mkdirSync(nodePath.dirname(file), { recursive: true, mode: 0o700 })
      entries = parse(readFileSync(file, "utf8"))
    } catch (error) {
      if ((error as { code?: string }).code !== "ENOENT") fail("read", error)
    }
    if (entries.length > limit * 2) {
      entries = entries.slice(-limit)
      try {
        const temporary = `${file}.${process.pid}.tmp`
        writeFileSync(temporary, entries.map((e) => `${JSON.stringify(e)}\n`).join(""), { mode: 0o600 })
        renameSync(temporary, file)
      } catch (error) {
        fail("rewritten", error)
      }
    }
    return {
      entries: () => entries,
      add: (text) => {
        if (!keepable(text)) return
        if (entries[entries.length - 1] === text) return
        const i = entries.indexOf(text)
        if (i >= 0) entries.splice(i, 1)
        entries.push(text)
        if (broken) return
        try {
          // one write with O_APPEND: whole entries, whichever session writes
          appendFileSync(file, `${JSON.stringify(text)}\n`, { mode: 0o600 })
          chmodSync(file, 0o600)
        } catch (error) {
          fail("written", error)
        }
      }
    } satisfies History
  })
