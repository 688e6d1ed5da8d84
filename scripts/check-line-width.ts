/**
 * Checks that no line of a tracked `.ts` or `.js` file is longer than 120 characters (dprint's
 * `lineWidth`, which dprint itself cannot enforce on long strings, templates and comments).
 * Test fixtures, `dist`, `node_modules` and `scripts/docs/.generated` are not checked.
 *
 *     node scripts/check-line-width.ts
 *
 * Prints `FILE:LINE: N characters` for each line over the limit and exits 1 if there is any.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const MAX = 120

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

const excluded = (file: string): boolean => {
  const parts = file.split("/")
  return parts.includes("dist") ||
    parts.includes("node_modules") ||
    file.startsWith("scripts/docs/.generated/") ||
    (parts.length > 4 && parts[0] === "packages" && parts[2] === "test" && parts[3] === "fixtures")
}

const files = execFileSync("git", ["ls-files", "-z", "--", "*.ts", "*.js"], {
  cwd: root,
  encoding: "utf8",
  maxBuffer: 64 * 1024 * 1024
})
  .split("\0")
  .filter((file) => file.length > 0 && !excluded(file))

let found = 0
for (const file of files) {
  const full = path.join(root, file)
  if (!fs.existsSync(full)) continue // deleted in the work tree, not yet in the index
  fs.readFileSync(full, "utf8").split("\n").forEach((text, index) => {
    const length = [...text.replace(/\r$/, "")].length
    if (length > MAX) {
      found++
      console.log(`${file}:${index + 1}: ${length} characters`)
    }
  })
}

if (found > 0) {
  console.log(`${found} line(s) over ${MAX} characters`)
  process.exit(1)
}
