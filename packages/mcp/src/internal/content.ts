/**
 * MCP content blocks (of a tool result, a prompt's messages, a resource's contents) as the text and
 * images a model takes: one conversion for every place they come from (the table in `Results.ts`).
 */
import type { ImageContent, TextContent } from "@agentloop/core"

const str = (value: unknown): string | undefined => typeof value === "string" ? value : undefined

export const bytesOfBase64 = (data: string): number => {
  const padding = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0
  return Math.max(0, Math.floor(data.length * 3 / 4) - padding)
}

export const mimeNote = (mimeType: string | undefined): string => mimeType === undefined ? "" : ` (${mimeType})`

/** The content of MCP content blocks, and what of them is kept beside it. */
interface Converted {
  readonly content: Array<TextContent | ImageContent>
  readonly audio: Array<{ mimeType: string; data: string }>
  readonly resourceLinks: Array<Record<string, unknown>>
  readonly resources: Array<{ uri: string; mimeType?: string; blob?: string }>
}

/**
 * MCP content blocks (of a tool result, a prompt's messages, a resource's contents) as text and
 * images. With `keep`, audio and binary data are kept (in the returned arrays, for `details`) and
 * the text says where; without it they are only described, their size given.
 */
export const convertContent = (parts: ReadonlyArray<Record<string, unknown>>, keep: boolean): Converted => {
  const converted: Converted = { content: [], audio: [], resourceLinks: [], resources: [] }
  const { content, audio, resourceLinks, resources } = converted
  const where = (what: string, index: number) => keep ? `details.${what}[${index}]` : "not shown"
  for (const part of parts) {
    const mimeType = str(part["mimeType"])
    switch (part["type"]) {
      case "text":
        content.push({ type: "text", text: str(part["text"]) ?? "" })
        break
      case "image":
        content.push({ type: "image", data: str(part["data"]) ?? "", mimeType: mimeType ?? "image/png" })
        break
      case "audio": {
        const data = str(part["data"]) ?? ""
        content.push({
          type: "text",
          text: `[audio${mimeNote(mimeType)}, ${bytesOfBase64(data)} bytes: ${where("audio", audio.length)}]`
        })
        if (keep) audio.push({ mimeType: mimeType ?? "application/octet-stream", data })
        break
      }
      case "resource_link": {
        const description = str(part["description"])
        content.push({
          type: "text",
          text: `[resource link ${str(part["name"]) ?? ""}: ${str(part["uri"]) ?? ""}${mimeNote(mimeType)}${
            description === undefined ? "" : ` ${description}`
          }]`
        })
        resourceLinks.push(part)
        break
      }
      case "resource": {
        const resource = (part["resource"] ?? {}) as Record<string, unknown>
        const uri = str(resource["uri"]) ?? ""
        const type = str(resource["mimeType"])
        const text = str(resource["text"])
        const blob = str(resource["blob"])
        const index = resources.length
        if (text !== undefined) {
          content.push({ type: "text", text: `[resource ${uri}${mimeNote(type)}]\n${text}` })
          resources.push({ uri, ...(type === undefined ? {} : { mimeType: type }) })
        } else if (blob !== undefined && type?.startsWith("image/") === true) {
          content.push({ type: "image", data: blob, mimeType: type })
          resources.push({ uri, mimeType: type })
        } else {
          const data = blob ?? ""
          content.push({
            type: "text",
            text: `[resource ${uri}${mimeNote(type)}, ${bytesOfBase64(data)} bytes: ${where("resources", index)}]`
          })
          resources.push({ uri, ...(type === undefined ? {} : { mimeType: type }), ...(keep ? { blob: data } : {}) })
        }
        break
      }
      default:
        content.push({ type: "text", text: `[unsupported MCP content: ${JSON.stringify(part["type"])}]` })
    }
  }
  return converted
}
