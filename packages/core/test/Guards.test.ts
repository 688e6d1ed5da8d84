/**
 * The loop's fast structural guards (internal/rules/guards.ts) stand in for the effect schemas on the
 * hot path. The message schemas in Message.ts are the one definition of a message's shape; the
 * guards are a hand-written shortcut held to them here, generatively:
 *
 * - the valid values come from the schemas themselves (`Arbitrary.schema`, effect's derivation
 *   of generators from a schema), so a field added to a schema is generated at once;
 * - each is then perturbed (a key dropped, a wrong type, an explicit undefined, NaN, an empty id,
 *   an extra key, a wrong tag, somewhere inside), and
 * - on every value, valid or perturbed, a message guard says yes exactly when the schema decodes
 *   it: no invalid message is fast-accepted, no valid one is sent the slow way.
 *
 * The guards of the run's settings and tool definitions only promise the first half (they leave
 * rare shapes to the schema), so they are checked in that direction on hand-made generators.
 */
import { AssistantMessage, Message, RunSettings, ToolDefinition, ToolResultMessage } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, Effect, Exit, Schema } from "effect"
import * as fc from "fast-check"
import {
  isAssistantMessageFast,
  isMessageFast,
  isRunSettingsFast,
  isToolDefinitionsFast,
  isToolResultMessageFast
} from "../src/internal/rules/guards.ts"

const id = fc.string({ minLength: 1, maxLength: 6 })
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
  {
    systemPrompt: fc.string(),
    maxSteps: fc.integer({ min: 1, max: 50 }),
    signal: fc.constant(new AbortController().signal)
  },
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
    if (value.length === 0 || rng.nextInt(0, 4) === 0) {
      return [...value, oddValues[rng.nextInt(0, oddValues.length - 1)]]
    }
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

const decoder = (schema: Schema.Top) => {
  const decode = Schema.decodeUnknownExit(schema as Schema.Decoder<unknown>)
  return (u: unknown) => Exit.isSuccess(decode(u))
}

/** Values generated from `schema` itself: deterministic (a fixed seed), of growing size. */
const samplesOf = <S extends Schema.Top>(schema: S, count: number): ReadonlyArray<unknown> =>
  Effect.runSync(Arbitrary.sampleEffect(Arbitrary.schema(schema as Schema.Constraint), { count, seed: 22, size: 6 }))

const exact = [
  { name: "Message", schema: Message, guard: isMessageFast },
  { name: "AssistantMessage", schema: AssistantMessage, guard: isAssistantMessageFast },
  { name: "ToolResultMessage", schema: ToolResultMessage, guard: isToolResultMessageFast }
] as const

describe("the message guards accept exactly what the message schemas decode", () => {
  for (const c of exact) {
    it(`${c.name}: on values derived from the schema and on perturbations of them`, () => {
      const decodes = decoder(c.schema)
      const guard = c.guard as (u: unknown) => boolean
      let perturbed = 0
      let rejected = 0
      samplesOf(c.schema, 1500).forEach((value, n) => {
        assert.isTrue(decodes(value), "the schema's generator makes valid values")
        assert.isTrue(guard(value), `the guard accepts a valid value: ${JSON.stringify(value)}`)
        const rng = makeRng(n)
        let mutated: unknown = value
        for (let i = 0; i < 4; i++) {
          mutated = perturb(mutated, rng)
          const valid = decodes(mutated)
          perturbed++
          if (!valid) rejected++
          assert.strictEqual(guard(mutated), valid, `guard and schema differ on ${JSON.stringify(mutated)}`)
        }
      })
      // the perturbations reach both sides of the line
      assert.isAbove(rejected, perturbed / 4)
      assert.isBelow(rejected, perturbed)
    })
  }

  it("Message: values of the other roles' schemas, messages of the wrong role", () => {
    const decodes = decoder(AssistantMessage)
    for (const value of samplesOf(Message, 500)) {
      assert.strictEqual(isAssistantMessageFast(value), decodes(value))
      assert.strictEqual(isToolResultMessageFast(value), decoder(ToolResultMessage)(value))
    }
  })

  it("a value whose reading throws is not fast-accepted (the schema then reports it)", () => {
    const throwing = {
      role: "user",
      get content(): string {
        throw new Error("boom")
      }
    }
    assert.isFalse(isMessageFast(throwing))
    assert.isFalse(isMessageFast(
      new Proxy({}, {
        get: () => {
          throw new Error("boom")
        }
      })
    ))
  })
})

const oneWay = [
  {
    name: "Array(ToolDefinition)",
    arb: fc.array(definition, { maxLength: 3 }),
    schema: Schema.Array(ToolDefinition),
    guard: isToolDefinitionsFast
  },
  { name: "RunSettings", arb: settings, schema: RunSettings, guard: isRunSettingsFast }
] as const

describe("the settings guards never accept what the schema rejects", () => {
  for (const c of oneWay) {
    const decodes = decoder(c.schema)
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
