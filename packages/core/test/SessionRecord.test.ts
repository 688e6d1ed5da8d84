/**
 * The session file's records have one schema (SessionRecord.ts), which the CLI writes with and
 * every reader decodes with. Files written by 0.1 (the fixture: a chat session with approvals, a
 * compaction, a model switch and a durable run) load: every record decodes, and the transcript
 * loads as core's parser reads it.
 */
import {
  decodeSessionRecord,
  parseTranscript,
  sessionHistoryOf,
  sessionRecordsOf,
  sessionRecordTypes,
  sessionRunsOf
} from "@agentloop/core"
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
      // every kind of record 0.1 wrote is in the fixture, each read by its fields (checkpoints, undo and MCP
      // servers' questions came later)
      const later = new Set(["checkpoint", "undo", "mcp_request"])
      assert.deepStrictEqual(
        new Set(records.map((r) => r.type)),
        new Set([...sessionRecordTypes].filter((t) => !later.has(t)))
      )
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

describe("a session's runs", () => {
  it.effect("each run's prompt and messages are found, whatever order a batch's results were written in", () =>
    Effect.gen(function*() {
      const line = (value: unknown) => JSON.stringify(value)
      const call = (id: string) => ({ type: "toolCall", id, name: "bash", arguments: {} })
      const result = (id: string) => ({
        role: "toolResult",
        toolCallId: id,
        toolName: "bash",
        content: [{ type: "text", text: id }],
        isError: false
      })
      const text = [
        { type: "session", at: 1, version: 1 },
        { type: "run_start", at: 2, prompt: "one" },
        { role: "user", content: "one" },
        { role: "assistant", content: [call("a"), call("b")], stopReason: "toolUse" },
        { type: "tool_start", at: 3, toolCallId: "a", name: "bash" },
        { type: "tool_start", at: 3, toolCallId: "b", name: "bash" },
        { type: "tool_end", at: 4, toolCallId: "b" },
        result("b"),
        { type: "tool_end", at: 5, toolCallId: "a" },
        result("a"),
        { role: "assistant", content: [{ type: "text", text: "done" }], stopReason: "stop" },
        { type: "run_end", at: 6, reason: "stop", steps: 2 },
        { type: "run_start", at: 7, prompt: "two" },
        { role: "user", content: "two" },
        // killed in the middle of a batch: c has no result (loading pairs it)
        { role: "assistant", content: [call("c")], stopReason: "toolUse" },
        { type: "tool_start", at: 8, toolCallId: "c", name: "bash" }
      ].map(line).join("\n") + "\n"
      const loaded = yield* parseTranscript(text)
      assert.deepStrictEqual(loaded.messages.map((m) => m.role), [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "assistant",
        "user",
        "assistant",
        "toolResult"
      ])
      // records among a batch's results count as after the batch
      assert.deepStrictEqual(loaded.recordsAt, [0, 0, 4, 4, 4, 4, 5, 5, 8])
      const runs = sessionRunsOf(loaded)
      assert.deepStrictEqual(runs.map((r) => [r.start.prompt, r.from, r.to, r.end?.reason]), [
        ["one", 0, 5, "stop"],
        ["two", 5, 8, undefined]
      ])
      assert.strictEqual(loaded.messages[runs[1]!.from]!.role, "user")
    }))
})

