/**
 * The servers' tools as an `Executor`: each server tool offered as `<server>__<tool>` (and the
 * resource tools of a server that has resources), its arguments checked before anything is sent,
 * the call sent to its server with its progress reported, and the answer (or what its failure
 * means) made a result, cut to the server's `maxOutputChars`. The definitions are built again
 * after a list change, when the loop next reads them (a turn boundary).
 */
import { errorResult } from "@agentloop/core"
import type {
  ExecutorShape,
  Tool,
  ToolCall,
  ToolContext,
  ToolDefinition,
  ToolOutput,
  ToolResultMessage
} from "@agentloop/core"
import { OutputStore } from "@agentloop/tools"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { Tool as SdkTool } from "@modelcontextprotocol/sdk/types.js"
import { Cause, Deferred, Effect, Exit, Fiber, Queue, Schema, Stream } from "effect"
import { MCP_MAX_OUTPUT_CHARS } from "../Config.ts"
import { toolNameFor } from "../Naming.ts"
import { limitResult, toToolResult } from "../Results.ts"
import type { PrepareImage } from "../Results.ts"
import { secretsOfServer } from "./connection.ts"
import type { Connections, ServerState } from "./connection.ts"
import { classify, request } from "./requests.ts"
import { resourceEntries } from "./resources.ts"
import { redactDeep } from "./secrets.ts"
import { argumentCheck } from "./validate.ts"
import type { ArgumentCheck } from "./validate.ts"

/** `MCP_PROGRESS_BUFFER` of `McpTools.ts`. */
export const PROGRESS_BUFFER = 64

/** One tool offered to the model, and how a call of it is sent. */
export interface Entry {
  readonly name: string
  readonly server: ServerState
  /** `details.mcp.tool` of its results: the server's name of the tool, or the MCP method of a resource tool. */
  readonly tool: string
  /** What a valid answer is, for the error when it is not one. */
  readonly answer: string
  readonly definition: ToolDefinition
  readonly check: ArgumentCheck | undefined
  /** Sends the call and converts the answer (before the caps); fails with what the SDK threw. */
  readonly send: (client: Client, call: ToolCall, onprogress: (p: unknown) => void) => Effect.Effect<
    ToolResultMessage,
    unknown
  >
}

interface Snapshot {
  readonly definitions: ReadonlyArray<ToolDefinition>
  readonly byName: ReadonlyMap<string, Entry>
}

const toolEntry = (server: ServerState, tool: SdkTool, name: string, trustAnnotations: boolean): Entry => {
  const parameters = tool.inputSchema as Record<string, unknown>
  const readOnly = trustAnnotations && tool.annotations?.readOnlyHint === true
  return {
    name,
    server,
    tool: tool.name,
    answer: "MCP tool result",
    definition: {
      name,
      description: tool.description ?? tool.title ?? "",
      parameters,
      ...(readOnly ? { readOnly: true } : {}),
      ...(server.config.timeoutMs === undefined ? {} : { timeoutMs: server.config.timeoutMs })
    },
    check: argumentCheck(parameters),
    send: (client, call, onprogress) =>
      Effect.map(
        request((sdk) =>
          client.callTool({ name: tool.name, arguments: call.arguments }, undefined, {
            ...sdk,
            onprogress
          })
        ),
        (result) => toToolResult(call, server.config.name, tool.name, result)
      )
  }
}

/** The tools of the servers as they were last listed, built again after a change. */
export interface Catalog {
  /** The tools, taking a fetched list change into use: called at turn boundaries only. */
  readonly current: () => Snapshot
  /** The tools in use (a fetched change is not taken into use: a batch's calls see the tools it was asked with). */
  readonly inUse: () => Snapshot
  /** A server's tool list or capabilities are new: the next `current` builds the tools again. */
  readonly changed: () => void
}

export const makeCatalog = (states: ReadonlyArray<ServerState>, trustAnnotations: boolean): Catalog => {
  const build = (): Snapshot => {
    const byName = new Map<string, Entry>()
    for (const server of states) {
      for (const tool of server.listed) {
        // a tool that can only run as an MCP task (call now, fetch the result later) is not offered
        if (tool.execution?.taskSupport === "required") continue
        const name = toolNameFor(server.prefix, tool.name)
        if (byName.has(name)) continue // a name the server itself repeats: the first one wins
        byName.set(name, toolEntry(server, tool, name, trustAnnotations))
      }
      // the resource tools, unless the server has tools of those names itself
      if (server.capabilities?.resources !== undefined) {
        for (const entry of resourceEntries(server)) if (!byName.has(entry.name)) byName.set(entry.name, entry)
      }
    }
    return { definitions: [...byName.values()].map((e) => e.definition), byName }
  }
  let snapshot: Snapshot = { definitions: [], byName: new Map() }
  let changed = false
  return {
    current: () => {
      if (changed) {
        changed = false
        snapshot = build()
      }
      return snapshot
    },
    inUse: () => snapshot,
    changed: () => {
      changed = true
    }
  }
}

