/**
 * The folder where cut outputs are kept whole: `.agentloop/output/<pid>-<8 hex digits>/` in the
 * workspace, one per `OutputStore`, made on first use and removed with the store's scope.
 *
 * Every step is taken from an opened descriptor and never through a symbolic link: the root is
 * opened with `O_DIRECTORY|O_NOFOLLOW`, then `.agentloop`, `output` and the store's own folder,
 * each relative to the one before (through `/proc/self/fd/N/name` on Linux, as in `confined.ts`)
 * with `O_NOFOLLOW`: a link planted at any of them (even one that stays inside the workspace) is
 * refused, and a process that swaps one for a link after it was opened cannot redirect a write.
 * `.agentloop` gets its `.gitignore` (`keepOutOfGit`) as every write into it does.
 * `output` must belong to this process's user and be writable by nobody else; the store's folder
 * is made with `mkdir` (it fails if the name is taken) and mode 0700, its files 0600.
 *
 * A file is written under a temporary name (`O_CREAT|O_EXCL|O_NOFOLLOW`) and renamed to its final
 * name once complete, so a reader never sees half of it. Folders left by a process that died
 * without closing its store (its pid no longer runs) are removed when the next store is made.
 * Errors thrown by `node:fs` are caught here and become a `SpillError` with one line of reason.
 */
import { randomBytes } from "node:crypto"
import * as NodeFs from "node:fs"
import { descriptorPaths, keepOutOfGit, OWN_FOLDER } from "./confined.ts"

const flags = NodeFs.constants
const O_NOFOLLOW = flags.O_NOFOLLOW ?? 0
const O_DIRECTORY = flags.O_DIRECTORY ?? 0

/** Where the stores' folders are, relative to the workspace root. */
export const SPILL_FOLDER = `${OWN_FOLDER}/output`

/** A store folder's name: the pid of the process that made it and 8 random hex digits. */
const ownName = /^(\d+)-[0-9a-f]{8}$/

/** Why a folder or file for kept output could not be made or written: one line, no stack. */
export class SpillError {
  readonly _tag = "SpillError"
  readonly reason: string
  constructor(reason: string) {
    this.reason = reason
  }
}

interface Dir {
  readonly fd: number
  readonly path: string
}

const at = (dir: Dir, name: string): string =>
  descriptorPaths() ? `/proc/self/fd/${dir.fd}/${name}` : `${dir.path}/${name}`

const listing = (dir: Dir): string => descriptorPaths() ? `/proc/self/fd/${dir.fd}` : dir.path

const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ?
    error.code :
    undefined

const reasonOf = (error: unknown): string => {
  const code = codeOf(error)
  if (code === "EACCES" || code === "EPERM") return "permission denied"
  if (code === "ENOSPC") return "no space left on the device"
  if (code === "EROFS") return "read-only file system"
  if (code === "EDQUOT") return "disk quota exceeded"
  return code ?? "unknown error"
}

const closeQuietly = (fd: number): void => {
  try {
    NodeFs.closeSync(fd)
  } catch {
    // already closed
  }
}

const attemptLstat = (path: string): NodeFs.Stats | undefined => {
  try {
    return NodeFs.lstatSync(path)
  } catch {
    return undefined
  }
}

/** Opens (and with `mode`, first makes) the folder `name` in `parent`, never through a link. */
const openFolder = (parent: Dir, name: string, shown: string, mode: number | undefined): Dir => {
  if (mode !== undefined) {
    try {
      NodeFs.mkdirSync(at(parent, name), mode)
    } catch (error) {
      if (codeOf(error) !== "EEXIST") throw new SpillError(`cannot make ${shown}: ${reasonOf(error)}`)
    }
  }
  try {
    return {
      fd: NodeFs.openSync(at(parent, name), flags.O_RDONLY | O_DIRECTORY | O_NOFOLLOW),
      path: `${parent.path}/${name}`
    }
  } catch (error) {
    const code = codeOf(error)
    if (code === "ELOOP" || code === "EMLINK" || code === "ENOTDIR") {
      // O_DIRECTORY|O_NOFOLLOW on a link answers ENOTDIR on Linux, ELOOP elsewhere
      const link = attemptLstat(at(parent, name))?.isSymbolicLink() === true || code !== "ENOTDIR"
      throw new SpillError(link ? `${shown} is a symbolic link` : `${shown} is not a folder`)
    }
    throw new SpillError(`cannot open ${shown}: ${reasonOf(error)}`)
  }
}

/** Whether the process `pid` runs (one of another user counts: it answers EPERM). */
const running = (pid: number): boolean => {
  // process.kill is a foreign API that reports a missing process by throwing
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return codeOf(error) === "EPERM"
  }
}

/** The names in `dir`, or none when it cannot be listed. */
const namesIn = (dir: Dir): Array<string> => {
  try {
    return NodeFs.readdirSync(listing(dir))
  } catch {
    return []
  }
}

/** Unlinks every entry of `dir` (a link is removed, never followed; a folder in it stays). */
const emptyFolder = (dir: Dir): void => {
  for (const name of namesIn(dir)) {
    try {
      NodeFs.unlinkSync(at(dir, name))
    } catch {
      // gone already, or a folder someone put there: left alone
    }
  }
}

