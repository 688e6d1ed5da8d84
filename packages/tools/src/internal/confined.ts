/**
 * The confined file layer: every path is walked one component at a time from an opened
 * descriptor of the workspace root, each component opened with `O_NOFOLLOW`, and the operation
 * then works on what it opened.
 *
 * Why `node:fs` and synchronous calls: effect's `FileSystem` has no descriptor-relative open and
 * no `O_NOFOLLOW`/`O_DIRECTORY`/`O_NONBLOCK` flags, which this needs. Synchronous calls never
 * occupy libuv's thread pool (a blocked open there starved every later file operation), and
 * nothing here can block: FIFOs, sockets and devices are refused after an `lstat` and opened, if at
 * all, with `O_NONBLOCK`. Errors thrown by `node:fs` are caught at this boundary only.
 *
 * On Linux a directory descriptor `fd` is used through the path `/proc/self/fd/<fd>/<name>`: the
 * kernel resolves `/proc/self/fd/<fd>` to the opened directory itself, whatever happened to its
 * name since, so a racing process that swaps a directory for a symbolic link cannot redirect the
 * operation. Elsewhere the physical path walked so far is used instead (see the README).
 */
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { WorkspaceFileError } from "../WorkspaceFileError.ts"
import { lenientMatches, visible } from "./lenientNames.ts"

const flags = NodeFs.constants
export const O_NOFOLLOW = flags.O_NOFOLLOW ?? 0
export const O_DIRECTORY = flags.O_DIRECTORY ?? 0
export const O_NONBLOCK = flags.O_NONBLOCK ?? 0
export const O_NOCTTY = flags.O_NOCTTY ?? 0

/** Symbolic links followed in one resolution at most, like the kernel's limit. */
export const MAX_LINKS = 40

let fdPathsChecked: boolean | undefined
/** Whether `/proc/self/fd/N/name` paths work here (Linux with /proc mounted). */
export const descriptorPaths = (): boolean => {
  if (fdPathsChecked === undefined) {
    fdPathsChecked = process.platform === "linux" && canUseFdPaths()
  }
  return fdPathsChecked
}

/**
 * Forces (or, with `undefined`, re-detects) the use of `/proc/self/fd` paths: tests use it to run
 * the path-based walk of systems without `/proc` on Linux too.
 */
export const setDescriptorPaths = (value: boolean | undefined): void => {
  fdPathsChecked = value
}

const canUseFdPaths = (): boolean => {
  let fd: number | undefined
  try {
    fd = NodeFs.openSync("/", flags.O_RDONLY | O_DIRECTORY)
    return NodeFs.statSync(`/proc/self/fd/${fd}/.`).isDirectory()
  } catch {
    return false
  } finally {
    if (fd !== undefined) NodeFs.closeSync(fd)
  }
}

/** An opened directory: its descriptor and the physical path it was reached by. */
export interface Dir {
  readonly fd: number
  readonly path: string
}

/** The path through which `name` inside `dir` is reached. */
export const at = (dir: Dir, name: string): string =>
  descriptorPaths() ? `/proc/self/fd/${dir.fd}/${name}` : `${dir.path}/${name}`

export const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ?
    error.code :
    undefined

export const messageOf = (error: unknown): string => {
  const code = codeOf(error)
  if (code === "ENOENT") return "no such file or directory"
  if (code === "EACCES" || code === "EPERM") return "permission denied"
  if (code === "ENOSPC") return "no space left on the device"
  if (code === "EROFS") return "read-only file system"
  if (code === "ENOTDIR") return "a component of the path is not a directory"
  if (code === "EISDIR") return "is a directory"
  if (code !== undefined) return code
  return error instanceof Error ? error.message.split("\n")[0]! : "unknown error"
}

/**
 * agentloop's own folder in a workspace (sessions, checkpoints, kept output, durable runs, the
 * project's configuration). The search tools leave it out by default; `keepOutOfGit` keeps it out of git.
 */
export const OWN_FOLDER = ".agentloop"

/** The `.gitignore` `keepOutOfGit` writes in `OWN_FOLDER`: `*` ignores everything there, itself included. */
export const OWN_FOLDER_GITIGNORE =
  "# Written by agentloop: nothing in .agentloop is committed. Edit it to choose.\n*\n"