/** What a `Tool` from an MCP server decodes its arguments with: any object (ajv checks them). */
const Arguments = Schema.Record(Schema.String, Schema.Unknown)

const toOutput = (result: ToolResultMessage): ToolOutput => ({
  content: result.content,
  ...(result.details === undefined ? {} : { details: result.details }),
  isError: result.isError
})

export interface ServerTools {
  readonly executor: ExecutorShape
  /** The current tools as core `Tool`s (a snapshot). */
  readonly tools: () => Array<Tool<Record<string, unknown>>>
}

/** The executor of the catalog's tools; cut results are kept whole in the `OutputStore` of the context. */
export const makeServerTools = Effect.fnUntraced(function*(
  catalog: Catalog,
  connections: Connections,
  prepareImage: PrepareImage
): Effect.fn.Return<ServerTools> {
  // where cut results are kept whole: the one in the layer's context (none by default)
  const store = yield* OutputStore

  const failure = (call: ToolCall, entry: Entry, text: string, extra: Record<string, unknown> = {}) =>
    errorResult(call, text, { mcp: { server: entry.server.config.name, tool: entry.tool }, ...extra })

  const callServer = (
    entry: Entry,
    call: ToolCall,
    context: ToolContext,
    retried = false
  ): Effect.Effect<ToolResultMessage> =>
    Effect.gen(function*() {
      const server = entry.server
      const name = server.config.name
      const connected = yield* Effect.result(connections.connect(server))
      if (connected._tag === "Failure") {
        return failure(call, entry, `MCP server "${name}" is not available: ${connected.failure.message}`, {
          unavailable: true
        })
      }
      const client = connected.success
      const progress = yield* Queue.sliding<unknown, Cause.Done>(PROGRESS_BUFFER)
      const pump = yield* Effect.forkChild(
        Stream.runForEach(Stream.fromQueue(progress), (p) => context.reportProgress(p))
      )
      const exit = yield* Effect.exit(entry.send(client, call, (p) => {
        Queue.offerUnsafe(progress, p)
      }))
      // the notifications that came before the result are reported before it
      yield* Queue.end(progress)
      yield* Fiber.join(pump)
      if (Exit.isFailure(exit)) {
        const error = exit.cause.reasons.find((r) => r._tag === "Fail")?.error
        const outcome = yield* classify(connections, server, client, error, entry.answer, retried)
        if ("retry" in outcome) return yield* callServer(entry, call, context, true)
        return failure(call, entry, outcome.text, outcome.flag)
      }
      // a tool-list change announced before this result is fetched before the result is handed back
      const refreshing = server.refreshing
      if (refreshing !== undefined) yield* Deferred.await(refreshing)
      // a server may echo the token it was sent: it is not handed on (transcript, events, files)
      const secrets = server.oauth === undefined ? [] : secretsOfServer(server)
      const result = exit.value
      return yield* limitResult(
        secrets.length === 0 ? result : redactDeep(result, secrets),
        server.config.maxOutputChars ?? MCP_MAX_OUTPUT_CHARS,
        prepareImage
      ).pipe(Effect.provideService(OutputStore, store))
    })

  const execute = (call: ToolCall, context: ToolContext): Effect.Effect<ToolResultMessage> =>
    Effect.suspend(() => {
      const snapshot = catalog.inUse()
      const entry = snapshot.byName.get(call.name)
      if (entry === undefined) {
        const available = snapshot.definitions.map((d) => d.name).join(", ")
        return Effect.succeed(errorResult(
          call,
          `Unknown tool "${call.name}". Available tools: ${available.length === 0 ? "(none)" : available}.`,
          { unknownTool: true }
        ))
      }
      const problems = entry.check?.(call.arguments)
      if (problems !== undefined) {
        return Effect.succeed(failure(call, entry, `Invalid arguments for tool "${call.name}": ${problems.text}`, {
          invalidArguments: true,
          fields: problems.fields
        }))
      }
      return callServer(entry, call, context)
    })

  const asTool = (entry: Entry): Tool<Record<string, unknown>> => ({
    name: entry.name,
    description: entry.definition.description,
    parameters: Arguments,
    definition: entry.definition,
    execute: (args, context) =>
      Effect.map(
        execute({ type: "toolCall", id: context.toolCallId, name: entry.name, arguments: args }, context),
        toOutput
      )
  })

  return {
    executor: {
      get definitions() {
        return catalog.current().definitions
      },
      execute
    },
    tools: () => [...catalog.current().byName.values()].map(asTool)
  }
})
