/**
 * A checker for tool arguments against the JSON Schema the model was given, so arguments are
 * accepted exactly when they satisfy that schema, and rejected with words a model can act on
 * (`Expected a number at ["a"], got "3"`).
 *
 * Why not a JSON Schema library: the schemas checked here are the ones `parametersJsonSchema`
 * derives from an effect `Schema` (self-contained, no `$ref`), so the keywords are a known subset;
 * a compiled closure per schema checks a call in well under a microsecond, where the validators on
 * the registry either generate code with `new Function` (ajv: ~200 ms to load and compile the first
 * schema, and refused where eval is) or interpret the schema on every call (~17 µs per call).
 * Keywords this module does not know are annotations to it (as `format` is by default in JSON
 * Schema 2020-12); the effect schema's own decoding, which runs after this check, still applies
 * anything they stood for.
 */

/** One way the arguments fail the schema. */
export interface Issue {
  readonly path: ReadonlyArray<string | number>
  /** What was expected, as words: "a number", "one of \"a\", \"b\"", "at most 3 items". */
  readonly expected: string
  /** The value found, or `undefined` for a missing key (then `missing` is true). */
  readonly actual: unknown
  readonly missing?: true
  readonly unexpected?: true
}

/** Checks a value; with `issues`, records every issue, else stops at the first one. */
type Check = (value: unknown, path: Array<string | number>, issues: Array<Issue> | undefined) => boolean

type Json = Readonly<Record<string, unknown>>

const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

const typeOk: Record<string, (u: unknown) => boolean> = {
  string: (u) => typeof u === "string",
  number: (u) => typeof u === "number" && Number.isFinite(u),
  integer: (u) => typeof u === "number" && Number.isInteger(u),
  boolean: (u) => typeof u === "boolean",
  null: (u) => u === null,
  array: (u) => Array.isArray(u),
  object: isObject
}

const typeWords: Record<string, string> = {
  string: "a string",
  number: "a number",
  integer: "an integer",
  boolean: "a boolean",
  null: "null",
  array: "an array",
  object: "an object"
}

const show = (u: unknown): string => {
  const text = JSON.stringify(u)
  return text.length > 60 ? `${text.slice(0, 57)}...` : text
}

const orList = (words: ReadonlyArray<string>): string =>
  words.length <= 1 ? (words[0] ?? "nothing") : `${words.slice(0, -1).join(", ")} or ${words.at(-1)}`

/** Deep equality of JSON values (for `enum`, `const`, `uniqueItems`). */
const jsonEqual = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]))
  }
  if (Array.isArray(b)) return false
  const ka = Object.keys(a)
  const kb = Object.keys(b)
  return ka.length === kb.length &&
    ka.every((k) => Object.hasOwn(b, k) && jsonEqual((a as Json)[k], (b as Json)[k]))
}

/** The length of a string in code points, as JSON Schema counts it. */
const codePoints = (s: string): number => {
  let n = 0
  for (const _ of s) n++
  return n
}

const fail = (
  issues: Array<Issue> | undefined,
  path: ReadonlyArray<string | number>,
  expected: string,
  actual: unknown
): false => {
  issues?.push({ path: path.slice(), expected, actual })
  return false
}

/** What a schema expects, in a few words (for `anyOf` members and `not`). */
const describe = (schema: unknown): string => {
  if (schema === true) return "anything"
  if (schema === false || !isObject(schema)) return "nothing"
  if ("const" in schema) return show(schema["const"])
  if (Array.isArray(schema["enum"])) return `one of ${schema["enum"].map(show).join(", ")}`
  const type = schema["type"]
  if (typeof type === "string") return typeWords[type] ?? type
  if (Array.isArray(type)) return orList(type.map((t) => typeWords[String(t)] ?? String(t)))
  for (const key of ["anyOf", "oneOf"] as const) {
    const members = schema[key]
    if (Array.isArray(members)) return orList(members.map(describe))
  }
  return "a value matching the schema"
}

