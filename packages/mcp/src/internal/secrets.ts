/**
 * The secrets of a server's config (environment values, headers, OAuth client secrets, credentials
 * and query of its URL), and text or values with them replaced by `<redacted>`: no message, result
 * or event of this package shows one.
 */
import type { McpServerConfig } from "../Config.ts"

/** The values of a server's config that must never appear in a message. */
export const secretsOf = (config: McpServerConfig): Array<string> => {
  if (config.transport === "stdio") return Object.values(config.env ?? {}).filter((v) => v.length >= 4)
  const secrets = Object.values(config.headers ?? {})
  if (config.oauth !== undefined && config.oauth !== false) {
    if (config.oauth.clientSecret !== undefined) secrets.push(config.oauth.clientSecret)
    if (config.oauth.privateKey !== undefined) secrets.push(config.oauth.privateKey)
  }
  if (URL.canParse(config.url)) {
    const parsed = new URL(config.url)
    secrets.push(parsed.username, parsed.password)
    secrets.push(decodeURIComponent(parsed.username), decodeURIComponent(parsed.password))
    for (const value of parsed.searchParams.values()) secrets.push(value)
    if (parsed.search.length > 1) secrets.push(parsed.search.slice(1))
  }
  return secrets.filter((v) => v.length >= 2)
}

/** `text` with every secret replaced by `<redacted>` (the longest first, so none is left in part). */
export const redact = (text: string, secrets: ReadonlyArray<string>): string =>
  [...secrets].sort((a, b) => b.length - a.length).reduce((t, secret) => t.split(secret).join("<redacted>"), text)

/** A value with every secret in its strings (not in image data) replaced by `<redacted>`. */
export const redactDeep = <A>(value: A, secrets: ReadonlyArray<string>): A => {
  const walk = (v: unknown, key: string | undefined): unknown => {
    if (typeof v === "string") return key === "data" || key === "blob" ? v : redact(v, secrets)
    if (Array.isArray(v)) return v.map((item) => walk(item, undefined))
    if (typeof v === "object" && v !== null) {
      return Object.fromEntries(Object.entries(v).map(([k, item]) => [k, walk(item, k)]))
    }
    return v
  }
  return walk(value, undefined) as A
}
