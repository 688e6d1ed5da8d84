/**
 * Typechecks every TypeScript block of the documentation against the real packages.
 *
 *     node scripts/docs/check-snippets.ts            # every Markdown file (see snippets.ts)
 *     node scripts/docs/check-snippets.ts README.md  # only these files
 *     node scripts/docs/check-snippets.ts --list     # list the blocks found, check nothing
 *
 * Each block becomes a module of its own in `scripts/docs/.generated/run-PID/` (git-ignored, kept
 * only when something fails, for a look at what was checked), with its
 * hidden prelude first, and the modules are typechecked together with the repository's compiler
 * settings (`tsconfig.base.json`: `strict`, `exactOptionalPropertyTypes`, NodeNext resolution).
 * `@agentloop/*` resolve to the packages' sources through the `agentloop-source` export condition,
 * so a block is checked against the API as it is in the work tree, built or not. Two settings are
 * relaxed, because they are about tidiness rather than correctness and a short example often
 * defines a value it only shows: `noUnusedLocals` and `noUnusedParameters`.
 *
 * Every error is printed as `FILE:LINE:COLUMN - error TSnnnn: message` with the line in the
 * Markdown file (a prelude's errors point into the prelude), and the script exits 1.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"
import { documentationFiles, extractSnippets } from "./snippets.ts"
import type { Snippet } from "./snippets.ts"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
// one folder per process: several people may check their files at the same time
const outDir = path.join(root, "scripts/docs/.generated", `run-${process.pid}`)

const args = process.argv.slice(2)
const listOnly = args.includes("--list")
const requested = args.filter((a) => !a.startsWith("--"))
const files = requested.length > 0
  ? requested.map((f) => path.relative(root, path.resolve(f)))
  : documentationFiles(root)

const snippets: Array<Snippet> = []
for (const file of files) {
  snippets.push(...extractSnippets(file, fs.readFileSync(path.join(root, file), "utf8")).filter((s) => s.lang === "ts"))
}

if (listOnly) {
  for (const s of snippets) {
    console.log(`${s.file}:${s.fenceLine}  ${s.code.split("\n").length} line(s)${s.prelude ? " + prelude" : ""}`)
  }
  process.exit(0)
}

fs.rmSync(outDir, { recursive: true, force: true })
fs.mkdirSync(outDir, { recursive: true })

interface Generated {
  readonly snippet: Snippet
  readonly preludeLines: number
}
const generated = new Map<string, Generated>()
for (const snippet of snippets) {
  const name = `${snippet.file.replace(/[^A-Za-z0-9]+/g, "_")}_L${snippet.fenceLine}.ts`
  const target = path.join(outDir, name)
  const preludeCode = snippet.prelude === undefined ? "" : `${snippet.prelude.code}\n`
  const preludeLines = snippet.prelude === undefined ? 0 : snippet.prelude.code.split("\n").length
  fs.writeFileSync(target, `${preludeCode}${snippet.code}\n`)
  generated.set(path.resolve(target), { snippet, preludeLines })
}

const base = ts.getParsedCommandLineOfConfigFile(path.join(root, "tsconfig.base.json"), {}, {
  ...ts.sys,
  onUnRecoverableConfigFileDiagnostic: (d) => {
    throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"))
  }
})
if (base === undefined) throw new Error("cannot read tsconfig.base.json")

const options: ts.CompilerOptions = {
  ...base.options,
  noEmit: true,
  composite: false,
  incremental: false,
  declaration: false,
  declarationMap: false,
  sourceMap: false,
  noUnusedLocals: false,
  noUnusedParameters: false,
  noErrorTruncation: false,
  allowImportingTsExtensions: true,
  types: ["node"],
  typeRoots: [path.join(root, "node_modules/@types")]
}
delete options.rootDir
delete options.outDir
delete options.tsBuildInfoFile
delete options.plugins

const program = ts.createProgram({ rootNames: [...generated.keys()], options })
const problems: Array<string> = []
const broken = new Set<Generated>()
for (const diagnostic of program.getOptionsDiagnostics()) {
  problems.push(`compiler options: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`)
}
for (const [fileName, entry] of generated) {
  const source = program.getSourceFile(fileName)
  if (source === undefined) throw new Error(`not in the program: ${fileName}`)
  const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]
  for (const diagnostic of diagnostics) {
    broken.add(entry)
    const { line, character } = source.getLineAndCharacterOfPosition(diagnostic.start ?? 0)
    const { snippet, preludeLines } = entry
    const mdLine = line < preludeLines ?
      snippet.prelude!.line + line :
      snippet.codeLine + (line - preludeLines)
    const where = line < preludeLines ? " (in the block's prelude)" : ""
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n    ")
    problems.push(`${snippet.file}:${mdLine}:${character + 1} - error TS${diagnostic.code}${where}: ${message}`)
  }
}

if (problems.length > 0) {
  for (const problem of problems) console.error(problem)
  console.error(
    `\n${broken.size} of ${snippets.length} TypeScript block(s) in ${files.length} file(s) do not typecheck` +
      ` (${problems.length} error(s)). The generated modules are in ${path.relative(root, outDir)}/.`
  )
  process.exit(1)
}
fs.rmSync(outDir, { recursive: true, force: true })
console.log(`${snippets.length} TypeScript block(s) in ${files.length} Markdown file(s) typecheck.`)
