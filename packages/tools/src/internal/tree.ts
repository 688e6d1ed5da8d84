/**
 * The confined walk of a workspace folder, for `grep`, `find` and `ls`.
 *
 * It is built on the descriptor walk of `confined.ts`: the folder named by the caller is reached
 * through `Confined.walk` (links inside the workspace followed, none out of it), and every folder
 * below is opened relative to its parent's descriptor (through `/proc/self/fd/N/name` on Linux)
 * with `O_DIRECTORY|O_NOFOLLOW|O_NONBLOCK`. A symbolic link is never followed: it is an entry of
 * kind `symlink`, listed at most. A folder swapped for a link (or a file) after it was listed fails
 * to open with `O_NOFOLLOW` and is skipped; a folder that is opened is read through its descriptor,
 * so a racing process cannot make the walk list or read anything outside. Files are opened the
 * same way (`O_NOFOLLOW|O_NONBLOCK`) and checked with `fstat` before they are read.
 *
 * `.gitignore` files are read only through the walk (regular files, one hard link, at most
 * `GITIGNORE_MAX_BYTES`, never through a link: git does not follow them either), from the workspace
 * root down to the walked folder and then in each folder walked. Their rules only ever decide
 * which of the entries the walk found are left out; a rule naming `../x` or an absolute path
 * matches no entry. Matching a folder's names (rules, and the caller's glob) runs under a time guard.
 *
 * agentloop's own folder (`.agentloop`: sessions, checkpoints, kept output) is left out by name,
 * as `node_modules` is, so a search never feeds on earlier searches; the `.gitignore` in it (which
 * keeps it out of git and ignores everything there) is not applied when the folder is named.
 */
import ignore from "ignore"
import type { Ignore } from "ignore"
import * as NodeFs from "node:fs"
import {
  GITIGNORE_MAX_BYTES,
  SEARCH_MAX_DEPTH,
  SEARCH_MAX_ENTRIES,
  SEARCH_NAME_MATCH_TIME_LIMIT_MS
} from "../Search.ts"
import { WorkspaceFileError } from "../WorkspaceFileError.ts"
import {
  at,
  codeOf,
  Confined,
  descriptorPaths,
  messageOf,
  O_DIRECTORY,
  O_NOCTTY,
  O_NOFOLLOW,
  O_NONBLOCK,
  OWN_FOLDER,
  readUpTo
} from "./confined.ts"
import type { Dir } from "./confined.ts"
import { guarded } from "./guard.ts"

/** What an entry is, as listed (a link is never resolved). */
export type EntryKind = "file" | "directory" | "symlink" | "other"

/** One entry the walk found. `dir` (its folder, opened) is valid until the walk moves on. */
export interface WalkEntry {
  /** Relative to the workspace root, as the model sees paths. */
  readonly shown: string
  /** Relative to the walked folder. */
  readonly relative: string
  readonly name: string
  readonly kind: EntryKind
  /** Whether the caller's `match` accepted it (true without one). */
  readonly matched: boolean
  readonly dir: Dir
}

export interface WalkOptions {
  /** List what `.gitignore` files and the defaults (`node_modules`, `.agentloop`) leave out; `.git` is listed too. */
  readonly includeIgnored: boolean
  /** Walk into folders (false: list the one folder). */
  readonly recursive: boolean
  /** Decides `matched`, from the path relative to the walked folder; run under the time guard. */
  readonly match?: ((relative: string, isDirectory: boolean) => boolean) | undefined
}

/** Why a walk ended before it listed everything. */
export type WalkStop =
  | { readonly reason: "entries" }
  | { readonly reason: "slow"; readonly folder: string }

/** What the walk left out, for the notices of a result. */
export interface WalkCounts {
  /** Entries left out by `.gitignore` rules or because they are `node_modules` (`.git` not counted). */
  ignored: number
  /** agentloop's own folders (`.agentloop`) left out, as shown. */
  readonly own: Array<string>
  /** Folders not walked because they are deeper than `SEARCH_MAX_DEPTH`. */
  tooDeep: number
  /** Folders that could not be read (permission denied, or changed while walked). */
  readonly unreadable: Array<string>
  /** `.gitignore` files not applied (too large, several hard links, not readable). */
  readonly rulesNotApplied: Array<string>
}

interface Item {
  readonly name: string
  readonly kind: EntryKind
  readonly matched: boolean
}

interface Frame {
  readonly dir: Dir
  readonly shown: string
  readonly relative: string
  readonly depth: number
  readonly items: ReadonlyArray<Item>
  index: number
  /** Whether this folder's `.gitignore` added a level of rules. */
  readonly rules: boolean
}

