/**
 * `bash`: run a shell command in the workspace.
 *
 * - The command runs as `bash -c` in the workspace root, with stdin closed and pagers disabled,
 *   in a PID namespace of its own where the system allows it (Linux with `unshare`; user
 *   namespace too when not root), else in its own process group; `details.containment` says which.
 * - Its environment is this process's minus the model providers' API keys (`DEFAULT_HIDDEN_ENV`,
 *   plus `BashOptions.hideEnv`); see `BashOptions` and `bashOptionsLayer`.
 * - Commands over `BASH_MAX_COMMAND_BYTES` are refused with a clear error.
 * - stdout and stderr stream as `tool_progress` events (`{ stream, text }`) while it runs (the
 *   first `BASH_MAX_PROGRESS_CHARS` characters; after that one `{ stream, omitted: true }`).
 * - The result keeps the first `BASH_OUTPUT_HEAD` and last `BASH_OUTPUT_TAIL` characters of the
 *   combined output, cut on line breaks (inside a line only when one is longer than its part, and
 *   then between two characters), with a notice of what was cut, the limit, and the file of the
 *   `OutputStore` that has the whole output byte for byte (read it with the `offset` the notice
 *   gives); `details` has `exitCode`, `signal`, `timedOut`, `truncated`, `containment`,
 *   `outputLines` and `outputBytes` (the size of the whole output as the command wrote it, lines
 *   counted as `read` counts them, whatever was shown or kept of it), and `fullOutput` (that file)
 *   when there is one. A non-zero exit, a signal or a timeout makes it an
 *   error result.
 * - Timeout (default `BASH_DEFAULT_TIMEOUT_SECONDS`, at most `BASH_MAX_TIMEOUT_SECONDS`), abort,
 *   interruption and the command's normal end kill everything it started: in a PID namespace
 *   every process in it (SIGKILL, even those that called `setsid` or double-forked), in a process
 *   group the group (SIGTERM, then SIGKILL after `BASH_KILL_GRACE`). In a PID namespace this
 *   holds even when the process running the tool is killed with SIGKILL: the namespace is started
 *   through `setpriv --pdeathsig KILL` (util-linux) when it is there, so the kernel takes it down.
 *
 * @since 0.1.0
 */
import { defineTool, ToolError } from "@agentloop/core"
import { Context, Duration, Effect, Fiber, Layer, Option, Schema, Scope, Semaphore, Stream } from "effect"
import type { PlatformError } from "effect"
import { ChildProcess } from "effect/process"
import type { ChildProcessSpawner } from "effect/process"
import { readFileSync } from "node:fs"
import { cutNotice, LineCutBuffer, showCut, Utf8Chunks } from "./internal/text.ts"
import type { Kept } from "./internal/text.ts"
import { OutputStore } from "./OutputStore.ts"
import type { OutputFile } from "./OutputStore.ts"
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

/** @since 0.1.0 @category constants */
export const BASH_MAX_COMMAND_BYTES = 100 * 1024

/**
 * Environment variables hidden from `bash` by default: the API keys of well-known model providers.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_HIDDEN_ENV: ReadonlyArray<string> = [
  "OPENAI_API_KEY",
  "OPENAI_ORG_ID",
  "ANTHROPIC_API_KEY",
  "ANTHROPIC_AUTH_TOKEN",
  "CLAUDE_API_KEY",
  "GEMINI_API_KEY",
  "GOOGLE_API_KEY",
  "GOOGLE_GENERATIVE_AI_API_KEY",
  "VERTEX_API_KEY",
  "AZURE_OPENAI_API_KEY",
  "AZURE_API_KEY",
  "MISTRAL_API_KEY",
  "CODESTRAL_API_KEY",
  "GROQ_API_KEY",
  "XAI_API_KEY",
  "GROK_API_KEY",
  "DEEPSEEK_API_KEY",
  "OPENROUTER_API_KEY",
  "TOGETHER_API_KEY",
  "TOGETHERAI_API_KEY",
  "FIREWORKS_API_KEY",
  "COHERE_API_KEY",
  "CO_API_KEY",
  "PERPLEXITY_API_KEY",
  "PPLX_API_KEY",
  "CEREBRAS_API_KEY",
  "DASHSCOPE_API_KEY",
  "MOONSHOT_API_KEY",
  "ZHIPU_API_KEY",
  "VOYAGE_API_KEY",
  "REPLICATE_API_TOKEN",
  "HF_TOKEN",
  "HUGGING_FACE_HUB_TOKEN",
  "HUGGINGFACE_API_KEY",
  "NVIDIA_API_KEY",
  "AI21_API_KEY",
  "LLAMA_API_KEY",
  "AGENTLOOP_API_KEY"
]

/**
 * How `bash` runs: which environment it gets and how its processes are contained.
 *
 * @since 0.1.0
 * @category models
 */