/**
 * Gives the opened `OWN_FOLDER` a `.gitignore` that ignores everything in it (as Python's venv does
 * for its folder), unless something is there already: a user's own `.gitignore` (or a link, or
 * anything else by that name) is never replaced. The file is written whole under a temporary name
 * (`O_CREAT|O_EXCL|O_NOFOLLOW`) and then linked to `.gitignore`, which fails when the name is
 * taken: two processes never both write it and no reader sees it half written. Every write into
 * the folder through `Confined` (and the output store's folder) calls it, so an older project's
 * folder gets one too. Best effort: a folder that cannot take it (read-only, no permission) is
 * left as it is, for the write that follows to report.
 */
export const keepOutOfGit = (folder: Dir): void => {
  try {
    NodeFs.lstatSync(at(folder, ".gitignore"))
    return // there already: ours, or the user's own
  } catch (error) {
    if (codeOf(error) !== "ENOENT") return
  }
  const temporary = temporaryName(".gitignore")
  let fd: number
  try {
    fd = NodeFs.openSync(at(folder, temporary), flags.O_WRONLY | flags.O_CREAT | flags.O_EXCL | O_NOFOLLOW, 0o666)
  } catch {
    return
  }
  try {
    try {
      writeAll(fd, new TextEncoder().encode(OWN_FOLDER_GITIGNORE))
    } finally {
      NodeFs.closeSync(fd)
    }
    NodeFs.linkSync(at(folder, temporary), at(folder, ".gitignore"))
  } catch {
    // EEXIST: another process (or the user) put one there first, kept as it is
  } finally {
    try {
      NodeFs.unlinkSync(at(folder, temporary))
    } catch {
      // already gone
    }
  }
}

/** Thrown by a final step when the name changed under it (e.g. swapped for a link): walk it again. */
class Retry {
  readonly _tag = "Retry"
}

/** What kind of file a non-regular one is, for messages. */
const kindOf = (stat: NodeFs.Stats): string =>
  stat.isDirectory() ?
    "directory" :
    stat.isFIFO() ?
    "FIFO (named pipe)" :
    stat.isSocket() ?
    "socket" :
    stat.isCharacterDevice() ?
    "character device" :
    stat.isBlockDevice() ?
    "block device" :
    stat.isSymbolicLink() ?
    "symbolic link" :
    "special file"

/** The final step of a walk: `dir` holds `name` (or `name` is null when the path is `dir` itself). */
type Final<A> = (dir: Dir, name: string | null, stat: NodeFs.Stats | undefined, shown: string) => A

interface WalkOptions {
  /** Create missing intermediate directories. */
  readonly createParents: boolean
  /** Follow a symbolic link in the final component (inside the workspace only). */
  readonly followFinal: boolean
  /** When a directory on the way is missing: the physical path the input names, else NotFound. */
  readonly missing?: ((physical: string) => unknown) | undefined
  /**
   * When given, a missing name is looked up leniently among its directory's entries (see
   * `lenientNames.ts`); each name taken instead is added here.
   */
  readonly lenient?: Array<Renamed> | undefined
}

/** A name a lenient walk took instead of a missing one: the one asked for, and the entry it used. */
export interface Renamed {
  readonly asked: string
  readonly found: string
}

/**
 * A workspace's confined file operations, all synchronous, throwing `WorkspaceFileError` (or
 * whatever a final step throws) after closing every descriptor they opened.
 */
export class Confined {
  readonly root: string
  constructor(root: string) {
    this.root = root
  }

  fail(path: string, reason: WorkspaceFileError["reason"], message: string): never {
    throw new WorkspaceFileError({ path, reason, message })
  }

