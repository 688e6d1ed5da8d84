/**
 * The terminal side of `run` and `chat`: reading lines (with a line editor on a terminal, see
 * internal/TerminalInput.ts), and stopping.
 *
 * Stopping: the first Ctrl-C (SIGINT) aborts the current run — tools are interrupted, every call
 * is paired, the session is saved — and `chat` gives the prompt back; a second Ctrl-C within two
 * seconds exits. SIGTERM and SIGHUP abort the run and exit. A closed output pipe (`agentloop run …
 * | head`) does the same, silently. Exits go through the program's scopes, so no tool process
 * is left behind. On a terminal stdin is in raw mode while the command runs: Ctrl-C arrives as a
 * key, not a signal, and the line input hands it to the same controller; in `chat`, Ctrl-D while a
 * run works asks to leave (`requestExit(0)`: the run is aborted first), and Esc aborts the run as
 * the first Ctrl-C does (`abort`), however often it is pressed.
 *
 * While a run of `chat` works, what is typed is edited on a line of its own below the output, and
 * sent to the run as steering (Enter) or as a follow-up (Alt+Enter): `LineInput.whileRunning`.
 *
 * @since 0.1.0
 */
import { Deferred, Effect } from "effect"
import type { Scope } from "effect"
import * as readline from "node:readline"
import type { History } from "./History.ts"
import { makeTerminalInput } from "./internal/TerminalInput.ts"
import { makeScreen } from "./Screen.ts"
import type { Screen } from "./Screen.ts"
import type { Style } from "./Style.ts"

/**
 * The exit codes the CLI uses for signals.
 *
 * @since 0.1.0
 * @category constants
 */
export const SIGNAL_EXIT = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 } as const

/**
 * How long a second Ctrl-C has to come to exit (milliseconds).
 *
 * @since 0.1.0
 * @category constants
 */
export const DOUBLE_INTERRUPT_MS = 2000

/**
 * The stop controller of a command.
 *
 * @since 0.1.0
 * @category models
 */
export interface Controller {
  /** Completed with the exit code when the program must end. */
  readonly exit: Deferred.Deferred<number>
  readonly exitRequested: () => boolean
  /** The current run's abort (or none between runs). */
  readonly setRun: (abort: Effect.Effect<void> | undefined) => void
  /** A Ctrl-C (from the signal or from a prompt): abort the run, or exit on the second one. */
  readonly interrupt: () => void
  /** Esc while a run works: abort it, as a first Ctrl-C does (never exits; nothing between runs). */
  readonly abort: () => void
  readonly requestExit: (code: number) => void
  /** The output is gone (closed pipe, hung-up terminal): write nothing more. */
  readonly outputClosed: () => boolean
}

/**
 * Installs the signal handlers for as long as the scope lasts (the runtime's own SIGINT/SIGTERM
 * handlers are set aside meanwhile and put back after).
 *
 * @since 0.1.0
 * @category constructors
 */
