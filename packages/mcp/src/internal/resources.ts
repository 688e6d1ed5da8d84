/**
 * The two tools through which a model reads a server's resources: `<server>__list_resources` (the
 * resources, then the resource templates, a page at a time) and `<server>__read_resource` (one
 * resource by its URI). Their definitions, the requests they send (`resourceEntries`), and what
 * their answers become (the same conversion as embedded resources in tool results, binary data
 * described and never kept).
 */
import { errorResult } from "@agentloop/core"
import type { ToolCall, ToolDefinition, ToolResultMessage } from "@agentloop/core"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import { toolNameFor } from "../Naming.ts"
import type { McpResultDetails } from "../Results.ts"
import type { ServerState } from "./connection.ts"
import { convertContent, mimeNote } from "./content.ts"
import { request } from "./requests.ts"
import type { Entry } from "./tools.ts"
import { argumentCheck } from "./validate.ts"

/** The tool part of the names of the resource tools (`toolNameFor(prefix, …)`). */
export const LIST_RESOURCES = "list_resources"
export const READ_RESOURCE = "read_resource"

/** One resource of a listing, as the SDK hands it over. */
export interface ListedResource {
  readonly uri: string
  readonly name: string
  readonly title?: string | undefined
  readonly description?: string | undefined
  readonly mimeType?: string | undefined
  readonly size?: number | undefined
}

/** One resource template of a listing. */
export interface ListedTemplate {
  readonly uriTemplate: string
  readonly name: string
  readonly title?: string | undefined
  readonly description?: string | undefined
  readonly mimeType?: string | undefined
}

/** One page of the listing: resources (then templates, once the resources are all listed). */
export interface ResourcePage {
  readonly resources: ReadonlyArray<ListedResource>
  readonly templates: ReadonlyArray<ListedTemplate>
  /** This tool's cursor for the next page (see `parseCursor`). */
  readonly nextCursor: string | undefined
}

/**
 * Where a page of the listing starts: the resources' pages come first (`r:<server cursor>`), then
 * the templates' (`t:<server cursor>`, `t:` for the first); no cursor is the first page.
 */
export type PageStart =
  | { readonly list: "resources"; readonly cursor: string | undefined }
  | { readonly list: "templates"; readonly cursor: string | undefined }

export const parseCursor = (cursor: unknown): PageStart | undefined => {
  if (cursor === undefined) return { list: "resources", cursor: undefined }
  if (typeof cursor !== "string") return undefined
  if (cursor.startsWith("r:") && cursor.length > 2) return { list: "resources", cursor: cursor.slice(2) }
  if (cursor.startsWith("t:")) return { list: "templates", cursor: cursor.length > 2 ? cursor.slice(2) : undefined }
  return undefined
}

export const resourceCursor = (list: "resources" | "templates", cursor: string | undefined): string =>
  `${list === "resources" ? "r" : "t"}:${cursor ?? ""}`

export const listResourcesDefinition = (
  name: string,
  server: string,
  readName: string,
  timeoutMs: number | undefined
): ToolDefinition => ({
  name,
  description: `List the resources (files, documents, data) of MCP server "${server}" and its resource templates ` +
    `(URIs with {placeholders} to fill in). Read one with ${readName}. A long list comes in pages: pass the ` +
    "cursor a page ends with to get the next.",
  parameters: {
    type: "object",
    properties: { cursor: { type: "string", description: "The cursor the previous page ended with" } },
    additionalProperties: false
  },
  readOnly: true,
  ...(timeoutMs === undefined ? {} : { timeoutMs })
})

export const readResourceDefinition = (
  name: string,
  server: string,
  listName: string,
  timeoutMs: number | undefined
): ToolDefinition => ({
  name,
  description: `Read a resource of MCP server "${server}" by its URI (as ${listName} lists it, or a resource ` +
    "template's with its {placeholders} filled in).",
  parameters: {
    type: "object",
    properties: { uri: { type: "string", description: "The resource's URI" } },
    required: ["uri"],
    additionalProperties: false
  },
  readOnly: true,
  ...(timeoutMs === undefined ? {} : { timeoutMs })
})

/** A server's text on one line (a description may hold line breaks). */
const oneLine = (text: string): string => text.replace(/\s+/g, " ").trim()

const about = (
  entry: { readonly name: string; readonly title?: string | undefined; readonly description?: string | undefined },
  mimeType: string | undefined,
  size?: number | undefined
): string => {
  const label = oneLine(entry.title ?? entry.name)
  const facts = [
    ...(mimeType === undefined ? [] : [mimeType]),
    ...(size === undefined ? [] : [`${size.toLocaleString("en-US")} bytes`])
  ]
  const description = entry.description === undefined ? "" : ` - ${oneLine(entry.description)}`
  return `${label}${facts.length === 0 ? "" : ` (${facts.join(", ")})`}${description}`
}

