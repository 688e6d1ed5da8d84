/**
 * The script-writing helpers under one name, for programs where the flat names (`user`, `turn`,
 * `toolCall`, `assistant`) would collide with their own: `Script.user("hi")`,
 * `Script.turn.toolCalls([Script.toolCall("a", "read", { path: "x" })])`, `Script.turn.finalAnswer("f", { ok: true })`,
 * `Script.subAgent({ name, script })` (a scripted sub-agent).
 *
 * @since 0.1.0
 */
export { assistant, toolCall, turn } from "./ScriptedModel.ts"
export { user } from "./ScriptedRun.ts"
export { scriptedSubAgent as subAgent } from "./ScriptedSubAgent.ts"
