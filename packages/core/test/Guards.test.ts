/**
 * The loop's fast structural guards (internal/guards.ts) stand in for the effect schemas on the
 * hot path. Their contract: a guard accepts a value only if the schema decodes it. This
 * differential test generates valid values, then perturbs them (a key dropped, a wrong type, an
 * explicit undefined, NaN, an empty id, an extra key, a wrong tag), and checks the contract on
 * every one. It also checks that valid values are accepted (otherwise the fast path is useless).
 */
import { assert, describe, it } from "@effect/vitest"
import { Exit, Schema } from "effect"
import * as fc from "fast-check"
import { AssistantMessage, Message, RunSettings, ToolDefinition, ToolResultMessage } from "@agentloop/core"
import {
  isAssistantMessageFast,
  isMessageFast,
  isRunSettingsFast,
  isToolDefinitionsFast,
  isToolResultMessageFast
} from "../src/internal/guards.ts"

const text = fc.record({ type: fc.constant("text"), text: fc.string() })
const image = fc.record({ type: fc.constant("image"), data: fc.string(), mimeType: fc.string() })
const thinking = fc.record(
  { type: fc.constant("thinking"), thinking: fc.string(), signature: fc.string(), redacted: fc.boolean() },
  { requiredKeys: ["type", "thinking"] }
)
const id = fc.string({ minLength: 1, maxLength: 6 })
const toolCall = fc.record({
  type: fc.constant("toolCall"),
  id,
  name: id,
  arguments: fc.dictionary(fc.string({ maxLength: 3 }), fc.jsonValue({ maxDepth: 1 }))
})
const usage = fc.record(
  { input: fc.nat(), output: fc.nat(), cacheRead: fc.nat(), cacheWrite: fc.nat(), cost: fc.double({ min: 0, max: 10, noNaN: true }) },
  { requiredKeys: ["input", "output"] }
)
const user = fc.record(
  { role: fc.constant("user"), content: fc.oneof(fc.string(), fc.array(fc.oneof(text, image))), timestamp: fc.nat() },
  { requiredKeys: ["role", "content"] }
)
const assistant = fc.record(
  {
    role: fc.constant("assistant"),
    content: fc.array(fc.oneof(text, thinking, toolCall), { maxLength: 4 }),
    stopReason: fc.constantFrom("stop", "toolUse", "length", "error", "aborted"),
    errorMessage: fc.string(),
    usage,
    model: fc.string(),
    timestamp: fc.nat()
  },
  { requiredKeys: ["role", "content", "stopReason"] }
)
const toolResult = fc.record(
  {
    role: fc.constant("toolResult"),
    toolCallId: id,
    toolName: id,
    content: fc.array(fc.oneof(text, image), { maxLength: 3 }),
    details: fc.jsonValue({ maxDepth: 1 }),
    isError: fc.boolean(),
    timestamp: fc.nat()
  },
  { requiredKeys: ["role", "toolCallId", "toolName", "content", "isError"] }
)
const definition = fc.record(
  {
    name: id,
    description: fc.string(),
    parameters: fc.constant({ type: "object" }),
    readOnly: fc.boolean(),
    exclusive: fc.boolean(),
    timeoutMs: fc.integer({ min: 1, max: 10_000 })
  },
  { requiredKeys: ["name", "description", "parameters"] }
)
const settings = fc.record(
  { systemPrompt: fc.string(), maxSteps: fc.integer({ min: 1, max: 50 }), signal: fc.constant(new AbortController().signal) },
  { requiredKeys: [] }
)

const oddValues = [undefined, null, Number.NaN, Infinity, "", 0, -1, 1.5, "x", true, [], {}, [1]]

interface Rng {
  readonly nextInt: (min: number, max: number) => number
}

/** A small deterministic generator (mulberry32) seeded by fast-check, so failures replay. */
const makeRng = (seed: number): Rng => {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return { nextInt: (min, max) => min + Math.floor(next() * (max - min + 1)) }
}

/** A copy of `value` with one random perturbation somewhere inside. */
const perturb = (value: unknown, rng: Rng): unknown => {
  if (Array.isArray(value)) {
    if (value.length === 0 || rng.nextInt(0, 4) === 0) return [...value, oddValues[rng.nextInt(0, oddValues.length - 1)]]
    const i = rng.nextInt(0, value.length - 1)
    return value.map((v, j) => (j === i ? perturb(v, rng) : v))
  }
  if (value !== null && typeof value === "object" && !(value instanceof AbortSignal)) {
    const keys = Object.keys(value)
    const out: Record<string, unknown> = { ...(value as Record<string, unknown>) }
    const choice = rng.nextInt(0, 3)
    if (keys.length === 0 || choice === 0) {
      out[["role", "type", "id", "content", "usage", "extra", "timestamp"][rng.nextInt(0, 6)]!] =
        oddValues[rng.nextInt(0, oddValues.length - 1)]
    } else {
      const key = keys[rng.nextInt(0, keys.length - 1)]!
      if (choice === 1) delete out[key]
      else if (choice === 2) out[key] = oddValues[rng.nextInt(0, oddValues.length - 1)]
      else out[key] = perturb(out[key], rng)
    }
    return out
  }
  return oddValues[rng.nextInt(0, oddValues.length - 1)]
}

const cases = [
  { name: "Message", arb: fc.oneof(user, assistant, toolResult), schema: Message, guard: isMessageFast },
  { name: "AssistantMessage", arb: assistant, schema: AssistantMessage, guard: isAssistantMessageFast },
  { name: "ToolResultMessage", arb: toolResult, schema: ToolResultMessage, guard: isToolResultMessageFast },
  { name: "Array(ToolDefinition)", arb: fc.array(definition, { maxLength: 3 }), schema: Schema.Array(ToolDefinition), guard: isToolDefinitionsFast },
  { name: "RunSettings", arb: settings, schema: RunSettings, guard: isRunSettingsFast }
] as const

describe("fast guards agree with the schemas", () => {
  for (const c of cases) {
    const decodes = (u: unknown) => Exit.isSuccess(Schema.decodeUnknownExit(c.schema as Schema.Decoder<unknown>)(u))
    it(`${c.name}: valid values pass both; a guard never accepts what the schema rejects`, () => {
      fc.assert(
        fc.property(c.arb, fc.integer(), (value, seed) => {
          assert.isTrue(decodes(value), "the generator makes valid values")
          assert.isTrue((c.guard as (u: unknown) => boolean)(value), "the fast path accepts valid values")
          const rng = makeRng(seed)
          let mutated: unknown = value
          for (let i = 0; i < 3; i++) {
            mutated = perturb(mutated, rng)
            if ((c.guard as (u: unknown) => boolean)(mutated)) assert.isTrue(decodes(mutated), JSON.stringify(mutated))
          }
        }),
        { numRuns: 2000 }
      )
    })
  }
})
