/**
 * @agentloop/cli — the `agentloop` command line and its building blocks.
 *
 * @since 0.1.0
 */
export * from "./DemoScript.ts"
export * from "./Renderer.ts"
export * from "./Session.ts"
export * from "./Style.ts"
export { agentloop, main } from "./main.ts"
