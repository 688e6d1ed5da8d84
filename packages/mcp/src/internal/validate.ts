/**
 * Checking a call's arguments against the server's JSON Schema, with ajv, before the server is
 * called. Schemas that declare draft-07 (or draft-06) are compiled by ajv's draft-07 validator,
 * every other schema by its 2020-12 validator (the `$schema` of an older or unknown draft is
 * ignored). Formats (`"format": "uri"`…) are not checked: the server checks them.
 */
import { Ajv } from "ajv"
import type { ErrorObject, ValidateFunction } from "ajv"
import { Ajv2020 } from "ajv/dist/2020.js"

/** Why arguments were refused: one line per problem, each naming the field. */
export interface ArgumentProblems {
  readonly text: string
  readonly fields: ReadonlyArray<{ readonly field: string; readonly problem: string }>
}

export type ArgumentCheck = (args: unknown) => ArgumentProblems | undefined

const options = { allErrors: true, strict: false, validateFormats: false, addUsedSchema: false, logger: false } as const
const draft07 = new Ajv(options)
const draft2020 = new Ajv2020(options)

const isDraft07 = (schema: Record<string, unknown>): boolean => {
  const declared = schema["$schema"]
  return typeof declared === "string" && /draft-0[67]/.test(declared)
}

const pointerToField = (pointer: string): string =>
  pointer === "" ?
    "" :
    pointer.slice(1).split("/").map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~")).join(".")

const describe = (error: ErrorObject): { field: string; problem: string } => {
  const base = pointerToField(error.instancePath)
  const join = (child: unknown) => (base === "" ? String(child) : `${base}.${String(child)}`)
  switch (error.keyword) {
    case "required":
      return { field: join(error.params["missingProperty"]), problem: "is required" }
    case "additionalProperties":
      return { field: join(error.params["additionalProperty"]), problem: "is not allowed" }
    case "unevaluatedProperties":
      return { field: join(error.params["unevaluatedProperty"]), problem: "is not allowed" }
    default:
      return { field: base === "" ? "(arguments)" : base, problem: error.message ?? error.keyword }
  }
}

const cache = new WeakMap<object, ArgumentCheck>()

/**
 * The argument check for a tool's input schema, compiled once per schema object. A schema ajv
 * cannot compile gives `undefined`: the arguments then go to the server unchecked (it checks them).
 */
export const argumentCheck = (schema: Record<string, unknown>): ArgumentCheck | undefined => {
  const known = cache.get(schema)
  if (known !== undefined) return known
  let validate: ValidateFunction
  try {
    if (isDraft07(schema)) {
      validate = draft07.compile(schema)
    } else {
      const { $schema: _, ...rest } = schema
      validate = draft2020.compile(rest)
    }
  } catch {
    // a foreign API that throws on a schema it cannot compile
    return undefined
  }
  const check: ArgumentCheck = (args) => {
    if (validate(args)) return undefined
    const fields = (validate.errors ?? []).map(describe)
    const seen = new Set<string>()
    const lines = fields.map((f) => `${f.field}: ${f.problem}`).filter((line) => !seen.has(line) && seen.add(line))
    return { text: lines.join("; "), fields }
  }
  cache.set(schema, check)
  return check
}
