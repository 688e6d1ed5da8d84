/**
 * @agentloop/providers — `Model` layers for real model APIs, on effect's HTTP client:
 * OpenAI-compatible Chat Completions, Anthropic Messages, and a bridge from effect's own
 * `LanguageModel`.
 *
 * Flat named exports, like `@agentloop/core`.
 *
 * @since 0.1.0
 */
export * from "./Anthropic.ts"
export * from "./Errors.ts"
export * from "./LanguageModelBridge.ts"
export * from "./ModelList.ts"
export * from "./Models.ts"
export * from "./OpenAiCompat.ts"
export * from "./Retry.ts"
export * from "./Timeouts.ts"
export * from "./ToolkitBridge.ts"
