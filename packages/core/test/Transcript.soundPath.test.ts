/**
 * `prepareTranscript` checks a well-formed transcript in one pass that calls the fast guards' checks
 * per role directly (not through `isMessageFast`, which Guards.test.ts compares with the schema).
 * So this compares that pass with the `Message` schema too: every field of every message of a
 * transcript that exercises each optional key and content part is in turn removed or replaced
 * by an odd value, and whenever `prepareTranscript` still accepts the transcript, the changed
 * message must decode with the schema (SPEC §5: every input message is checked).
 */
import { Message, prepareTranscript } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { Exit, Schema } from "effect"

type Json = Record<string, unknown>

const transcript = (): Array<Json> => [
  { role: "user", content: "hi" },
  {
    role: "user",
    content: [{ type: "text", text: "look" }, { type: "image", data: "AAAA", mimeType: "image/png" }],
    timestamp: 1
  },
  {
    role: "assistant",
    content: [
      { type: "thinking", thinking: "hmm", signature: "sig", redacted: false },
      { type: "text", text: "calling" },
      { type: "toolCall", id: "c1", name: "echo", arguments: { x: 1 } }
    ],
    stopReason: "toolUse",
    usage: { input: 1, output: 2, cacheRead: 0, cacheWrite: 0, cost: 0.5 },
    model: "m",
    timestamp: 2
  },
  {
    role: "toolResult",
    toolCallId: "c1",
    toolName: "echo",
    content: [{ type: "text", text: "ok" }, { type: "image", data: "AAAA", mimeType: "image/png" }],
    details: { any: "thing" },
    isError: false,
    timestamp: 3
  },
  { role: "assistant", content: [{ type: "text", text: "done" }], stopReason: "error", errorMessage: "boom" }
]

const keys = [
  "role",
  "content",
  "timestamp",
  "stopReason",
  "errorMessage",
  "usage",
  "model",
  "toolCallId",
  "toolName",
  "isError",
  "type",
  "text",
  "data",
  "mimeType",
  "thinking",
  "signature",
  "redacted",
  "id",
  "name",
  "arguments",
  "input",
  "output",
  "cacheRead",
  "cacheWrite",
  "cost"
]
const REMOVE = Symbol("remove")
const oddValues: ReadonlyArray<unknown> = [
  REMOVE,
  undefined,
  null,
  Number.NaN,
  Infinity,
  -Infinity,
  "",
  "x",
  0,
  true,
  [],
  {},
  [1]
]

const decodes = (u: unknown) => Exit.isSuccess(Schema.decodeUnknownExit(Message)(u))

/** The objects of a message one level of nesting at a time: the message, its parts, its usage. */
const targets = (message: Json): Array<Json> => {
  const out: Array<Json> = [message]
  if (Array.isArray(message["content"])) out.push(...(message["content"] as Array<Json>))
  if (typeof message["usage"] === "object" && message["usage"] !== null) out.push(message["usage"] as Json)
  return out
}

describe("prepareTranscript's one-pass check agrees with the Message schema", () => {
  it("the unchanged transcript is accepted as it is", () => {
    const input = transcript()
    for (const message of input) assert.isTrue(decodes(message))
    const checked = prepareTranscript(input)
    assert.isTrue(checked.ok)
    if (checked.ok) assert.deepStrictEqual(checked.value, input)
  })

  it("a transcript with one field removed or made odd is accepted only if that message still decodes", () => {
    let accepted = 0
    let rejected = 0
    for (let m = 0; m < transcript().length; m++) {
      for (let t = 0; t < targets(transcript()[m]!).length; t++) {
        for (const key of keys) {
          for (const odd of oddValues) {
            const input = transcript()
            const target = targets(input[m]!)[t]!
            if (odd === REMOVE) {
              if (!(key in target)) continue
              delete target[key]
            } else target[key] = odd
            const checked = prepareTranscript(input)
            if (!checked.ok) {
              rejected++
              continue
            }
            accepted++
            assert.isTrue(decodes(input[m]), `accepted messages[${m}] = ${JSON.stringify(input[m])}`)
          }
        }
      }
    }
    // both outcomes happen (extra keys are accepted; a wrong type is rejected)
    assert.isAbove(accepted, 100)
    assert.isAbove(rejected, 100)
  })
})