const succeeded = (call: ToolCall, text: string, details: unknown): ToolResultMessage => ({
  role: "toolResult",
  toolCallId: call.id,
  toolName: call.name,
  content: [{ type: "text", text }],
  details,
  isError: false
})

/** A page of the listing as a result: one line per resource and template, and how to go on. */
export const listResult = (call: ToolCall, server: string, page: ResourcePage): ToolResultMessage => {
  const lines: Array<string> = []
  if (page.resources.length > 0) {
    lines.push(`Resources of MCP server "${server}":`)
    for (const r of page.resources) lines.push(`- ${r.uri}: ${about(r, r.mimeType, r.size)}`)
  }
  if (page.templates.length > 0) {
    lines.push(`Resource templates of MCP server "${server}" (fill in the {placeholders} to read one):`)
    for (const t of page.templates) lines.push(`- ${t.uriTemplate}: ${about(t, t.mimeType)}`)
  }
  if (lines.length === 0) {
    lines.push(page.nextCursor === undefined ? `MCP server "${server}" lists no resources.` : "(this page is empty)")
  }
  if (page.nextCursor !== undefined) lines.push(`More: call ${call.name} with cursor "${page.nextCursor}".`)
  return succeeded(call, lines.join("\n"), {
    mcp: { server, tool: "resources/list" },
    listed: { resources: page.resources, resourceTemplates: page.templates },
    ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor })
  })
}

/** A `resources/read` result's contents as a result (text, images; binary data described). */
export const readResult = (
  call: ToolCall,
  server: string,
  uri: string,
  contents: ReadonlyArray<Record<string, unknown>>
): ToolResultMessage => {
  const converted = convertContent(contents.map((resource) => ({ type: "resource", resource })), false)
  const details: McpResultDetails = {
    mcp: { server, tool: "resources/read", uri },
    resources: converted.resources
  }
  return {
    role: "toolResult",
    toolCallId: call.id,
    toolName: call.name,
    content: converted.content.length === 0 ?
      [{ type: "text", text: `[resource ${uri}${mimeNote(undefined)} has no contents]` }] :
      converted.content,
    details,
    isError: false
  }
}

/** The first page of templates (none from a server that does not list them). */
const templatesPage = (client: Client, cursor: string | undefined) =>
  request((sdk) => client.listResourceTemplates(cursor === undefined ? undefined : { cursor }, sdk)).pipe(
    Effect.catchIf(
      (error) => error instanceof McpError && error.code === ErrorCode.MethodNotFound,
      () => Effect.succeed({ resourceTemplates: [] as Array<ListedTemplate>, nextCursor: undefined })
    )
  )

/** `<server>__list_resources` and `<server>__read_resource`, named by `toolNameFor`. */
export const resourceEntries = (server: ServerState): Array<Entry> => {
  const listName = toolNameFor(server.prefix, LIST_RESOURCES)
  const readName = toolNameFor(server.prefix, READ_RESOURCE)
  const serverName = server.config.name
  const timeoutMs = server.config.timeoutMs
  const list = listResourcesDefinition(listName, serverName, readName, timeoutMs)
  const read = readResourceDefinition(readName, serverName, listName, timeoutMs)
  return [{
    name: listName,
    server,
    tool: "resources/list",
    answer: "resources/list result",
    definition: list,
    check: argumentCheck(list.parameters),
    send: (client, call) =>
      Effect.gen(function*() {
        const start = parseCursor(call.arguments["cursor"])
        if (start === undefined) {
          return errorResult(
            call,
            `Invalid cursor for tool "${call.name}": pass the cursor a page ended with (none for the first page).`,
            { mcp: { server: serverName, tool: "resources/list" }, invalidArguments: true }
          )
        }
        if (start.list === "resources") {
          const cursor = start.cursor
          const page = yield* request((sdk) => client.listResources(cursor === undefined ? undefined : { cursor }, sdk))
          if (page.nextCursor !== undefined) {
            return listResult(call, serverName, {
              resources: page.resources,
              templates: [],
              nextCursor: resourceCursor("resources", page.nextCursor)
            })
          }
          const templates = yield* templatesPage(client, undefined)
          return listResult(call, serverName, {
            resources: page.resources,
            templates: templates.resourceTemplates,
            nextCursor: templates.nextCursor === undefined
              ? undefined
              : resourceCursor("templates", templates.nextCursor)
          })
        }
        const templates = yield* templatesPage(client, start.cursor)
        return listResult(call, serverName, {
          resources: [],
          templates: templates.resourceTemplates,
          nextCursor: templates.nextCursor === undefined
            ? undefined
            : resourceCursor("templates", templates.nextCursor)
        })
      })
  }, {
    name: readName,
    server,
    tool: "resources/read",
    answer: "resources/read result",
    definition: read,
    check: argumentCheck(read.parameters),
    send: (client, call) => {
      const uri = String(call.arguments["uri"])
      return Effect.map(
        request((sdk) => client.readResource({ uri }, sdk)),
        (result) => readResult(call, serverName, uri, result.contents)
      )
    }
  }]
}
