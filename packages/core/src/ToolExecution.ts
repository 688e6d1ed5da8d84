/**
 * Knobs of tool execution, as `Context.Reference`s with defaults: provide them anywhere above the
 * run (`Effect.provideService(ToolConcurrency, 4)`, or a `Layer.succeed`).
 *
 * @since 0.1.0
 */
import { Context } from "effect"
import type { Duration } from "effect"

/**
 * How many calls of one batch may run at the same time (default: all of them). Results stay in
 * call order whatever the limit.
 *
 * @since 0.1.0
 * @category references
 */
export const ToolConcurrency = Context.Reference<number | "unbounded">("@agentloop/core/ToolConcurrency", {
  defaultValue: () => "unbounded"
})

/**
 * The default time limit of one tool call (default: none). A tool's own `timeoutMs` wins. A call
 * over its limit is interrupted (its `AbortSignal` fires) and answered with an error result
 * saying it timed out and after how long.
 *
 * @since 0.1.0
 * @category references
 */
export const ToolTimeout = Context.Reference<Duration.Input | undefined>("@agentloop/core/ToolTimeout", {
  defaultValue: () => undefined
})
