/**
 * The project's instructions for agents, joined into the system prompt: `AGENTS.md` (or
 * `CLAUDE.md` in a folder without one) from
 *
 * 1. the user's folder, `$XDG_CONFIG_HOME/agentloop/` (default `~/.config/agentloop/`), for every
 *    project;
 * 2. each folder above the workspace, from the repository root (the nearest folder above holding
 *    `.git`) down; none when the workspace is not inside a repository;
 * 3. the workspace itself.
 *
 * The workspace's file is read through the confined layer, like every file the CLI reads there. The
 * others are outside the workspace on purpose; they are read as plain files, each at most
 * `CONTEXT_FILE_MAX_BYTES`: opened without following a link (`O_NOFOLLOW`; a link is skipped with a
 * note), only when it is a regular file (no FIFO or device is opened for reading), and no other
 * file is read from there.
 */
import { WorkspaceFiles } from "@agentloop/tools"
import { Effect } from "effect"
import * as NodeFs from "node:fs"
import { homedir } from "node:os"
import * as nodePath from "node:path"
import { CliError } from "../CliError.ts"
import { readInWorkspace } from "./Attachments.ts"

/** The most of one instructions file that is joined: 64 KiB (the rest is cut, and the prompt says so). */
export const CONTEXT_FILE_MAX_BYTES = 64 * 1024

/** The names looked for in each folder, in order: the first that exists is taken. */
export const CONTEXT_FILE_NAMES = ["AGENTS.md", "CLAUDE.md"] as const

/** One instructions file: where it is (as shown to the model) and its text. */
export interface ContextFile {
  readonly shown: string
  readonly text: string
}

/** The files found, and a note for each one that was skipped. */
export interface ProjectContext {
  readonly files: ReadonlyArray<ContextFile>
  readonly notes: ReadonlyArray<string>
}

/** The user's folder for instructions (next to the user's config file). */
export const userFolder = (env: NodeJS.ProcessEnv): string => {
  const xdg = env["XDG_CONFIG_HOME"]
  const home = env["HOME"] ?? homedir()
  return nodePath.join(xdg !== undefined && xdg.length > 0 ? xdg : nodePath.join(home, ".config"), "agentloop")
}

/** The folders above `root` up to the repository root, the top one first (none outside a repository). */
export const foldersAbove = (root: string): ReadonlyArray<string> => {
  const chain: Array<string> = []
  let folder = root
  while (true) {
    if (NodeFs.existsSync(nodePath.join(folder, ".git"))) return chain.reverse()
    const parent = nodePath.dirname(folder)
    if (parent === folder) return []
    folder = parent
    chain.push(folder)
  }
}

const cut = (shown: string, bytes: Uint8Array, size: number): string => {
  if (size <= CONTEXT_FILE_MAX_BYTES) return new TextDecoder().decode(bytes)
  const head = Buffer.from(bytes.subarray(0, CONTEXT_FILE_MAX_BYTES)).toString("utf8").replace(/\uFFFD+$/, "")
  return `${head}\n[${shown} is ${size} bytes; only its first ${CONTEXT_FILE_MAX_BYTES} are shown]`
}

type Found =
  | { readonly _tag: "found"; readonly bytes: Uint8Array; readonly size: number }
  | { readonly _tag: "none" }
  | {
    readonly _tag: "skipped"
    readonly why: string
  }

