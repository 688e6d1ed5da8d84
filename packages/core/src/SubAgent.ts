/**
 * Sub-agents as tools: an agent (a system prompt, its tools, optionally its own model and output
 * schema) that other agents call like any tool.
 *
 * Each call runs a nested loop with its own transcript, under the same guarantees as any run: every
 * call of the child paired, one `turn_end` per run. Its events reach the parent as `tool_progress`
 * of the call (`SubAgentEvent`, with the path of agents from the parent's call down, for a tree
 * view); its final text (or its typed answer, as JSON) is the call's result; its transcript is in the
 * result's `details` (`{ subAgent: SubAgentRun }`), also when it failed, was interrupted or timed
 * out; its usage joins the parent's. The call is a tool call like any other: the parent's policy,
 * `exclusive`, concurrency limit and time limits apply to it, and aborting or interrupting the
 * parent interrupts the child, which pairs its own calls before the parent pairs the call.
 * Traced, the child's run is an `invoke_agent {name}` span inside the call's `execute_tool` span.
 *
 * @since 0.1.0
 */
import { Context, Effect, Schema } from "effect"
import type { Duration, Layer } from "effect"
import { ToolError } from "./Errors.ts"
import { Executor } from "./Executor.ts"
import type { ToolContext } from "./Executor.ts"
import { runLoop } from "./internal/engine/loop.ts"
import type { Emit } from "./internal/engine/shortcuts.ts"
import type { LoopEvent, RunReason } from "./LoopEvent.ts"
import type { Message, Usage } from "./Message.ts"
import { Model } from "./Model.ts"
import { toOutputSchema } from "./Output.ts"
import type { OutputInput, OutputSchema } from "./Output.ts"
import type { ToolPolicy } from "./Policy.ts"
import type { AgentLoopOptions, AgentRunResult } from "./Run.ts"
import { defineTool, makeToolExecutor } from "./Tool.ts"
import type { AnyTool, Tool, ToolOutput, ToolServices } from "./Tool.ts"
import { AgentTrace } from "./Tracing.ts"

/**
 * How deep the current run is: 0 for a run started by a program, 1 for a sub-agent's run, 2 for a
 * sub-agent of a sub-agent... Set by the sub-agent tool for the runs it starts.
 *
 * @since 0.1.0
 * @category references
 */
export const SubAgentDepth = Context.Reference<number>("@agentloop/core/SubAgentDepth", {
  defaultValue: () => 0
})

/**
 * The deepest a sub-agent run may be (default 3: a program's run, its sub-agents, theirs, and
 * theirs). A sub-agent call that would start a run deeper is answered with an error result saying
 * the limit is reached, and nothing runs.
 *
 * @since 0.1.0
 * @category references
 */
export const SubAgentMaxDepth = Context.Reference<number>("@agentloop/core/SubAgentMaxDepth", {
  defaultValue: () => 3
})

/**
 * One step of a sub-agent event's path: the agent and the call of its parent that started it.
 *
 * @since 0.1.0
 * @category models
 */
export interface SubAgentStep {
  readonly agent: string
  readonly toolCallId: string
}

/**
 * The `progress` of a `tool_progress` event that carries an event of a sub-agent's run. `path`
 * goes from the parent's call down to the run that emitted `event`: `path[0].toolCallId` is the
 * `tool_progress` event's `toolCallId`; a sub-agent of a sub-agent has a path of two steps. Every
 * run in the tree has exactly one `turn_end` among its events.
 *
 * @since 0.1.0
 * @category models
 */
export interface SubAgentEvent {
  readonly type: "subagent_event"
  readonly path: ReadonlyArray<SubAgentStep>
  readonly event: LoopEvent
}

/**
 * True when a `tool_progress` event's `progress` is a `SubAgentEvent`.
 *
 * @since 0.1.0
 * @category guards
 */
export const isSubAgentEvent = (progress: unknown): progress is SubAgentEvent =>
  typeof progress === "object" && progress !== null &&
  (progress as { readonly type?: unknown }).type === "subagent_event" &&
  Array.isArray((progress as { readonly path?: unknown }).path) &&
  typeof (progress as { readonly event?: unknown }).event === "object"

