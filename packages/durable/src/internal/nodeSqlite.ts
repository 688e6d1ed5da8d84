/**
 * Node's built-in `node:sqlite`, loaded in this one place, after checking that this Node.js can run
 * the package at all.
 *
 * - A static `import … from "node:sqlite"` is resolved before any module of the program runs, so on
 *   a Node.js without it (20.x) the import of `@agentloop/durable` would fail with Node's raw
 *   `ERR_UNKNOWN_BUILTIN_MODULE`. The module is loaded with `process.getBuiltinModule` instead, once
 *   the version is known to be supported; an older Node.js gets one line on stderr naming the
 *   version the package needs (its `engines`: 22.19, what `@effect/platform-node` 4.1 also needs)
 *   and the process exits with status 1, as the `agentloop` command does.
 * - Loading `node:sqlite` makes Node print "ExperimentalWarning: SQLite is an experimental feature"
 *   on stderr, in every program that imports this package. That one warning, emitted while the
 *   module loads, is dropped; every other warning (and any emitted later) goes through as usual.
 */
import type * as NodeSqlite from "node:sqlite"

/** The oldest Node.js the package runs on: its package.json `engines` field says the same. */
const minimum = { major: 22, minor: 19 } as const

const [major = 0, minor = 0] = process.versions.node.split(".").map(Number)
if (major < minimum.major || (major === minimum.major && minor < minimum.minor)) {
  process.stderr.write(
    `@agentloop/durable needs Node.js ${minimum.major}.${minimum.minor} or later; this is Node.js ` +
      `${process.versions.node} (${process.execPath}).\n`
  )
  process.exit(1)
}

const isSqliteNotice = (warning: string | Error): boolean =>
  (typeof warning === "string" ? warning : warning.message).startsWith("SQLite is an experimental feature")

/** Loads the module with its experimental-feature notice dropped (Node emits it synchronously, on first load). */
const load = (): typeof NodeSqlite | undefined => {
  const emitWarning = process.emitWarning
  process.emitWarning = function(this: unknown, warning: string | Error, ...rest: ReadonlyArray<unknown>) {
    if (isSqliteNotice(warning)) return
    Reflect.apply(emitWarning, process, [warning, ...rest])
  } as typeof process.emitWarning
  try {
    return process.getBuiltinModule("node:sqlite")
  } finally {
    process.emitWarning = emitWarning
  }
}

const sqlite = load()

/**
 * `node:sqlite`'s `DatabaseSync`. A Node.js started with `--no-experimental-sqlite` has no
 * `node:sqlite`: opening a database then fails with an error that says so (the PostgreSQL engines
 * still work).
 */
export const DatabaseSync: typeof NodeSqlite.DatabaseSync = sqlite?.DatabaseSync ??
  (class {
    constructor() {
      throw new Error(
        "node:sqlite is not available in this Node.js (started with --no-experimental-sqlite?): the embedded " +
          "engine needs it"
      )
    }
  } as unknown as typeof NodeSqlite.DatabaseSync)