  /** The input's components relative to the root, checked lexically (`..` and absolute paths). */
  components(input: string): Array<string> {
    if (input.length === 0) this.fail(input, "InvalidPath", "Path is empty")
    if (input.includes("\u0000")) this.fail(input, "InvalidPath", "Path contains a NUL byte")
    const absolute = NodePath.resolve(this.root, input)
    const relative = NodePath.relative(this.root, absolute)
    if (relative === ".." || relative.startsWith(`..${NodePath.sep}`) || NodePath.isAbsolute(relative)) {
      this.outside(input, NodePath.isAbsolute(input) ? "absolute path" : "it climbs out with ..")
    }
    return relative === "" ? [] : relative.split(NodePath.sep)
  }

  outside(input: string, how: string): never {
    const message = `Path "${input}" is outside the workspace (${how}); paths must stay inside ${this.root}`
    return this.fail(input, "Outside", message)
  }

  /** A path as shown to the model: relative to the root. */
  display(physical: string): string {
    return NodePath.relative(this.root, physical) || "."
  }

  private openRoot(input: string): Dir {
    try {
      return { fd: NodeFs.openSync(this.root, flags.O_RDONLY | O_DIRECTORY | O_NOFOLLOW), path: this.root }
    } catch (error) {
      return this.fail(input, "Io", `Cannot open the workspace root ${this.root}: ${messageOf(error)}`)
    }
  }

  /**
   * Walks `input` from the root and runs `final` on the last component, in the directory as opened.
   * Links are resolved here, one at a time, each counted against `MAX_LINKS`; a link that leads
   * out of the root (by an absolute target elsewhere or by `..` past the root) is refused.
   */
  walk<A>(input: string, options: WalkOptions, final: Final<A>): A {
    const queue = this.components(input)
    const stack: Array<Dir> = [this.openRoot(input)]
    let links = 0
    let lastLink: string | undefined
    const top = () => stack[stack.length - 1]!
    // a missing name's unique lenient match in the same opened directory, counted like a link so a
    // racing rename cannot keep the walk going
    const lenient = (dir: Dir, name: string): string | undefined => {
      if (options.lenient === undefined) return undefined
      const found = this.lenientName(input, dir, name)
      if (found === undefined) return undefined
      if (++links > MAX_LINKS) this.fail(input, "TooManyLinks", `Path "${input}" keeps changing while it is resolved`)
      options.lenient.push({ asked: name, found })
      return found
    }
    const follow = (dir: Dir, name: string) => {
      const shownLink = this.display(`${dir.path}/${name}`)
      if (++links > MAX_LINKS) {
        this.fail(input, "TooManyLinks", `Path "${input}" goes through too many symbolic links (over ${MAX_LINKS})`)
      }
      let target: string
      try {
        target = NodeFs.readlinkSync(at(dir, name))
      } catch (error) {
        if (codeOf(error) === "EINVAL" || codeOf(error) === "ENOENT") {
          queue.unshift(name) // no longer a link: walk the name again
          return
        }
        return this.fail(input, "Io", `Cannot resolve path "${input}": ${messageOf(error)}`)
      }
      lastLink = shownLink
      const parts = target.split("/").filter((p) => p.length > 0 && p !== ".")
      if (target.startsWith("/")) {
        const rootParts = this.root.split("/").filter((p) => p.length > 0)
        const inside = rootParts.every((p, i) => parts[i] === p)
        if (!inside) this.outside(input, `the symbolic link ${shownLink} points outside`)
        while (stack.length > 1) NodeFs.closeSync(stack.pop()!.fd)
        queue.unshift(...parts.slice(rootParts.length))
      } else {
        queue.unshift(...parts)
      }
    }
    try {
      for (;;) {
        // `.` and `..` (from link targets) are taken physically on the stack of opened directories
        while (queue.length > 0 && (queue[0] === "." || queue[0] === "" || queue[0] === "..")) {
          if (queue.shift() === "..") {
            if (stack.length === 1) {
              this.outside(
                input,
                lastLink === undefined ? "it climbs out with .." : `the symbolic link ${lastLink} points outside`
              )
            }
            NodeFs.closeSync(stack.pop()!.fd)
          }
        }
        const name = queue.shift()
        if (name === undefined) return final(top(), null, undefined, this.display(top().path))
        const dir = top()
        const shown = this.display(`${dir.path}/${name}`)
        const isLast = !queue.some((p) => p !== "." && p !== "")
        if (!isLast) {
          let fd: number
          try {
            fd = NodeFs.openSync(at(dir, name), flags.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK)
          } catch (error) {
            const code = codeOf(error)
            const found = code === "ENOENT" ? lenient(dir, name) : undefined
            if (found !== undefined) {
              queue.unshift(found)
              continue
            }
            if (code === "ENOENT" && options.createParents) {
              try {
                NodeFs.mkdirSync(at(dir, name), 0o777)
              } catch (mkdirError) {
                if (codeOf(mkdirError) !== "EEXIST") this.fail(input, "Io", `${shown}: ${messageOf(mkdirError)}`)
              }
              queue.unshift(name)
              continue
            }
            if (code === "ENOENT" && options.missing !== undefined) {
              return options.missing([dir.path, name, ...queue.filter((p) => p !== "." && p !== "")].join("/")) as A
            }
            if (code === "ENOENT") {
              const missing = this.display(`${dir.path}/${[name, ...queue].join("/")}`)
              this.fail(input, "NotFound", `${missing}: no such file or directory`)
            }
            if (code === "ELOOP" || code === "ENOTDIR" || code === "EMLINK") {
              const stat = this.lstat(input, dir, name)
              if (stat?.isSymbolicLink()) {
                follow(dir, name)
                continue
              }
              if (stat === undefined) {
                queue.unshift(name)
                if (++links > MAX_LINKS) {
                  this.fail(input, "TooManyLinks", `Path "${input}" keeps changing while it is resolved`)
                }
                continue
              }
              this.fail(input, "NotFound", `${shown} is a ${kindOf(stat)}, not a directory`)
            }
            return this.fail(input, "Io", `${shown}: ${messageOf(error)}`)
          }
          stack.push({ fd, path: `${dir.path}/${name}` })
          // a write that goes through the workspace's own folder keeps that folder out of git
          if (options.createParents && stack.length === 2 && name === OWN_FOLDER) keepOutOfGit(top())
          continue
        }
        const stat = this.lstat(input, dir, name)
        const found = stat === undefined ? lenient(dir, name) : undefined
        if (found !== undefined) {
          queue.unshift(found)
          continue
        }
        if (stat?.isSymbolicLink() && options.followFinal) {
          follow(dir, name)
          continue
        }
        try {
          return final(dir, name, stat, shown)
        } catch (error) {
          if (!(error instanceof Retry)) throw error
          if (++links > MAX_LINKS) this.fail(input, "TooManyLinks", `Path "${input}" keeps changing while it is used`)
          queue.unshift(name)
        }
      }
    } finally {
      for (const dir of stack) NodeFs.closeSync(dir.fd)
    }
  }

