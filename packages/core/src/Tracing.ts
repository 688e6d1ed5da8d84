/**
 * What a traced run shows (OtlpTracing.ts sends it to an OpenTelemetry collector).
 *
 * A run is traced when a tracer other than effect's built-in one is installed: `otlpTracingLayer`
 * (OtlpTracing.ts), or any other (`@effect/opentelemetry`'s `NodeSdk.layer` with the OpenTelemetry SDK, a test's
 * own). Without one no span is made at all. The spans follow OpenTelemetry's semantic conventions for
 * generative AI (names, kinds, `gen_ai.*` attributes), with agentloop's own attributes beside them:
 *
 * - `invoke_agent {agent}` (internal): the run. `gen_ai.operation.name` `invoke_agent`,
 *   `gen_ai.agent.name` and `gen_ai.conversation.id` (from `AgentTrace`), the model's
 *   `gen_ai.provider.name` and `gen_ai.request.model` (from `Model.describe`), the run's usage
 *   (`gen_ai.usage.*`), `agentloop.reason`, `agentloop.steps`, `error.type` when it ended `error`.
 * - `chat {model}` (client): one model turn (a request and its answer). `gen_ai.operation.name`
 *   `chat`, the provider and model requested, `gen_ai.response.model`, the turn's usage,
 *   `gen_ai.response.finish_reasons`, `agentloop.step`.
 * - `execute_tool {tool}` (internal): one tool call, from its policy's decision (the wait for an
 *   approval included) to its result. `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type`
 *   `function`, `agentloop.tool.outcome` (`ok` or `error`) and `error.type` for an error result. A
 *   sub-agent's run is an `invoke_agent` span inside its call's span.
 * - `agentloop.approval` (internal, inside the call's span): the wait for a person's answer, with
 *   `agentloop.approval.outcome` (`approved`, `denied` or `aborted`).
 *
 * Every span carries `agentloop.span`, its name in agentloop's own terms (`agentloop.run`,
 * `agentloop.turn`, `agentloop.tool`, `agentloop.approval`), whatever the conventions name it. No span
 * carries a message's content, a tool's arguments or its output.
 *
 * @since 0.1.0
 */
import { Context } from "effect"

/**
 * Who a run is, as traces name it: `name` is the agent's name (`gen_ai.agent.name`, and the
 * `invoke_agent` span's name), `conversationId` the conversation (session) the run belongs to
 * (`gen_ai.conversation.id`).
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentTraceInfo {
  readonly name?: string | undefined
  readonly conversationId?: string | undefined
}

/**
 * The agent a run is, for its spans (default: unnamed, no conversation). A sub-agent's run is named
 * after its tool, whatever its caller's is.
 *
 * @example
 * ```ts
 * import { AgentTrace, runAgentLoop } from "@agentloop/core"
 * import { Effect } from "effect"
 *
 * const run = runAgentLoop({ messages: [{ role: "user", content: "hi" }] }).pipe(
 *   Effect.provideService(AgentTrace, { name: "support-bot", conversationId: "ticket-4711" })
 * )
 * ```
 *
 * @since 0.1.0
 * @category references
 */
export const AgentTrace = Context.Reference<AgentTraceInfo>("@agentloop/core/AgentTrace", {
  defaultValue: () => ({})
})