/** Removes the store folders in `output` whose process no longer runs. */
const removeStale = (output: Dir): void => {
  for (const name of namesIn(output)) {
    const pid = ownName.exec(name)?.[1]
    if (pid === undefined || Number(pid) === process.pid || running(Number(pid))) continue
    try {
      const dir = openFolder(output, name, name, undefined)
      try {
        emptyFolder(dir)
      } finally {
        closeQuietly(dir.fd)
      }
      NodeFs.rmdirSync(at(output, name))
    } catch {
      // a link, a file, or a folder that is not empty: not one of ours, left alone
    }
  }
}

/** A store's own folder, opened. All methods throw `SpillError` only. */
export class SpillFolder {
  private readonly output: Dir
  private readonly own: Dir
  /** Set by `close`: the descriptors are gone (their numbers may name other files by now). */
  private closed = false
  /** The folder as shown to the model, relative to the workspace root. */
  readonly shown: string

  private constructor(output: Dir, own: Dir, shown: string) {
    this.output = output
    this.own = own
    this.shown = shown
  }

  /** Makes a new store folder under `root`'s `.agentloop/output`, removing stale ones first. */
  static open(root: string): SpillFolder {
    let rootFd: number
    try {
      rootFd = NodeFs.openSync(root, flags.O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
    } catch (error) {
      throw new SpillError(`cannot open the workspace root: ${reasonOf(error)}`)
    }
    const opened: Array<number> = [rootFd]
    try {
      const agentloop = openFolder({ fd: rootFd, path: root }, OWN_FOLDER, OWN_FOLDER, 0o777)
      opened.push(agentloop.fd)
      keepOutOfGit(agentloop)
      const output = openFolder(agentloop, "output", SPILL_FOLDER, 0o700)
      opened.push(output.fd)
      const stat = NodeFs.fstatSync(output.fd)
      const uid = process.getuid?.()
      if (uid !== undefined && stat.uid !== uid) throw new SpillError(`${SPILL_FOLDER} belongs to another user`)
      if ((stat.mode & 0o022) !== 0) throw new SpillError(`${SPILL_FOLDER} is writable by other users`)
      removeStale(output)
      for (let attempt = 0; attempt < 8; attempt++) {
        const name = `${process.pid}-${randomBytes(4).toString("hex")}`
        try {
          NodeFs.mkdirSync(at(output, name), 0o700)
        } catch (error) {
          if (codeOf(error) === "EEXIST") continue
          throw new SpillError(`cannot make a folder in ${SPILL_FOLDER}: ${reasonOf(error)}`)
        }
        const own = openFolder(output, name, `${SPILL_FOLDER}/${name}`, undefined)
        opened.splice(opened.indexOf(output.fd), 1) // kept open with the store
        return new SpillFolder(output, own, `${SPILL_FOLDER}/${name}`)
      }
      throw new SpillError(`cannot find a free folder name in ${SPILL_FOLDER}`)
    } catch (error) {
      if (error instanceof SpillError) throw error
      throw new SpillError(`cannot make ${SPILL_FOLDER}: ${reasonOf(error)}`)
    } finally {
      for (const fd of opened) closeQuietly(fd)
    }
  }

  /** Creates a new temporary file in the folder: its name and descriptor. */
  createTemporary(): { readonly name: string; readonly fd: number } {
    if (this.closed) throw new SpillError("the output store is closed")
    const name = `.${randomBytes(8).toString("hex")}.tmp`
    try {
      const how = flags.O_WRONLY | flags.O_CREAT | flags.O_EXCL | O_NOFOLLOW
      return { name, fd: NodeFs.openSync(at(this.own, name), how, 0o600) }
    } catch (error) {
      throw new SpillError(`cannot create a file in ${this.shown}: ${reasonOf(error)}`)
    }
  }

  /** Writes `bytes` whole to `fd`. */
  write(fd: number, bytes: Uint8Array): void {
    try {
      let offset = 0
      while (offset < bytes.length) offset += NodeFs.writeSync(fd, bytes, offset, bytes.length - offset)
    } catch (error) {
      throw new SpillError(`cannot write to ${this.shown}: ${reasonOf(error)}`)
    }
  }

  /** Closes `fd` and gives the temporary file `temporary` its final name. */
  commit(fd: number, temporary: string, name: string): void {
    if (this.closed) throw new SpillError("the output store is closed")
    try {
      NodeFs.closeSync(fd)
      NodeFs.renameSync(at(this.own, temporary), at(this.own, name))
    } catch (error) {
      throw new SpillError(`cannot keep ${this.shown}/${name}: ${reasonOf(error)}`)
    }
  }

  /** Removes the file `name` (closing `fd` first when given); never fails. */
  remove(name: string, fd?: number): void {
    if (fd !== undefined) closeQuietly(fd)
    if (this.closed) return // close removed it with the folder
    try {
      NodeFs.unlinkSync(at(this.own, name))
    } catch {
      // already gone
    }
  }

  /** Removes the folder and everything in it; never fails. */
  close(): void {
    if (this.closed) return
    this.closed = true
    emptyFolder(this.own)
    closeQuietly(this.own.fd)
    try {
      NodeFs.rmdirSync(at(this.output, this.shown.slice(SPILL_FOLDER.length + 1)))
    } catch {
      // something was put in it that is not ours to remove
    }
    closeQuietly(this.output.fd)
  }
}
