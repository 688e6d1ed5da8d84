/**
 * The providers' server-sent events parser (internal/sse.ts, faster than effect's on model
 * streams) must read every stream exactly as effect's `Sse.makeParser` does: this differential
 * test generates streams from the pieces a parser can trip on (CR, LF, CRLF, comments, fields with
 * and without a space or a value, `id` with NUL, `retry`, a byte order mark, multi-byte
 * characters), cuts them into random pieces, and compares the events with effect's parser reading
 * the whole text. It also checks the limit on a pending event.
 */
import { assert, describe, it } from "@effect/vitest"
import { Sse } from "effect/encoding"
import * as fc from "fast-check"
import { makeEventParser } from "../src/internal/sse.ts"

const tokens = [
  "data",
  "data:",
  "data: ",
  "data:  ",
  "event:",
  "event: ",
  "event",
  "id:",
  "id: 1",
  "id: a\u0000b",
  "retry: 5",
  "retry",
  ":",
  ": comment",
  " ",
  "x",
  "{\"a\":1}",
  "\r",
  "\n",
  "\r\n",
  "\n\n",
  "\r\n\r\n",
  "é",
  "🙂",
  "\uFEFF",
  "message",
  "ping",
  "DATA:",
  "dat",
  "a:",
  "ev",
  "ent:"
]

/** A whole line: a field, a separator, a value and a line end (often an event's end). */
const line = fc.tuple(
  fc.constantFrom("data", "data", "event", "id", "retry", "", "x", "Data"),
  fc.constantFrom(":", ": ", ":  ", "", ":"),
  fc.constantFrom("", "x", "ping", "{\"a\":1}", "é🙂", " y", ":z"),
  fc.constantFrom("\n", "\r", "\r\n", "\n\n", "\r\n\r\n", "\r\r", "\n")
).map((parts) => parts.join(""))

const stream = fc.array(fc.oneof(fc.constantFrom(...tokens), line), { maxLength: 60 }).map((parts) => parts.join(""))

type Seen = { readonly event: string; readonly id: string | undefined; readonly data: string }

const withEffect = (text: string): ReadonlyArray<Seen> => {
  const out: Array<Seen> = []
  const parser = Sse.makeParser((event) => {
    if (event._tag === "Event") out.push({ event: event.event, id: event.id, data: event.data })
  })
  parser.feed(text)
  return out
}

const withOurs = (pieces: ReadonlyArray<string>): ReadonlyArray<Seen> => {
  const out: Array<Seen> = []
  const parser = makeEventParser((event) => out.push({ event: event.event, id: event.id, data: event.data }))
  for (const piece of pieces) assert.strictEqual(parser.feed(piece), undefined)
  return out
}

/** `text` cut at the given positions (modulo its length). */
const cut = (text: string, at: ReadonlyArray<number>): ReadonlyArray<string> => {
  const points = [...new Set(at.map((n) => (text.length === 0 ? 0 : n % (text.length + 1))))].sort((a, b) => a - b)
  const pieces: Array<string> = []
  let from = 0
  for (const point of points) {
    pieces.push(text.slice(from, point))
    from = point
  }
  pieces.push(text.slice(from))
  return pieces
}

describe("the SSE parser", () => {
  it("reads every generated stream, cut anywhere, as effect's parser reads it whole", () =>
    fc.assert(
      fc.property(stream, fc.array(fc.nat(), { maxLength: 12 }), (text, at) => {
        assert.deepStrictEqual(withOurs(cut(text, at)), withEffect(text), JSON.stringify(cut(text, at)))
      }),
      { numRuns: 3000 }
    ))

  it("one character at a time too", () =>
    fc.assert(
      fc.property(stream, (text) => {
        assert.deepStrictEqual(withOurs([...text]), withEffect(text))
      }),
      { numRuns: 500 }
    ))

  it("refuses a pending event larger than the limit, in one piece or many", () => {
    for (const pieces of [["data: " + "x".repeat(120)], Array.from({ length: 20 }, () => "data: xxxxxxxxxx\n")]) {
      const parser = makeEventParser(() => assert.fail("no event is complete"), 100)
      const errors = pieces.map((piece) => parser.feed(piece)).filter((error) => error !== undefined)
      assert.deepStrictEqual(errors.slice(0, 1), ["Pending SSE event exceeded the maximum size of 100"])
    }
  })

  it("many events each below the limit are fine: the limit is per event", () => {
    let seen = 0
    const parser = makeEventParser(() => seen++, 100)
    for (let i = 0; i < 50; i++) assert.strictEqual(parser.feed(`event: e\ndata: ${"x".repeat(60)}\n\n`), undefined)
    assert.strictEqual(seen, 50)
  })
})