export interface BashOptions {
  /** More variable names to hide (e.g. the one `--api-key-env` names), on top of `DEFAULT_HIDDEN_ENV`. */
  readonly hideEnv?: ReadonlyArray<string> | undefined
  /** Names to pass although hidden by default (or by `hideEnv`). */
  readonly passEnv?: ReadonlyArray<string> | undefined
  /** The last word: receives the environment after hiding, returns the one `bash` gets. */
  readonly env?: ((env: Readonly<Record<string, string>>) => Record<string, string>) | undefined
  /**
   * `"auto"` (default): a PID namespace where the system allows one (Linux, `unshare`), else the
   * process group. `"process-group"`: always the process group (weaker: see the README).
   */
  readonly containment?: "auto" | "process-group" | undefined
}

/**
 * The `BashOptions` in effect; defaults to none (provider keys hidden, automatic containment).
 *
 * @since 0.1.0
 * @category services
 */
export const BashSettings: Context.Reference<BashOptions> = Context.Reference<BashOptions>(
  "@agentloop/tools/BashSettings",
  { defaultValue: () => ({}) }
)

/**
 * Provides `options` to the `bash` tool.
 *
 * @since 0.1.0
 * @category layers
 */
export const bashOptionsLayer = (options: BashOptions): Layer.Layer<never> => Layer.succeed(BashSettings, options)

/**
 * The environment `bash` gets from `base` (default: this process's) under `options`: everything
 * but the hidden names, then `options.env` if given. The pager and colour settings of the tool
 * are added after this.
 *
 * @since 0.1.0
 * @category constructors
 */
export const bashEnvironment = (
  options: BashOptions,
  base: Readonly<Record<string, string | undefined>> = process.env
): Record<string, string> => {
  const hidden = new Set([...DEFAULT_HIDDEN_ENV, ...(options.hideEnv ?? [])])
  for (const name of options.passEnv ?? []) hidden.delete(name)
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(base)) {
    if (value !== undefined && !hidden.has(name)) env[name] = value
  }
  return options.env === undefined ? env : options.env(env)
}

/**
 * How a command's processes are contained: `"pid-namespace"` (all of them die with it, whatever
 * they do) or `"process-group"` (those that leave the group, e.g. with `setsid`, can survive).
 *
 * @since 0.1.0
 * @category models
 */
export type Containment = "pid-namespace" | "process-group"

const namespaceArgs = (): ReadonlyArray<string> => [
  ...(process.getuid?.() === 0 ? [] : ["--user", "--map-current-user"]),
  "--pid",
  "--fork",
  "--kill-child",
  "--mount-proc"
]

/**
 * `setpriv --pdeathsig KILL` (util-linux, beside `unshare`): the kernel kills `unshare` when the
 * process that started it dies, even by SIGKILL, when no finalizer runs; `--kill-child` then kills
 * the namespace's PID 1, and with it every process of the namespace. Without it, a `kill -9` of
 * this process would leave the command running, reparented to PID 1 (and a durable run resumed
 * after the kill would run the call again beside it). The death signal survives `exec`.
 */
const deathSignalArgs = ["--pdeathsig", "KILL"] as const

/** How a command is started in a PID namespace: through `setpriv` when it is there. */
let namespaceLauncher: "setpriv" | "unshare" | undefined

let detected: Containment | undefined

/** Whether `file args…` runs and exits 0. */
const succeeds = (file: string, args: ReadonlyArray<string>) =>
  Effect.scoped(
    Effect.flatMap(
      ChildProcess.make(file, args, { stdin: "ignore", stdout: "ignore", stderr: "ignore" }),
      (handle) => handle.exitCode
    )
  ).pipe(Effect.map((code) => code === 0), Effect.orElseSucceed(() => false))

/**
 * The containment `bash` uses here, found once per process by trying `unshare` (Linux only).
 *
 * @since 0.1.0
 * @category constructors
 */
export const detectContainment: Effect.Effect<
  Containment,
  never,
  ChildProcessSpawner.ChildProcessSpawner