interface Level {
  /** The folder of the `.gitignore`, relative to the root ("" for the root). */
  readonly base: string
  readonly rules: Ignore
}

/** The result of opening the folder to walk: a walk, or what the path is instead. */
export type Opened =
  | { readonly _tag: "Walk"; readonly walk: Walk }
  | { readonly _tag: "NotFolder"; readonly shown: string; readonly kind: EntryKind; readonly size: number }

const join = (parent: string, name: string): string => parent === "" || parent === "." ? name : `${parent}/${name}`

const byCodeUnits = (a: Item, b: Item): number => a.name < b.name ? -1 : a.name > b.name ? 1 : 0

const kindOfStat = (stat: NodeFs.Stats): EntryKind =>
  stat.isFile() ? "file" : stat.isDirectory() ? "directory" : stat.isSymbolicLink() ? "symlink" : "other"

const kindOfDirent = (entry: NodeFs.Dirent): EntryKind =>
  entry.isFile() ? "file" : entry.isDirectory() ? "directory" : entry.isSymbolicLink() ? "symlink" : "other"

/** The path that lists `dir` itself. */
const listPath = (dir: Dir): string => descriptorPaths() ? `/proc/self/fd/${dir.fd}` : dir.path

const openDirectory = (path: string): number =>
  NodeFs.openSync(path, NodeFs.constants.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK)

/** What reading a file found: its bytes, or why it was not read. */
export type Read =
  | { readonly _tag: "Bytes"; readonly bytes: Uint8Array }
  | { readonly _tag: "Changed" }
  | { readonly _tag: "NotRegular" }
  | { readonly _tag: "HardLinked" }
  | { readonly _tag: "TooLarge"; readonly size: number }
  | { readonly _tag: "Unreadable"; readonly message: string }

/**
 * Reads the regular file `name` of the opened folder `dir`, never through a link
 * (`O_NOFOLLOW|O_NONBLOCK`, checked with `fstat`): files with several hard links (one could be a
 * name of a file outside the workspace) and files over `maxBytes` are not read.
 */