/**
 * A sub-agent's run, as kept in the `details` of the call's result (`{ subAgent: SubAgentRun }`):
 * how it ended, its whole transcript (its own sub-agents' runs are in the details of their results
 * there), its usage (its sub-agents' included), and its answer as JSON when it has an output schema.
 *
 * @since 0.1.0
 * @category models
 */
export interface SubAgentRun {
  readonly agent: string
  readonly reason: RunReason
  readonly steps: number
  readonly error?: string
  readonly messages: ReadonlyArray<Message>
  readonly usage?: Usage
  readonly output?: unknown
}

/**
 * The sub-agent run a tool result's `details` carry, if any.
 *
 * @since 0.1.0
 * @category guards
 */
export const subAgentRunOf = (details: unknown): SubAgentRun | undefined => {
  if (typeof details !== "object" || details === null) return undefined
  const run: unknown = (details as { readonly subAgent?: unknown }).subAgent
  if (typeof run !== "object" || run === null) return undefined
  const { agent, reason, steps, messages } = run as Partial<Record<keyof SubAgentRun, unknown>>
  return typeof agent === "string" && typeof reason === "string" && typeof steps === "number" &&
      Array.isArray(messages) ?
    run as SubAgentRun :
    undefined
}

/**
 * What a sub-agent is.
 *
 * @since 0.1.0
 * @category models
 */
export interface SubAgentConfig<Tools extends ReadonlyArray<AnyTool>, A, RM> {
  /** The tool's name, also the agent's name in event paths. */
  readonly name: string
  /** What the calling model is told: what this agent does and what a task for it should say. */
  readonly description: string
  readonly systemPrompt?: string | undefined
  /** Its own tools (none by default). */
  readonly tools?: Tools | undefined
  /** Its own model; by default the `Model` of the run that calls it. */
  readonly model?: Layer.Layer<Model, unknown, RM> | undefined
  /** Its final answer's schema: the call's result is then the answer, as JSON. */
  readonly output?: OutputInput<A> | undefined
  readonly outputRetries?: number | undefined
  readonly maxSteps?: number | undefined
  /** Its own policy for its tools' calls (default: allow all, as for any run). */
  readonly policy?: ToolPolicy | undefined
  /** A time limit for its run: past it the child is aborted and the call answered with its transcript. */
  readonly timeout?: Duration.Input | undefined
  /** As for `defineTool`: how the parent's batch treats the call. */
  readonly readOnly?: boolean | undefined
  readonly exclusive?: boolean | undefined
  readonly timeoutMs?: number | undefined
}

const TaskParameters = Schema.Struct({
  task: Schema.String.annotate({
    description: "The task for this agent, with everything it needs to know: it sees nothing else of this conversation"
  })
})

const lastText = (messages: ReadonlyArray<Message>): string => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.role === "assistant") {
      return message.content.flatMap((part) => part.type === "text" ? [part.text] : []).join("")
    }
  }
  return ""
}

/** The accepted answer's JSON, from the final-answer call that ends a run with an output schema. */
const answerOf = (output: OutputSchema<unknown>, messages: ReadonlyArray<Message>): unknown => {
  const result = messages.at(-1)
  if (result?.role !== "toolResult") return undefined
  for (let i = messages.length - 2; i >= 0; i--) {
    const message = messages[i]!
    if (message.role === "assistant") {
      const call = message.content.find((part) => part.type === "toolCall" && part.id === result.toolCallId)
      return call?.type === "toolCall" ? output.answerOf(call.arguments) : undefined
    }
  }
  return undefined
}

const runOf = (agent: string, result: AgentRunResult, output: OutputSchema<unknown> | undefined): SubAgentRun => ({
  agent,
  reason: result.reason,
  steps: result.steps,
  ...(result.error === undefined ? {} : { error: result.error }),
  messages: result.messages,
  ...(result.usage === undefined ? {} : { usage: result.usage }),
  ...(output === undefined || result.reason !== "stop" ? {} : { output: answerOf(output, result.messages) })
})

const toolOutputOf = (run: SubAgentRun): ToolOutput => {
  const text = run.reason === "stop" ?
    ("output" in run ? JSON.stringify(run.output) : lastText(run.messages) || "(the agent gave no text)") :
    `Sub-agent "${run.agent}" ended ${run.reason} after ${run.steps} step(s)${
      run.error === undefined ? "" : `: ${run.error}`
    }.`
  return { content: [{ type: "text", text }], details: { subAgent: run }, isError: run.reason !== "stop" }
}