> = Effect.suspend(() => {
  if (detected !== undefined) return Effect.succeed(detected)
  if (process.platform !== "linux") return Effect.succeed<Containment>("process-group")
  return Effect.gen(function*() {
    if (yield* succeeds("setpriv", [...deathSignalArgs, "unshare", ...namespaceArgs(), "true"])) {
      namespaceLauncher = "setpriv"
      return detected = "pid-namespace"
    }
    if (yield* succeeds("unshare", [...namespaceArgs(), "true"])) {
      namespaceLauncher = "unshare"
      return detected = "pid-namespace"
    }
    return detected = "process-group"
  })
})

/** The program and arguments that run `command` under the given containment. */
const commandLine = (containment: Containment, command: string): readonly [string, ReadonlyArray<string>] =>
  containment === "process-group" ?
    ["bash", ["-c", command]] :
    namespaceLauncher === "setpriv" ?
    ["setpriv", [...deathSignalArgs, "unshare", ...namespaceArgs(), "bash", "-c", command]] :
    ["unshare", [...namespaceArgs(), "bash", "-c", command]]

/** The signal that ended the process, from the error effect's spawner reports for it. */
const signalOf = (error: PlatformError.PlatformError): string | undefined => {
  const cause = error.reason.cause
  const message = cause instanceof Error ? cause.message : error.message
  return /signal: '([A-Z0-9]+)'/.exec(message)?.[1]
}

/** Kills what is left of a process group (ignoring a group already gone). */
const killGroup = (pid: number): void => {
  // process.kill is a foreign API that reports a missing group by throwing
  try {
    process.kill(-pid, "SIGKILL")
  } catch {
    // no such group: nothing survived
  }
}

/** SIGKILLs the children of `unshare` (the namespace's PID 1), which takes every process of the namespace with it. */
const killNamespace = (pid: number): void => {
  // readFileSync and process.kill are foreign APIs that report a process already gone by throwing
  try {
    for (const child of readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/)) {
      if (child.length > 0) process.kill(Number(child), "SIGKILL")
    }
  } catch {
    // already gone: nothing to kill
  }
}

