/**
 * Builds every package's `dist/` (`tsc -b tsconfig.build.json`, with any arguments given, e.g.
 * `--force`), then removes the files in `dist/` whose source no longer exists.
 *
 * `tsc -b` writes what the sources compile to and never deletes: a module renamed or removed
 * in `src/` would leave its old `.js`, `.d.ts` and maps in `dist/`, and `npm pack` would ship
 * them (importable by a deep path, documented nowhere).
 *
 * Usage: npm run build [-- --force]   (`node scripts/build.ts [tsc -b options]`)
 */
import { spawnSync } from "node:child_process"
import { existsSync, readdirSync, rmSync, statSync } from "node:fs"
import { createRequire } from "node:module"
import { join, relative } from "node:path"

const root = join(import.meta.dirname, "..")
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
const built = spawnSync(process.execPath, [tsc, "-b", "tsconfig.build.json", ...process.argv.slice(2)], {
  cwd: root,
  stdio: "inherit"
})
if (built.status !== 0) process.exit(built.status ?? 1)
const outputs = /\.(d\.ts\.map|d\.ts|js\.map|js)$/

const walk = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? walk(path) : [path]
  })

/** The source a dist file was compiled from, compared by exact name (case matters on Linux). */
const hasSource = (src: string, rel: string): boolean => {
  const stem = rel.replace(outputs, "")
  const parts = stem.split("/")
  const name = parts.pop() ?? ""
  const dir = join(src, ...parts)
  if (!existsSync(dir)) return false
  const entries = readdirSync(dir)
  return entries.includes(`${name}.ts`) || entries.includes(`${name}.tsx`)
}

/** Removes the folders under `dir` that the removals left empty (not `dir` itself). */
const removeEmptyFolders = (dir: string): void => {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (!statSync(path).isDirectory()) continue
    removeEmptyFolders(path)
    if (readdirSync(path).length === 0) rmSync(path, { recursive: true })
  }
}

let removed = 0
for (const pkg of readdirSync(join(root, "packages"))) {
  const dist = join(root, "packages", pkg, "dist")
  const src = join(root, "packages", pkg, "src")
  if (!existsSync(dist) || !existsSync(src)) continue
  for (const file of walk(dist)) {
    const rel = relative(dist, file)
    if (!outputs.test(rel) || hasSource(src, rel)) continue
    rmSync(file)
    removed++
    console.log(`build: removed ${relative(root, file)} (its source is gone)`)
  }
  removeEmptyFolders(dist)
}
if (removed > 0) console.log(`build: ${removed} stale file(s) removed`)