  /**
   * The one entry of `dir` (as opened) whose name matches `name` leniently, or undefined; several
   * such entries are refused as NotFound naming them, since the walk must not guess.
   */
  private lenientName(input: string, dir: Dir, name: string): string | undefined {
    let entries: Array<Uint8Array>
    try {
      entries = NodeFs.readdirSync(descriptorPaths() ? `/proc/self/fd/${dir.fd}` : dir.path, { encoding: "buffer" })
    } catch {
      return undefined
    }
    const found = lenientMatches(name, entries)
    if (found.length <= 1) return found[0]
    const shown = this.display(`${dir.path}/${name}`)
    return this.fail(
      input,
      "NotFound",
      `${shown}: no such file or directory; ${found.length} names differ from it only in spaces, quotes or ` +
        `Unicode form (${found.slice(0, 5).map(visible).join(", ")}): give the one you mean`
    )
  }

  private lstat(input: string, dir: Dir, name: string): NodeFs.Stats | undefined {
    try {
      return NodeFs.lstatSync(at(dir, name))
    } catch (error) {
      if (codeOf(error) === "ENOENT") return undefined
      return this.fail(input, "Io", `${this.display(`${dir.path}/${name}`)}: ${messageOf(error)}`)
    }
  }

  /** The physical path `input` resolves to (links inside followed), for display. */
  resolve(input: string): string {
    return this.walk(
      input,
      { createParents: false, followFinal: true, missing: (physical) => physical },
      (dir, name) => name === null ? dir.path : `${dir.path}/${name}`
    )
  }

