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
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"

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

// The `agentloop` command ships as a bundle (packages/cli/bundle/): one entry that holds the command
// line's flags and help, and a chunk per command and per heavy feature (durable runs, MCP, the
// viewer), loaded only when used, so `agentloop --help` starts in about the time Node itself does
// instead of importing every package and effect's whole index. It is built from the compiled dist/
// above (what the library's users get), never from a second source; the bin falls back to dist/ when
// the bundle is absent, and runs src/ under the `agentloop-source` condition (the repository's tests).
// Built beside it and swapped in with two renames, so that a build running while the command runs (or
// while another build does: two test runs at once) never leaves a half-written bundle in its place.
const bundleDir = join(root, "packages", "cli", "bundle")
const nextDir = `${bundleDir}.next-${process.pid}`
rmSync(nextDir, { recursive: true, force: true })
const { build } = await import("esbuild")
// The packages import effect from its barrels (`import { Effect, Schema } from "effect"`, as effect's
// docs do). A barrel re-exports each module as a namespace object, and a bundler keeps all of a
// namespace object's members: the whole of every module named, used or not. The bundle imports the
// modules themselves instead (`import * as Effect from "effect/dist/Effect.js"`, the same bindings),
// so that esbuild keeps only what is used: the run/chat path loads 678 KiB instead of 1,072, and a
// one-turn run reaches its first request about 18% sooner (the start-up bench).
/** What a barrel of effect's (`effect`, `effect/http`, ...) re-exports: each name, the module it comes from. */
const barrelOf = (() => {
  const cache = new Map<string, Map<string, { file: string; namespace: boolean }>>()
  return (specifier: string) => {
    const known = cache.get(specifier)
    if (known !== undefined) return known
    const index = fileURLToPath(import.meta.resolve(specifier))
    const text = readFileSync(index, "utf8")
    const names = new Map<string, { file: string; namespace: boolean }>()
    for (const m of text.matchAll(/export \* as (\w+) from "(\.\/[\w/.-]+)"/g)) {
      names.set(m[1]!, { file: join(dirname(index), m[2]!), namespace: true })
    }
    for (const m of text.matchAll(/export \{([^}]*)\} from "(\.\/[\w/.-]+)"/g)) {
      for (const name of m[1]!.split(",").map((s) => s.trim()).filter((s) => s.length > 0)) {
        names.set(name, { file: join(dirname(index), m[2]!), namespace: false })
      }
    }
    cache.set(specifier, names)
    return names
  }
})()
/** The packages' compiled modules (what the bundle is built from), not their dependencies'. */
const ownDist = new RegExp(`^${join(root, "packages").replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/[^/]+/dist/.*\\.js$`)
const importsFromBarrel = /import \{([^}]*)\} from "(effect(?:\/[a-z-]+)?)";?/g
const barrelImports = {
  name: "effect-barrel-imports",
  setup(b: import("esbuild").PluginBuild) {
    b.onLoad({ filter: ownDist }, (args) => {
      const text = readFileSync(args.path, "utf8")
      const contents = text.replace(importsFromBarrel, (_import, list: string, specifier: string) => {
        const names = barrelOf(specifier)
        return list.split(",").map((s) => s.trim()).filter((s) => s.length > 0).map((entry) => {
          const [name, local = name] = entry.split(/\s+as\s+/) as [string, string?]
          const found = names.get(name)
          if (found === undefined) throw new Error(`build: ${specifier} has no export ${name} (${args.path})`)
          return found.namespace
            ? `import * as ${local} from ${JSON.stringify(found.file)};`
            : `import { ${name} as ${local} } from ${JSON.stringify(found.file)};`
        }).join("")
      })
      return { contents, loader: "js" }
    })
  }
}
// effect's CliOutput builds an `Intl.Segmenter` when its module loads (ICU's grapheme rules: about 10 ms,
// 5% of a one-turn run's start-up), used only to measure text for help and tables, which `run` and
// `chat` never render: the bundle builds it on first use instead. A newer effect without that line
// leaves the file as it is (the build says so, and this can go).
const eagerSegmenter =
  /const graphemeSegmenter = \/\*#__PURE__\*\/new Intl\.Segmenter\(undefined, \{\s*granularity: "grapheme"\s*\}\);/
