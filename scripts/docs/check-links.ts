/**
 * Checks the relative links of the documentation's Markdown files (see snippets.ts for which):
 * each must lead to a file or folder of the repository and, with a `#fragment` into a Markdown
 * file, to one of its headings (GitHub's anchors: lower case, punctuation dropped, spaces as `-`).
 * Links to the web are not fetched. Links inside code blocks are not links.
 *
 *     node scripts/docs/check-links.ts [FILES]
 *
 * Prints `FILE:LINE - problem` for each broken link and exits 1.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { documentationFiles } from "./snippets.ts"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const requested = process.argv.slice(2).filter((a) => !a.startsWith("--"))
const files = requested.length > 0
  ? requested.map((f) => path.relative(root, path.resolve(f)))
  : documentationFiles(root)

/** The lines of a Markdown text outside fenced code blocks, with their 1-based numbers. */
const proseLines = (text: string): Array<{ readonly line: number; readonly text: string }> => {
  const out: Array<{ line: number; text: string }> = []
  let fence: string | undefined
  text.split("\n").forEach((line, index) => {
    const open = /^\s{0,3}(`{3,}|~{3,})/.exec(line)
    if (fence === undefined && open !== null) {
      fence = open[1]!
      return
    }
    if (fence !== undefined) {
      if (line.trim().startsWith(fence) && line.trim().replaceAll(fence[0]!, "") === "") fence = undefined
      return
    }
    out.push({ line: index + 1, text: line })
  })
  return out
}

/** GitHub's anchor for a heading. */
const slug = (heading: string): string =>
  heading.trim().toLowerCase().replace(/`/g, "").replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-")

const anchorsCache = new Map<string, Set<string>>()
const anchorsOf = (file: string): Set<string> => {
  let anchors = anchorsCache.get(file)
  if (anchors === undefined) {
    anchors = new Set()
    const counts = new Map<string, number>()
    for (const { text } of proseLines(fs.readFileSync(file, "utf8"))) {
      const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text)
      if (heading === null) continue
      const base = slug(heading[1]!)
      const n = counts.get(base) ?? 0
      counts.set(base, n + 1)
      anchors.add(n === 0 ? base : `${base}-${n}`)
    }
    for (const { text } of proseLines(fs.readFileSync(file, "utf8"))) {
      for (const m of text.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(m[1]!)
    }
    anchorsCache.set(file, anchors)
  }
  return anchors
}

const problems: Array<string> = []
let checked = 0
for (const file of files) {
  const full = path.join(root, file)
  for (const { line, text } of proseLines(fs.readFileSync(full, "utf8"))) {
    // [text](target) and ![alt](target), the target up to a space or the closing parenthesis
    for (const m of text.replace(/`[^`]*`/g, "").matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = m[1]!
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue // http:, https:, mailto:
      checked++
      const [pathPart, fragment] = target.split("#", 2) as [string, string | undefined]
      const resolved = pathPart === "" ? full : path.resolve(path.dirname(full), decodeURIComponent(pathPart))
      if (!fs.existsSync(resolved)) {
        problems.push(`${file}:${line} - ${target}: no such file or folder`)
        continue
      }
      if (fragment !== undefined && fragment !== "" && resolved.endsWith(".md") && !anchorsOf(resolved).has(fragment)) {
        problems.push(
          `${file}:${line} - ${target}: no heading with the anchor #${fragment} in ${path.relative(root, resolved)}`
        )
      }
    }
  }
}

if (problems.length > 0) {
  for (const problem of problems) console.error(problem)
  console.error(`\n${problems.length} broken link(s) among ${checked} relative link(s) in ${files.length} file(s).`)
  process.exit(1)
}
console.log(`${checked} relative link(s) in ${files.length} Markdown file(s) lead somewhere.`)