  /**
   * Opens the regular file `input` for reading, checks it and reads it whole (at most `maxBytes`,
   * decided from the final name and size). Refused: directories, FIFOs, sockets, devices (before
   * opening them), files with more than one hard link (when `refuseHardLinks`), files over the limit.
   */
  read(
    input: string,
    options: {
      readonly maxBytes: (name: string) => number
      readonly refuseHardLinks: boolean
      /** Look missing names up leniently (see `lenientNames.ts`). */
      readonly lenient?: boolean | undefined
    }
  ): {
    readonly bytes: Uint8Array
    readonly stat: NodeFs.Stats
    readonly shown: string
    readonly name: string
    readonly renamed: ReadonlyArray<Renamed>
  } {
    if (input.endsWith("/") || /(^|\/)\.\.?$/.test(input)) {
      this.fail(input, "IsDirectory", `${input} names a directory; give a file name`)
    }
    const renamed: Array<Renamed> = []
    const walk = { createParents: false, followFinal: true, lenient: options.lenient === true ? renamed : undefined }
    return this.walk(input, walk, (dir, name, lstat, shown) => {
      if (name === null) return this.fail(input, "IsDirectory", `${shown} is a directory`)
      if (lstat === undefined) return this.fail(input, "NotFound", `${shown}: no such file or directory`)
      if (lstat.isDirectory()) return this.fail(input, "IsDirectory", `${shown} is a directory`)
      if (!lstat.isFile()) return this.notRegular(input, shown, lstat)
      const fd = this.openNoFollow(input, dir, name, shown, flags.O_RDONLY | O_NONBLOCK | O_NOCTTY)
      try {
        const stat = NodeFs.fstatSync(fd)
        if (!stat.isFile()) return this.notRegular(input, shown, stat)
        if (options.refuseHardLinks && stat.nlink > 1) this.hardLinked(input, shown, stat)
        const max = options.maxBytes(name)
        if (stat.size > max) this.tooLarge(input, shown, stat.size, max)
        const bytes = readUpTo(fd, max + 1, stat.size)
        if (bytes.length > max) this.tooLarge(input, shown, bytes.length, max)
        return { bytes, stat, shown, name, renamed }
      } finally {
        NodeFs.closeSync(fd)
      }
    })
  }

