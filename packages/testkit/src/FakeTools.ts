/**
 * Fake tools for tests: gated tools whose completion the test releases through `Deferred`, probes
 * that count executions and interruptions, and tools that fail, die, throw, sleep (for
 * `TestClock`), never end or report progress.
 *
 * Every fake tool takes any object as arguments.
 *
 * @since 0.1.0
 */
import { defineTool, ToolError } from "@agentloop/core"
import type { AnyTool, Tool, ToolOutput } from "@agentloop/core"
import { Deferred, Duration, Effect, Exit, Schema } from "effect"

const AnyArgs = Schema.Record(Schema.String, Schema.Unknown)

type Args = typeof AnyArgs.Type

/**
 * A tool with any-object arguments.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fakeTool = (
  name: string,
  execute: Tool<Args>["execute"],
  description = `fake tool ${name}`
): Tool<Args> => defineTool({ name, description, parameters: AnyArgs, execute })

/**
 * Answers with `output` (default: the arguments as JSON).
 *
 * @since 0.1.0
 * @category constructors
 */
export const echoTool = (name: string, output?: ToolOutput): Tool<Args> =>
  fakeTool(name, (args) => Effect.succeed(output ?? JSON.stringify(args)))

/**
 * Fails with a typed `ToolError`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const failingTool = (name: string, message: string): Tool<Args> =>
  fakeTool(name, () => Effect.fail(new ToolError({ message })))

/**
 * Dies with `defect`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const dyingTool = (name: string, defect: unknown): Tool<Args> => fakeTool(name, () => Effect.die(defect))

/**
 * Throws `error` synchronously from `execute`, before returning any effect.
 *
 * @since 0.1.0
 * @category constructors
 */
export const throwingTool = (name: string, error: unknown): Tool<Args> =>
  fakeTool(name, () => {
    throw error
  })

/**
 * Interrupts itself.
 *
 * @since 0.1.0
 * @category constructors
 */
export const interruptingTool = (name: string): Tool<Args> => fakeTool(name, () => Effect.interrupt)

/**
 * Sleeps for `duration` (drive it with `TestClock.adjust`), then answers `output`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sleepingTool = (name: string, duration: Duration.Input, output: ToolOutput = "slept"): Tool<Args> =>
  fakeTool(name, () => Effect.as(Effect.sleep(duration), output))

/**
 * Never ends (until interrupted).
 *
 * @since 0.1.0
 * @category constructors
 */
export const neverTool = (name: string): Tool<Args> => fakeTool(name, () => Effect.never)

/**
 * Reports each of `progress` through `reportProgress`, then answers `output`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const progressTool = (name: string, progress: ReadonlyArray<unknown>, output: ToolOutput = "done"): Tool<Args> =>
  fakeTool(name, (_, context) => Effect.as(Effect.forEach(progress, context.reportProgress, { discard: true }), output))

/**
 * What a probe saw of its tool.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolProbe<T extends AnyTool> {
  /** The wrapped tool: use it in place of the original. */
  readonly tool: T
  /** How many times `execute` was entered, in total and per call id. */
  readonly executions: Effect.Effect<number>
  readonly executedIds: Effect.Effect<ReadonlyArray<string>>
  /** Call ids whose execution was interrupted; and whose `AbortSignal` fired. */
  readonly interruptedIds: Effect.Effect<ReadonlyArray<string>>
  readonly abortedSignalIds: Effect.Effect<ReadonlyArray<string>>
}

/**
 * Wraps a tool to count its executions and interruptions.
 *
 * @since 0.1.0
 * @category constructors
 */
export const probeTool = <T extends AnyTool>(tool: T): ToolProbe<T> => {
  const executed: Array<string> = []
  const interrupted: Array<string> = []
  const aborted: Array<string> = []
  const wrapped = {
    ...tool,
    execute: (args: unknown, context) =>
      Effect.suspend(() => {
        executed.push(context.toolCallId)
        context.signal.addEventListener("abort", () => aborted.push(context.toolCallId), { once: true })
        return tool.execute(args, context)
      }).pipe(Effect.onInterrupt(() => Effect.sync(() => interrupted.push(context.toolCallId))))
  } as T
  return {
    tool: wrapped,
    executions: Effect.sync(() => executed.length),
    executedIds: Effect.sync(() => executed.slice()),
    interruptedIds: Effect.sync(() => interrupted.slice()),
    abortedSignalIds: Effect.sync(() => aborted.slice())
  }
}

/**
 * A tool whose calls wait until the test releases them, one call id at a time.
 *
 * @since 0.1.0
 * @category models
 */
export interface GatedTool {
  readonly tool: Tool<Args>
  /** Waits until the call with this id has started. */
  readonly started: (toolCallId: string) => Effect.Effect<void>
  /** Lets the call finish with `output` (default: `"<id> done"`). */
  readonly release: (toolCallId: string, output?: ToolOutput) => Effect.Effect<void>
  /** Lets the call fail with a `ToolError`. */
  readonly fail: (toolCallId: string, message: string) => Effect.Effect<void>
  /** Lets the call die with `defect`. */
  readonly die: (toolCallId: string, defect: unknown) => Effect.Effect<void>
}

interface GateEntry {
  readonly started: Deferred.Deferred<void>
  readonly outcome: Deferred.Deferred<Exit.Exit<ToolOutput, ToolError>>
}

/**
 * Makes a gated tool.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeGatedTool = (name: string): GatedTool => {
  const entries = new Map<string, GateEntry>()
  const entry = (id: string): GateEntry => {
    let found = entries.get(id)
    if (found === undefined) {
      found = { started: Deferred.makeUnsafe(), outcome: Deferred.makeUnsafe() }
      entries.set(id, found)
    }
    return found
  }
  const settle = (id: string, exit: Exit.Exit<ToolOutput, ToolError>) =>
    Effect.asVoid(Deferred.succeed(entry(id).outcome, exit))
  return {
    tool: fakeTool(name, (_, context) =>
      Effect.suspend(() => {
        const gate = entry(context.toolCallId)
        return Deferred.succeed(gate.started, undefined).pipe(
          Effect.andThen(Deferred.await(gate.outcome)),
          Effect.flatMap((exit) => exit)
        )
      })),
    started: (id) => Deferred.await(entry(id).started),
    release: (id, output) => settle(id, Exit.succeed(output ?? `${id} done`)),
    fail: (id, message) => settle(id, Exit.fail(new ToolError({ message }))),
    die: (id, defect) => settle(id, Exit.die(defect))
  }
}
