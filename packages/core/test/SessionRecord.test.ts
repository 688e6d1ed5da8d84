/**
 * The session file's records have one schema (SessionRecord.ts), which the CLI writes with and
 * every reader decodes with. Files written by 0.1 (the fixture: a chat session with approvals, a
 * compaction, a model switch and a durable run) load: every record decodes, and the transcript
 * loads as core's parser reads it.
 */
import { decodeSessionRecord, parseTranscript, sessionRecordsOf, sessionRecordTypes } from "@agentloop/core"
import type { SessionRecord, TranscriptRecord } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

const fixture = readFileSync(fileURLToPath(new URL("./fixtures/session-0.1.jsonl", import.meta.url)), "utf8")

describe("session records", () => {
  it.effect("a session file written by 0.1 loads: every record decodes, the transcript is sound", () =>
    Effect.gen(function*() {
      const loaded = yield* parseTranscript(fixture, "session-0.1.jsonl")
      assert.strictEqual(loaded.repaired, 0)
      assert.isAbove(loaded.messages.length, 10)
      for (const record of loaded.records) {
        assert.isTrue(decodeSessionRecord(record)?.ok, JSON.stringify(record))
      }
      const records = sessionRecordsOf(loaded.records)
      assert.strictEqual(records.length, loaded.records.length)
      // every kind of record is in the fixture, each read by its fields
      assert.deepStrictEqual(new Set(records.map((r) => r.type)), sessionRecordTypes)
      const header = records[0]!
      assert.isTrue(header.type === "session" && header.version === 1 && header.model === "claude-sonnet-4-5")
      const ends = records.filter((r): r is Extract<SessionRecord, { type: "run_end" }> => r.type === "run_end")
      assert.deepStrictEqual(ends.map((e) => e.reason), ["stop", "aborted", "error", "stop"])
      assert.deepStrictEqual(ends[3]!.output, { ok: true })
      const compaction = records.find((r) => r.type === "compaction")
      assert.isTrue(compaction?.type === "compaction" && compaction.summary?.role === "user")
    }))

  it("a record of an unknown type is left to the reader (undefined), a known one that does not decode says why", () => {
    assert.isUndefined(decodeSessionRecord({ type: "future_record", at: 1 }))
    const bad = decodeSessionRecord({ type: "run_end", at: 1, reason: "finished" } as TranscriptRecord)
    assert.isTrue(bad !== undefined && !bad.ok)
    assert.match(bad !== undefined && !bad.ok ? bad.error : "", /Expected "stop" \| "length"/)
    const noAt = decodeSessionRecord({ type: "tool_start", toolCallId: "c", name: "read" })
    assert.isTrue(noAt !== undefined && !noAt.ok)
    assert.deepStrictEqual(
      sessionRecordsOf([{ type: "future_record" }, { type: "run_end", at: 1, reason: "finished" }, {
        type: "model",
        at: 2,
        model: "m"
      }]),
      [{ type: "model", at: 2, model: "m" }]
    )
  })

  it("extra fields a newer writer adds do not stop a record from decoding", () => {
    const decoded = decodeSessionRecord({ type: "turn_start", at: 1, step: 2, extra: { any: "thing" } })
    assert.isTrue(decoded?.ok)
  })
})
