/**
 * `bash`: run a shell command in the workspace.
 *
 * - The command runs as `bash -c` in the workspace root, in its own process group, with stdin
 *   closed and pagers disabled.
 * - stdout and stderr stream as `tool_progress` events (`{ stream, text }`) while it runs (the
 *   first `BASH_MAX_PROGRESS_CHARS` characters; after that one `{ stream, omitted: true }`).
 * - The result keeps the first `BASH_OUTPUT_HEAD` and last `BASH_OUTPUT_TAIL` characters of the
 *   combined output, with a note of what was cut; `details` has `exitCode`, `signal`,
 *   `timedOut` and `truncated`. A non-zero exit, a signal or a timeout makes it an error result.
 * - Timeout (default `BASH_DEFAULT_TIMEOUT_SECONDS`, at most `BASH_MAX_TIMEOUT_SECONDS`), abort and
 *   interruption kill the **whole process group** (SIGTERM, then SIGKILL after
 *   `BASH_KILL_GRACE`), so no background process it started survives.
 *
 * @since 0.1.0
 */
import { Duration, Effect, Option, Schema, Stream } from "effect"
import type { PlatformError } from "effect"
import { ChildProcess } from "effect/process"
import { defineTool, ToolError } from "@agentloop/core"
import { HeadTailBuffer } from "./internal/text.ts"
import { Workspace } from "./Workspace.ts"

/** @since 0.1.0 @category constants */
export const BASH_DEFAULT_TIMEOUT_SECONDS = 120
/** @since 0.1.0 @category constants */
export const BASH_MAX_TIMEOUT_SECONDS = 600
/** @since 0.1.0 @category constants */
export const BASH_OUTPUT_HEAD = 10_000
/** @since 0.1.0 @category constants */
export const BASH_OUTPUT_TAIL = 20_000
/** @since 0.1.0 @category constants */
export const BASH_MAX_PROGRESS_CHARS = 200_000
/** @since 0.1.0 @category constants */
export const BASH_KILL_GRACE: Duration.Input = "2 seconds"

const Timeout = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: BASH_MAX_TIMEOUT_SECONDS }))

/** The signal that ended the process, from the error effect's spawner reports for it. */
const signalOf = (error: PlatformError.PlatformError): string | undefined => {
  const cause = error.reason.cause
  const message = cause instanceof Error ? cause.message : error.message
  return /signal: '([A-Z0-9]+)'/.exec(message)?.[1]
}

/**
 * The `bash` tool.
 *
 * @since 0.1.0
 * @category tools
 */
export const bashTool = defineTool({
  name: "bash",
  exclusive: true,
  description: "Run a bash command in the workspace root and return its combined stdout and stderr. " +
    `Long output keeps its first ${BASH_OUTPUT_HEAD / 1000}k and last ${BASH_OUTPUT_TAIL / 1000}k characters. ` +
    `Times out after ${BASH_DEFAULT_TIMEOUT_SECONDS} s unless timeout is given; on timeout every process it ` +
    "started is killed. No input can be given (stdin is closed); do not start interactive programs.",
  parameters: Schema.Struct({
    command: Schema.String.annotate({ description: "the bash command line" }),
    timeout: Schema.optionalKey(
      Timeout.annotate({ description: `seconds before the command is killed (1-${BASH_MAX_TIMEOUT_SECONDS})` })
    )
  }),
  execute: ({ command, timeout }, ctx) =>
    Effect.gen(function*() {
      if (command.trim().length === 0) return yield* new ToolError({ message: "command is empty" })
      const workspace = yield* Workspace
      const seconds = timeout ?? BASH_DEFAULT_TIMEOUT_SECONDS
      const output = new HeadTailBuffer(BASH_OUTPUT_HEAD, BASH_OUTPUT_TAIL)
      let progressed = 0
      const pump = (stream: Stream.Stream<Uint8Array, PlatformError.PlatformError>, name: "stdout" | "stderr") =>
        stream.pipe(
          Stream.decodeText(),
          Stream.runForEach((text) => {
            output.append(text)
            if (progressed >= BASH_MAX_PROGRESS_CHARS) return Effect.void
            progressed += text.length
            return ctx.reportProgress(
              progressed >= BASH_MAX_PROGRESS_CHARS ? { stream: name, omitted: true } : { stream: name, text }
            )
          })
        )
      const run = Effect.scoped(Effect.gen(function*() {
        const handle = yield* ChildProcess.make("bash", ["-c", command], {
          cwd: workspace.root,
          detached: true,
          stdin: "ignore",
          killSignal: "SIGTERM",
          forceKillAfter: BASH_KILL_GRACE,
          extendEnv: true,
          env: { PAGER: "cat", GIT_PAGER: "cat", TERM: "dumb", NO_COLOR: "1" }
        })
        yield* Effect.all([pump(handle.stdout, "stdout"), pump(handle.stderr, "stderr")], {
          concurrency: 2,
          discard: true
        })
        return yield* Effect.result(handle.exitCode)
      }))
      const finished = yield* Effect.timeoutOption(run, Duration.seconds(seconds)).pipe(
        Effect.mapError((error) => new ToolError({ message: `could not run the command: ${error.message}` }))
      )
      let exitCode: number | null = null
      let signal: string | null = null
      const timedOut = Option.isNone(finished)
      if (Option.isSome(finished)) {
        if (finished.value._tag === "Success") exitCode = finished.value.success
        else signal = signalOf(finished.value.failure) ?? "unknown"
      }
      const notes: Array<string> = []
      if (timedOut) notes.push(`[Command timed out after ${seconds} s; its process group was killed.]`)
      else if (signal !== null) notes.push(`[Command was killed by signal ${signal}.]`)
      else if (exitCode !== 0) notes.push(`[Command exited with code ${exitCode}.]`)
      const text = output.text.length === 0 && notes.length === 0 ? "(no output)" : output.text
      return {
        content: [{ type: "text" as const, text: [text, ...notes].filter((s) => s.length > 0).join("\n") }],
        details: { command, exitCode, signal, timedOut, truncated: output.truncated },
        isError: timedOut || signal !== null || exitCode !== 0
      }
    })
})