export const readRegular = (dir: Dir, name: string, maxBytes: number): Read => {
  let fd: number
  try {
    fd = NodeFs.openSync(at(dir, name), NodeFs.constants.O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
  } catch (error) {
    const code = codeOf(error)
    if (code === "ELOOP" || code === "EMLINK" || code === "ENOENT") return { _tag: "Changed" }
    if (code === "ENXIO") return { _tag: "NotRegular" }
    return { _tag: "Unreadable", message: messageOf(error) }
  }
  try {
    const stat = NodeFs.fstatSync(fd)
    if (!stat.isFile()) return { _tag: "NotRegular" }
    if (stat.nlink > 1) return { _tag: "HardLinked" }
    if (stat.size > maxBytes) return { _tag: "TooLarge", size: stat.size }
    const bytes = readUpTo(fd, maxBytes + 1, stat.size)
    if (bytes.length > maxBytes) return { _tag: "TooLarge", size: bytes.length }
    return { _tag: "Bytes", bytes }
  } catch (error) {
    return { _tag: "Unreadable", message: messageOf(error) }
  } finally {
    NodeFs.closeSync(fd)
  }
}

// git matches case-sensitively on Linux; `allowRelativePaths`: a name such as "..." is tested, not thrown on
const rulesOf = (bytes: Uint8Array): Ignore =>
  ignore({ ignorecase: false, allowRelativePaths: true }).add(new TextDecoder("utf-8").decode(bytes))

/**
 * A depth-first walk of one folder, in name order. Synchronous and bounded per step (`next` reads
 * at most one folder); `close` closes every descriptor it holds.
 */
export class Walk {
  readonly counts: WalkCounts = { ignored: 0, own: [], tooDeep: 0, unreadable: [], rulesNotApplied: [] }
  /** Set when the walk ended early; `next` then returns `undefined`. */
  stopped: WalkStop | undefined
  /** The walked folder, relative to the root. */
  readonly shown: string
  /**
   * Why the walked folder, named by the caller, is walked though it would be left out: it is in
   * agentloop's own folder (`own`), or ignored by `.gitignore` or as `node_modules` or `.git`.
   */
  readonly namedIgnored: "own" | "ignored" | undefined

  private readonly stack: Array<Frame> = []
  private readonly levels: Array<Level>
  private readonly options: WalkOptions
  private pending: { readonly name: string; readonly shown: string; readonly relative: string } | undefined
  private seen = 0

  private constructor(
    start: Dir,
    shown: string,
    levels: Array<Level>,
    namedIgnored: "own" | "ignored" | undefined,
    options: WalkOptions,
    stopped: WalkStop | undefined
  ) {
    this.shown = shown
    this.levels = levels
    this.namedIgnored = namedIgnored
    this.options = options
    this.stopped = stopped
    try {
      if (stopped === undefined) this.enter(start, shown, "", 0)
      else NodeFs.closeSync(start.fd)
    } catch (error) {
      this.close()
      throw error
    }
  }

  /**
   * Opens the folder `input` (relative to the workspace root; links inside followed) for a walk,
   * or says what it is when it is no folder. Fails with a `WorkspaceFileError` when it is outside
   * or missing.
   */
  static open(confined: Confined, input: string, options: WalkOptions): Opened {
    const start = confined.walk(
      input,
      { createParents: false, followFinal: true },
      (dir, name, lstat, shown): { readonly dir: Dir; readonly shown: string } | Opened => {
        if (name === null) return { dir: { fd: openDirectory(at(dir, ".")), path: dir.path }, shown }
        if (lstat === undefined) return confined.fail(input, "NotFound", `${shown}: no such file or directory`)
        if (!lstat.isDirectory()) return { _tag: "NotFolder", shown, kind: kindOfStat(lstat), size: lstat.size }
        try {
          return { dir: { fd: openDirectory(at(dir, name)), path: `${dir.path}/${name}` }, shown }
        } catch (error) {
          return confined.fail(input, "Io", `${shown}: ${messageOf(error)} (it changed while it was opened)`)
        }
      }
    )
    if ("_tag" in start) return start
    try {
      let levels: Array<Level> = []
      let namedIgnored: "own" | "ignored" | undefined
      let stopped: WalkStop | undefined
      if (!options.includeIgnored && start.shown !== ".") {
        const parts = start.shown.split("/")
        for (let i = 0; i < parts.length; i++) {
          const base = parts.slice(0, i).join("/")
          const rules = ancestorRules(confined, join(base, ".gitignore"))
          if (rules !== undefined) levels.push({ base, rules })
        }
        const byName = parts.some((part) => part === "node_modules" || part === ".git")
        const byRules = guarded(() => ignoredBy(levels, start.shown, true), SEARCH_NAME_MATCH_TIME_LIMIT_MS)
        if (byRules === undefined) stopped = { reason: "slow", folder: parts.slice(0, -1).join("/") || "." }
        // a folder named by the caller is walked even when ignored; the rules above it then do not apply
        if (parts.includes(OWN_FOLDER)) namedIgnored = "own"
        else if (byName || byRules?.value === true) namedIgnored = "ignored"
        if (namedIgnored !== undefined) levels = []
      }
      return { _tag: "Walk", walk: new Walk(start.dir, start.shown, levels, namedIgnored, options, stopped) }
    } catch (error) {
      NodeFs.closeSync(start.dir.fd)
      throw error
    }
  }

  /** The next entry, or `undefined` when the walk is done or stopped. */
  next(): WalkEntry | undefined {
    const pending = this.pending
    if (pending !== undefined) {
      this.pending = undefined
      const parent = this.stack[this.stack.length - 1]!
      let fd: number | undefined
      try {
        fd = openDirectory(at(parent.dir, pending.name))
      } catch (error) {
        const code = codeOf(error)
        // swapped for a link or a file, or removed, since it was listed: not walked
        if (code !== "ELOOP" && code !== "ENOTDIR" && code !== "ENOENT" && code !== "EMLINK") {
          this.counts.unreadable.push(pending.shown)
        }
      }
      if (fd !== undefined) {
        this.enter(
          { fd, path: `${parent.dir.path}/${pending.name}` },
          pending.shown,
          pending.relative,
          parent.depth + 1
        )
      }
    }
    while (this.stopped === undefined && this.stack.length > 0) {
      const top = this.stack[this.stack.length - 1]!
      if (top.index >= top.items.length) {
        this.leave()
        continue
      }
      const item = top.items[top.index++]!
      const shown = join(top.shown, item.name)
      const relative = join(top.relative, item.name)
      if (item.kind === "directory" && this.options.recursive && item.name !== ".git") {
        if (top.depth + 1 > SEARCH_MAX_DEPTH) this.counts.tooDeep++
        else this.pending = { name: item.name, shown, relative }
      }
      return { shown, relative, name: item.name, kind: item.kind, matched: item.matched, dir: top.dir }
    }
    return undefined
  }

  /** Closes every folder still open. */
  close(): void {
    while (this.stack.length > 0) this.leave()
    this.pending = undefined
  }

  private leave(): void {
    const frame = this.stack.pop()!
    if (frame.rules) this.levels.pop()
    NodeFs.closeSync(frame.dir.fd)
  }

  /** Lists the opened folder `dir` and pushes it; closes `dir` when it is not pushed. */
  private enter(dir: Dir, shown: string, relative: string, depth: number): void {
    let pushed = false
    let rules = false
    try {
      const room = SEARCH_MAX_ENTRIES - this.seen
      const listed = this.list(dir, shown, room + 1)
      if (listed === undefined) return
      this.seen += listed.length
      if (listed.length > room) {
        this.stopped = { reason: "entries" }
        return
      }
      listed.sort(byCodeUnits)
      const base = shown === "." ? "" : shown
      const rulesApply = !this.options.includeIgnored && base.split("/").pop() !== OWN_FOLDER
      if (rulesApply && listed.some((e) => e.name === ".gitignore" && e.kind === "file")) {
        const read = readRegular(dir, ".gitignore", GITIGNORE_MAX_BYTES)
        if (read._tag === "Bytes") {
          this.levels.push({ base, rules: rulesOf(read.bytes) })
          rules = true
        } else if (read._tag !== "Changed") {
          this.counts.rulesNotApplied.push(join(shown, ".gitignore"))
        }
      }
      const verdicts = guarded(
        () => listed.map((e) => this.verdict(e, join(base, e.name), join(relative, e.name))),
        SEARCH_NAME_MATCH_TIME_LIMIT_MS
      )
      if (verdicts === undefined) {
        this.stopped = { reason: "slow", folder: shown }
        return
      }
      const items: Array<Item> = []
      verdicts.value.forEach((verdict, i) => {
        if (verdict === "ignored") this.counts.ignored++
        else if (verdict === "own") this.counts.own.push(join(shown, listed[i]!.name))
        else if (verdict !== "hidden") items.push(verdict)
      })
      this.stack.push({ dir, shown, relative, depth, items, index: 0, rules })
      pushed = true
    } finally {
      if (!pushed) {
        if (rules) this.levels.pop()
        NodeFs.closeSync(dir.fd)
      }
    }
  }

  /**
   * An entry's fate: left out (`ignored` counts in the notices, `own` is named there, `hidden` is
   * not said), or listed.
   */
  private verdict(entry: Item, path: string, relative: string): Item | "ignored" | "own" | "hidden" {
    const isDirectory = entry.kind === "directory"
    if (!this.options.includeIgnored) {
      if (entry.name === ".git") return "hidden"
      if (entry.name === OWN_FOLDER && isDirectory) return "own"
      if (entry.name === "node_modules" || ignoredBy(this.levels, path, isDirectory)) return "ignored"
    }
    const matched = this.options.match === undefined ? true : this.options.match(relative, isDirectory)
    return { name: entry.name, kind: entry.kind, matched }
  }

  /** At most `max` entries of the opened folder, through its descriptor; undefined when unreadable. */
  private list(dir: Dir, shown: string, max: number): Array<Item> | undefined {
    let handle: NodeFs.Dir
    try {
      handle = NodeFs.opendirSync(listPath(dir))
    } catch (error) {
      if (codeOf(error) !== "ENOENT") this.counts.unreadable.push(shown)
      return undefined
    }
    const items: Array<Item> = []
    try {
      for (let entry = handle.readSync(); entry !== null && items.length < max; entry = handle.readSync()) {
        items.push({ name: entry.name, kind: kindOfDirent(entry), matched: true })
      }
    } catch {
      this.counts.unreadable.push(shown)
      return undefined
    } finally {
      handle.closeSync()
    }
    return items
  }
}

/** Whether `path` (relative to the root; a folder when `isDirectory`) is ignored: the deepest rule that speaks wins. */
const ignoredBy = (levels: ReadonlyArray<Level>, path: string, isDirectory: boolean): boolean => {
  for (let i = levels.length - 1; i >= 0; i--) {
    const { base, rules } = levels[i]!
    const relative = base === "" ? path : path.slice(base.length + 1)
    const result = rules.test(isDirectory ? `${relative}/` : relative)
    if (result.ignored) return true
    if (result.unignored) return false
  }
  return false
}

/** The rules of the `.gitignore` at `path` above the walked folder (not through a link), if any. */
const ancestorRules = (confined: Confined, path: string): Ignore | undefined => {
  try {
    return confined.walk(path, { createParents: false, followFinal: false }, (dir, name, lstat) => {
      if (name === null || lstat === undefined || !lstat.isFile()) return undefined
      const read = readRegular(dir, name, GITIGNORE_MAX_BYTES)
      return read._tag === "Bytes" ? rulesOf(read.bytes) : undefined
    })
  } catch (error) {
    if (error instanceof WorkspaceFileError) return undefined
    throw error
  }
}
