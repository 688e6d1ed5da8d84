/**
 * A server's prompts: their listing as `McpPrompt`s, the check of the arguments before a
 * `prompts/get`, and its messages as agentloop messages.
 */
import type { AssistantMessage, ImageContent, TextContent, UserMessage } from "@agentloop/core"
import type { Prompt, PromptMessage } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import type { McpPrompt } from "../Prompts.ts"
import type { PrepareImage } from "../Results.ts"
import { convertContent } from "./content.ts"

export const promptOf = (server: string, prompt: Prompt): McpPrompt => ({
  server,
  name: prompt.name,
  ...(prompt.title === undefined ? {} : { title: prompt.title }),
  ...(prompt.description === undefined ? {} : { description: prompt.description }),
  arguments: (prompt.arguments ?? []).map((argument) => ({
    name: argument.name,
    ...(argument.description === undefined ? {} : { description: argument.description }),
    required: argument.required === true
  }))
})

/** What is wrong with `args` for `prompt` (a required one missing, one it does not take), if anything. */
export const checkPromptArguments = (
  prompt: McpPrompt,
  args: Readonly<Record<string, string>>
): string | undefined => {
  const named = `prompt "${prompt.name}" of MCP server "${prompt.server}"`
  const missing = prompt.arguments.filter((a) => a.required && args[a.name] === undefined).map((a) => a.name)
  if (missing.length > 0) return `The ${named} needs the argument(s) ${missing.join(", ")}.`
  const known = new Set(prompt.arguments.map((a) => a.name))
  const unknown = Object.keys(args).filter((name) => !known.has(name))
  if (unknown.length > 0) {
    const takes = prompt.arguments.length === 0 ? "none" : prompt.arguments.map((a) => a.name).join(", ")
    return `The ${named} takes no argument(s) ${unknown.join(", ")} (it takes: ${takes}).`
  }
  return undefined
}

const leftOut = (mimeType: string) =>
  `[an image (${mimeType}) of the prompt was left out: an assistant message takes text only]`

const contentOf = (message: UserMessage): ReadonlyArray<TextContent | ImageContent> =>
  typeof message.content === "string" ? [{ type: "text", text: message.content }] : message.content

/** A prompt's messages as agentloop messages, next ones of the same role joined. */
export const promptMessages = (
  server: string,
  messages: ReadonlyArray<PromptMessage>,
  prepareImage: PrepareImage
): Effect.Effect<Array<UserMessage | AssistantMessage>> =>
  Effect.gen(function*() {
    const source = { server, tool: "prompts/get" }
    const out: Array<UserMessage | AssistantMessage> = []
    for (const message of messages) {
      const parts: Array<TextContent | ImageContent> = []
      for (const part of convertContent([message.content as Record<string, unknown>], false).content) {
        if (part.type === "text") parts.push(part)
        else if (message.role === "user") parts.push(...yield* prepareImage(part, source))
        else parts.push({ type: "text", text: leftOut(part.mimeType) })
      }
      const last = out[out.length - 1]
      if (message.role === "user") {
        if (last?.role === "user") out[out.length - 1] = { role: "user", content: [...contentOf(last), ...parts] }
        else out.push({ role: "user", content: parts })
      } else {
        const texts = parts.filter((p): p is TextContent => p.type === "text")
        if (last?.role === "assistant") out[out.length - 1] = { ...last, content: [...last.content, ...texts] }
        else out.push({ role: "assistant", content: texts, stopReason: "stop" })
      }
    }
    return out
  })
