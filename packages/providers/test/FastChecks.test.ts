/**
 * The hand-written checks that vouch for the common event shapes (`fastChunk`, `fastBlockDelta`)
 * stand in for the effect schemas on the hot path. Their contract: the protocol behaves exactly
 * as if the schema decoded every event. This differential test replays every recorded stream,
 * with events perturbed at random (a key dropped, a value replaced by any JSON value or by null),
 * through the protocol twice — hand-written checks on, and off (the schema decodes everything) —
 * and requires the same steps (events, failures and their messages, the final message). It also
 * checks that the recorded hot events do take the fast path (otherwise it would be useless).
 */
import type { ModelEvent } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { Sse } from "effect/encoding"
import * as fc from "fast-check"
import { readdirSync, readFileSync } from "node:fs"
import { fastBlockDelta, messagesProtocol } from "../src/internal/anthropicWire.ts"
import { chatProtocol, fastChunk } from "../src/internal/openAiWire.ts"
import { makeCleaner } from "../src/internal/text.ts"
import type { Step, WireProtocol } from "../src/internal/transport.ts"

const fixtureRoot = new URL("./fixtures/", import.meta.url)

/** The events of every recorded stream in `dir`, one list per file. */
const recorded = (dir: string): ReadonlyArray<ReadonlyArray<Sse.Event>> =>
  readdirSync(new URL(`${dir}/`, fixtureRoot)).filter((file) => file.endsWith(".sse")).map((file) => {
    const events: Array<Sse.Event> = []
    const parser = Sse.makeParser((event) => {
      if (event._tag === "Event") events.push(event)
    })
    parser.feed(readFileSync(new URL(`${dir}/${file}`, fixtureRoot), "utf8"))
    return events
  })

const anthropicStreams = recorded("anthropic")
const openAiStreams = [...recorded("openai-chat"), ...recorded("openai-compat")]

type Json = null | boolean | number | string | Array<Json> | { [key: string]: Json }

/** Every path to a value inside `value` (object keys and array indices). */
const pathsOf = (value: Json, prefix: ReadonlyArray<string | number> = []): Array<ReadonlyArray<string | number>> => {
  if (value === null || typeof value !== "object") return []
  const keys: Array<string | number> = Array.isArray(value) ? value.map((_, i) => i) : Object.keys(value)
  return keys.flatMap((key) => {
    const path = [...prefix, key]
    const child = (value as Record<string | number, Json>)[key]!
    return [path, ...pathsOf(child, path)]
  })
}

interface Mutation {
  readonly event: number
  readonly path: number
  readonly kind: "delete" | "replace" | "null"
  readonly value: Json
}

const mutation: fc.Arbitrary<Mutation> = fc.record({
  event: fc.nat(),
  path: fc.nat(),
  kind: fc.constantFrom("delete", "replace", "null"),
  value: fc.oneof(
    fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Json>,
    fc.constantFrom<Json>("", "text_delta", "input_json_delta", "thinking_delta", 0, 1.5, -1, [], {}, true)
  )
})

const mutate = (events: ReadonlyArray<Sse.Event>, mutations: ReadonlyArray<Mutation>): ReadonlyArray<Sse.Event> => {
  const out = events.slice()
  for (const m of mutations) {
    const index = m.event % out.length
    const event = out[index]!
    if (event.data.trim() === "[DONE]") continue
    const json = JSON.parse(event.data) as Json
    const paths = pathsOf(json)
    if (paths.length === 0) continue
    const path = paths[m.path % paths.length]!
    let parent = json as Record<string | number, Json>
    for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, Json>
    const last = path[path.length - 1]!
    if (m.kind === "delete" && !Array.isArray(parent)) delete parent[last]
    else parent[last] = m.kind === "null" ? null : m.value
    out[index] = { ...event, data: JSON.stringify(json) }
  }
  return out
}

/**
 * The steps of a protocol over `events` with the model events of each, until it fails or finishes (nothing more is
 * fed after that).
 */
const run = (
  protocol: WireProtocol,
  events: ReadonlyArray<Sse.Event>
): ReadonlyArray<{ readonly step: Step; readonly events: ReadonlyArray<ModelEvent> }> => {
  const steps: Array<{ readonly step: Step; readonly events: ReadonlyArray<ModelEvent> }> = []
  for (const event of events) {
    const out: Array<ModelEvent> = []
    const step = protocol.onEvent(event, out)
    steps.push({ step, events: out })
    if (step._tag === "Fail" || step.finished) return steps
  }
  const out: Array<ModelEvent> = []
  steps.push({ step: protocol.onEnd(out), events: out })
  return steps
}

const context = { provider: "P", model: "m", timestamp: 0, idPrefix: "call_x", clean: makeCleaner(["sk-secret"]) }

const differential = (
  streams: ReadonlyArray<ReadonlyArray<Sse.Event>>,
  make: (fastChecks: boolean) => WireProtocol
) =>
  fc.assert(
    fc.property(
      fc.nat({ max: streams.length - 1 }),
      fc.array(mutation, { minLength: 1, maxLength: 4 }),
      (which, mutations) => {
        const events = mutate(streams[which]!, mutations)
        assert.deepStrictEqual(run(make(true), events), run(make(false), events))
      }
    ),
    { numRuns: 1500 }
  )

describe("hand-written checks of hot events", () => {
  it("Anthropic: with and without them, the same steps on perturbed recorded streams", () =>
    differential(anthropicStreams, (fastChecks) => messagesProtocol({ ...context, fastChecks })))

  it("Chat Completions: with and without them, the same steps on perturbed recorded streams", () =>
    differential(openAiStreams, (fastChecks) => chatProtocol({ ...context, fastChecks })))

  it("the recorded deltas take the fast path (every content_block_delta, every chunk without usage or error)", () => {
    let anthropic = 0
    for (const event of anthropicStreams.flat()) {
      const json: unknown = JSON.parse(event.data)
      if (event.event === "content_block_delta") {
        assert.strictEqual(fastBlockDelta(json), json, event.data)
        anthropic++
      }
    }
    let openAi = 0
    for (const event of openAiStreams.flat()) {
      if (event.data.trim() === "[DONE]") continue
      const json = JSON.parse(event.data) as Record<string, unknown>
      if ((json["usage"] ?? null) === null && (json["error"] ?? null) === null) {
        assert.strictEqual(fastChunk(json), json, event.data)
        openAi++
      }
    }
    assert.isAbove(anthropic, 30)
    assert.isAbove(openAi, 100)
  })
})
