/**
 * Tab completion of `@` mentions in `chat`: the word before the cursor, when it starts with `@`,
 * is completed with the names in the workspace folder it names (folders end with `/`; a single
 * file match is followed by a space). Only names are listed, never contents: the folder is resolved
 * through `@agentloop/tools`' confined `Workspace.resolve` (so `@../`, `@/etc/` and a link out of the
 * workspace complete to nothing), entries that are links are listed as they are without following
 * them, and the folder is resolved again after listing (a folder swapped for a link meanwhile lists
 * nothing). Dot files appear when the typed name starts with a dot; `.git` never does.
 */
import { makeWorkspace } from "@agentloop/tools"
import type { WorkspaceShape } from "@agentloop/tools"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Effect } from "effect"
import * as NodeFs from "node:fs"

/** The most names offered at once. */
export const MAX_COMPLETIONS = 200

/** A readline completer: the candidates for the line before the cursor, and the part they replace. */
export type Completer = (line: string) => Promise<[Array<string>, string]>

const escape = (name: string) => name.replace(/ /g, "\\ ")

/** The mention completer of the workspace `root`. */
export const mentionCompleter = (root: string): Completer => {
  let workspace: Promise<WorkspaceShape> | undefined
  const open = () => (workspace ??= Effect.runPromise(makeWorkspace(root).pipe(Effect.provide(NodeServices.layer))))
  return async (line) => {
    const m = /(?:^|\s)(@(?:\\ |[^\s])*)$/.exec(line)
    if (m === null) return [[], line]
    const typed = m[1]!
    const partial = typed.slice(1).replace(/\\ /g, " ")
    const slash = partial.lastIndexOf("/")
    const folder = partial.slice(0, slash + 1)
    const prefix = partial.slice(slash + 1)
    if (folder.startsWith("/") || folder.split("/").includes("..")) return [[], typed]
    try {
      const ws = await open()
      const resolve = (path: string) => Effect.runPromise(ws.resolve(path))
      const dir = await resolve(folder === "" ? "." : folder)
      const entries = NodeFs.readdirSync(dir, { withFileTypes: true })
      if ((await resolve(folder === "" ? "." : folder)) !== dir) return [[], typed]
      const names = entries
        .filter((e) =>
          e.name.startsWith(prefix) && e.name !== ".git" && (prefix.startsWith(".") || !e.name.startsWith("."))
        )
        .map((e) => (e.isDirectory() ? `${e.name}/` : e.name))
        .sort()
        .slice(0, MAX_COMPLETIONS)
      const candidates = names.map((name) => `@${escape(folder + name)}`)
      if (candidates.length === 1 && !candidates[0]!.endsWith("/")) candidates[0] = `${candidates[0]} `
      return [candidates, typed]
    } catch {
      return [[], typed]
    }
  }
}
