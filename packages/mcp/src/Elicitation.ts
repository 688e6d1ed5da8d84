/**
 * Questions MCP servers ask the user (MCP elicitation, form mode): while it handles a call, a
 * server may send `elicitation/create` with a message and a flat schema of fields (text, numbers,
 * yes/no, choices) to fill in. With an `Elicitation` service in the context of `mcpToolsLayer`, the
 * client declares the capability and hands each question to it; the answer (accepted with values,
 * declined, or cancelled) goes back to the server.
 *
 * Without one, the capability is not declared: a server must then not ask, and one that asks
 * anyway is refused by the SDK (an error for that request, which the server turns into the call's
 * result). Nobody is there to answer, so saying so is more honest than declining in the user's name.
 *
 * The service is where a UI plugs in (a form in a terminal, a dialog) and where a durable run can
 * journal answers: `ask` is called once per question and its answer is a plain value.
 *
 * ```ts
 * import { Effect } from "effect"
 * import { acceptDefaults, elicitationLayer } from "@agentloop/mcp"
 *
 * // accept every question with the defaults the server proposed
 * export const ElicitationLive = elicitationLayer((request) => Effect.succeed(acceptDefaults(request)))
 * ```
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer } from "effect"

/**
 * A value of a field: text, a number, yes/no, or the chosen options of a multiple-choice field.
 *
 * @since 0.1.0
 * @category models
 */
export type ElicitationValue = string | number | boolean | ReadonlyArray<string>

/**
 * One field of a question, read from the server's `requestedSchema`.
 *
 * - `kind`: `string`, `number`, `integer`, `boolean`, `choice` (one of `options`) or `choices`
 *   (any of `options`).
 * - `default`: the server's proposed value, if any (what a form shows filled in). Fields left out
 *   of an accepted answer get their default before the answer is sent.
 * - `schema`: the field's JSON Schema as the server gave it (`format`, `minimum`, `maxLength`, …).
 *
 * @since 0.1.0
 * @category models
 */
export interface ElicitationField {
  readonly name: string
  readonly kind: "string" | "number" | "integer" | "boolean" | "choice" | "choices"
  readonly title?: string | undefined
  readonly description?: string | undefined
  readonly required: boolean
  readonly default?: ElicitationValue | undefined
  readonly options?: ReadonlyArray<{ readonly value: string; readonly title: string }> | undefined
  readonly schema: Readonly<Record<string, unknown>>
}

/**
 * A question from a server.
 *
 * @since 0.1.0
 * @category models
 */
export interface ElicitationRequest {
  /** The name of the server that asks (as configured). */
  readonly server: string
  readonly message: string
  readonly fields: ReadonlyArray<ElicitationField>
  /** The schema as the server sent it. */
  readonly requestedSchema: Readonly<Record<string, unknown>>
}

/**
 * The user's answer: `accept` with the values (fields left out get their defaults), `decline`
 * (the user said no), or `cancel` (the user dismissed the question without choosing).
 *
 * @since 0.1.0
 * @category models
 */
export type ElicitationAnswer =
  | { readonly action: "accept"; readonly content: Readonly<Record<string, ElicitationValue>> }
  | { readonly action: "decline" }
  | { readonly action: "cancel" }

/**
 * @since 0.1.0
 * @category services
 */
export interface ElicitationShape {
  /**
   * Asks the user. Interrupted when the server cancels the question, or its call ends. A defect is
   * answered as `cancel`.
   */
  readonly ask: (request: ElicitationRequest) => Effect.Effect<ElicitationAnswer>
}

/**
 * Who answers the servers' questions. Provide it to `mcpToolsLayer` (for instance with
 * `elicitationLayer`); without it, the client does not offer elicitation.
 *
 * @since 0.1.0
 * @category services
 */
export class Elicitation extends Context.Service<Elicitation, ElicitationShape>()("@agentloop/mcp/Elicitation") {}

/**
 * An `Elicitation` that answers with `ask`.
 *
 * @since 0.1.0
 * @category layers
 */
export const elicitationLayer = (ask: ElicitationShape["ask"]): Layer.Layer<Elicitation> =>
  Layer.succeed(Elicitation, Elicitation.of({ ask }))

/**
 * The answer that accepts every field's default (and leaves fields without one out).
 *
 * @since 0.1.0
 * @category constructors
 */
export const acceptDefaults = (request: ElicitationRequest): ElicitationAnswer => ({
  action: "accept",
  content: Object.fromEntries(
    request.fields.flatMap((f) => (f.default === undefined ? [] : [[f.name, f.default] as const]))
  )
})

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const text = (u: unknown): string | undefined => (typeof u === "string" ? u : undefined)

const isValue = (u: unknown): u is ElicitationValue =>
  typeof u === "string" || typeof u === "number" || typeof u === "boolean" ||
  (Array.isArray(u) && u.every((v) => typeof v === "string"))

/** The options of a choice: `enum` (+ legacy `enumNames`), or `oneOf`/`anyOf` of `{ const, title }`. */
const optionsOf = (schema: Record<string, unknown>): Array<{ value: string; title: string }> | undefined => {
  if (Array.isArray(schema["enum"])) {
    const names = Array.isArray(schema["enumNames"]) ? schema["enumNames"] : []
    return schema["enum"].map((v, i) => ({ value: String(v), title: text(names[i]) ?? String(v) }))
  }
  const alternatives = schema["oneOf"] ?? schema["anyOf"]
  if (Array.isArray(alternatives)) {
    return alternatives.filter(isRecord).map((a) => ({
      value: String(a["const"]),
      title: text(a["title"]) ?? String(a["const"])
    }))
  }
  return undefined
}

const kindOf = (schema: Record<string, unknown>): ElicitationField["kind"] => {
  if (schema["type"] === "array") return "choices"
  if (optionsOf(schema) !== undefined) return "choice"
  switch (schema["type"]) {
    case "number":
    case "integer":
    case "boolean":
      return schema["type"]
    default:
      return "string"
  }
}

/**
 * The fields of a `requestedSchema` (`{ type: "object", properties, required }`), in its order.
 *
 * @since 0.1.0
 * @category constructors
 */
export const elicitationFields = (requestedSchema: Readonly<Record<string, unknown>>): Array<ElicitationField> => {
  const properties = isRecord(requestedSchema["properties"]) ? requestedSchema["properties"] : {}
  const required = Array.isArray(requestedSchema["required"]) ? requestedSchema["required"] : []
  return Object.entries(properties).filter((entry): entry is [string, Record<string, unknown>] => isRecord(entry[1]))
    .map(([name, schema]): ElicitationField => {
      const kind = kindOf(schema)
      const items = isRecord(schema["items"]) ? schema["items"] : {}
      const options = kind === "choices" ? optionsOf(items) : kind === "choice" ? optionsOf(schema) : undefined
      const fallback = schema["default"]
      return {
        name,
        kind,
        ...(text(schema["title"]) === undefined ? {} : { title: text(schema["title"]) }),
        ...(text(schema["description"]) === undefined ? {} : { description: text(schema["description"]) }),
        required: required.includes(name),
        ...(isValue(fallback) ? { default: fallback } : {}),
        ...(options === undefined ? {} : { options }),
        schema
      }
    })
}