describe("the history a session continues (undo)", () => {
  const line = (value: unknown) => JSON.stringify(value)
  const call = (id: string) => ({ type: "toolCall", id, name: "edit", arguments: {} })
  const result = (id: string) => ({
    role: "toolResult",
    toolCallId: id,
    toolName: "edit",
    content: [{ type: "text", text: id }],
    isError: false
  })
  /** A run of `prompt` with one call `id` and its result, ended (or killed mid-batch: no result, no end). */
  const run = (prompt: string, id: string, ended = true) => [
    { type: "run_start", at: 2, prompt },
    { role: "user", content: prompt },
    { role: "assistant", content: [call(id)], stopReason: "toolUse" },
    { type: "checkpoint", at: 3, run: 0, toolCallId: id, tool: "edit", file: { path: "a.txt", blob: "00", size: 1 } },
    ...(ended ?
      [result(id), { role: "assistant", content: [{ type: "text", text: `${prompt} done` }], stopReason: "stop" }, {
        type: "run_end",
        at: 4,
        reason: "stop",
        steps: 2
      }] :
      [])
  ]
  const load = (entries: ReadonlyArray<unknown>) =>
    parseTranscript(entries.map(line).join("\n") + "\n").pipe(Effect.map(sessionHistoryOf))
  const prompts = (
    history: { readonly messages: ReadonlyArray<{ readonly role: string; readonly content: unknown }> }
  ) => history.messages.filter((m) => m.role === "user").map((m) => m.content)

  it.effect("undone runs are left out whole (every call stays paired); later runs and their numbers stay", () =>
    Effect.gen(function*() {
      const history = yield* load([
        { type: "session", at: 1, version: 1 },
        ...run("one", "a"),
        ...run("two", "b"),
        ...run("three", "c", false),
        { type: "undo", at: 5, runs: [2, 3], restored: ["a.txt"] },
        ...run("four", "d")
      ])
      assert.deepStrictEqual(prompts(history), ["one", "four"])
      assert.deepStrictEqual(history.runs.map((r) => [r.number, r.start.prompt, r.from, r.to]), [
        [1, "one", 0, 4],
        [4, "four", 4, 8]
      ])
      assert.deepStrictEqual(history.messages.map((m) => m.role), [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "user",
        "assistant",
        "toolResult",
        "assistant"
      ])
    }))

  it.effect("a run killed mid-batch and undone leaves no dangling call; without an undo everything is kept", () =>
    Effect.gen(function*() {
      const entries = [{ type: "session", at: 1, version: 1 }, ...run("one", "a"), ...run("two", "b", false)]
      const kept = yield* load(entries)
      assert.deepStrictEqual(prompts(kept), ["one", "two"])
      assert.strictEqual(kept.messages.length, 7, "the killed run's call is paired as interrupted")
      const undone = yield* load([...entries, { type: "undo", at: 5, runs: [2] }])
      assert.deepStrictEqual(prompts(undone), ["one"])
      assert.deepStrictEqual(undone.messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"])
    }))

  it.effect("a compaction stays in force unless an undo leaves fewer messages than it summarised", () =>
    Effect.gen(function*() {
      const summary = { role: "user", content: "[summary]" }
      const base = [{ type: "session", at: 1, version: 1 }, ...run("one", "a"), ...run("two", "b")]
      // summarised the first run's 4 messages, during the second run
      const compacted = [...base.slice(0, -4), { type: "compaction", at: 3, summarized: 4, summary }, ...base.slice(-4)]
      const still = yield* load([...compacted, { type: "undo", at: 5, runs: [2] }])
      assert.deepStrictEqual(still.compaction, { summary: summary as never, covered: 4 })
      const covering = [...base, { type: "compaction", at: 5, summarized: 6, summary }]
      assert.strictEqual((yield* load(covering)).compaction?.covered, 6)
      const gone = yield* load([...covering, { type: "undo", at: 6, runs: [2] }])
      assert.isUndefined(gone.compaction, "the summary covered messages of the undone run")
    }))

  it("checkpoint and undo records decode; a checkpoint needs its run", () => {
    assert.isTrue(
      decodeSessionRecord({ type: "checkpoint", at: 1, run: 1, file: { path: "a", absent: true } })?.ok
    )
    assert.isTrue(decodeSessionRecord({ type: "checkpoint", at: 1, run: 1, tree: "abc" })?.ok)
    assert.isTrue(decodeSessionRecord({ type: "undo", at: 1, runs: [1], failed: [{ path: "a", reason: "r" }] })?.ok)
    assert.isFalse(decodeSessionRecord({ type: "checkpoint", at: 1, file: { path: "a" } })?.ok)
  })
})
