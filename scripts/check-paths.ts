/**
 * Checks that no tracked file reads or names a path outside the repository: a user's clone has
 * nothing beside it (no `../shared`, no sibling checkout), so a test, helper, script or config that
 * reaches out of the repository passes in one harness and fails in every clone.
 *
 *     node scripts/check-paths.ts
 *
 * In every tracked source, test, script and config file (`.ts`, `.js`, `.mjs`, `.cjs`, `.json`,
 * `.sh`, `.ci/run`), it finds:
 * - a string literal made of `..` segments and a path (`"../../x"`, `new URL("../../../y", …)`),
 *   resolved from the file's folder;
 * - a call joining `".."` segments one by one (`join(here, "..", "..", "..")`), from the file's
 *   folder;
 * - a name of the folder CI happens to have beside the repository (`shared/fixtures`,
 *   `../shared`), wherever it is written.
 *
 * A path that is meant to leave (an attacker's input in a containment test, say) is allowed when
 * its line, or the line above, says `check-paths: outside on purpose`.
 *
 * Prints `FILE:LINE: PATH leaves the repository` for each and exits 1 if there is any.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const ALLOW = "check-paths: outside on purpose"

const excluded = (file: string): boolean => {
  const parts = file.split("/")
  return parts.includes("dist") || parts.includes("node_modules") || file === "package-lock.json" ||
    file.startsWith("scripts/docs/.generated/") || file === "scripts/check-paths.ts" // its own examples
}

const files = execFileSync(
  "git",
  ["ls-files", "-z", "--", "*.ts", "*.js", "*.mjs", "*.cjs", "*.json", "*.sh", ".ci/*"],
  { cwd: root, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 }
)
  .split("\0")
  .filter((file) => file.length > 0 && !excluded(file))

/** A literal starting with `..` segments, up to the end of the literal or the first space. */
const RELATIVE = /(["'`])((?:\.\.\/)+(?:\.\.)?[^"'`\s]*|\.\.)\1/g
/** A run of `".."` arguments, as `path.join` / `path.resolve` take them. */
const SEGMENTS = /(?:(["'])\.\.\1\s*,\s*)+(["'])\.\.\2/g
/** The folder CI happens to have beside the repository. */
const SIBLING = /\.\.\/shared\b|\bshared\/(?:fixtures|reference|seed|SPEC\.md|STYLE\.md)/g

const inside = (from: string, relative: string): boolean => {
  const target = path.resolve(from, relative)
  return target === root || target.startsWith(root + path.sep)
}

let found = 0
const report = (file: string, line: number, what: string) => {
  found += 1
  console.log(`${file}:${line}: ${what} leaves the repository`)
}

for (const file of files) {
  const full = path.join(root, file)
  if (!fs.existsSync(full)) continue // deleted in the work tree, not yet in the index
  const folder = path.dirname(full)
  const lines = fs.readFileSync(full, "utf8").split("\n")
  lines.forEach((text, index) => {
    if (text.includes(ALLOW) || (index > 0 && lines[index - 1]!.includes(ALLOW))) return
    for (const match of text.matchAll(RELATIVE)) {
      if (!inside(folder, match[2]!)) report(file, index + 1, match[2]!)
    }
    for (const match of text.matchAll(SEGMENTS)) {
      const count = match[0].split(",").length
      const relative = Array.from({ length: count }, () => "..").join("/")
      if (!inside(folder, relative)) report(file, index + 1, `${count} ".." segments`)
    }
    for (const match of text.matchAll(SIBLING)) report(file, index + 1, match[0])
  })
}

if (found > 0) {
  console.log(`${found} path(s) leave the repository: a clone has nothing beside it (scripts/check-paths.ts)`)
  process.exit(1)
}
