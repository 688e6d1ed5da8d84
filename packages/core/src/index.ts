/**
 * @agentloop/core — the verifiable agent loop on Effect 4.
 *
 * Flat named exports (SPEC §7). Each schema is a value and a type of the same name.
 *
 * The modules whose flat names are short enough to collide in a program's scope (`ask`, `allow`,
 * `deny`, `decide`, ...) are also exported as namespaces, the way Effect's modules are used:
 * `Policy.ask`, `Policy.deny("why")`, `Decision.decideTurn`, `Transcript.errorResult`,
 * `Persistence.loadTranscript`.
 *
 * @since 0.1.0
 */
export * from "./AgentLoop.ts"
export * from "./AgentRun.ts"
export * from "./Compaction.ts"
export * from "./Decision.ts"
export * from "./Errors.ts"
export * from "./EventSink.ts"
export * from "./Executor.ts"
export * from "./LoopEvent.ts"
export * from "./Message.ts"
export * from "./Model.ts"
export * from "./OtlpTracing.ts"
export * from "./Output.ts"
export * from "./Persistence.ts"
export * from "./Policy.ts"
export * from "./Run.ts"
export * from "./RunControl.ts"
export * from "./RunJournal.ts"
export * from "./SessionRecord.ts"
export * from "./SubAgent.ts"
export * from "./Tool.ts"
export * from "./ToolExecution.ts"
export * from "./Tracing.ts"
export * from "./Transcript.ts"

/**
 * Policies as a namespace: `Policy.allow`, `Policy.deny(reason)`, `Policy.ask`, `Policy.decide`.
 *
 * @since 0.1.0
 * @category namespaces
 */
export * as Policy from "./Policy.ts"
/**
 * The decision table as a namespace: `Decision.decideTurn`, `Decision.skipText`.
 *
 * @since 0.1.0
 * @category namespaces
 */
export * as Decision from "./Decision.ts"
/**
 * Transcript checks and results as a namespace: `Transcript.errorResult`, `Transcript.skippedResult`, ...
 *
 * @since 0.1.0
 * @category namespaces
 */
export * as Transcript from "./Transcript.ts"
/**
 * Saving and loading transcripts as a namespace: `Persistence.saveTranscript`, `Persistence.loadTranscript`, ...
 *
 * @since 0.1.0
 * @category namespaces
 */
export * as Persistence from "./Persistence.ts"
