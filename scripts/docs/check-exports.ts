/**
 * Checks that every public name of every published package is documented the project's way.
 *
 *     node scripts/docs/check-exports.ts                    # every published package
 *     node scripts/docs/check-exports.ts packages/core      # only these package folders
 *
 * The public names of a package are those its `src/index.ts` exports (following `export *` and
 * `export * as X`). Each must have a doc comment carrying `@since` and exactly one `@category`,
 * on every declaration (a schema's value and its type alias of the same name are two). A name
 * exported as a namespace (`export * as X from "./X.ts"`) needs the module's header comment with
 * `@since`, and the rule then applies to each name inside it.
 *
 * TypeDoc (`npm run docs`, `validation.notDocumented`) catches a name with no comment at all; this
 * adds the tags, which TypeDoc does not check. Prints `FILE:LINE - NAME: problem` and exits 1.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

/** The packages whose API is published (the others are private: bench, release). */
export const publicPackages = (): Array<{ readonly name: string; readonly dir: string; readonly entry: string }> =>
  fs.readdirSync(path.join(root, "packages")).sort().flatMap((dir) => {
    const manifest = path.join(root, "packages", dir, "package.json")
    const entry = path.join(root, "packages", dir, "src/index.ts")
    if (!fs.existsSync(manifest) || !fs.existsSync(entry)) return []
    const pkg = JSON.parse(fs.readFileSync(manifest, "utf8")) as { name: string; private?: boolean }
    return pkg.private === true ? [] : [{ name: pkg.name, dir, entry }]
  })

// `node scripts/docs/check-exports.ts DIR…` checks only the packages in those folders
const requested = process.argv.slice(2).map((dir) => path.resolve(dir))
const packages = requested.length === 0 ? publicPackages() : requested.map((dir) => {
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as { name: string }
  return { name: pkg.name, dir, entry: path.join(dir, "src/index.ts") }
})
const base = ts.getParsedCommandLineOfConfigFile(path.join(root, "tsconfig.base.json"), {}, {
  ...ts.sys,
  onUnRecoverableConfigFileDiagnostic: () => {}
})
if (base === undefined) throw new Error("cannot read tsconfig.base.json")
const options: ts.CompilerOptions = {
  ...base.options,
  noEmit: true,
  composite: false,
  incremental: false,
  types: ["node"]
}
delete options.rootDir
delete options.outDir
const program = ts.createProgram({ rootNames: packages.map((p) => p.entry), options })
const checker = program.getTypeChecker()

const problems: Array<string> = []
let checked = 0

const where = (node: ts.Node): string => {
  const source = node.getSourceFile()
  const { line } = source.getLineAndCharacterOfPosition(node.getStart(source))
  return `${path.relative(root, source.fileName)}:${line + 1}`
}

const tagsOf = (node: ts.Node): ReadonlyArray<ts.JSDocTag> | undefined => {
  // the JSDoc of `export const x = …` sits on the statement, which getJSDocTags finds from the declaration
  const docs = ts.getJSDocCommentsAndTags(node).filter(ts.isJSDoc)
  if (docs.length === 0) return undefined
  return docs.flatMap((doc) => [...(doc.tags ?? [])])
}

/** The header comment of a module: its first JSDoc, before the first statement. */
const moduleTags = (source: ts.SourceFile): ReadonlyArray<string> | undefined => {
  const text = source.getFullText()
  const ranges = ts.getLeadingCommentRanges(text, 0) ?? []
  const first = ranges.find((r) => text.slice(r.pos, r.pos + 3) === "/**")
  if (first === undefined) return undefined
  return [...text.slice(first.pos, first.end).matchAll(/@(\w+)/g)].map((m) => m[1]!)
}

const checkDeclaration = (pkg: string, name: string, declaration: ts.Node): void => {
  const tags = tagsOf(declaration)
  const label = `${pkg} ${name}`
  if (tags === undefined) {
    problems.push(`${where(declaration)} - ${label}: no doc comment`)
    return
  }
  const since = tags.filter((t) => t.tagName.text === "since")
  const categories = tags.filter((t) => t.tagName.text === "category")
  if (since.length === 0) problems.push(`${where(declaration)} - ${label}: no @since`)
  if (categories.length !== 1) {
    problems.push(
      `${where(declaration)} - ${label}: ${categories.length === 0 ? "no" : categories.length} @category (one expected)`
    )
  }
}

const seen = new Set<ts.Symbol>()
const checkModule = (pkg: string, prefix: string, moduleSymbol: ts.Symbol): void => {
  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    const name = `${prefix}${exported.getName()}`
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported
    if (seen.has(symbol)) continue
    seen.add(symbol)
    checked++
    const declarations = symbol.getDeclarations() ?? []
    // `/** … */ export { x }`: the comment on the export statement documents the name
    const specifier = exported.getDeclarations()?.find(ts.isExportSpecifier)
    if (specifier !== undefined && specifier.parent.parent.moduleSpecifier === undefined) {
      checkDeclaration(pkg, name, specifier.parent.parent)
      continue
    }
    const namespaceFile = declarations.find(ts.isSourceFile)
    if (namespaceFile !== undefined) {
      // export * as X from "./X.ts"
      const tags = moduleTags(namespaceFile)
      if (tags === undefined || !tags.includes("since")) {
        problems.push(
          `${
            path.relative(root, namespaceFile.fileName)
          }:1 - ${pkg} ${name}: the module has no header comment with @since`
        )
      }
      checkModule(pkg, `${name}.`, symbol)
      continue
    }
    for (const declaration of declarations) {
      // a file outside the repository's packages (a re-export of effect's) is documented there
      if (!packages.some((p) => declaration.getSourceFile().fileName.startsWith(path.dirname(p.entry)))) continue
      checkDeclaration(pkg, name, declaration)
    }
  }
}

for (const pkg of packages) {
  const source = program.getSourceFile(pkg.entry)
  const symbol = source === undefined ? undefined : checker.getSymbolAtLocation(source)
  if (symbol === undefined) {
    problems.push(`${path.relative(root, pkg.entry)} - ${pkg.name}: cannot read its exports`)
    continue
  }
  checkModule(pkg.name, "", symbol)
}

if (problems.length > 0) {
  for (const problem of problems) console.error(problem)
  console.error(`\n${problems.length} problem(s) among ${checked} exported name(s) of ${packages.length} package(s).`)
  process.exit(1)
}
console.log(
  `${checked} exported name(s) of ${packages.length} package(s) each have a doc comment with @since and one @category.`
)