export const installController = (
  notice: (text: string) => void
): Effect.Effect<Controller, never, Scope.Scope> =>
  Effect.gen(function*() {
    const exit = yield* Deferred.make<number>()
    let abort: Effect.Effect<void> | undefined
    let lastInterrupt = -Infinity
    let closed = false
    let requested = false
    const requestExit = (code: number) => {
      if (requested) return
      requested = true
      if (abort !== undefined) Effect.runFork(abort)
      Effect.runSync(Deferred.succeed(exit, code))
    }
    const interrupt = () => {
      // foreign-callback glue: the time of a key press, not loop logic
      const now = performance.now()
      if (now - lastInterrupt < DOUBLE_INTERRUPT_MS || requested) {
        requestExit(SIGNAL_EXIT.SIGINT)
        return
      }
      lastInterrupt = now
      if (abort !== undefined) {
        if (!closed) notice("^C aborting the run (press Ctrl-C again within 2 s to exit)")
        Effect.runFork(abort)
      } else if (!closed) {
        notice("^C (press Ctrl-C again within 2 s to exit, or type /exit)")
      }
    }
    const abortRun = () => {
      if (abort === undefined || requested) return
      if (!closed) notice("esc: aborting the run")
      Effect.runFork(abort)
    }
    const onTerm = () => requestExit(SIGNAL_EXIT.SIGTERM)
    const onHup = () => {
      closed = true
      requestExit(SIGNAL_EXIT.SIGHUP)
    }
    const onOutputError = (error: NodeJS.ErrnoException) => {
      closed = true
      requestExit(error.code === "EPIPE" ? 0 : 1)
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        const saved = {
          SIGINT: process.listeners("SIGINT"),
          SIGTERM: process.listeners("SIGTERM"),
          stdout: process.stdout.listeners("error"),
          stderr: process.stderr.listeners("error")
        }
        process.removeAllListeners("SIGINT")
        process.removeAllListeners("SIGTERM")
        process.stdout.removeAllListeners("error")
        process.stderr.removeAllListeners("error")
        process.on("SIGINT", interrupt)
        process.on("SIGTERM", onTerm)
        process.on("SIGHUP", onHup)
        process.stdout.on("error", onOutputError)
        process.stderr.on("error", onOutputError)
        return saved
      }),
      (saved) =>
        Effect.sync(() => {
          process.removeListener("SIGINT", interrupt)
          process.removeListener("SIGTERM", onTerm)
          process.removeListener("SIGHUP", onHup)
          for (const l of saved.SIGINT) process.on("SIGINT", l as () => void)
          for (const l of saved.SIGTERM) process.on("SIGTERM", l as () => void)
          // after a closed pipe, later writes must not crash the exit
          if (!closed) {
            process.stdout.removeListener("error", onOutputError)
            process.stderr.removeListener("error", onOutputError)
            for (const l of saved.stdout) process.stdout.on("error", l as (e: Error) => void)
            for (const l of saved.stderr) process.stderr.on("error", l as (e: Error) => void)
          }
        })
    )
    return {
      exit,
      exitRequested: () => requested,
      setRun: (a) => {
        abort = a
      },
      interrupt,
      abort: abortRun,
      requestExit,
      outputClosed: () => closed
    } satisfies Controller
  })

/**
 * Reads lines from the user.
 *
 * @since 0.1.0
 * @category models
 */
export interface LineInput {
  /** A terminal (line editing, history, approvals can be asked). */
  readonly interactive: boolean
  /**
   * The next text, or `undefined` at the end of input (Ctrl-D, closed stdin, exit requested).
   * `history: false` (an approval question): no history, and nothing typed is kept. `edit`: opens
   * the external editor at once (`/edit`).
   */
  readonly read: (
    prompt: string,
    options?: { readonly history?: boolean; readonly edit?: boolean }
  ) => Effect.Effect<string | undefined>
  /**
   * Runs `effect` (a run) taking what is typed meanwhile. On a terminal the text is edited on a line
   * of its own below the output (the screen's footer); Enter gives it to `send` as `"steering"`,
   * Alt+Enter as `"followUp"`; Esc aborts the run; the other keys edit as at a prompt. Text left
   * unsent when `effect` ends is the next prompt's. Elsewhere `effect` runs as it is (lines typed
   * meanwhile wait for the next read).
   */
  readonly whileRunning: <A, E, R>(
    effect: Effect.Effect<A, E, R>,
    send: (text: string, kind: "steering" | "followUp") => Effect.Effect<void>
  ) => Effect.Effect<A, E, R>
  /** `text` is the answer of the next read, shown at its prompt as if typed (before anything typed since). */
  readonly queue: (text: string) => void
  /**
   * Shows `text` whole (already sanitized): on a terminal in `$PAGER` (default `less`, with `LESS`
   * defaulting to `FRX`) when it has more lines than the screen, otherwise printed.
   */
  readonly page: (text: string) => Effect.Effect<void>
}