const all = (checks: ReadonlyArray<Check>): Check => {
  if (checks.length === 1) return checks[0]!
  return (value, path, issues) => {
    let ok = true
    for (const check of checks) {
      if (!check(value, path, issues)) {
        ok = false
        if (issues === undefined) return false
      }
    }
    return ok
  }
}

const compileTypes = (type: unknown): Check | undefined => {
  const types = typeof type === "string" ? [type] : Array.isArray(type) ? type.map(String) : undefined
  if (types === undefined) return undefined
  const tests = types.map((t) => typeOk[t] ?? (() => true))
  const expected = orList(types.map((t) => typeWords[t] ?? t))
  if (tests.length === 1) {
    const test = tests[0]!
    return (value, path, issues) => test(value) || fail(issues, path, expected, value)
  }
  return (value, path, issues) => tests.some((test) => test(value)) || fail(issues, path, expected, value)
}

const compileNumber = (schema: Json): Array<Check> => {
  const checks: Array<Check> = []
  const bound = (key: string, ok: (n: number, limit: number) => boolean, words: (limit: number) => string) => {
    const limit = schema[key]
    if (typeof limit !== "number") return
    const expected = words(limit)
    checks.push((value, path, issues) =>
      typeof value !== "number" || ok(value, limit) || fail(issues, path, expected, value)
    )
  }
  bound("minimum", (n, l) => n >= l, (l) => `a number ≥ ${l}`)
  bound("maximum", (n, l) => n <= l, (l) => `a number ≤ ${l}`)
  bound("exclusiveMinimum", (n, l) => n > l, (l) => `a number > ${l}`)
  bound("exclusiveMaximum", (n, l) => n < l, (l) => `a number < ${l}`)
  bound("multipleOf", (n, l) => Number.isInteger(n / l), (l) => `a multiple of ${l}`)
  return checks
}

const compileString = (schema: Json): Array<Check> => {
  const checks: Array<Check> = []
  const min = schema["minLength"]
  if (typeof min === "number") {
    const expected = `a string of at least ${min} character${min === 1 ? "" : "s"}`
    checks.push((value, path, issues) =>
      typeof value !== "string" || codePoints(value) >= min || fail(issues, path, expected, value)
    )
  }
  const max = schema["maxLength"]
  if (typeof max === "number") {
    const expected = `a string of at most ${max} character${max === 1 ? "" : "s"}`
    checks.push((value, path, issues) =>
      typeof value !== "string" || codePoints(value) <= max || fail(issues, path, expected, value)
    )
  }
  const pattern = schema["pattern"]
  if (typeof pattern === "string") {
    const regex = new RegExp(pattern, "u")
    const expected = `a string matching ${show(pattern)}`
    checks.push((value, path, issues) =>
      typeof value !== "string" || regex.test(value) || fail(issues, path, expected, value)
    )
  }
  return checks
}

const compileArray = (schema: Json): Array<Check> => {
  const checks: Array<Check> = []
  const prefix = Array.isArray(schema["prefixItems"]) ? schema["prefixItems"].map(compileSchema) : []
  const items = "items" in schema ? compileSchema(schema["items"]) : undefined
  if (prefix.length > 0 || items !== undefined) {
    checks.push((value, path, issues) => {
      if (!Array.isArray(value)) return true
      let ok = true
      for (let i = 0; i < value.length; i++) {
        const check = i < prefix.length ? prefix[i]! : items
        if (check === undefined) continue
        path.push(i)
        const good = check(value[i], path, issues)
        path.pop()
        if (!good) {
          ok = false
          if (issues === undefined) return false
        }
      }
      return ok
    })
  }
  const min = schema["minItems"]
  if (typeof min === "number") {
    const expected = `an array of at least ${min} item${min === 1 ? "" : "s"}`
    checks.push((value, path, issues) =>
      !Array.isArray(value) || value.length >= min || fail(issues, path, expected, value)
    )
  }
  const max = schema["maxItems"]
  if (typeof max === "number") {
    const expected = `an array of at most ${max} item${max === 1 ? "" : "s"}`
    checks.push((value, path, issues) =>
      !Array.isArray(value) || value.length <= max || fail(issues, path, expected, value)
    )
  }
  if (schema["uniqueItems"] === true) {
    checks.push((value, path, issues) =>
      !Array.isArray(value) ||
      value.every((x, i) => value.findIndex((y) => jsonEqual(x, y)) === i) ||
      fail(issues, path, "an array of unique items", value)
    )
  }
  return checks
}

