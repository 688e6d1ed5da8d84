/**
 * The script-writing helpers under one name, for programs where the flat names (`user`, `turn`,
 * `toolCall`, `assistant`) would collide with their own: `Script.user("hi")`,
 * `Script.turn.toolCalls([Script.toolCall("a", "read", { path: "x" })])`.
 *
 * @since 0.1.0
 */
export { assistant, toolCall, turn } from "./ScriptedModel.ts"
export { user } from "./ScriptedRun.ts"