const lazySegmenter = {
  name: "lazy-grapheme-segmenter",
  setup(b: import("esbuild").PluginBuild) {
    b.onLoad({ filter: /effect\/dist\/cli\/CliOutput\.js$/ }, (args) => {
      const text = readFileSync(args.path, "utf8")
      if (!eagerSegmenter.test(text)) {
        console.log(
          `build: ${args.path} no longer builds its Intl.Segmenter at load: the lazy-segmenter step is unused`
        )
        return undefined
      }
      const lazy = "let segmenter;const graphemeSegmenter = { segment: (text) => " +
        "(segmenter ??= new Intl.Segmenter(undefined, { granularity: \"grapheme\" })).segment(text) };"
      return { contents: text.replace(eagerSegmenter, lazy), loader: "js" }
    })
  }
}
const bundled = await build({
  plugins: [barrelImports, lazySegmenter],
  entryPoints: { agentloop: join(root, "scripts", "cli-bundle-entry.js") },
  outdir: nextDir,
  chunkNames: "chunks/[name]-[hash]",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node22",
  // minified names, not kept: keeping them (esbuild's keepNames) defines every function's and class's
  // `name` at load, which cost a one-turn run about 12 ms of its start-up (8% of its first request) in
  // the start-up bench; messages and `_tag`s never depend on those names, so only a defect's stack
  // trace shows the minified ones
  minify: true,
  legalComments: "linked",
  // sharp is a native addon, and web-tree-sitter loads its WebAssembly from beside its own module
  // (as tree-sitter-bash's grammar is read from its package): resolved at run time from the CLI's
  // own dependencies; pg's optional native driver and the Cloudflare socket it can use are never
  // installed
  external: ["sharp", "web-tree-sitter", "tree-sitter-bash", "pg-native", "cloudflare:sockets"],
  // CommonJS dependencies inside an ES module bundle still call `require` for Node's built-ins
  banner: {
    js: "import { createRequire as __agentloopRequire } from 'node:module';" +
      "const require = __agentloopRequire(import.meta.url);"
  },
  metafile: true,
  logLevel: "warning"
})
const bundleFiles = bundled.metafile.outputs
/** The files an output loads before it runs (its static imports, transitively), itself included. */
const loadedWith = (start: string): Set<string> => {
  const seen = new Set<string>()
  const stack = [start]
  while (stack.length > 0) {
    const next = stack.pop()!
    if (seen.has(next)) continue
    seen.add(next)
    for (const i of bundleFiles[next]?.imports ?? []) {
      if (i.kind === "import-statement" && i.path in bundleFiles) stack.push(i.path)
    }
  }
  return seen
}
const outputOf = (pattern: RegExp): string => {
  const found = Object.keys(bundleFiles).find((o) => pattern.test(o))
  if (found === undefined) throw new Error(`build: the bundle has no output matching ${pattern}`)
  return found
}
// What each path may not load: the command line (every command's flags and their parsing) loads no
// command's code; `run` and `chat` load neither durable runs' engine, nor the MCP client, nor the
// viewer, nor the OTLP exporter unless asked for. (`--help` and `--version` load neither: the bin
// prints them from static.json, below.)
const helpMay = /packages\/cli\/dist\/(main|Logs|Sanitize|Screen|Style|internal\/Names)\.js/
const paths = [
  {
    name: "command line (flags, parsing)",
    start: outputOf(/bundle\.next-\d+\/agentloop\.js$/),
    forbidden: (input: string) =>
      (/packages\//.test(input) && !helpMay.test(input)) ||
      /sql|cluster|workflow|modelcontextprotocol|observability/.test(input)
  },
  {
    name: "run/chat",
    start: outputOf(/chunks\/Agent-[^/]*\.js$/),
    forbidden: (input: string) =>
      /packages\/durable\/dist\/(?!RunnerLock)|packages\/mcp\/|modelcontextprotocol|undici/.test(input) ||
      /effect\/dist\/(cluster|workflow|sql|rpc|observability)\/|packages\/cli\/dist\/view\/|OtlpTracing/.test(input)
  }
]
/** An effect barrel left in (imported other than as the barrel step above rewrites): every module it names. */
const barrel = /node_modules\/effect\/dist\/([a-z-]+\/)?index\.js$/
for (const path of paths) {
  const files = loadedWith(path.start)
  const inputs = [...files].flatMap((f) => Object.keys(bundleFiles[f]!.inputs))
  const wrong = inputs.filter((input) => path.forbidden(input) || barrel.test(input))
  if (wrong.length > 0) {
    rmSync(nextDir, { recursive: true, force: true })
    const why = wrong.some((input) => barrel.test(input)) ?
      "an effect barrel is imported other than by `import { ... } from \"effect...\"`: import its module" :
      "import it lazily"
    throw new Error(`build: the CLI's ${path.name} path would load ${wrong.slice(0, 5).join(", ")}: ${why}`)
  }
  const bytes = [...files].reduce((sum, f) => sum + bundleFiles[f]!.bytes, 0)
  console.log(`build: the CLI's ${path.name} path loads ${files.size} file(s), ${(bytes / 1024).toFixed(0)} KiB`)
}
// What `--help`, `--version` and each command's `--help` print, rendered by the command line itself
// (the compiled dist/, with and without colors) for the bin to print without loading the bundle.
const staticOutput = await import(join(root, "packages", "cli", "dist", "internal", "StaticOutput.js"))
const { Effect } = await import("effect")
const rendered = await Effect.runPromise(staticOutput.renderAllStatic)
writeFileSync(join(nextDir, "static.json"), JSON.stringify(rendered))
console.log(`build: packages/cli/bundle/static.json: ${Object.keys(rendered.entries).length} command lines`)
const oldDir = `${bundleDir}.old-${process.pid}`
if (existsSync(bundleDir)) renameSync(bundleDir, oldDir)
renameSync(nextDir, bundleDir)
rmSync(oldDir, { recursive: true, force: true })
const size = Object.values(bundleFiles).reduce((sum, o) => sum + o.bytes, 0)
console.log(
  `build: packages/cli/bundle: ${Object.keys(bundleFiles).length} files, ${(size / 1024 / 1024).toFixed(1)} MiB`
)
