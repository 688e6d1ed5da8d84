/**
 * `agentloop sessions show`, `sessions fork ID --at N` and `run/chat --fork ID:N`: the fork's lines
 * from a recorded session (pure, from the viewer's fixture), and the commands as real processes
 * against a loopback model: the fork holds prompts 1..N, the original file is never changed, bad
 * input writes nothing.
 */
import { parseTranscript, SessionHeader } from "@agentloop/core"
import type { Message, SessionRecord } from "@agentloop/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { CliError } from "../src/CliError.ts"
import { forkEntries, parseForkPoint } from "../src/internal/Fork.ts"
import { buildTimeline, parseSessionText } from "../src/view/index.ts"
import {
  jsonLines,
  makeWorkspace,
  providerFlags,
  scriptServer,
  sessionFiles,
  startCli,
  testEnv
} from "./helpers/agent.ts"

const fixture = (name: string) =>
  readFileSync(fileURLToPath(new URL(`./fixtures/view/${name}`, import.meta.url)), "utf8")

const typeOf = (entry: Message | SessionRecord) => "role" in entry ? entry.role : entry.type

describe("forkEntries (the lines of a fork)", () => {
  it.effect("at prompt 1: run 1's records and messages up to its run_end; the /compact after it is not copied", () =>
    Effect.gen(function*() {
      const loaded = yield* parseTranscript(fixture("coding-session.jsonl"))
      const fork = forkEntries(loaded, "s", 1)
      assert.isFalse(fork instanceof CliError)
      if (fork instanceof CliError) return
      const types = fork.entries.map(typeOf)
      assert.strictEqual(types[0], "run_start")
      assert.strictEqual(types[types.length - 1], "run_end")
      assert.notInclude(types, "session", "the original header is replaced, not copied")
      assert.notInclude(types, "compaction")
      assert.strictEqual(types.filter((t) => t === "run_start").length, 1)
      // the messages are run 1's, in the transcript's order (each batch's results in call order)
      const messages = fork.entries.filter((e): e is Message => "role" in e)
      assert.deepStrictEqual(messages, loaded.messages.slice(0, messages.length))
      assert.strictEqual(messages.length, 9)
    }))

  it.effect("at prompt 2: the compaction and model switch before it come along; the fork passes every check", () =>
    Effect.gen(function*() {
      const loaded = yield* parseTranscript(fixture("coding-session.jsonl"))
      const fork = forkEntries(loaded, "s", 2)
      if (fork instanceof CliError) return assert.fail(fork.message)
      const types = fork.entries.map(typeOf)
      assert.include(types, "compaction")
      assert.include(types, "model")
      assert.strictEqual(types.filter((t) => t === "run_end").length, 2)
      const header = { type: "session", at: 1, id: "f", forkedFrom: { session: "s", prompt: 2 } }
      const text = [header, ...fork.entries].map((e) => `${JSON.stringify(e)}\n`).join("")
      const timeline = buildTimeline(parseSessionText(text))
      assert.deepStrictEqual(timeline.invariants.flatMap((c) => c.violations), [])
      assert.deepStrictEqual(timeline.problems, [])
      assert.strictEqual(timeline.runs.length, 2)
      // the header decodes with core's schema, forkedFrom included
      assert.deepStrictEqual(Schema.decodeUnknownSync(SessionHeader)(header).forkedFrom, { session: "s", prompt: 2 })
    }))

  it.effect("refuses a prompt out of range, and a run with no end (a killed process)", () =>
    Effect.gen(function*() {
      const loaded = yield* parseTranscript(fixture("coding-session.jsonl"))
      for (const n of [0, 4, 1.5]) {
        const fork = forkEntries(loaded, "s", n)
        assert.instanceOf(fork, CliError)
        assert.include((fork as CliError).message, "has 3 prompt(s): fork at 1 to 3")
      }
      const killed = forkEntries(yield* parseTranscript(fixture("killed-mid-batch.jsonl")), "k", undefined)
      assert.instanceOf(killed, CliError)
      assert.include((killed as CliError).message, "prompt 1 of session k has no end")
    }))

  it("reads --fork ID and ID:N, and refuses anything else", () => {
    assert.deepStrictEqual(parseForkPoint("20261201-101500-ab12"), {
      session: "20261201-101500-ab12",
      prompt: undefined
    })
    assert.deepStrictEqual(parseForkPoint("20261201-101500-ab12:2"), { session: "20261201-101500-ab12", prompt: 2 })
    assert.instanceOf(parseForkPoint("../x:2"), CliError)
    assert.instanceOf(parseForkPoint("abc:two"), CliError)
  })
})

const userTexts = (body: Record<string, unknown>): Array<string> =>
  (body["messages"] as Array<{ role: string; content: unknown }>).filter((m) => m.role === "user").map((m) =>
    typeof m.content === "string" ? m.content : JSON.stringify(m.content)
  )

