/**
 * `run --output-schema FILE`: reading the schema file, with bounds on what is read.
 */
import { outputSchemaFromJson } from "@agentloop/core"
import type { OutputSchema } from "@agentloop/core"
import { Effect } from "effect"
import { closeSync, constants as fsConstants, fstatSync, openSync, readSync } from "node:fs"
import * as nodePath from "node:path"
import { CliError } from "../CliError.ts"

/** The largest `--output-schema` file read (a schema is a few kilobytes). */
const MAX_SCHEMA_BYTES = 1024 * 1024
/** The deepest nesting of objects and arrays in an `--output-schema` file. */
const MAX_SCHEMA_DEPTH = 64

/** How deep `value` nests objects and arrays, up to `limit + 1` (iterative: no stack to overflow). */
const nestingDepth = (value: unknown, limit: number): number => {
  let deepest = 0
  const stack: Array<readonly [unknown, number]> = [[value, 0]]
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!
    if (typeof v !== "object" || v === null) continue
    if (depth + 1 > deepest) deepest = depth + 1
    if (deepest > limit) return deepest
    for (const child of Object.values(v)) stack.push([child, depth + 1])
  }
  return deepest
}

/**
 * Reads a regular file of at most `max` bytes: a FIFO, a device or a folder is refused before
 * anything is read (the open does not block on a FIFO), a larger file before it is read whole.
 */
const readRegularFile = (path: string, max: number): string => {
  const fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK)
  try {
    const stat = fstatSync(fd)
    if (!stat.isFile()) {
      throw new CliError(
        stat.isDirectory() ? "it is a folder" : "it is not a regular file (a FIFO, a device or a socket)"
      )
    }
    if (stat.size > max) throw new CliError(`it is larger than ${max} bytes`)
    const buffer = Buffer.alloc(max + 1)
    let length = 0
    while (length <= max) {
      const n = readSync(fd, buffer, length, max + 1 - length, null)
      if (n === 0) break
      length += n
    }
    if (length > max) throw new CliError(`it is larger than ${max} bytes`)
    return buffer.subarray(0, length).toString("utf8")
  } finally {
    closeSync(fd)
  }
}

/**
 * Reads `--output-schema FILE`: a JSON Schema the answer must satisfy; checked before anything
 * runs. The file may be anywhere (the user names it), but it must be a regular file of at most
 * 1 MiB nesting at most 64 levels; a JSON syntax error names its line and column only, never the
 * file's text (it may be a file that was not meant to be shown, e.g. through a link).
 */
export const readOutputSchema = (file: string): Effect.Effect<OutputSchema<unknown>, CliError> =>
  Effect.gen(function*() {
    if (file.trim().length === 0) {
      return yield* Effect.fail(new CliError("--output-schema is empty: give a JSON Schema file"))
    }
    const text = yield* Effect.try({
      try: () => readRegularFile(nodePath.resolve(file), MAX_SCHEMA_BYTES),
      catch: (e) =>
        new CliError(
          `--output-schema ${file}: cannot read it (${
            e instanceof CliError ? e.message : (e as { code?: string }).code ?? "unreadable"
          })`
        )
    })
    const json = yield* Effect.try({
      try: (): unknown => JSON.parse(text),
      catch: (e) => {
        const at = /position (\d+)/.exec(e instanceof Error ? e.message : "")
        const where = at === null ? "" : (() => {
          const before = text.slice(0, Number(at[1]))
          const line = before.split("\n").length
          return ` at line ${line}, column ${before.length - before.lastIndexOf("\n")}`
        })()
        return new CliError(`--output-schema ${file}: not valid JSON${where}`)
      }
    })
    if (nestingDepth(json, MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH) {
      return yield* Effect.fail(new CliError(`--output-schema ${file}: nested deeper than ${MAX_SCHEMA_DEPTH} levels`))
    }
    return yield* outputSchemaFromJson(json).pipe(
      Effect.mapError((e) => new CliError(`--output-schema ${file}: ${e.message}`))
    )
  })
