/**
 * Finds the code blocks of the documentation's Markdown files that are checked: every TypeScript
 * block (info string `ts`, `typescript` or `mts`), and the shell blocks (`sh`, `bash`, `shell`)
 * marked `<!-- run -->`. Every other block (`json`, `text`, unmarked shell…) is left alone.
 *
 * A block may be preceded (blank lines allowed in between) by a hidden prelude, an HTML comment
 * that Markdown renderers do not show:
 *
 *     <!-- prelude
 *     import type { Message } from "@agentloop/core"
 *     declare const messages: ReadonlyArray<Message>
 *     -->
 *
 * The prelude is put before the block's code when it is checked. Use it only to declare what the
 * reader already has at that point (a value built in an earlier block, a layer of their own);
 * everything the block itself needs to work (imports, a `Scope`, the services it uses) belongs
 * in the visible code.
 *
 * A block preceded by `<!-- run -->` is a complete program: `run-snippets.ts` runs it (a TypeScript
 * one with Node, a shell one with bash, with this clone's `agentloop` on its PATH) and expects it to
 * exit 0. A TypeScript block that imports `@effect/vitest` is a test file: it is run with vitest.
 */
import * as fs from "node:fs"
import * as path from "node:path"

export interface Snippet {
  /** The Markdown file, relative to the repository root. */
  readonly file: string
  /** 1-based line of the opening fence. */
  readonly fenceLine: number
  /** 1-based line, in the Markdown file, of the block's first line of code. */
  readonly codeLine: number
  readonly code: string
  /** The hidden prelude's code, and the 1-based line of its first line in the Markdown file. */
  readonly prelude: { readonly code: string; readonly line: number } | undefined
  /** Marked `<!-- run -->`: a program that must run and exit 0. */
  readonly run: boolean
  /** A TypeScript block, or a shell block (always marked `run`). */
  readonly lang: "ts" | "sh"
}

const fenceOpen = /^( {0,3})(`{3,}|~{3,})\s*([^\s`]*)(.*)$/
const preludeStart = /^\s*<!--\s*prelude\b(.*)$/
const runMarker = /^\s*<!--\s*run\s*-->\s*$/

const isTypeScript = (lang: string): boolean => {
  const l = lang.toLowerCase()
  return l === "ts" || l === "typescript" || l === "mts"
}

const isShell = (lang: string): boolean => ["sh", "bash", "shell"].includes(lang.toLowerCase())

/** Every TypeScript block of one Markdown text. */
export const extractSnippets = (file: string, text: string): Array<Snippet> => {
  const lines = text.split("\n")
  const out: Array<Snippet> = []
  let pendingPrelude: { code: string; line: number; endLine: number } | undefined
  let pendingRun: number | undefined
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    if (runMarker.test(line)) {
      pendingRun = i + 1
      continue
    }
    const prelude = preludeStart.exec(line)
    if (prelude !== null) {
      // <!-- prelude ... --> possibly over several lines
      const body: Array<string> = []
      const startLine = i + 1
      let rest = prelude[1]!
      let j = i
      for (;;) {
        const end = rest.indexOf("-->")
        if (end >= 0) {
          if (rest.slice(0, end).trim() !== "") body.push(rest.slice(0, end))
          break
        }
        if (j > i || rest.trim() !== "") body.push(rest)
        j++
        if (j >= lines.length) throw new Error(`${file}:${startLine}: a prelude comment is never closed`)
        rest = lines[j]!
      }
      const firstCodeLine = prelude[1]!.trim() === "" ? startLine + 1 : startLine
      pendingPrelude = { code: body.join("\n"), line: firstCodeLine, endLine: j + 1 }
      i = j
      continue
    }
    const open = fenceOpen.exec(line)
    if (open === null) {
      if (line.trim() !== "") {
        pendingPrelude = undefined
        pendingRun = undefined
      }
      continue
    }
    const fence = open[2]!
    const lang = open[3]!
    const fenceLine = i + 1
    const body: Array<string> = []
    let j = i + 1
    for (; j < lines.length; j++) {
      const candidate = lines[j]!
      if (
        candidate.trimStart().startsWith(fence[0]!.repeat(fence.length)) &&
        candidate.trim().replaceAll(fence[0]!, "") === ""
      ) {
        break
      }
      body.push(candidate)
    }
    if (isTypeScript(lang)) {
      out.push({
        file,
        fenceLine,
        codeLine: fenceLine + 1,
        code: body.join("\n"),
        prelude: pendingPrelude === undefined ? undefined : { code: pendingPrelude.code, line: pendingPrelude.line },
        run: pendingRun !== undefined,
        lang: "ts"
      })
    } else if (pendingRun !== undefined && pendingPrelude === undefined && isShell(lang)) {
      out.push({
        file,
        fenceLine,
        codeLine: fenceLine + 1,
        code: body.join("\n"),
        prelude: undefined,
        run: true,
        lang: "sh"
      })
    } else if (pendingPrelude !== undefined) {
      throw new Error(
        `${file}:${pendingPrelude.line}: a prelude comment is followed by a "${lang}" block, not a TypeScript one`
      )
    } else if (pendingRun !== undefined) {
      throw new Error(
        `${file}:${pendingRun}: a run marker is followed by a "${lang}" block, not a TypeScript or shell one`
      )
    }
    pendingPrelude = undefined
    pendingRun = undefined
    i = j
  }
  if (pendingPrelude !== undefined) {
    throw new Error(`${file}:${pendingPrelude.line}: a prelude comment is not followed by a TypeScript block`)
  }
  if (pendingRun !== undefined) {
    throw new Error(`${file}:${pendingRun}: a run marker is not followed by a TypeScript block`)
  }
  return out
}

const walk = (dir: string, found: Array<string>): void => {
  if (!fs.existsSync(dir)) return
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith(".") || entry.name === "node_modules" || entry.name === "api") continue
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) walk(full, found)
    else if (entry.name.endsWith(".md")) found.push(full)
  }
}

/**
 * The documentation's Markdown files, relative to `root`: the root README, every page under
 * `docs/` (the generated API reference in `docs/api` excluded) and each package's README.
 */
export const documentationFiles = (root: string): Array<string> => {
  const found: Array<string> = []
  if (fs.existsSync(path.join(root, "README.md"))) found.push(path.join(root, "README.md"))
  walk(path.join(root, "docs"), found)
  const packages = path.join(root, "packages")
  if (fs.existsSync(packages)) {
    for (const name of fs.readdirSync(packages).sort()) {
      const readme = path.join(packages, name, "README.md")
      if (fs.existsSync(readme)) found.push(readme)
    }
  }
  return found.map((file) => path.relative(root, file))
}
