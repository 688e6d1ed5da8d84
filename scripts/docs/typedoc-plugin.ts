/**
 * A TypeDoc plugin for the API reference:
 *
 * - names each package's module after the package (`@agentloop/core`) instead of its entry file's
 *   folder (`core/src`);
 * - takes the module's summary from the header comment of `src/index.ts` (the project's modules
 *   open with a plain doc comment, which TypeDoc would otherwise give to the first export).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Comment, Converter, ReflectionKind } from "typedoc"
import type { Application, Context } from "typedoc"

const headerSummary = (file: string): string | undefined => {
  const text = fs.readFileSync(file, "utf8")
  const match = /^\s*\/\*\*([\s\S]*?)\*\//.exec(text)
  if (match === null) return undefined
  const lines = match[1]!.split("\n").map((line) => line.replace(/^\s*\* ?/, ""))
  const summary: Array<string> = []
  for (const line of lines) {
    if (line.trimStart().startsWith("@")) break
    summary.push(line)
  }
  const joined = summary.join("\n").trim()
  return joined === "" ? undefined : joined
}

export const load = (app: Application): void => {
  app.converter.on(Converter.EVENT_RESOLVE_BEGIN, (context: Context) => {
    for (const child of context.project.children ?? []) {
      if (!child.kindOf(ReflectionKind.Module)) continue
      const file = child.sources?.[0]?.fullFileName
      if (file === undefined) continue
      const manifest = path.join(path.dirname(file), "..", "package.json")
      if (!fs.existsSync(manifest)) continue
      const name = (JSON.parse(fs.readFileSync(manifest, "utf8")) as { name?: string }).name
      if (name !== undefined) child.name = name
      const summary = headerSummary(file)
      if (child.comment === undefined && summary !== undefined) {
        child.comment = new Comment([{ kind: "text", text: summary }])
      }
    }
  })
}