  /**
   * Writes `content` to `input` atomically: a temporary file with an unpredictable name is created
   * exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`) in the target's directory as opened, written, given
   * the old file's mode and owner, synced, then renamed over the target (or linked to it when
   * `exclusive`, which fails if the target exists). Leftover temporary files of earlier crashed
   * writes of the same target are removed first. `transform` (for edits) receives the current
   * content, read through the same opened directory.
   */
  write(
    input: string,
    options: {
      readonly exclusive: boolean
      readonly content: (
        current: { readonly bytes: Uint8Array; readonly stat: NodeFs.Stats } | undefined,
        shown: string
      ) => Uint8Array
      /** The file must exist (an edit): at most this many bytes, its name looked up leniently if asked. */
      readonly mustExist?: { readonly maxBytes: number; readonly lenient?: boolean | undefined } | undefined
      /**
       * Whether a link in the final component is followed (inside the workspace); when false, a link
       * there is refused as not a regular file (default: followed).
       */
      readonly followFinal?: boolean | undefined
      /** The new file's permission bits, instead of the old file's (or the default for a new one). */
      readonly mode?: number | undefined
    }
  ): {
    readonly shown: string
    readonly created: boolean
    readonly bytes: number
    readonly renamed: ReadonlyArray<Renamed>
  } {
    if (input.endsWith("/") || /(^|\/)\.\.?$/.test(input)) {
      this.fail(input, "IsDirectory", `${input} names a directory (it ends with "/"); give a file name`)
    }
    const renamed: Array<Renamed> = []
    const walk = {
      createParents: options.mustExist === undefined,
      followFinal: options.followFinal !== false,
      lenient: options.mustExist?.lenient === true ? renamed : undefined
    }
    return this.walk(input, walk, (dir, name, lstat, shown) => {
      if (name === null) return this.fail(input, "IsDirectory", `${shown} is a directory`)
      if (lstat !== undefined) {
        if (lstat.isDirectory()) this.fail(input, "IsDirectory", `${shown} is a directory`)
        if (!lstat.isFile()) this.notRegular(input, shown, lstat)
        if (options.exclusive) this.fail(input, "AlreadyExists", `${shown} already exists`)
      }
      let current: { readonly bytes: Uint8Array; readonly stat: NodeFs.Stats } | undefined
      if (options.mustExist !== undefined) {
        if (lstat === undefined) this.fail(input, "NotFound", `${shown}: no such file or directory`)
        const fd = this.openNoFollow(input, dir, name, shown, flags.O_RDONLY | O_NONBLOCK | O_NOCTTY)
        try {
          const stat = NodeFs.fstatSync(fd)
          if (!stat.isFile()) this.notRegular(input, shown, stat)
          if (stat.nlink > 1) this.hardLinked(input, shown, stat)
          if (stat.size > options.mustExist.maxBytes) this.tooLarge(input, shown, stat.size, options.mustExist.maxBytes)
          const bytes = readUpTo(fd, options.mustExist.maxBytes + 1, stat.size)
          if (bytes.length > options.mustExist.maxBytes) {
            this.tooLarge(input, shown, bytes.length, options.mustExist.maxBytes)
          }
          current = { bytes, stat }
        } finally {
          NodeFs.closeSync(fd)
        }
      }
      const content = options.content(current, shown)
      const previous = current?.stat ?? lstat
      this.removeLeftovers(dir, name)
      const temporary = temporaryName(name)
      const mode = options.mode !== undefined ?
        options.mode & 0o7777 :
        previous === undefined ?
        0o666 :
        previous.mode & 0o7777
      let fd: number
      try {
        const how = flags.O_WRONLY | flags.O_CREAT | flags.O_EXCL | O_NOFOLLOW
        fd = NodeFs.openSync(at(dir, temporary), how, mode & 0o666)
      } catch (error) {
        return this.fail(input, "Io", `${shown}: cannot create a temporary file: ${messageOf(error)}`)
      }
      let placed = false
      try {
        try {
          writeAll(fd, content)
          if (previous !== undefined) {
            try {
              NodeFs.fchownSync(fd, previous.uid, previous.gid)
            } catch {
              // only the owner or root may change owners; the file then belongs to whoever writes
            }
          }
          if (previous !== undefined || options.mode !== undefined) NodeFs.fchmodSync(fd, mode)
          NodeFs.fsyncSync(fd)
        } finally {
          NodeFs.closeSync(fd)
        }
        if (options.exclusive) {
          try {
            NodeFs.linkSync(at(dir, temporary), at(dir, name))
          } catch (error) {
            if (codeOf(error) === "EEXIST") this.fail(input, "AlreadyExists", `${shown} already exists`)
            throw error
          }
          placed = true
          NodeFs.unlinkSync(at(dir, temporary))
        } else {
          NodeFs.renameSync(at(dir, temporary), at(dir, name))
          placed = true
        }
      } catch (error) {
        if (!placed) {
          try {
            NodeFs.unlinkSync(at(dir, temporary))
          } catch {
            // already gone
          }
        }
        if (error instanceof WorkspaceFileError) throw error
        if (codeOf(error) === "EISDIR") this.fail(input, "IsDirectory", `${shown} is a directory`)
        return this.fail(input, "Io", `${shown}: ${messageOf(error)}`)
      }
      return { shown, created: lstat === undefined, bytes: content.length, renamed }
    })
  }

  /** Removes `.<name>.agentloop-*.tmp` files left in `dir` by a write that crashed. */
  private removeLeftovers(dir: Dir, name: string): void {
    const prefix = `.${truncatedName(name)}.agentloop-`
    let entries: Array<string>
    try {
      entries = NodeFs.readdirSync(descriptorPaths() ? `/proc/self/fd/${dir.fd}` : dir.path)
    } catch {
      return
    }
    for (const entry of entries) {
      if (entry.startsWith(prefix) && /^[0-9a-f]{16}\.tmp$/.test(entry.slice(prefix.length))) {
        try {
          NodeFs.unlinkSync(at(dir, entry))
        } catch {
          // another writer removed it
        }
      }
    }
  }

