/**
 * The names the model sees for MCP tools: `<server>__<tool>`, within what every provider accepts
 * (`^[a-zA-Z0-9_-]{1,64}$`), so two servers never give the same name.
 *
 * The rule:
 *
 * 1. The **server prefix** is the server's name with every character outside `a-z A-Z 0-9 _ -`
 *    replaced by `_`, runs of `_` collapsed to one, `_` trimmed from both ends, cut to
 *    `MCP_PREFIX_MAX` (24) characters (`mcp` if nothing is left). It never contains `__` and never
 *    ends with `_`, so the first `__` of a tool name is always where the prefix ends: two servers
 *    with different prefixes can never produce the same tool name. Two servers whose prefixes are
 *    equal are a configuration error.
 * 2. The **tool part** is the server's tool name as it is when it already fits
 *    (`a-z A-Z 0-9 _ -`, and the whole name at most 64 characters). Otherwise it is sanitized the
 *    same way, cut, and followed by `_` and six hex digits of the SHA-256 of the original name,
 *    so two tools of one server still get different names.
 *
 * The model calls `everything__echo`; the server is called with `echo`.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"

/**
 * The longest server prefix.
 *
 * @since 0.1.0
 * @category naming
 */
export const MCP_PREFIX_MAX = 24

/**
 * The longest tool name given to the model.
 *
 * @since 0.1.0
 * @category naming
 */
export const MCP_TOOL_NAME_MAX = 64

const valid = /^[a-zA-Z0-9_-]+$/

/**
 * The tool-name prefix of a server (rule 1).
 *
 * @since 0.1.0
 * @category naming
 */
export const serverPrefix = (serverName: string): string => {
  const prefix = serverName.replace(/[^a-zA-Z0-9_-]/g, "_").replace(/_+/g, "_").replace(/^_+|_+$/g, "")
    .slice(0, MCP_PREFIX_MAX).replace(/_+$/, "")
  return prefix.length === 0 ? "mcp" : prefix
}

const shortHash = (text: string): string => createHash("sha256").update(text).digest("hex").slice(0, 6)

/**
 * The name the model sees for tool `toolName` of the server with prefix `prefix` (rule 2).
 *
 * @since 0.1.0
 * @category naming
 */
export const toolNameFor = (prefix: string, toolName: string): string => {
  const room = MCP_TOOL_NAME_MAX - prefix.length - 2
  if (valid.test(toolName) && toolName.length <= room) return `${prefix}__${toolName}`
  const cleaned = toolName.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, Math.max(0, room - 7))
  return `${prefix}__${cleaned}_${shortHash(toolName)}`
}
