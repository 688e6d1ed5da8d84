/**
 * Scripted sub-agents: a sub-agent tool whose model is its own script, so a test says exactly what
 * the child does, and checks what it was asked.
 *
 * @since 0.1.0
 */
import { subAgentTool } from "@agentloop/core"
import type { AnyTool, SubAgentConfig, Tool, ToolServices } from "@agentloop/core"
import { Effect } from "effect"
import { makeScriptedModel } from "./ScriptedModel.ts"
import type { ScriptedModel, ScriptedTurn } from "./ScriptedModel.ts"

/**
 * A scripted sub-agent: the tool to give a parent, and its model (its requests, `verify`).
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedSubAgent<R> {
  readonly tool: Tool<{ readonly task: string }, R>
  readonly model: ScriptedModel
}

/**
 * A sub-agent tool whose model answers from `script`. Every call of the tool takes the next turns
 * of the same script, in the order the requests come (give sub-agents called in parallel one
 * script each). `description` defaults to a short one.
 *
 * @example
 * ```ts
 * const researcher = yield* scriptedSubAgent({
 *   name: "researcher",
 *   script: [turn.toolCalls([toolCall("r1", "read", { path: "notes" })]), turn.text("The notes say 42.")],
 *   tools: [echoTool("read")]
 * })
 * // give researcher.tool to the parent; researcher.model.requests are what the child saw
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const scriptedSubAgent = <const Tools extends ReadonlyArray<AnyTool> = readonly [], A = never>(
  config: Omit<SubAgentConfig<Tools, A, never>, "model" | "description"> & {
    readonly script: ReadonlyArray<ScriptedTurn>
    readonly description?: string | undefined
  }
): Effect.Effect<ScriptedSubAgent<ToolServices<Tools[number]>>> =>
  Effect.map(makeScriptedModel(config.script), (model) => {
    const { script: _, description, ...rest } = config
    return {
      model,
      tool: subAgentTool<Tools, A, never>({
        ...rest,
        description: description ?? `The scripted agent "${config.name}"`,
        model: model.layer
      })
    }
  })