  /** Opens `input` for appending (created if absent, parents too); regular files with one link only. */
  openAppend(input: string): { readonly fd: number; readonly shown: string } {
    if (input.endsWith("/")) {
      this.fail(input, "IsDirectory", `${input} names a directory (it ends with "/"); give a file name`)
    }
    return this.walk(input, { createParents: true, followFinal: true }, (dir, name, lstat, shown) => {
      if (name === null || lstat?.isDirectory() === true) {
        return this.fail(input, "IsDirectory", `${shown} is a directory`)
      }
      if (lstat !== undefined && !lstat.isFile()) this.notRegular(input, shown, lstat)
      const how = flags.O_WRONLY | flags.O_APPEND | flags.O_CREAT | O_NONBLOCK | O_NOCTTY
      const fd = this.openNoFollow(input, dir, name, shown, how)
      try {
        const stat = NodeFs.fstatSync(fd)
        if (!stat.isFile()) this.notRegular(input, shown, stat)
        if (stat.nlink > 1) this.hardLinked(input, shown, stat)
        return { fd, shown }
      } catch (error) {
        NodeFs.closeSync(fd)
        throw error
      }
    })
  }

  /**
   * Removes the file or link `input` names, never following a link in its final component (a link
   * is removed itself); refuses a directory. Returns whether there was something to remove.
   */
  remove(input: string): { readonly shown: string; readonly removed: boolean } {
    if (input.endsWith("/") || /(^|\/)\.\.?$/.test(input)) {
      this.fail(input, "IsDirectory", `${input} names a directory; give a file name`)
    }
    const walk = { createParents: false, followFinal: false, missing: () => ({ shown: input, removed: false }) }
    return this.walk(input, walk, (dir, name, lstat, shown) => {
      if (name === null || lstat?.isDirectory() === true) {
        return this.fail(input, "IsDirectory", `${shown} is a directory`)
      }
      if (lstat === undefined) return { shown, removed: false }
      try {
        NodeFs.unlinkSync(at(dir, name))
      } catch (error) {
        if (codeOf(error) === "ENOENT") return { shown, removed: false }
        if (codeOf(error) === "EISDIR") throw new Retry()
        return this.fail(input, "Io", `${shown}: ${messageOf(error)}`)
      }
      return { shown, removed: true }
    })
  }

  /** Makes the directory `input` and its parents; fine if it exists. `OWN_FOLDER` gets its `.gitignore`. */
  makeDirectory(input: string): void {
    this.walk(input, { createParents: true, followFinal: true }, (dir, name, lstat, shown) => {
      if (name === null) return
      if (lstat !== undefined && !lstat.isDirectory()) {
        this.fail(input, "AlreadyExists", `${shown} exists and is not a directory`)
      }
      if (lstat === undefined) {
        try {
          NodeFs.mkdirSync(at(dir, name), 0o777)
        } catch (error) {
          if (codeOf(error) === "EEXIST") throw new Retry()
          this.fail(input, "Io", `${shown}: ${messageOf(error)}`)
        }
      }
      if (name === OWN_FOLDER && dir.path === this.root) this.keepOwnFolderOutOfGit(dir)
    })
  }

  /** `keepOutOfGit` on `OWN_FOLDER` in the opened root `root`, opened without following a link. */
  private keepOwnFolderOutOfGit(root: Dir): void {
    let fd: number
    try {
      fd = NodeFs.openSync(at(root, OWN_FOLDER), flags.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK)
    } catch {
      return // swapped for a link or removed since: not ours to mark
    }
    try {
      keepOutOfGit({ fd, path: `${root.path}/${OWN_FOLDER}` })
    } finally {
      NodeFs.closeSync(fd)
    }
  }

  /** Whether `input` exists (a dangling link inside the workspace does not). */
  exists(input: string): boolean {
    try {
      return this.walk(
        input,
        { createParents: false, followFinal: true },
        (_dir, name, lstat) => name === null || lstat !== undefined
      )
    } catch (error) {
      if (error instanceof WorkspaceFileError && error.reason === "NotFound") return false
      throw error
    }
  }

