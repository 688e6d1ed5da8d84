/**
 * `agentloop run --json`: one JSON object per line on stdout, for scripts. Every line has `v` (the
 * schema's version, 1) and `type`:
 *
 * - first, `session`: the session's id and file, the workspace, the provider and model;
 * - then each event of the run, as core's `LoopEvent` has it (`model_event` with the stream's
 *   deltas, `assistant_message`, `tool_start`, `tool_progress`, `tool_end`, `approval_request`,
 *   `user_message`, `turn_end`), and `turn_start` before each model request;
 * - last, `result`: how the run ended (`reason`, `steps`, `usage`, `error`, and `output`, the typed
 *   answer of `--output-schema`), and the exit code the process ends with.
 *
 * `JsonLine` is the schema of a line: decode each with it to read the stream with types. Notes,
 * questions and errors go to stderr (nothing else is written to stdout). A field may be added
 * within a version; a field removed or changed in meaning makes a new version.
 *
 * @since 0.1.0
 */
import { LoopEvent, RunReason, Usage } from "@agentloop/core"
import type { LoopEvent as LoopEventType, Usage as UsageType } from "@agentloop/core"
import { Effect, Schema } from "effect"
import type { Renderer } from "./Renderer.ts"
import type { RunEvent } from "./RunEngine.ts"

/**
 * The version of the line schema.
 *
 * @since 0.1.0
 * @category constants
 */
export const JSON_SCHEMA_VERSION = 1 as const

const V = Schema.Literal(JSON_SCHEMA_VERSION)

/**
 * The first line: the session the run belongs to.
 *
 * @since 0.1.0
 * @category schemas
 */
export const JsonSessionLine = Schema.Struct({
  v: V,
  type: Schema.Literal("session"),
  id: Schema.String,
  file: Schema.String,
  workspace: Schema.String,
  provider: Schema.optionalKey(Schema.String),
  model: Schema.optionalKey(Schema.String)
})

/**
 * The last line: how the run ended, and the process's exit code.
 *
 * @since 0.1.0
 * @category schemas
 */
export const JsonResultLine = Schema.Struct({
  v: V,
  type: Schema.Literal("result"),
  reason: RunReason,
  steps: Schema.Number,
  usage: Usage,
  exitCode: Schema.Number,
  error: Schema.optionalKey(Schema.String),
  output: Schema.optionalKey(Schema.Unknown)
})

/**
 * A line of `agentloop run --json` (see the module's description).
 *
 * @since 0.1.0
 * @category schemas
 */
export const JsonLine = Schema.Union([
  JsonSessionLine,
  Schema.Struct({ v: V, type: Schema.Literal("turn_start"), step: Schema.Number }),
  ...LoopEvent.members.map((member) => Schema.Struct({ v: V, ...member.fields })),
  JsonResultLine
])

/**
 * @since 0.1.0
 * @category models
 */
export type JsonLine = typeof JsonLine.Type

/**
 * A line for an event of the run.
 *
 * @since 0.1.0
 * @category output
 */
export const eventLine = (event: RunEvent): string => JSON.stringify({ v: JSON_SCHEMA_VERSION, ...event })

/**
 * The renderer of `--json`: each event a line on `write` (stdout); notes between events go to
 * `note` (stderr), never to stdout.
 *
 * @since 0.1.0
 * @category output
 */
export const makeJsonRenderer = (write: (text: string) => void, note: (text: string) => void): Renderer => ({
  render: (event: LoopEventType) => Effect.sync(() => write(`${eventLine(event)}\n`)),
  line: (text) => Effect.sync(() => note(`${text}\n`)),
  hold: (effect) => effect
})

/**
 * The last line.
 *
 * @since 0.1.0
 * @category output
 */
export const resultLine = (result: {
  readonly reason: typeof RunReason.Type
  readonly steps: number
  readonly usage: UsageType
  readonly exitCode: number
  readonly error?: string | undefined
  readonly output?: unknown
}): string =>
  JSON.stringify({
    v: JSON_SCHEMA_VERSION,
    type: "result",
    reason: result.reason,
    steps: result.steps,
    usage: result.usage,
    exitCode: result.exitCode,
    ...(result.error === undefined ? {} : { error: result.error }),
    ...(result.output === undefined ? {} : { output: result.output })
  })
