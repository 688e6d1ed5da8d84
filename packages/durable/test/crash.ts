/**
 * Helpers for the crash tests: real processes (test/fixtures/crash-process.ts), their side-effect
 * and event logs, kill -9.
 */
import type { AgentRunResult, Message } from "@agentloop/core"
import { Effect } from "effect"
import assert from "node:assert/strict"
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import type { DurableEvent } from "../src/index.ts"
import { violationsOf } from "./harness.ts"

const fixture = fileURLToPath(new URL("./fixtures/crash-process.ts", import.meta.url))

export interface Proc {
  readonly child: ChildProcess
  readonly exited: Promise<number | null>
  readonly output: () => string
}

export const spawnProc = (role: string, settings: object, env: Record<string, string> = {}): Proc => {
  const child = spawn(process.execPath, ["--no-warnings", fixture, role, JSON.stringify(settings)], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env }
  })
  let output = ""
  child.stdout!.on("data", (d) => output += String(d))
  child.stderr!.on("data", (d) => output += String(d))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  return { child, exited, output: () => output }
}

export const kill9 = (proc: Proc) =>
  Effect.promise(() => {
    proc.child.kill("SIGKILL")
    return proc.exited
  })

export const lines = <A = Record<string, unknown>>(file: string): Array<A> =>
  existsSync(file) ?
    readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l) as A) :
    []

/** Waits (polling the logs every 25 ms, real time) until `test` holds, or fails after `ms`. */
export const waitUntil = (what: string, test: () => boolean, ms = 60_000, procs: ReadonlyArray<Proc> = []) =>
  Effect.promise(() =>
    new Promise<void>((resolve, reject) => {
      const started = performance.now()
      const tick = () => {
        if (test()) return resolve()
        if (performance.now() - started > ms) {
          const outputs = procs.map((p, i) =>
            `--- process ${i} (exit ${p.child.exitCode}):\n${p.output().slice(-1500)}`
          )
          return reject(new Error(`timed out waiting for ${what}\n${outputs.join("\n")}`))
        }
        setTimeout(tick, 25)
      }
      tick()
    })
  )

export const awaitExit = (proc: Proc, ms = 60_000) =>
  Effect.promise(() =>
    Promise.race([
      proc.exited,
      new Promise<number | null>((resolve) => setTimeout(() => resolve(-999), ms))
    ])
  ).pipe(Effect.flatMap((code) =>
    code === 0 ? Effect.void : Effect.die(new Error(`process exited ${code}: ${proc.output().slice(-2000)}`))
  ))

export const tempDir = (prefix: string) => mkdtempSync(join(tmpdir(), prefix))

export interface LogEntry {
  readonly kind: "turn" | "tool" | "process" | "shards"
  readonly phase: "start" | "end"
  readonly call?: string
  readonly turn?: number
  readonly key?: string
  readonly pid: number
}

/** How many times each call (or turn) started, from the side-effect log. */
export const starts = (log: string) => {
  const entries = lines<LogEntry>(log)
  const count = (test: (e: LogEntry) => boolean) => entries.filter((e) => e.phase === "start" && test(e)).length
  return {
    call: (id: string) => count((e) => e.kind === "tool" && e.call === id),
    turn: (n: number) => count((e) => e.kind === "turn" && e.turn === n),
    keys: (id: string) => [...new Set(entries.filter((e) => e.kind === "tool" && e.call === id).map((e) => e.key))],
    entries
  }
}

export const input: ReadonlyArray<Message> = [{ role: "user", content: "go" }]

export const resultAndViolations = (resultFile: string, eventsFile: string) => {
  const result = JSON.parse(readFileSync(resultFile, "utf8")) as AgentRunResult
  const events = lines<DurableEvent>(eventsFile)
  return { result, events, violations: violationsOf(input, result, events) }
}

/**
 * The approval scenario's outcome: every call (c1, c2, c3, d1) and turn (0, 1, 2) ran once, and
 * the run ended `stop` with every invariant kept.
 */
export const ranOnceAndStopped = (
  files: { readonly log: string; readonly result: string; readonly events: string }
) => {
  const c = starts(files.log)
  assert.deepStrictEqual([c.call("c1"), c.call("c2"), c.call("c3"), c.call("d1")], [1, 1, 1, 1])
  assert.deepStrictEqual([c.turn(0), c.turn(1), c.turn(2)], [1, 1, 1])
  const { result, violations } = resultAndViolations(files.result, files.events)
  assert.strictEqual(result.reason, "stop")
  assert.deepStrictEqual(violations, [])
}

export const toolEndedIn = (eventsFile: string, callId: string) =>
  lines<DurableEvent>(eventsFile).some((e) => e.event.type === "tool_end" && e.event.result.toolCallId === callId)

/** A loopback port no one listens on now. */
export const freePort = Effect.promise(() =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })
)