describe("agentloop sessions show / sessions fork / --fork (processes)", () => {
  it("forks a two-prompt session at prompt 1: the new file holds run 1 only, the original is unchanged", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([
      { calls: [{ id: "w1", name: "write", args: { path: "a.txt", content: "one\n" } }] },
      { text: "wrote a.txt" },
      { calls: [{ id: "w2", name: "write", args: { path: "b.txt", content: "two\n" } }] },
      { text: "wrote b.txt" },
      { text: "forked answer" }
    ])
    try {
      const env = testEnv(ws)
      const first = startCli(["run", "--yes", ...providerFlags(server), "first prompt"], { cwd: ws, env })
      assert.strictEqual((await first.exitedWithin(60_000)).code, 0, first.stderr())
      const id = sessionFiles(ws)[0]!.split("/").pop()!.replace(".jsonl", "")
      const second = startCli(["run", "--yes", "--resume", id, ...providerFlags(server), "second prompt"], {
        cwd: ws,
        env
      })
      assert.strictEqual((await second.exitedWithin(60_000)).code, 0, second.stderr())
      const originalFile = sessionFiles(ws)[0]!
      const original = readFileSync(originalFile, "utf8")

      const show = startCli(["sessions", "show", id], { cwd: ws, env })
      assert.strictEqual((await show.exitedWithin(60_000)).code, 0, show.stderr())
      assert.match(show.output(), /\n {2}1 {2}stop .*first prompt\n {2}2 {2}stop .*second prompt\n/)

      const fork = startCli(["sessions", "fork", id, "--at", "1"], { cwd: ws, env })
      assert.strictEqual((await fork.exitedWithin(60_000)).code, 0, fork.stderr())
      const forkId = fork.output().split("\n")[0]!
      const forkFile = join(ws, ".agentloop", "sessions", `${forkId}.jsonl`)
      const lines = jsonLines(forkFile)
      assert.deepInclude(lines[0], { type: "session", id: forkId, forkedFrom: { session: id, prompt: 1 } })
      const prompts = lines.filter((l) => l["type"] === "run_start").map((l) => l["prompt"])
      assert.deepStrictEqual(prompts, ["first prompt"])
      assert.strictEqual(readFileSync(originalFile, "utf8"), original, "the original file is not changed")

      // run --fork ID:1 goes on from prompt 1's history, in a new session of its own
      const forked = startCli(["run", "--yes", "--fork", `${id}:1`, ...providerFlags(server), "other second"], {
        cwd: ws,
        env
      })
      assert.strictEqual((await forked.exitedWithin(60_000)).code, 0, forked.stderr())
      assert.deepStrictEqual(userTexts(server.bodies[4]!.body), ["first prompt", "other second"])
      const all = sessionFiles(ws)
      assert.strictEqual(all.length, 3)
      assert.strictEqual(readFileSync(originalFile, "utf8"), original, "the original file is not changed")
      const third = jsonLines(all.find((f) => f !== originalFile && f !== forkFile)!)
      assert.deepInclude(third[0], { forkedFrom: { session: id, prompt: 1 } })
      assert.deepStrictEqual(third.filter((l) => l["type"] === "run_start").map((l) => l["prompt"]), [
        "first prompt",
        "other second"
      ])
    } finally {
      await server.close()
    }
  }, 240_000)

  it("bad input: an unknown id, a prompt out of range, a hostile file: one line, exit 2, nothing written", async () => {
    const ws = makeWorkspace()
    const dir = join(ws, ".agentloop", "sessions")
    mkdirSync(dir, { recursive: true })
    const good = fixture("coding-session.jsonl")
    writeFileSync(join(dir, "good.jsonl"), good)
    // a line in the middle that is not JSON, and a message content that tries to drive the terminal
    const lines = good.split("\n")
    lines.splice(3, 0, "{not json")
    writeFileSync(join(dir, "torn.jsonl"), lines.join("\n"))
    const env = testEnv(ws)
    const cases: Array<[Array<string>, string]> = [
      [["sessions", "fork", "nope"], "no session nope in"],
      [["sessions", "fork", "good", "--at", "4"], "has 3 prompt(s): fork at 1 to 3, not 4"],
      [["sessions", "fork", "good", "--at", "0"], "not 0"],
      [["sessions", "fork", "../good"], "is not a session id"],
      [["sessions", "fork", "torn"], "line 4 is not valid JSON"],
      [["sessions", "show", "nope"], "no session nope in"],
      [[
        "run",
        "--fork",
        "good:9",
        "--provider",
        "openai-compat",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "x"
      ], "not 9"],
      [[
        "run",
        "--fork",
        "good",
        "--resume",
        "good",
        "--provider",
        "openai-compat",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "x"
      ], "--fork"]
    ]
    for (const [args, expected] of cases) {
      const cli = startCli(args, { cwd: ws, env })
      const { code } = await cli.exitedWithin(60_000)
      assert.strictEqual(code, 2, `${args.join(" ")}: ${cli.stderr()}`)
      const err = cli.stderr().trim()
      assert.notInclude(err, "\n", `${args.join(" ")}: one line`)
      assert.include(err, expected, args.join(" "))
      assert.deepStrictEqual(sessionFiles(ws).map((f) => f.split("/").pop()), ["good.jsonl", "torn.jsonl"])
    }
  }, 240_000)
})