const compileObject = (schema: Json): Array<Check> => {
  const checks: Array<Check> = []
  const properties = isObject(schema["properties"]) ? schema["properties"] : {}
  const known = new Map(Object.entries(properties).map(([key, sub]) => [key, compileSchema(sub)]))
  const patterns = isObject(schema["patternProperties"]) ?
    Object.entries(schema["patternProperties"]).map(([p, sub]) => [new RegExp(p, "u"), compileSchema(sub)] as const) :
    []
  const additional = schema["additionalProperties"]
  const rest = additional === undefined || additional === true ? undefined : compileSchema(additional)
  const required = Array.isArray(schema["required"]) ? schema["required"].map(String) : []
  const names = "propertyNames" in schema ? compileSchema(schema["propertyNames"]) : undefined
  checks.push((value, path, issues) => {
    if (!isObject(value)) return true
    let ok = true
    for (const key of required) {
      if (!Object.hasOwn(value, key)) {
        ok = false
        if (issues === undefined) return false
        issues.push({ path: [...path, key], expected: "a value", actual: undefined, missing: true })
      }
    }
    for (const key in value) {
      if (!Object.hasOwn(value, key)) continue
      path.push(key)
      let good = true
      if (names !== undefined && !names(key, path, issues)) good = false
      const check = known.get(key)
      let matched = check !== undefined
      if (check !== undefined && !check(value[key], path, issues)) good = false
      for (const [regex, sub] of patterns) {
        if (regex.test(key)) {
          matched = true
          if (!sub(value[key], path, issues)) good = false
        }
      }
      if (!matched && rest !== undefined) {
        if (additional === false) {
          issues?.push({ path: path.slice(), expected: "no such key", actual: value[key], unexpected: true })
          good = false
        } else if (!rest(value[key], path, issues)) {
          good = false
        }
      }
      path.pop()
      if (!good) {
        ok = false
        if (issues === undefined) return false
      }
    }
    return ok
  })
  return checks
}

const compileCombinators = (schema: Json): Array<Check> => {
  const checks: Array<Check> = []
  const allOf = schema["allOf"]
  if (Array.isArray(allOf)) checks.push(all(allOf.map(compileSchema)))
  for (const key of ["anyOf", "oneOf"] as const) {
    const members = schema[key]
    if (!Array.isArray(members)) continue
    const compiled = members.map(compileSchema)
    const exactlyOne = key === "oneOf"
    const expected = orList(members.map(describe))
    checks.push((value, path, issues) => {
      let matches = 0
      for (const check of compiled) {
        if (check(value, path, undefined)) {
          matches++
          if (!exactlyOne) return true
        }
      }
      if (matches === 1 || (!exactlyOne && matches > 0)) return true
      if (issues === undefined) return false
      // one member of the right type: its own issues say more than "a string or null"
      const typed = members.map((m, i) => [m, compiled[i]!] as const).filter(([m]) => {
        const t = isObject(m) ? m["type"] : undefined
        return typeof t === "string" && typeOk[t]?.(value) === true
      })
      if (matches === 0 && typed.length === 1) return typed[0]![1](value, path, issues)
      return fail(issues, path, matches > 1 ? `exactly one of ${expected}` : expected, value)
    })
  }
  if ("not" in schema) {
    const not = compileSchema(schema["not"])
    const expected = `not ${describe(schema["not"])}`
    checks.push((value, path, issues) => !not(value, path, undefined) || fail(issues, path, expected, value))
  }
  return checks
}