/**
 * Line input on stdin. On a terminal, one line editor on a raw-mode stdin for as long as the scope
 * lasts (bracketed paste, new-line keys, history, Ctrl-R, `$EDITOR`: see the package README), which
 * also reads Ctrl-C and Ctrl-D while no question is asked; otherwise plain lines.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeLineInput = (
  controller: Controller,
  options: {
    /** The prompt history (none: nothing is recalled or kept). */
    readonly history?: History | undefined
    /** Ctrl-D while no question is asked (a run works) leaves (`chat`); otherwise it is ignored. */
    readonly leaveOnEof?: boolean
    /** Tab completion (not in approvals): the candidates for the text before the cursor, and the part they replace. */
    readonly complete?: ((line: string) => Promise<[Array<string>, string]>) | undefined
    /** The screen the output is drawn on (the line typed while a run works goes in its footer). */
    readonly screen?: Screen | undefined
    readonly style?: Style | undefined
    /** Shift+Tab on a terminal (at a prompt, or while a run works): switches the mode, returns the line to show. */
    readonly cycleMode?: (() => string) | undefined
    /** A line among a run's output on a terminal (the renderer's, which ends a streaming answer's line first). */
    readonly say?: ((line: string) => void) | undefined
  } = {}
): Effect.Effect<LineInput, never, Scope.Scope> =>
  Effect.gen(function*() {
    const input = process.stdin
    const screen = options.screen ?? makeScreen({
      write: (text) => {
        if (!controller.outputClosed() && !process.stdout.destroyed) process.stdout.write(text)
      },
      live: false
    })
    if (input.isTTY === true) {
      return yield* makeTerminalInput(controller, {
        history: options.history ?? { entries: () => [], add: () => {} },
        leaveOnEof: options.leaveOnEof === true,
        complete: options.complete,
        screen,
        style: options.style,
        cycleMode: options.cycleMode,
        say: options.say
      })
    }
    // not a terminal: one reader over stdin, lines queued (after those given by `queue`)
    const queued: Array<string> = []
    const lines: Array<string> = []
    let ended = false
    let waiting: ((line: string | undefined) => void) | undefined
    const rl = readline.createInterface({ input, terminal: false })
    rl.on("line", (line) => {
      if (waiting !== undefined) {
        const w = waiting
        waiting = undefined
        w(line)
      } else lines.push(line)
    })
    rl.on("close", () => {
      ended = true
      if (waiting !== undefined) {
        const w = waiting
        waiting = undefined
        w(undefined)
      }
    })
    yield* Effect.addFinalizer(() => Effect.sync(() => rl.close()))
    return {
      interactive: false,
      whileRunning: (effect) => effect,
      queue: (text) => {
        queued.push(text)
      },
      page: (text) => Effect.sync(() => screen.write(text.endsWith("\n") || text.length === 0 ? text : `${text}\n`)),
      read: () =>
        Effect.callback<string | undefined>((resume) => {
          if (queued.length > 0) return resume(Effect.succeed(queued.shift()))
          if (lines.length > 0) return resume(Effect.succeed(lines.shift()))
          if (ended || controller.exitRequested()) return resume(Effect.succeed(undefined))
          waiting = (line) => resume(Effect.succeed(line))
          const watcher = Effect.runFork(
            Deferred.await(controller.exit).pipe(
              Effect.andThen(Effect.sync(() => {
                if (waiting !== undefined) {
                  waiting = undefined
                  resume(Effect.succeed(undefined))
                }
              }))
            )
          )
          return Effect.sync(() => {
            waiting = undefined
            watcher.interruptUnsafe()
          })
        })
    } satisfies LineInput
  })

/**
 * Ends the process once a command is done: at once when nothing is left open, else 50 ms later
 * (an idle keep-alive connection, a stdin listener would hold it open). Everything has been written
 * and every scope (tools, files, the HTTP client) closed by then; `process.exitCode` is kept.
 *
 * @since 0.1.0
 * @category stopping
 */
export const exitSoon: Effect.Effect<void> = Effect.sync(() => {
  // unref'd: the timer itself does not keep the process waiting
  setTimeout(() => process.exit(), 50).unref()
})