/** A file outside the workspace, read as a plain file: no link followed, a regular file only, bounded. */
const readPlain = (file: string): Found => {
  let fd: number
  try {
    fd = NodeFs.openSync(
      file,
      NodeFs.constants.O_RDONLY | NodeFs.constants.O_NOFOLLOW | NodeFs.constants.O_NONBLOCK | NodeFs.constants.O_NOCTTY
    )
  } catch (e) {
    const code = (e as { code?: string }).code
    if (code === "ENOENT" || code === "ENOTDIR") return { _tag: "none" }
    return { _tag: "skipped", why: code === "ELOOP" ? "it is a link" : `it cannot be read (${code ?? e})` }
  }
  try {
    const stat = NodeFs.fstatSync(fd)
    if (!stat.isFile()) return { _tag: "skipped", why: "it is not a regular file" }
    const buffer = Buffer.alloc(Math.min(stat.size, CONTEXT_FILE_MAX_BYTES + 1))
    let total = 0
    while (total < buffer.length) {
      const n = NodeFs.readSync(fd, buffer, total, buffer.length - total, total)
      if (n === 0) break
      total += n
    }
    return { _tag: "found", bytes: buffer.subarray(0, total), size: Math.max(stat.size, total) }
  } catch (e) {
    return { _tag: "skipped", why: `it cannot be read (${(e as { code?: string }).code ?? e})` }
  } finally {
    NodeFs.closeSync(fd)
  }
}

/** The workspace's own file, through the confined layer. */
const readConfined = (root: string, name: string): Effect.Effect<Found> =>
  readInWorkspace(root, name, WorkspaceFiles.DEFAULT_MAX_BYTES).pipe(
    Effect.map((bytes): Found => ({ _tag: "found", bytes, size: bytes.length })),
    Effect.catch((e): Effect.Effect<Found> =>
      Effect.succeed(
        e instanceof CliError ?
          { _tag: "skipped", why: e.message } :
          e.reason === "NotFound" ?
          { _tag: "none" } :
          { _tag: "skipped", why: e.message }
      )
    )
  )

/** Reads the instructions files (see the module's description). */
export const readProjectContext = (root: string, env: NodeJS.ProcessEnv): Effect.Effect<ProjectContext> =>
  Effect.gen(function*() {
    const files: Array<ContextFile> = []
    const notes: Array<string> = []
    const take = (shown: string, found: Found) => {
      if (found._tag === "found") files.push({ shown, text: cut(shown, found.bytes, found.size) })
      if (found._tag === "skipped") notes.push(`${shown} is not used as project instructions: ${found.why}`)
      return found._tag !== "none"
    }
    const outside = [userFolder(env), ...foldersAbove(root)]
    for (const folder of outside) {
      if (folder === root) continue
      for (const name of CONTEXT_FILE_NAMES) {
        const file = nodePath.join(folder, name)
        if (take(file, readPlain(file))) break
      }
    }
    for (const name of CONTEXT_FILE_NAMES) {
      if (take(name, yield* readConfined(root, name))) break
    }
    return { files, notes }
  })

/** The system prompt's section of project instructions ("" when there are none). */
export const projectContextSection = (context: ProjectContext): string =>
  context.files.length === 0 ? "" : [
    "# Project instructions",
    "The files below hold instructions for agents working here, from the most general to the most specific " +
    "(the workspace's own last); follow them, and where they disagree the later one wins.",
    ...context.files.map((f) => `## ${f.shown}\n\n${f.text.trim()}`)
  ].join("\n\n")

/**
 * What `/init` asks the agent: a run of the agent, through the usual tools and approvals, rather
 * than a template filled in by the CLI, because the useful content of an AGENTS.md (how to build
 * and test, the conventions, what not to touch) is only found by reading the project, and the
 * user sees the file in the write's approval before it lands.
 */
export const INIT_PROMPT = [
  "Write AGENTS.md at the root of the workspace: the instructions a coding agent needs to work on this project.",
  "First look at the project: its README, its manifests and build files (package.json, Cargo.toml, " +
  "pyproject.toml, go.mod, Makefile…), its layout, its test set-up and any contributing notes.",
  "Then write a short AGENTS.md (under 100 lines) with: what the project is in one or two sentences; the " +
  "commands to install, build, test and lint (checked against the files, not guessed); the layout (which folder " +
  "holds what); the conventions a change must follow; anything an agent must not do. Only write what you found.",
  "If AGENTS.md exists already, read it and improve it instead of starting over. Change no other file."
].join("\n\n")
