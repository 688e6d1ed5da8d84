/**
 * The system prompt of `run` and `chat`: the built-in prompt (the coding instructions, the tools,
 * the workspace, the date and the platform), then the config file's `systemPrompt` (added, under its
 * own heading), then the project's instructions (AGENTS.md, see `ProjectContext.ts`).
 *
 * An explicit replacement (`--system-prompt TEXT`, or the config's `systemPrompt` with
 * `"replaceSystemPrompt": true`) stands instead of the built-in prompt and the addition; the
 * project's instructions are still joined (they belong to the project, not to the prompt).
 */
import type { ToolDefinition } from "@agentloop/core"
import { CODING_SYSTEM_PROMPT } from "../Session.ts"

/** What the system prompt is made of. */
export interface SystemPromptParts {
  readonly tools: ReadonlyArray<Pick<ToolDefinition, "name" | "description">>
  readonly workspace: string
  /** Milliseconds since the epoch (the date is the local one). */
  readonly now: number
  /** e.g. `linux x64` (`process.platform`, `process.arch`). */
  readonly platform: string
  /** The config file's `systemPrompt`: added to the built-in prompt. */
  readonly addition: string | undefined
  /** Stands instead of the built-in prompt and the addition. */
  readonly replacement: string | undefined
  /** The project's instructions section ("" when there are none). */
  readonly projectContext: string
}

/** The first sentence of a tool's description, at most 200 characters. */
const summaryOf = (description: string): string => {
  const line = description.replace(/\s+/g, " ").trim()
  const end = line.search(/[.!?](\s|$)/)
  const first = end >= 0 ? line.slice(0, end + 1) : line
  return first.length > 200 ? `${first.slice(0, 199)}…` : first
}

const localDate = (now: number): string => {
  const d = new Date(now)
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")}`
}

/** The built-in part: instructions, tools, environment. */
export const builtInPrompt = (parts: Pick<SystemPromptParts, "tools" | "workspace" | "now" | "platform">): string =>
  [
    CODING_SYSTEM_PROMPT,
    `# Tools\n\n${parts.tools.map((t) => `- ${t.name}: ${summaryOf(t.description)}`).join("\n")}`,
    [
      "# Environment",
      "",
      `- workspace: ${parts.workspace} (the tools' paths are relative to it, and stay inside it)`,
      `- date: ${localDate(parts.now)}`,
      `- platform: ${parts.platform}`
    ].join("\n")
  ].join("\n\n")

/** The whole system prompt (see the module's description). */
export const buildSystemPrompt = (parts: SystemPromptParts): string => {
  const head = parts.replacement !== undefined ?
    parts.replacement :
    parts.addition !== undefined && parts.addition.trim().length > 0 ?
    `${builtInPrompt(parts)}\n\n# Instructions from the configuration\n\n${parts.addition.trim()}` :
    builtInPrompt(parts)
  return parts.projectContext.length > 0 ? `${head}\n\n${parts.projectContext}` : head
}