  private openNoFollow(input: string, dir: Dir, name: string, shown: string, how: number): number {
    try {
      return NodeFs.openSync(at(dir, name), how | O_NOFOLLOW, 0o666)
    } catch (error) {
      const code = codeOf(error)
      // swapped for a link (ELOOP) or removed (ENOENT) since the lstat: walk the name again
      if (code === "ELOOP" || code === "EMLINK" || code === "ENOENT") throw new Retry()
      if (code === "ENXIO") return this.fail(input, "NotRegularFile", `${shown} is not a regular file`)
      return this.fail(input, "Io", `${shown}: ${messageOf(error)}`)
    }
  }

  private notRegular(input: string, shown: string, stat: NodeFs.Stats): never {
    const message = `${shown} is a ${kindOf(stat)}, not a regular file; only regular files are read or written`
    return this.fail(input, "NotRegularFile", message)
  }

  private hardLinked(input: string, shown: string, stat: NodeFs.Stats): never {
    return this.fail(
      input,
      "HardLinked",
      `${shown} has ${stat.nlink} hard links; one of them could be outside the workspace, so it is not read ` +
        "or changed here (remove the extra links, or copy the file)"
    )
  }

  private tooLarge(input: string, shown: string, size: number, max: number): never {
    return this.fail(input, "TooLarge", `${shown} is ${size} bytes, over the limit of ${max} bytes`)
  }
}

/** A file name's part used in its temporary name, kept short enough for 255-byte name limits. */
const truncatedName = (name: string): string =>
  Buffer.byteLength(name) > 200 ? Buffer.from(name).subarray(0, 200).toString("utf8").replace(/\uFFFD+$/, "") : name

const temporaryName = (name: string): string =>
  `.${truncatedName(name)}.agentloop-${randomBytes(8).toString("hex")}.tmp`

/**
 * Reads from `fd` until end of file or `limit` bytes, whichever comes first; `expected` (the size
 * `fstat` gave) sizes the first buffer, so a small file does not cost a large allocation.
 */
export const readUpTo = (fd: number, limit: number, expected: number): Uint8Array => {
  const chunks: Array<Uint8Array> = []
  let total = 0
  while (total < limit) {
    const want = total === 0 ? Math.max(expected + 1, 256) : 1024 * 1024
    const chunk = Buffer.allocUnsafe(Math.min(limit - total, want, 1024 * 1024))
    const n = NodeFs.readSync(fd, chunk, 0, chunk.length, null)
    if (n === 0) break
    chunks.push(chunk.subarray(0, n))
    total += n
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total)
}

const writeAll = (fd: number, content: Uint8Array): void => {
  let offset = 0
  while (offset < content.length) offset += NodeFs.writeSync(fd, content, offset, content.length - offset)
}

/** Appends `data` whole to `fd` and flushes it to the disk. */
export const appendAll = (fd: number, data: Uint8Array, shown: string): void => {
  try {
    writeAll(fd, data)
    NodeFs.fdatasyncSync(fd)
  } catch (error) {
    throw new WorkspaceFileError({ path: shown, reason: "Io", message: `${shown}: cannot append: ${messageOf(error)}` })
  }
}

/** Closes an append descriptor. */
export const closeFd = (fd: number): void => NodeFs.closeSync(fd)

/**
 * Runs a synchronous confined operation as an Effect: `WorkspaceFileError`s (and errors `expected`
 * accepts, e.g. a tool's own error thrown by an edit's transform) fail it; anything else is a defect.
 */
export const attempt = <A, E = never>(
  f: () => A,
  expected?: (error: unknown) => error is E
): Effect.Effect<A, WorkspaceFileError | E> =>
  Effect.suspend((): Effect.Effect<A, WorkspaceFileError | E> => {
    try {
      return Effect.succeed(f())
    } catch (error) {
      if (error instanceof WorkspaceFileError) return Effect.fail(error)
      if (expected?.(error) === true) return Effect.fail(error)
      return Effect.die(error)
    }
  })
