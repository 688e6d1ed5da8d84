/**
 * What an MCP `tools/call` result becomes in the transcript.
 *
 * A tool result's content is text and images (what every provider accepts), so:
 *
 * | MCP result part | content the model sees | kept in `details` |
 * |---|---|---|
 * | `text` | the text | |
 * | `image` | the image | |
 * | `audio` | `[audio <mimeType>, <n> bytes: details.audio[i]]` | `audio[i]`: `{ mimeType, data }` |
 * | `resource_link` | `[resource link <name>: <uri> (<mimeType>) <description>]` | `resourceLinks[i]`: the link |
 * | `resource` with `text` | `[resource <uri> (<mimeType>)]` then the text | `resources[i]`: `{ uri, mimeType }` |
 * | `resource` with an `image/*` `blob` | the image | `resources[i]`: `{ uri, mimeType }` |
 * | `resource`, other `blob` | `[resource <uri> (<mimeType>), <n> bytes: details.resources[i]]` | `resources[i]`+blob |
 * | `structuredContent` | its JSON, only when there is no other content | `structuredContent` |
 * | `isError: true` | an error result | |
 * | `_meta` | | `meta` |
 * | nothing at all | `(no output)` | |
 *
 * `details.mcp` is always `{ server, tool }` (the server's own name for the tool).
 *
 * The other way, for agentloop's own server (`McpServer.ts`), `toMcpResult`: each text part a
 * `text` part, each image an `image` part, `isError` as it is; `details` stay on this side (they
 * may name files of the workspace or hold a sub-agent's whole transcript).
 *
 * @since 0.1.0
 */
import type { ImageContent, TextContent, ToolCall, ToolResultMessage } from "@agentloop/core"
import { limitText } from "@agentloop/tools"
import { Effect } from "effect"
import { convertContent } from "./internal/content.ts"

/**
 * Where something a model sees came from: the server (as configured) and the server's own name of
 * the tool; for what came from no tool, the MCP method it came with (`resources/list`,
 * `resources/read`, `prompts/get`, `sampling/createMessage`), and `uri` for a resource that was read.
 *
 * @since 0.1.0
 * @category models
 */
export interface McpSource {
  readonly server: string
  readonly tool: string
  readonly uri?: string | undefined
}

/**
 * The `details` of a result from an MCP tool.
 *
 * @since 0.1.0
 * @category models
 */
export interface McpResultDetails {
  readonly mcp: McpSource
  readonly structuredContent?: unknown
  readonly audio?: ReadonlyArray<{ readonly mimeType: string; readonly data: string }>
  readonly resourceLinks?: ReadonlyArray<Record<string, unknown>>
  readonly resources?: ReadonlyArray<{ readonly uri: string; readonly mimeType?: string; readonly blob?: string }>
  readonly meta?: unknown
  /** Set when the result's text was longer than its server's `maxOutputChars` and was cut. */
  readonly truncated?: true
  /** The file of the `OutputStore` with the whole text of a cut result (relative to the workspace). */
  readonly fullOutput?: string
}

/**
 * A `tools/call` result as the SDK hands it over (already checked against MCP's result schema).
 *
 * @since 0.1.0
 * @category models
 */
export interface McpCallResult {
  readonly content?: ReadonlyArray<Record<string, unknown>> | undefined
  readonly structuredContent?: unknown
  readonly isError?: boolean | undefined
  readonly _meta?: unknown
  /** The result of servers on the 2024-10-07 protocol. */
  readonly toolResult?: unknown
}

/**
 * The agentloop result for an MCP result (see the table above).
 *
 * @since 0.1.0
 * @category converting
 */
export const toToolResult = (
  call: ToolCall,
  server: string,
  tool: string,
  result: McpCallResult
): ToolResultMessage => {
  const { audio, content, resourceLinks, resources } = convertContent(result.content ?? [], true)
  if (content.length === 0 && result.structuredContent !== undefined) {
    content.push({ type: "text", text: JSON.stringify(result.structuredContent) })
  }
  if (content.length === 0 && result.toolResult !== undefined) {
    content.push({ type: "text", text: JSON.stringify(result.toolResult) })
  }
  if (content.length === 0) content.push({ type: "text", text: "(no output)" })
  const details: McpResultDetails = {
    mcp: { server, tool },
    ...(result.structuredContent === undefined ? {} : { structuredContent: result.structuredContent }),
    ...(audio.length === 0 ? {} : { audio }),
    ...(resourceLinks.length === 0 ? {} : { resourceLinks }),
    ...(resources.length === 0 ? {} : { resources }),
    ...(result._meta === undefined ? {} : { meta: result._meta })
  }
  return {
    role: "toolResult",
    toolCallId: call.id,
    toolName: call.name,
    content,
    details,
    isError: result.isError === true
  }
}

/**
 * What an image block of an MCP result becomes before the model sees it: its parts (the image,
 * the same or resized, with a note; or a text that stands for it). The seam through which
 * `McpToolsOptions.prepareImage` passes every image of a result (an `image` part or an embedded
 * `image/*` resource).
 *
 * @since 0.1.0
 * @category models
 */
export type PrepareImage = (
  image: ImageContent,
  source: McpSource
) => Effect.Effect<ReadonlyArray<TextContent | ImageContent>>

/**
 * `result` within `maxChars` characters of text: when its text parts are longer together, they
 * are joined (one line break between two parts) and cut like `bash` output (`limitText` from
 * `@agentloop/tools`: the first third and the last two thirds, on line breaks, with a notice that
 * names the limit and, when `OutputStore` keeps the whole text, its file and the `offset` to read
 * it with); the images follow that text. Every image goes through `prepareImage` (as it is
 * without one).
 *
 * @since 0.1.0
 * @category converting
 */
export const limitResult = (
  result: ToolResultMessage,
  maxChars: number,
  prepareImage?: PrepareImage
): Effect.Effect<ToolResultMessage> =>
  Effect.gen(function*() {
    const source = (result.details as McpResultDetails | undefined)?.mcp ?? { server: "", tool: result.toolName }
    const content: Array<TextContent | ImageContent> = []
    for (const part of result.content) {
      if (part.type === "image" && prepareImage !== undefined) content.push(...yield* prepareImage(part, source))
      else content.push(part)
    }
    const texts = content.filter((part): part is TextContent => part.type === "text")
    const chars = texts.reduce((sum, part) => sum + part.text.length, Math.max(0, texts.length - 1))
    if (chars <= maxChars) return { ...result, content }
    const head = Math.floor(maxChars / 3)
    const limited = yield* limitText(result.toolName, texts.map((part) => part.text).join("\n"), {
      head,
      tail: maxChars - head
    })
    return {
      ...result,
      content: [{ type: "text", text: limited.text }, ...content.filter((part) => part.type === "image")],
      details: {
        ...(result.details as McpResultDetails),
        truncated: true,
        ...(limited.fullOutput === undefined ? {} : { fullOutput: limited.fullOutput })
      }
    }
  })

/**
 * The MCP `tools/call` result for an agentloop tool result: its text and image parts, and whether
 * it is an error (see the table above for the other way).
 *
 * @since 0.1.0
 * @category converting
 */
export const toMcpResult = (result: ToolResultMessage): {
  content: Array<
    { type: "text"; text: string } | { type: "image"; data: string; mimeType: string }
  >
  isError: boolean
} => ({
  content: result.content.map((part) =>
    part.type === "text" ?
      { type: "text" as const, text: part.text } :
      { type: "image" as const, data: part.data, mimeType: part.mimeType }
  ),
  isError: result.isError
})
