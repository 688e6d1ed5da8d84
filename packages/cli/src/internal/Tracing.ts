/**
 * Where `run` and `chat` send their spans: `--otlp URL`, else OpenTelemetry's own environment
 * (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT`, the `..._HEADERS`), exported
 * with core's `otlpTracingLayer`. Imported only when one of them is set (`wantsTracing` in Agent.ts
 * decides), so a command without tracing never loads the exporter.
 */
import { otlpTracingLayer } from "@agentloop/core"
import { Effect } from "effect"
import { CliError } from "../CliError.ts"

/** Where spans go and the headers that go with them (never printed: they may hold an API key). */
export interface OtlpTarget {
  readonly url: string
  readonly headers: Readonly<Record<string, string>> | undefined
}

const set = (value: string | undefined): string | undefined =>
  value === undefined || value.trim() === "" ? undefined : value.trim()

/** A base URL as OTLP's environment means it: traces go to `<base>/v1/traces`. */
const tracesUnder = (base: URL): string => {
  const path = base.pathname.endsWith("/") ? base.pathname : `${base.pathname}/`
  return new URL(`${path}v1/traces${base.search}`, base).href
}

const parseUrl = (text: string, from: string): URL | CliError => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return new CliError(`${from} is not a URL (e.g. http://127.0.0.1:4318)`)
  }
  return url.protocol === "http:" || url.protocol === "https:" ?
    url :
    new CliError(`${from} must be an http:// or https:// URL`)
}

/**
 * `OTEL_EXPORTER_OTLP_HEADERS`' form: `key=value` pairs separated by commas, percent-encoded. An entry
 * without a key is skipped, as OpenTelemetry's exporters skip it.
 */
export const parseOtlpHeaders = (text: string | undefined): Record<string, string> | undefined => {
  if (set(text) === undefined) return undefined
  const decode = (part: string) => {
    try {
      return decodeURIComponent(part.trim())
    } catch {
      return part.trim()
    }
  }
  const headers: Record<string, string> = {}
  for (const entry of text!.split(",")) {
    const at = entry.indexOf("=")
    if (at <= 0) continue
    const key = decode(entry.slice(0, at)).toLowerCase()
    if (key !== "") headers[key] = decode(entry.slice(at + 1))
  }
  return Object.keys(headers).length === 0 ? undefined : headers
}

/**
 * Where the spans go, or nothing. `--otlp URL` wins and is read as `OTEL_EXPORTER_OTLP_ENDPOINT` is
 * (a base URL: traces go to `URL/v1/traces`), unless it already ends in `/v1/traces`. Without it:
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the traces URL itself), else `OTEL_EXPORTER_OTLP_ENDPOINT`;
 * `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn the environment's off. The headers:
 * `OTEL_EXPORTER_OTLP_TRACES_HEADERS`, else `OTEL_EXPORTER_OTLP_HEADERS`.
 */
export const otlpTarget = (flag: string | undefined, env: NodeJS.ProcessEnv): OtlpTarget | undefined | CliError => {
  const headers = parseOtlpHeaders(
    set(env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"]) ?? set(env["OTEL_EXPORTER_OTLP_HEADERS"])
  )
  const given = set(flag)
  if (given !== undefined) {
    const url = parseUrl(given, "--otlp")
    if (url instanceof CliError) return url
    return { url: /\/v1\/traces\/?$/.test(url.pathname) ? url.href : tracesUnder(url), headers }
  }
  const exporters = (set(env["OTEL_TRACES_EXPORTER"]) ?? "otlp").toLowerCase().split(",").map((e) => e.trim())
  if (set(env["OTEL_SDK_DISABLED"])?.toLowerCase() === "true" || !exporters.includes("otlp")) return undefined
  const traces = set(env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
  if (traces !== undefined) {
    const url = parseUrl(traces, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return url instanceof CliError ? url : { url: url.href, headers }
  }
  const base = set(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
  if (base === undefined) return undefined
  const url = parseUrl(base, "OTEL_EXPORTER_OTLP_ENDPOINT")
  return url instanceof CliError ? url : { url: tracesUnder(url), headers }
}

/**
 * Runs `command` with its spans sent where `otlpTarget` says; the layer closes with the command,
 * sending what is left before the process exits.
 */
export const withOtlpTracing = <A, E>(
  flag: string | undefined,
  env: NodeJS.ProcessEnv,
  command: Effect.Effect<A, E>
): Effect.Effect<A, E | CliError> => {
  const target = otlpTarget(flag, env)
  if (target === undefined) return command
  if (target instanceof CliError) return Effect.fail(target)
  return Effect.provide(command, otlpTracingLayer({ url: target.url, headers: target.headers }))
}