/** The child's events as progress of the parent's call, flattened: each carries its whole path. */
const forwardTo = (context: ToolContext, self: SubAgentStep): Emit => (event) =>
  context.reportProgress(
    event.type === "tool_progress" && isSubAgentEvent(event.progress) ?
      { type: "subagent_event", path: [self, ...event.progress.path], event: event.progress.event } :
      { type: "subagent_event", path: [self], event }
  )

/**
 * A tool that runs an agent. The calling model gives it `{ task }`; the agent starts from that one
 * user message, with its own system prompt, tools, model (by default the caller's), policy and
 * output schema, and its answer is the call's result (see the module's documentation for events,
 * details, usage, interruption and the depth limit).
 *
 * @example
 * ```ts
 * const researcher = subAgentTool({
 *   name: "researcher",
 *   description: "Finds facts in the notes and reports them",
 *   systemPrompt: "You answer from the notes only.",
 *   tools: [readNote],
 *   output: Schema.Struct({ facts: Schema.Array(Schema.String) })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const subAgentTool = <const Tools extends ReadonlyArray<AnyTool> = readonly [], A = never, RM = never>(
  config: SubAgentConfig<Tools, A, RM>
): Tool<{ readonly task: string }, ToolServices<Tools[number]> | RM> => {
  const output = config.output === undefined ? undefined : toOutputSchema(config.output)
  const tools: ReadonlyArray<AnyTool> = config.tools ?? []
  const settings: Omit<AgentLoopOptions, "messages"> = {
    ...(config.systemPrompt === undefined ? {} : { systemPrompt: config.systemPrompt }),
    ...(config.maxSteps === undefined ? {} : { maxSteps: config.maxSteps }),
    ...(config.policy === undefined ? {} : { policy: config.policy }),
    ...(config.timeout === undefined ? {} : { timeout: config.timeout }),
    ...(output === undefined ? {} : { output }),
    ...(config.outputRetries === undefined ? {} : { outputRetries: config.outputRetries })
  }
  const name = config.name
  return defineTool({
    name,
    description: config.description,
    parameters: TaskParameters,
    readOnly: config.readOnly,
    exclusive: config.exclusive,
    timeoutMs: config.timeoutMs,
    execute: ({ task }, context) =>
      Effect.gen(function*() {
        const depth = yield* SubAgentDepth
        const limit = yield* SubAgentMaxDepth
        if (depth >= limit) {
          return yield* Effect.fail(
            new ToolError({
              message: `sub-agent "${name}" not started: the sub-agent depth limit (${limit}) is reached`
            })
          )
        }
        const options: AgentLoopOptions = {
          ...settings,
          messages: [{ role: "user", content: task }],
          signal: context.signal
        }
        // the child's executor is made inside the child's context (its depth, its model), which its
        // tools then see: a sub-agent among them starts one level deeper
        const child = Effect.flatMap(makeToolExecutor(tools), (executor) =>
          runLoop(
            options,
            forwardTo(context, { agent: name, toolCallId: context.toolCallId }),
            // called however the child ends, interrupted too: the call's result keeps its transcript
            (result) => Effect.sync(() => context.keepOnInterrupt?.({ subAgent: runOf(name, result, output) }))
          ).pipe(Effect.provideService(Executor, executor))).pipe(
            Effect.provideService(SubAgentDepth, depth + 1),
            // traced, the child's run is `invoke_agent {name}`, inside the call's span
            Effect.provideService(AgentTrace, { name })
          )
        let result: AgentRunResult
        if (config.model === undefined) {
          const model = yield* Effect.serviceOption(Model)
          if (model._tag === "None") {
            return yield* Effect.fail(
              new ToolError({ message: `sub-agent "${name}" not started: no Model to run it with` })
            )
          }
          result = yield* Effect.provideService(child, Model, model.value)
        } else {
          result = yield* Effect.provide(child, config.model)
        }
        return toolOutputOf(runOf(name, result, output))
      }) as Effect.Effect<ToolOutput, unknown, ToolServices<Tools[number]> | RM>
  })
}
