/**
 * Prompts: messages a server has ready, with arguments to fill in (MCP `prompts/list` and
 * `prompts/get`), for a user to choose, as a CLI's `/server:prompt args`. `listMcpPrompts` lists
 * them; `getMcpPrompt` gets one as agentloop messages, to send as the next turn:
 *
 * ```ts
 * import { Effect } from "effect"
 * import { getMcpPrompt, listMcpPrompts } from "@agentloop/mcp"
 *
 * export const weather = Effect.gen(function*() {
 *   const prompts = yield* listMcpPrompts("everything") // name, description, arguments of each
 *   yield* Effect.log(prompts.map((p) => p.name).join(", "))
 *   return yield* getMcpPrompt("everything", "args-prompt", { city: "Lisbon" })
 * })
 * ```
 *
 * A prompt's messages become user and assistant messages (next ones of the same role joined): text
 * as it is, images fitted as `read` sends them (in an assistant message, which takes only text, a
 * line says one was left out), embedded resources as text (`[resource <uri> (<mimeType>)]` then
 * their text; binary ones described), audio and resource links described.
 *
 * @since 0.1.0
 */
import type { AssistantMessage, UserMessage } from "@agentloop/core"
import { Effect } from "effect"
import type { McpRequestError } from "./Errors.ts"
import { McpTools } from "./McpTools.ts"

/**
 * One argument of a prompt.
 *
 * @since 0.1.0
 * @category models
 */
export interface McpPromptArgument {
  readonly name: string
  readonly description?: string | undefined
  readonly required: boolean
}

/**
 * One prompt of a server.
 *
 * @since 0.1.0
 * @category models
 */
export interface McpPrompt {
  /** The server's name (as configured). */
  readonly server: string
  readonly name: string
  readonly title?: string | undefined
  readonly description?: string | undefined
  readonly arguments: ReadonlyArray<McpPromptArgument>
}

/**
 * The prompts of a server (by its configured name, or its tool prefix), or of every server that
 * offers prompts. A server that offers none has none.
 *
 * @since 0.1.0
 * @category constructors
 */
export const listMcpPrompts = (server?: string): Effect.Effect<ReadonlyArray<McpPrompt>, McpRequestError, McpTools> =>
  Effect.gen(function*() {
    return yield* (yield* McpTools).prompts(server)
  })

/**
 * A server's prompt with `args` filled in, as messages. Fails with an `McpRequestError` for an
 * unknown server or prompt, a missing required argument or one the prompt does not take, or the
 * server's error.
 *
 * @since 0.1.0
 * @category constructors
 */
export const getMcpPrompt = (
  server: string,
  name: string,
  args: Readonly<Record<string, string>> = {}
): Effect.Effect<ReadonlyArray<UserMessage | AssistantMessage>, McpRequestError, McpTools> =>
  Effect.gen(function*() {
    return yield* (yield* McpTools).getPrompt(server, name, args)
  })
