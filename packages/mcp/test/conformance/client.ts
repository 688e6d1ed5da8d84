/**
 * The conformance suite's client under test: a small program that uses `@agentloop/mcp` the way a
 * user's program does. The suite starts a mock server per scenario and runs
 * `node client.ts <server url>` with the scenario's name in `MCP_CONFORMANCE_SCENARIO` (and, for
 * some, data such as pre-registered credentials in `MCP_CONFORMANCE_CONTEXT`); it then checks the
 * traffic.
 *
 * What it does, for every scenario: load the server with `mcpToolsLayer` over Streamable HTTP, list
 * its tools, and call each one through the `Executor` with arguments made from the tool's schema
 * (what a model would send). Exits 0 when the server was loaded and every call reached it.
 */
import { Executor } from "@agentloop/core"
import type { ToolCall, ToolContext, ToolDefinition } from "@agentloop/core"
import {
  acceptDefaults,
  elicitationLayer,
  headlessAuthorizationLayer,
  mcpToolsLayer,
  memoryTokenStoreLayer
} from "@agentloop/mcp"
import type { McpOAuthConfig, McpServerConfig } from "@agentloop/mcp"
import { NodeServices } from "@effect/platform-node"
import { Effect, Layer } from "effect"

const url = process.argv[2]
const scenario = process.env["MCP_CONFORMANCE_SCENARIO"] ?? ""
if (url === undefined) {
  process.stderr.write("usage: client.ts <server url>\n")
  process.exit(2)
}

/** An example value for a JSON Schema: its default, its first enum value, or one of its type. */
const exampleOf = (schema: Record<string, unknown>): unknown => {
  if ("default" in schema) return schema["default"]
  if (Array.isArray(schema["enum"])) return schema["enum"][0]
  switch (schema["type"]) {
    case "number":
    case "integer":
      return 1
    case "boolean":
      return true
    case "array":
      return []
    case "object":
      return argumentsFor(schema)
    default:
      return "x"
  }
}

/** Arguments with every required property of an object schema. */
const argumentsFor = (schema: Record<string, unknown>): Record<string, unknown> => {
  const properties = (schema["properties"] ?? {}) as Record<string, Record<string, unknown>>
  const required = Array.isArray(schema["required"]) ? (schema["required"] as Array<string>) : []
  return Object.fromEntries(required.map((name) => [name, exampleOf(properties[name] ?? {})]))
}

/**
 * The client ID metadata document URL the suite expects (it does not resolve; the mock
 * authorization server accepts it as it is).
 */
const CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"

/**
 * What some scenarios give in `MCP_CONFORMANCE_CONTEXT`: credentials registered beforehand, as a
 * user would write them in the server's `oauth` config.
 */
const oauthOf = (context: Record<string, unknown>): McpOAuthConfig => {
  const text = (key: string) => (typeof context[key] === "string" ? context[key] : undefined)
  const clientId = text("client_id")
  if (clientId === undefined) return {}
  const secret = text("client_secret")
  const privateKey = text("private_key_pem")
  const machine = scenario.startsWith("auth/client-credentials")
  return {
    clientId,
    ...(secret === undefined ? {} : { clientSecret: secret }),
    ...(machine ? { grant: "client_credentials" as const } : {}),
    ...(privateKey === undefined ? {} : { privateKey }),
    ...(text("valid_jwt") === undefined ? {} : { workloadIdentity: { token: text("valid_jwt")! } }),
    ...(text("idp_id_token") === undefined || text("idp_token_endpoint") === undefined ? {} : {
      crossAppAccess: {
        tokenEndpoint: text("idp_token_endpoint")!,
        idToken: text("idp_id_token")!,
        ...(text("idp_client_id") === undefined ? {} : { clientId: text("idp_client_id") })
      }
    }),
    ...(text("signing_algorithm") === undefined ? {} : { signingAlgorithm: text("signing_algorithm") })
  }
}

const context = JSON.parse(process.env["MCP_CONFORMANCE_CONTEXT"] ?? "{}") as Record<string, unknown>
const server: McpServerConfig = { name: "conformance", transport: "http", url, oauth: oauthOf(context) }

/**
 * The arguments of a call. One scenario asks for more than a model would send:
 * `json-schema-2020-12-preservation` wants the input schema we were given for
 * `json_schema_2020_12_tool` sent back to `json_schema_echo`, to see what survived.
 */
const argumentsOf = (definitions: ReadonlyArray<ToolDefinition>, definition: ToolDefinition) => {
  if (definition.name.endsWith("__json_schema_echo")) {
    const focal = definitions.find((d) => d.name.endsWith("__json_schema_2020_12_tool"))
    if (focal !== undefined) return { schema: focal.parameters }
  }
  return argumentsFor(definition.parameters)
}

const program = Effect.gen(function*() {
  const executor = yield* Executor
  let failures = 0
  const definitions = executor.definitions
  for (const [i, definition] of definitions.entries()) {
    const call: ToolCall = {
      type: "toolCall",
      id: `call-${i}`,
      name: definition.name,
      arguments: argumentsOf(definitions, definition)
    }
    const context: ToolContext = {
      signal: new AbortController().signal,
      reportProgress: () => Effect.void,
      toolCallId: call.id,
      toolName: call.name
    }
    const result = yield* executor.execute(call, context)
    const text = result.content.map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join("\n")
    process.stdout.write(`${call.name} -> ${result.isError ? "error" : "ok"}: ${text}\n`)
    // an error result of the tool itself (or arguments refused) is an answer; a call that could
    // not reach the server, or was not authorized, is a failure of this client
    const details = (result.details ?? {}) as Record<string, unknown>
    if (details["disconnected"] === true || details["unavailable"] === true || details["unauthorized"] === true) {
      failures++
    }
  }
  return failures
})

// a user who accepts what the server proposes (elicitation-sep1034-client-defaults)
const ElicitationLive = elicitationLayer((request) => Effect.succeed(acceptDefaults(request)))

// the mock authorization servers approve at once: follow their redirects without a browser; the
// tokens live as long as this process
const layer = mcpToolsLayer([server], { clientName: "agentloop-conformance", clientMetadataUrl: CLIENT_METADATA_URL })
  .pipe(
    Layer.provide(
      Layer.mergeAll(NodeServices.layer, ElicitationLive, headlessAuthorizationLayer, memoryTokenStoreLayer())
    )
  )

Effect.runPromiseExit(Effect.provide(program, layer)).then((exit) => {
  if (exit._tag === "Failure") process.stderr.write(`scenario ${scenario}: ${String(exit.cause)}\n`)
  // exitCode, not exit(): what was written to a pipe is flushed first
  process.exitCode = exit._tag === "Success" && exit.value === 0 ? 0 : 1
})