const Timeout = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: BASH_MAX_TIMEOUT_SECONDS }))

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
    `Long output keeps its first ${BASH_OUTPUT_HEAD / 1000}k and last ${BASH_OUTPUT_TAIL / 1000}k characters ` +
    "(the result then names a file with all of it, to read with offset). " +
    `Times out after ${BASH_DEFAULT_TIMEOUT_SECONDS} s unless timeout is given; on timeout every process it ` +
    "started is killed. No input can be given (stdin is closed); do not start interactive programs.",
  parameters: Schema.Struct({
    command: Schema.String.annotate({ description: "the bash command line" }),
    timeout: Schema.optionalKey(
      Timeout.annotate({ description: `seconds before the command is killed (1-${BASH_MAX_TIMEOUT_SECONDS})` })
    )
  }),
  execute: ({ command, timeout }, ctx) =>
    Effect.scoped(Effect.gen(function*() {
      if (command.trim().length === 0) return yield* new ToolError({ message: "command is empty" })
      const commandBytes = Buffer.byteLength(command, "utf8")
      if (commandBytes > BASH_MAX_COMMAND_BYTES) {
        return yield* new ToolError({
          message: `command is ${commandBytes} bytes, over the ${BASH_MAX_COMMAND_BYTES}-byte limit; ` +
            "write a script with the write tool and run it"
        })
      }
      const workspace = yield* Workspace
      const options = yield* BashSettings
      const containment = options.containment === "process-group" ? "process-group" : yield* detectContainment
      const seconds = timeout ?? BASH_DEFAULT_TIMEOUT_SECONDS
      const store = yield* OutputStore
      // the file of a cut output lives until the result is made (the command's own scope closes before)
      const callScope = yield* Effect.scope
      const output = new LineCutBuffer(BASH_OUTPUT_HEAD, BASH_OUTPUT_TAIL)
      // the raw bytes, in the order their text reached `output`: in memory until the output is cut,
      // then in a file of the output store (opened at that moment, so short outputs cost no file)
      const early: Array<Uint8Array> = []
      let spill: OutputFile | { readonly notKept: string } | undefined
      const keepBytes = (bytes: Uint8Array): Effect.Effect<void> =>
        Effect.gen(function*() {
          if (spill === undefined && !output.truncated) {
            early.push(bytes)
            return
          }
          if (spill === undefined) {
            const created = yield* Effect.result(store.create("bash").pipe(Scope.provide(callScope)))
            spill = created._tag === "Success" ? created.success : { notKept: created.failure.message }
            if ("write" in spill) { for (const chunk of early) yield* spill.write(chunk) }
            early.length = 0
          }
          if ("write" in spill) yield* spill.write(bytes)
        })
      /** Where the whole output of a cut one is: its file, once complete, or why there is none. */
      const keptOutput = (): Effect.Effect<Kept> =>
        spill === undefined ?
          Effect.succeed({ notKept: "the command was stopped before it was kept" }) :
          "write" in spill ?
          Effect.match(spill.keep, { onSuccess: (kept): Kept => kept, onFailure: (e) => ({ notKept: e.message }) }) :
          Effect.succeed(spill)
      const order = yield* Semaphore.make(1)
      let progressed = 0
      // the whole output's size, whatever is kept or shown of it
      let outputBytes = 0
      const pump = (stream: Stream.Stream<Uint8Array, PlatformError.PlatformError>, name: "stdout" | "stderr") => {
        const chunks = new Utf8Chunks()
        const take = ({ bytes, text }: { readonly bytes: Uint8Array; readonly text: string }) =>
          Effect.gen(function*() {
            // stdout's and stderr's pieces reach the text and the file in one order
            yield* order.withPermits(1)(Effect.suspend(() => {
              output.append(text)
              outputBytes += bytes.length
              return keepBytes(bytes)
            }))
            if (progressed >= BASH_MAX_PROGRESS_CHARS || text.length === 0) return
            progressed += text.length
            yield* ctx.reportProgress(
              progressed >= BASH_MAX_PROGRESS_CHARS ? { stream: name, omitted: true } : { stream: name, text }
            )
          })
        return Stream.runForEach(stream, (chunk) => take(chunks.push(chunk))).pipe(
          Effect.andThen(Effect.suspend(() => take(chunks.end())))
        )
      }
      const env = { ...bashEnvironment(options), PAGER: "cat", GIT_PAGER: "cat", TERM: "dumb", NO_COLOR: "1" }
      const [file, args] = commandLine(containment, command)
      const run = Effect.scoped(Effect.gen(function*() {
        const handle = yield* ChildProcess.make(file, args, {
          cwd: workspace.root,
          detached: true,
          stdin: "ignore",
          // in a PID namespace the command is PID 1, which ignores SIGTERM: kill at once
          killSignal: containment === "pid-namespace" ? "SIGKILL" : "SIGTERM",
          // after SIGKILL there is nothing to wait for: a short bound on the spawner's wait for the group
          forceKillAfter: containment === "pid-namespace" ? "200 millis" : BASH_KILL_GRACE,
          extendEnv: false,
          env
        })
        if (containment === "pid-namespace") {
          // runs before the spawner's own cleanup: killing the namespace's PID 1 directly lets
          // `unshare` reap it and exit at once (killed together, PID 1 would wait for whatever
          // reaps orphans on this system before the group is gone)
          yield* Effect.addFinalizer(() => Effect.sync(() => killNamespace(handle.pid)))
        }
        const pumps = yield* Effect.forkScoped(
          Effect.all([pump(handle.stdout, "stdout"), pump(handle.stderr, "stderr")], { concurrency: 2, discard: true })
        )
        const exit = yield* Effect.result(handle.exitCode)
        // the command is over: nothing it started may outlive it (in a namespace the kernel has
        // already killed the rest; in a process group we do)
        yield* Effect.sync(() => killGroup(handle.pid))
        yield* Fiber.join(pumps)
        return exit
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
      if (timedOut) {
        notes.push(
          `[Command timed out after ${seconds} s; ${
            containment === "pid-namespace" ? "every process it started was killed" : "its process group was killed"
          }.]`
        )
      } else if (signal !== null) notes.push(`[Command was killed by signal ${signal}.]`)
      else if (exitCode !== 0) notes.push(`[Command exited with code ${exitCode}.]`)
      const cut = output.cut()
      const kept: Kept | undefined = cut === undefined ? undefined : yield* keptOutput()
      const shown = cut === undefined || kept === undefined ?
        output.whole :
        showCut(cut, cutNotice(cut, { head: BASH_OUTPUT_HEAD, tail: BASH_OUTPUT_TAIL }, kept))
      const text = shown.length === 0 && notes.length === 0 ? "(no output)" : shown
      const fullOutput = kept !== undefined && "path" in kept ? { fullOutput: kept.path } : {}
      return {
        content: [{ type: "text" as const, text: [text, ...notes].filter((s) => s.length > 0).join("\n") }],
        details: {
          command,
          exitCode,
          signal,
          timedOut,
          truncated: cut !== undefined,
          containment,
          outputLines: output.totalLines,
          outputBytes,
          ...fullOutput
        },
        isError: timedOut || signal !== null || exitCode !== 0
      }
    }))
})
