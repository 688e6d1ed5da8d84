/**
 * @agentloop/cli — the `agentloop` command line and its building blocks.
 *
 * @since 0.1.0
 */
export * from "./Agent.ts"
export * from "./Approvals.ts"
export * from "./CliError.ts"
export * from "./Compaction.ts"
export * from "./Config.ts"
export * from "./DemoScript.ts"
export * from "./History.ts"
export * from "./LineEditor.ts"
export * from "./Logs.ts"
export { agentloop, main } from "./main.ts"
export * from "./Renderer.ts"
export * from "./RunEngine.ts"
export * from "./Sanitize.ts"
export * from "./Screen.ts"
export * from "./Session.ts"
export * from "./Sessions.ts"
export * from "./Style.ts"
export * from "./Terminal.ts"
export * from "./ToolOutput.ts"
export * from "./WorkspaceIO.ts"
