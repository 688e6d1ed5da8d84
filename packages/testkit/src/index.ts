/**
 * @agentloop/testkit — test your own agents: a scripted model, fake tools, a recording sink and
 * the invariant checker.
 *
 * @since 0.1.0
 */
export * from "./FakeTools.ts"
export * from "./FaultInjection.ts"
export * from "./Invariants.ts"
export * from "./RecordingSink.ts"
export * from "./Replay.ts"
export * from "./ScriptedModel.ts"
export * from "./ScriptedRun.ts"
export * from "./ScriptedSubAgent.ts"

/**
 * The script-writing helpers as a namespace: `Script.user`, `Script.turn` (with
 * `Script.turn.finalAnswer`), `Script.toolCall`, `Script.assistant`, `Script.subAgent`.
 *
 * @since 0.1.0
 * @category namespaces
 */
export * as Script from "./Script.ts"
