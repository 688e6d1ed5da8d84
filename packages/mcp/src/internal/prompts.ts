/**
 * A server's prompts: their listing as `McpPrompt`s (`prompts/list`, every page), the check of the
 * arguments before a `prompts/get`, and its messages as agentloop messages (`McpTools.prompts` and
 * `McpTools.getPrompt`).
 */
import type { AssistantMessage, ImageContent, TextContent, UserMessage } from "@agentloop/core"
import type { Prompt, PromptMessage } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import { McpRequestError } from "../Errors.ts"
import type { McpToolsShape } from "../McpTools.ts"
import type { McpPrompt } from "../Prompts.ts"
import type { PrepareImage } from "../Results.ts"
import { secretsOfServer, serverNamed } from "./connection.ts"
import type { Connections, ServerState } from "./connection.ts"
import { convertContent } from "./content.ts"
import { request, requestServer } from "./requests.ts"
import { redactDeep } from "./secrets.ts"

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

/** `prompts` and `getPrompt` of `McpTools`, asked of the servers. */
export const makeServerPrompts = (
  states: ReadonlyArray<ServerState>,
  connections: Connections,
  prepareImage: PrepareImage
): Pick<McpToolsShape, "prompts" | "getPrompt"> => {
  /** Every prompt of a server (all pages); none from a server that does not offer prompts. */
  const promptsOf = (server: ServerState): Effect.Effect<Array<McpPrompt>, McpRequestError> =>
    requestServer(connections, server, "prompts/list result", (client) =>
      Effect.gen(function*() {
        if (client.getServerCapabilities()?.prompts === undefined) return []
        const all: Array<McpPrompt> = []
        let cursor: string | undefined
        do {
          const params = cursor === undefined ? undefined : { cursor }
          const page = yield* request((sdk) => client.listPrompts(params, sdk))
          all.push(...page.prompts.map((prompt) => promptOf(server.config.name, prompt)))
          cursor = page.nextCursor
        } while (cursor !== undefined)
        return all
      }))

  const prompts = (name?: string): Effect.Effect<ReadonlyArray<McpPrompt>, McpRequestError> =>
    name === undefined ?
      Effect.map(Effect.forEach(states, promptsOf, { concurrency: "unbounded" }), (lists) => lists.flat()) :
      Effect.flatMap(serverNamed(states, name), promptsOf)

  const getPrompt = Effect.fnUntraced(function*(
    serverName: string,
    name: string,
    args: Readonly<Record<string, string>> = {}
  ): Effect.fn.Return<ReadonlyArray<UserMessage | AssistantMessage>, McpRequestError> {
    const server = yield* serverNamed(states, serverName)
    const listed = yield* promptsOf(server)
    if (server.capabilities?.prompts === undefined) {
      return yield* new McpRequestError({
        server: server.config.name,
        message: `MCP server "${server.config.name}" offers no prompts.`
      })
    }
    const prompt = listed.find((p) => p.name === name)
    if (prompt === undefined) {
      return yield* new McpRequestError({
        server: server.config.name,
        message: `MCP server "${server.config.name}" has no prompt "${name}" (its prompts: ${
          listed.map((p) => p.name).join(", ") || "none"
        }).`
      })
    }
    const problem = checkPromptArguments(prompt, args)
    if (problem !== undefined) return yield* new McpRequestError({ server: server.config.name, message: problem })
    const result = yield* requestServer(
      connections,
      server,
      "prompts/get result",
      (client) => request((sdk) => client.getPrompt({ name, arguments: { ...args } }, sdk))
    )
    const secrets = server.oauth === undefined ? [] : secretsOfServer(server)
    return yield* promptMessages(
      server.config.name,
      secrets.length === 0 ? result.messages : redactDeep(result.messages, secrets),
      prepareImage
    )
  })

  return { prompts, getPrompt }
}
