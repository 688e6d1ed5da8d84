/**
 * Checks the floors of `@agentloop/core` (docs/contributing.md, "Core's floors"): every import of
 * a module in `packages/core/src` goes to its own floor or one below, never up.
 *
 * 1. **Ground**: the vocabulary and the rules: the public modules in `src/` (schemas, services,
 *    the decision table, the checks) and their private helpers in `src/internal/rules/`.
 * 2. **Engine**: the loop that runs steps, in `src/internal/engine/`.
 * 3. **Entry**: the modules that start runs (`AgentLoop.ts`, `AgentRun.ts`, `SubAgent.ts`) and
 *    `index.ts`.
 *
 *     node scripts/check-layers.ts
 *
 * Prints `FILE:LINE: floor imports floor (PATH)` for each import that runs up, and exits 1 if
 * there is any (type-only imports count too: a floor is a dependency, not only a runtime one).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const src = path.join(root, "packages", "core", "src")

const ENTRY = new Set(["AgentLoop.ts", "AgentRun.ts", "SubAgent.ts", "index.ts"])
const FLOORS = ["ground", "engine", "entry"] as const
type Floor = typeof FLOORS[number]

/** The floor of a file of `src` (by its path relative to `src`), or `undefined` when it has none. */
const floorOf = (relative: string): Floor | undefined => {
  const parts = relative.split(path.sep)
  if (parts.length === 1) return ENTRY.has(parts[0]!) ? "entry" : "ground"
  if (parts[0] === "internal" && parts[1] === "rules") return "ground"
  if (parts[0] === "internal" && parts[1] === "engine") return "engine"
  return undefined
}

const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    return entry.isDirectory() ? filesOf(full) : entry.name.endsWith(".ts") ? [full] : []
  })

// `import ... from "./x.ts"` and `export ... from "./x.ts"`, over several lines too
const importPattern = /(?:^|\n)\s*(?:import|export)\s[^;]*?\sfrom\s+"(\.[^"]+)"/g

const problems: Array<string> = []
for (const file of filesOf(src)) {
  const relative = path.relative(src, file)
  const floor = floorOf(relative)
  if (floor === undefined) {
    problems.push(`${path.relative(root, file)}: in no floor (put it in src/, internal/rules/ or internal/engine/)`)
    continue
  }
  const text = fs.readFileSync(file, "utf8")
  for (const match of text.matchAll(importPattern)) {
    const target = path.relative(src, path.resolve(path.dirname(file), match[1]!))
    const targetFloor = floorOf(target)
    if (targetFloor === undefined || FLOORS.indexOf(targetFloor) > FLOORS.indexOf(floor)) {
      const line = text.slice(0, match.index + match[0].indexOf("from")).split("\n").length
      problems.push(`${path.relative(root, file)}:${line}: ${floor} imports ${targetFloor ?? "no floor"} (${match[1]})`)
    }
  }
}

if (problems.length > 0) {
  for (const problem of problems) process.stderr.write(`${problem}\n`)
  process.stderr.write(`${problems.length} import(s) of @agentloop/core run up a floor\n`)
  process.exit(1)
}
process.stdout.write("@agentloop/core: every import stays on its floor or goes down\n")
