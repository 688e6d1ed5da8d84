/**
 * An MCP stdio transport on effect's `ChildProcess`: the server runs in its own process group, in
 * a scope of its own; closing the transport (or the scope it was forked from) stops the whole
 * group (SIGTERM, then SIGKILL after `STDIO_KILL_GRACE`), as the `bash` tool does. The SDK's own
 * stdio transport only signals the direct child, which leaves a server started through `npx` or
 * a shell running.
 */
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Exit, Queue, Scope, Sink, Stream } from "effect"
import type { Duration } from "effect"
import { ChildProcess } from "effect/process"
import type { ChildProcessSpawner } from "effect/process"
import type { StdioServerConfig } from "../Config.ts"

/** How long a server gets to exit after SIGTERM before its group is killed. */
export const STDIO_KILL_GRACE: Duration.Input = "2 seconds"

/** The variables of this process's environment a server inherits (the rest is not passed on). */
export const INHERITED_ENV = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TMPDIR"] as const

const STDERR_TAIL = 4000

export interface StdioTransport extends Transport {
  /** The last characters the server wrote to stderr (for connection errors). */
  readonly stderrTail: () => string
  /** The server's process id once started. */
  readonly pid: () => number | undefined
}

type RunPromise = <A, E>(effect: Effect.Effect<A, E, ChildProcessSpawner.ChildProcessSpawner>) => Promise<A>

const environment = (config: StdioServerConfig): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const key of INHERITED_ENV) {
    const value = process.env[key]
    if (value !== undefined && !value.startsWith("()")) env[key] = value
  }
  return { ...env, ...config.env }
}

export const makeStdioTransport = (
  config: StdioServerConfig,
  scope: Scope.Closeable,
  runPromise: RunPromise
): StdioTransport => {
  const input = Effect.runSync(Queue.unbounded<Uint8Array>())
  const buffer = new ReadBuffer()
  const encoder = new TextEncoder()
  let stderr = ""
  let pid: number | undefined
  let closed = false
  let started = false
  const transport: StdioTransport = {
    stderrTail: () => stderr,
    pid: () => pid,
    start: () => {
      if (started) return Promise.reject(new Error("the transport was already started"))
      started = true
      return runPromise(Effect.gen(function*() {
        const handle = yield* ChildProcess.make(config.command, [...config.args], {
          ...(config.cwd === undefined ? {} : { cwd: config.cwd }),
          env: environment(config),
          extendEnv: false,
          detached: true,
          killSignal: "SIGTERM",
          forceKillAfter: STDIO_KILL_GRACE
        }).pipe(Effect.provideService(Scope.Scope, scope))
        pid = handle.pid
        const forkHere = <A, E>(effect: Effect.Effect<A, E>) => Effect.forkIn(Effect.ignore(effect), scope)
        yield* forkHere(Stream.run(Stream.fromQueue(input), handle.stdin))
        yield* forkHere(
          Stream.runForEach(handle.stdout, (chunk) =>
            Effect.sync(() => {
              buffer.append(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))
              while (true) {
                let message: JSONRPCMessage | null
                try {
                  message = buffer.readMessage()
                } catch (error) {
                  // the SDK's parser throws on a line that is not a JSON-RPC message; skip the line
                  transport.onerror?.(error instanceof Error ? error : new Error(String(error)))
                  continue
                }
                if (message === null) break
                transport.onmessage?.(message)
              }
            })).pipe(Effect.ensuring(Effect.sync(onClosed)))
        )
        yield* forkHere(Stream.run(
          Stream.decodeText(handle.stderr),
          Sink.forEach((text: string) => Effect.sync(() => stderr = (stderr + text).slice(-STDERR_TAIL)))
        ))
        yield* forkHere(Effect.ensuring(handle.exitCode, Effect.sync(onClosed)))
      }))
    },
    send: (message) => {
      if (closed) return Promise.reject(new Error("Not connected"))
      Queue.offerUnsafe(input, encoder.encode(serializeMessage(message)))
      return Promise.resolve()
    },
    close: () => runPromise(Scope.close(scope, Exit.void)).then(onClosed)
  }
  function onClosed() {
    if (closed) return
    closed = true
    buffer.clear()
    transport.onclose?.()
  }
  return transport
}
