/**
 * Typed failures of loading MCP servers. Their messages are meant for people: they name the
 * server and what is wrong, never a stack trace, never a header or environment value.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * MCP server configuration that cannot be used: a malformed `mcpServers` section, a `--mcp`
 * command line that does not parse, two servers whose names give the same tool prefix, or a
 * server tool whose name clashes with a local tool.
 *
 * @since 0.1.0
 * @category errors
 */
export class McpConfigError extends Schema.TaggedError<McpConfigError>()("McpConfigError", {
  message: Schema.String
}) {}

/**
 * An MCP server could not be started or connected to, or did not list its tools.
 *
 * @since 0.1.0
 * @category errors
 */
export class McpConnectError extends Schema.TaggedError<McpConnectError>()("McpConnectError", {
  server: Schema.String,
  message: Schema.String
}) {}

/**
 * An HTTP server could not be authorized: it needs a login nobody can give here (no
 * `McpAuthorization`), the user or the authorization server refused, discovery or a token request
 * failed, or the token store could not be written. The message never contains a token or secret.
 *
 * @since 0.1.0
 * @category errors
 */
export class McpAuthError extends Schema.TaggedError<McpAuthError>()("McpAuthError", {
  server: Schema.String,
  message: Schema.String
}) {}

/**
 * A request the library makes of a server for its caller (listing or getting a prompt) failed: the
 * server is unknown, is not available, does not offer what was asked, answered with an error, or
 * the arguments do not fit. The message names the server and what is wrong.
 *
 * @since 0.1.0
 * @category errors
 */
export class McpRequestError extends Schema.TaggedError<McpRequestError>()("McpRequestError", {
  server: Schema.String,
  message: Schema.String
}) {}

/**
 * A server's sampling request was not answered with a message: the user (or the policy) denied it
 * (`denied`), it asks for what this client cannot do (`unsupported`), or the model failed
 * (`model`). The server gets a JSON-RPC error with the message (code -1 for `denied`, as MCP's
 * specification has it; invalid params for `unsupported`; internal error for `model`).
 *
 * @since 0.1.0
 * @category errors
 */
export class McpSamplingError extends Schema.TaggedError<McpSamplingError>()("McpSamplingError", {
  server: Schema.String,
  reason: Schema.Literals(["denied", "unsupported", "model"]),
  message: Schema.String
}) {}

/**
 * An MCP server of agentloop's own (`serveMcpStdio`, `serveMcpHttp`) could not start: its port is
 * taken, or the transport could not be opened.
 *
 * @since 0.1.0
 * @category errors
 */
export class McpServeError extends Schema.TaggedError<McpServeError>()("McpServeError", {
  message: Schema.String
}) {}