/** Compiles a JSON Schema (the subset effect derives; unknown keywords are annotations) to a check. */
export const compileSchema = (schema: unknown): Check => {
  if (schema === true || schema === undefined) return () => true
  if (schema === false) return (value, path, issues) => fail(issues, path, "nothing (no value is allowed here)", value)
  if (!isObject(schema)) return () => true
  const checks: Array<Check> = []
  const types = compileTypes(schema["type"])
  if (types !== undefined) checks.push(types)
  if ("const" in schema) {
    const constant = schema["const"]
    const expected = show(constant)
    checks.push((value, path, issues) => jsonEqual(value, constant) || fail(issues, path, expected, value))
  }
  if (Array.isArray(schema["enum"])) {
    const values = schema["enum"]
    const expected = values.length === 1 ? show(values[0]) : `one of ${values.map(show).join(", ")}`
    checks.push((value, path, issues) => values.some((v) => jsonEqual(v, value)) || fail(issues, path, expected, value))
  }
  checks.push(...compileNumber(schema), ...compileString(schema), ...compileArray(schema))
  checks.push(...compileObject(schema), ...compileCombinators(schema))
  if (checks.length === 0) return () => true
  const whole = all(checks)
  // the type check comes first: when it fails, the other keywords have nothing to say
  return types === undefined ?
    whole :
    (value, path, issues) => types(value, path, undefined) ? whole(value, path, issues) : types(value, path, issues)
}

const formatPath = (path: ReadonlyArray<string | number>): string => JSON.stringify(path)

/** An issue in words: `Expected a number at ["a"], got "3"`. */
export const formatIssue = (issue: Issue): string => {
  const at = issue.path.length === 0 ? "" : ` at ${formatPath(issue.path)}`
  if (issue.missing) return `Missing required key${at}`
  if (issue.unexpected) return `Unexpected key${at} (the tool has no such parameter)`
  return `Expected ${issue.expected}${at}, got ${show(issue.actual)}`
}

/**
 * A compiled checker: `undefined` when `value` satisfies the schema, else every issue in words.
 */
export const makeArgumentsCheck = (schema: unknown): (value: unknown) => ReadonlyArray<string> | undefined => {
  const check = compileSchema(schema)
  return (value) => {
    if (check(value, [], undefined)) return undefined
    const issues: Array<Issue> = []
    check(value, [], issues)
    return issues.map(formatIssue)
  }
}

// -----------------------------------------------------------------------------
// Schemas from outside (a JSON Schema file for a run's final answer)
// -----------------------------------------------------------------------------

/** Keywords that constrain a value but that `compileSchema` does not check: refused, never ignored. */
const unsupportedKeywords: Record<string, string> = {
  $ref: "references ($ref) are not supported: inline the referenced schema",
  $dynamicRef: "references ($dynamicRef) are not supported: inline the referenced schema",
  $recursiveRef: "references ($recursiveRef) are not supported: inline the referenced schema",
  if: "conditionals (if/then/else) are not supported",
  then: "conditionals (if/then/else) are not supported",
  else: "conditionals (if/then/else) are not supported",
  dependentSchemas: "dependentSchemas is not supported",
  dependentRequired: "dependentRequired is not supported",
  dependencies: "dependencies is not supported",
  contains: "contains is not supported",
  minContains: "minContains is not supported",
  maxContains: "maxContains is not supported",
  minProperties: "minProperties is not supported",
  maxProperties: "maxProperties is not supported",
  unevaluatedItems: "unevaluatedItems is not supported",
  unevaluatedProperties: "unevaluatedProperties is not supported (use additionalProperties)",
  additionalItems: "additionalItems is not supported (use prefixItems and items)"
}

const knownTypes = new Set(Object.keys(typeOk))

