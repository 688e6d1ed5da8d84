/**
 * The JSON Schema the model is given for an effect `Schema` (a tool's parameters, a run's final
 * answer): self-contained, numbers as plain `number`, unknown keys rejected.
 */
import { SchemaAST, SchemaRepresentation } from "effect"
import type { Schema } from "effect"
import type { JsonSchemaObject } from "../../Model.ts"

/** effect's JSON form of the non-finite numbers, which it puts beside `number` in an `anyOf`. */
const isNonFiniteStrings = (node: unknown): boolean => {
  if (node === null || typeof node !== "object") return false
  const record = node as Record<string, unknown>
  const values = record["enum"]
  return record["type"] === "string" && Object.keys(record).length === 2 && Array.isArray(values) &&
    values.length === 3 && ["NaN", "Infinity", "-Infinity"].every((v) => values.includes(v))
}

const isPlainNumber = (node: unknown): boolean =>
  node !== null && typeof node === "object" && (node as Record<string, unknown>)["type"] === "number"

/**
 * Rewrites effect's JSON Schema into the form providers accept: numbers as plain `number` (the
 * `"NaN" | "Infinity" | "-Infinity"` strings dropped from every `anyOf` that has a `number`), and
 * an `anyOf` left with one member merged into its parent.
 */
const normalizeJsonSchema = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(normalizeJsonSchema)
  if (node === null || typeof node !== "object") return node
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(node as Record<string, unknown>)) out[key] = normalizeJsonSchema(value)
  // a key the tool does not know is rejected, not silently dropped (see README: extra properties)
  if (out["type"] === "object" && "properties" in out && (out["additionalProperties"] ?? true) === true) {
    out["additionalProperties"] = false
  }
  const anyOf = out["anyOf"]
  if (Array.isArray(anyOf) && anyOf.some(isPlainNumber)) {
    const members = anyOf.filter((member) => !isNonFiniteStrings(member))
    if (members.length === 1) {
      const { anyOf: _, ...rest } = out
      return { ...(members[0] as Record<string, unknown>), ...rest }
    }
    out["anyOf"] = members
  }
  return out
}

/** The prototype every AST node of the `effect` copy this package uses inherits from. */
const astNodePrototype: object = Object.getPrototypeOf(SchemaAST.Null.prototype)

/**
 * Throws when `schema` was made by another copy of `effect` than the one this package uses: two
 * copies of `effect` do not understand each other's schemas, and deciding with the wrong one
 * would reject valid arguments (or accept invalid ones) without a word.
 */
const assertSameEffect = (what: string, schema: Schema.Top): void => {
  const ast: unknown = (schema as { readonly ast?: unknown }).ast
  if (typeof ast !== "object" || ast === null) {
    throw new Error(`agentloop: ${what}: not an effect Schema`)
  }
  if (!Object.prototype.isPrototypeOf.call(astNodePrototype, ast)) {
    throw new Error(
      `agentloop: the schema of ${what} was made by another copy of "effect" than the one ` +
        `@agentloop/core uses: two copies of "effect" are installed, and neither can check the other's schemas. ` +
        `Install one copy (\`npm ls effect\` lists them; effect is a peer dependency of @agentloop/core).`
    )
  }
}

const isEmptyStruct = (ast: SchemaAST.AST): boolean =>
  ast._tag === "Objects" && ast.propertySignatures.length === 0 && ast.indexSignatures.length === 0

/**
 * The JSON Schema for `schema` (described as `what` in errors): self-contained (every definition
 * inlined), numbers as `number`, annotations such as `description` kept, `Struct({})` as an empty
 * object. Throws for a schema that cannot be described without `$ref` (recursive), or made by
 * another copy of effect: programming errors caught when the schema is given.
 */
export const deriveJsonSchema = (what: string, schema: Schema.Top): JsonSchemaObject => {
  assertSameEffect(what, schema)
  const document = SchemaRepresentation.toJsonSchemaDocument(
    SchemaRepresentation.toRepresentation(schema.ast, { referencePolicy: () => undefined })
  )
  if (Object.keys(document.definitions).length > 0) {
    throw new Error(
      `agentloop: ${what}: a recursive schema cannot be described without $ref; model providers need a ` +
        `self-contained JSON Schema`
    )
  }
  let json = normalizeJsonSchema(document.schema) as JsonSchemaObject
  if (isEmptyStruct(schema.ast)) {
    // effect describes `Struct({})` as "anything but null"; providers need an object
    const { not: _, ...rest } = json
    json = { type: "object", properties: {}, ...rest }
  }
  return json
}
