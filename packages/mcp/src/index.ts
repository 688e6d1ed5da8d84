/**
 * @agentloop/mcp — tools from MCP servers (stdio and Streamable HTTP) for the agentloop loop.
 *
 * @since 0.1.0
 */
export * from "./Auth.ts"
export * from "./Config.ts"
export * from "./Elicitation.ts"
export * from "./Errors.ts"
export * from "./McpServer.ts"
export * from "./McpTools.ts"
export * from "./Naming.ts"
export * from "./Prompts.ts"
export * from "./Results.ts"
export * from "./Roots.ts"
export * from "./Sampling.ts"
