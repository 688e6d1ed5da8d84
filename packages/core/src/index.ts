/**
 * @agentloop/core — the verifiable agent loop on Effect 4.
 *
 * Flat named exports (SPEC §7). Each schema is a value and a type of the same name.
 *
 * @since 0.1.0
 */
export * from "./AgentLoop.ts"
export * from "./AgentRun.ts"
export * from "./Batch.ts"
export * from "./Decision.ts"
export * from "./Errors.ts"
export * from "./EventSink.ts"
export * from "./Executor.ts"
export * from "./LoopEvent.ts"
export * from "./Message.ts"
export * from "./Model.ts"
export * from "./Policy.ts"
export * from "./Run.ts"
export * from "./Tool.ts"
export * from "./ToolExecution.ts"
export * from "./Transcript.ts"
export * from "./Persistence.ts"