const pointer = (path: ReadonlyArray<string | number>): string =>
  `#${path.map((p) => `/${String(p).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("")}`

/** What is wrong with a JSON Schema given from outside, at a JSON Pointer into it. */
export interface SchemaProblem {
  readonly path: string
  readonly message: string
}

/**
 * How deeply subschemas may nest in a schema given from outside. The checks recurse once per
 * level: a schema nested tens of thousands of levels deep (a few hundred kilobytes of JSON) would
 * overflow the stack instead of getting an error.
 */
export const MAX_SCHEMA_DEPTH = 64

/**
 * The first reason why `schema` cannot be checked exactly as written, if any: a keyword that
 * constrains values but that `compileSchema` does not implement, a malformed keyword value, a
 * `pattern` that is not a valid regular expression, or subschemas nested deeper than
 * `MAX_SCHEMA_DEPTH`. Keywords it does not know otherwise are annotations (`title`, `format`,
 * `examples`, `x-…`), as JSON Schema says.
 */
export const unsupportedSchema = (
  schema: unknown,
  path: Array<string | number> = [],
  depth = 0
): SchemaProblem | undefined => {
  const problem = (message: string, at: ReadonlyArray<string | number> = path): SchemaProblem => ({
    path: pointer(at),
    message
  })
  if (depth > MAX_SCHEMA_DEPTH) return problem(`subschemas are nested more than ${MAX_SCHEMA_DEPTH} levels deep`)
  if (typeof schema === "boolean") return undefined
  if (!isObject(schema)) return problem(`a schema must be an object or a boolean, got ${show(schema)}`)
  for (const key of Object.keys(schema)) {
    const why = unsupportedKeywords[key]
    if (why !== undefined) return problem(why, [...path, key])
  }
  const type = schema["type"]
  if (type !== undefined) {
    const types = Array.isArray(type) ? type : [type]
    for (const t of types) {
      if (typeof t !== "string" || !knownTypes.has(t)) {
        return problem(`unknown type ${show(t)} (expected one of ${[...knownTypes].join(", ")})`, [...path, "type"])
      }
    }
  }
  for (const key of ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]) {
    if (key in schema && typeof schema[key] !== "number") {
      return problem(`${key} must be a number, got ${show(schema[key])}`, [...path, key])
    }
  }
  for (const key of ["minLength", "maxLength", "minItems", "maxItems"]) {
    const value = schema[key]
    if (key in schema && !(typeof value === "number" && Number.isInteger(value) && value >= 0)) {
      return problem(`${key} must be a non-negative integer, got ${show(value)}`, [...path, key])
    }
  }
  const patterns: Array<[string, ReadonlyArray<string | number>]> = []
  if ("pattern" in schema) {
    if (typeof schema["pattern"] !== "string") return problem("pattern must be a string", [...path, "pattern"])
    patterns.push([schema["pattern"], [...path, "pattern"]])
  }
  if ("required" in schema) {
    const required = schema["required"]
    if (!Array.isArray(required) || !required.every((k) => typeof k === "string")) {
      return problem("required must be an array of strings", [...path, "required"])
    }
  }
  if ("enum" in schema && !Array.isArray(schema["enum"])) return problem("enum must be an array", [...path, "enum"])
  if ("items" in schema && Array.isArray(schema["items"])) {
    return problem("items as an array (draft-07 tuples) is not supported: use prefixItems", [...path, "items"])
  }
  const subschemas: Array<[unknown, Array<string | number>]> = []
  for (const key of ["items", "additionalProperties", "not", "propertyNames"]) {
    if (key in schema) subschemas.push([schema[key], [...path, key]])
  }
  for (const key of ["prefixItems", "allOf", "anyOf", "oneOf"]) {
    if (!(key in schema)) continue
    const members = schema[key]
    if (!Array.isArray(members)) return problem(`${key} must be an array of schemas`, [...path, key])
    members.forEach((member, i) => subschemas.push([member, [...path, key, i]]))
  }
  for (const key of ["properties", "patternProperties"]) {
    if (!(key in schema)) continue
    const members = schema[key]
    if (!isObject(members)) return problem(`${key} must be an object of schemas`, [...path, key])
    for (const [name, member] of Object.entries(members)) {
      if (key === "patternProperties") patterns.push([name, [...path, key, name]])
      subschemas.push([member, [...path, key, name]])
    }
  }
  for (const [source, at] of patterns) {
    try {
      new RegExp(source, "u")
    } catch {
      return problem(`${show(source)} is not a valid regular expression`, at)
    }
  }
  for (const [sub, at] of subschemas) {
    const found = unsupportedSchema(sub, at, depth + 1)
    if (found !== undefined) return found
  }
  return undefined
}
