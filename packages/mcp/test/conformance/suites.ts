/**
 * What the client and the server conformance tests share: the two suites (the stable release and
 * the newest alpha, installed as `mcp-conformance-next`), where their CLI is, and how to read the
 * scenarios of one part of `conformance list`.
 */
import { Semaphore } from "effect"
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"

const require = createRequire(import.meta.url)

export interface Suite {
  readonly pkg: string
  /** Whether the SDK speaks a scenario with these spec-version tags. */
  readonly speaks: (tags: ReadonlyArray<string>) => boolean
}

export const suites: ReadonlyArray<Suite> = [
  { pkg: "@modelcontextprotocol/conformance", speaks: () => true },
  { pkg: "mcp-conformance-next", speaks: (tags) => tags.some((tag) => tag !== "2026-07-28") }
]

/** Scenarios running at once in one test file, over both suites. */
export const slots = Semaphore.makeUnsafe(4)

export const versionOf = (pkg: string): string =>
  (JSON.parse(readFileSync(require.resolve(`${pkg}/package.json`), "utf8")) as { version: string }).version

export const cliOf = (pkg: string): string => join(require.resolve(`${pkg}/package.json`), "..", "dist", "index.js")

/** `name [tag,tag]` lines of the `section` part ("Client scenarios", "Server scenarios") of `conformance list`. */
export const parseList = (
  output: string,
  section: string
): Array<{ readonly name: string; readonly tags: ReadonlyArray<string> }> => {
  const rest = output.slice(output.indexOf(section))
  const end = rest.search(/\n\S/) // the next section
  const part = end < 0 ? rest : rest.slice(0, end)
  return [...part.matchAll(/^ {2}- (\S+)(?: \[([^\]]*)\])?$/gm)].map((m) => ({
    name: m[1]!,
    tags: (m[2] ?? "").split(",").filter((t) => t.length > 0)
  }))
}
