import {
  callbackSinkLayer,
  encodeTranscriptLine,
  loadTranscript,
  messageOfEvent,
  openTranscriptWriter,
  parseTranscript,
  runAgentLoop,
  saveTranscript,
  toolExecutorLayer,
  transcriptSink
} from "@agentloop/core"
import type { Message } from "@agentloop/core"
import {
  checkInvariants,
  echoTool,
  makeGatedTool,
  runScripted,
  scriptedModelLayer,
  toolCall,
  turn,
  user
} from "@agentloop/testkit"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, FileSystem, Layer } from "effect"
import type { Scope } from "effect"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { results, roles } from "./helpers.ts"

const withTempDir = <A, E>(f: (dir: string) => Effect.Effect<A, E, FileSystem.FileSystem | Scope.Scope>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = yield* fs.makeTempDirectoryScoped({ prefix: "agentloop-persist-" })
    return yield* f(dir)
  }).pipe(Effect.scoped, Effect.provide(NodeServices.layer))

const call3: Message = {
  role: "assistant",
  content: [toolCall("a", "echo"), toolCall("b", "echo"), toolCall("c", "echo")],
  stopReason: "toolUse"
}
const resultOf = (id: string): Message => ({
  role: "toolResult",
  toolCallId: id,
  toolName: "echo",
  content: [{ type: "text", text: `result ${id}` }],
  isError: false
})

describe("transcript files", () => {
  it.effect("save then load gives the same transcript back", () =>
    withTempDir((dir) =>
      Effect.gen(function*() {
        const run = yield* runScripted(
          [turn.toolCalls([toolCall("a", "echo", { text: "x" }), toolCall("b", "echo")]), turn.text("done")],
          { tools: [echoTool("echo")] }
        )
        const file = `${dir}/t.jsonl`
        yield* saveTranscript(file, run.result.messages)
        const loaded = yield* loadTranscript(file)
        assert.deepStrictEqual(loaded.messages, run.result.messages)
        assert.strictEqual(loaded.tornLine, undefined)
        assert.strictEqual(loaded.repaired, 0)
        const fs = yield* FileSystem.FileSystem
        const text = yield* fs.readFileString(file)
        assert.strictEqual(text.split("\n").length, run.result.messages.length + 1) // one line each, newline-ended
        assert.deepStrictEqual(yield* fs.readDirectory(dir), ["t.jsonl"]) // no temporary file left
      })
    ))

  it.effect("save refuses a transcript that is not valid, naming the problem", () =>
    withTempDir((dir) =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(saveTranscript(`${dir}/t.jsonl`, [resultOf("a")]))
        assert.strictEqual(error._tag, "PersistenceError")
        assert.match(error.message, /orphan tool result/)
      })
    ))

  it.effect("a torn last line is ignored and reported; the rest loads", () =>
    Effect.gen(function*() {
      const text = encodeTranscriptLine(user("hi")) + `{"role":"assistant","content":[{"ty`
      const loaded = yield* parseTranscript(text)
      assert.deepStrictEqual(loaded.messages, [user("hi")])
      assert.strictEqual(loaded.tornLine, 2)
    }))

  it.effect("a complete last line without its newline is kept", () =>
    Effect.gen(function*() {
      const text = encodeTranscriptLine(user("hi")) + JSON.stringify(user("again"))
      const loaded = yield* parseTranscript(text)
      assert.deepStrictEqual(loaded.messages, [user("hi"), user("again")])
      assert.strictEqual(loaded.tornLine, undefined)
    }))

  it.effect("a bad line before the end is an error naming the line", () =>
    Effect.gen(function*() {
      const notJson = yield* Effect.flip(parseTranscript(`${encodeTranscriptLine(user("a"))}{oops\n`, "f.jsonl"))
      assert.strictEqual(notJson.message, "line 2 is not valid JSON")
      assert.strictEqual(notJson.path, "f.jsonl")
      const torn = yield* Effect.flip(parseTranscript(`{oops\n${encodeTranscriptLine(user("a"))}`))
      assert.strictEqual(torn.message, "line 1 is not valid JSON")
      const badMessage = yield* Effect.flip(parseTranscript(`{"role":"user","content":3}\n`))
      assert.match(badMessage.message, /messages\[0\] is not a valid message/)
      const neither = yield* Effect.flip(parseTranscript(`{"hello":1}\n`))
      assert.match(neither.message, /line 1 is neither a message/)
    }))

  it.effect("records (lines with a type) are returned apart and skipped from the messages", () =>
    Effect.gen(function*() {
      const header = { type: "session", id: "s1", at: 1 }
      const text = [header, user("a"), { type: "run_end", reason: "stop" }].map(encodeTranscriptLine).join("")
      const loaded = yield* parseTranscript(text)
      assert.deepStrictEqual(loaded.messages, [user("a")])
      assert.deepStrictEqual(loaded.records, [header, { type: "run_end", reason: "stop" }])
    }))

  it.effect("results in completion order load in call order; a call without a result is paired", () =>
    Effect.gen(function*() {
      const text = [user("go"), call3, resultOf("c"), resultOf("a")].map(encodeTranscriptLine).join("")
      const loaded = yield* parseTranscript(text)
      assert.deepStrictEqual(results(loaded.messages).map((r) => r.toolCallId), ["a", "b", "c"])
      const b = results(loaded.messages)[1]!
      assert.strictEqual(b.isError, true)
      assert.deepStrictEqual(b.details, { skipped: true, reason: "interrupted" })
      assert.strictEqual(loaded.repaired, 1)
    }))

  it.effect("opening a file with a torn last line cuts it off before appending", () =>
    withTempDir((dir) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const file = `${dir}/t.jsonl`
        yield* fs.writeFileString(file, encodeTranscriptLine(user("a")) + `{"role":"us`)
        const writer = yield* openTranscriptWriter(file)
        assert.strictEqual(writer.droppedTornLine, true)
        yield* writer.append(user("b"))
        const loaded = yield* loadTranscript(file)
        assert.deepStrictEqual(loaded.messages, [user("a"), user("b")])
        assert.strictEqual(loaded.tornLine, undefined)
        const exclusive = yield* Effect.flip(openTranscriptWriter(file, { exclusive: true }))
        assert.match(exclusive.message, /cannot open/)
      })
    ))

  it.effect("the sink appends every message as it joins, so the file equals the run's transcript", () =>
    withTempDir((dir) =>
      Effect.gen(function*() {
        const file = `${dir}/t.jsonl`
        const writer = yield* openTranscriptWriter(file)
        const input = [user("go")]
        for (const m of input) yield* writer.append(m)
        const sink = transcriptSink(writer)
        const missing: Array<string> = []
        let checked = 0
        const fs = yield* FileSystem.FileSystem
        const result = yield* runAgentLoop({ messages: input }).pipe(
          Effect.provide(Layer.mergeAll(
            scriptedModelLayer([
              turn.toolCalls([toolCall("a", "echo"), toolCall("b", "echo"), toolCall("c", "echo")]),
              turn.toolCalls([toolCall("d", "echo")]),
              turn.text("done")
            ]),
            toolExecutorLayer([echoTool("echo")]),
            // each message is on disk as soon as its event has been emitted (not at the end of the run)
            callbackSinkLayer((event) =>
              Effect.andThen(
                sink.emit(event),
                Effect.suspend(() => {
                  const message = messageOfEvent(event)
                  if (message === undefined) return Effect.void
                  checked++
                  return Effect.map(fs.readFileString(file), (text) => {
                    if (!text.split("\n").includes(JSON.stringify(message))) missing.push(event.type)
                  }).pipe(Effect.orDie)
                })
              )
            )
          ))
        )
        assert.strictEqual(result.reason, "stop")
        const loaded = yield* loadTranscript(file)
        assert.deepStrictEqual(loaded.messages, result.messages)
        assert.strictEqual(checked, 7) // 3 assistant messages, 4 results
        assert.deepStrictEqual(missing, [])
      })
    ))

  it.effect(
    "a process killed with SIGKILL in the middle of a batch leaves a file that resumes paired",
    () =>
      withTempDir((dir) =>
        Effect.gen(function*() {
          const file = `${dir}/killed.jsonl`
          const output = yield* runChild(file)
          assert.strictEqual(output.signal, "SIGKILL")
          const loaded = yield* loadTranscript(file)
          assert.deepStrictEqual(roles(loaded.messages), [
            "user",
            "assistant",
            "toolResult",
            "toolResult",
            "toolResult"
          ])
          const [a, b, c] = results(loaded.messages)
          assert.strictEqual(a!.isError, false)
          assert.deepStrictEqual(b!.details, { skipped: true, reason: "interrupted" })
          assert.strictEqual(c!.isError, false)
          assert.strictEqual(loaded.repaired, 1)
          // resume from the file: the next request carries every call paired
          const resumed = yield* runScripted([turn.text("resumed")], { messages: loaded.messages })
          assert.deepStrictEqual(resumed.violations, [])
          assert.strictEqual(resumed.result.reason, "stop")
          assert.deepStrictEqual(
            checkInvariants({
              input: loaded.messages,
              result: resumed.result,
              events: resumed.events,
              requests: resumed.requests
            }),
            []
          )
        })
      ),
    20_000
  )

  it.effect("results are on disk as each call ends, before the batch is over", () =>
    withTempDir((dir) =>
      Effect.gen(function*() {
        const file = `${dir}/t.jsonl`
        const writer = yield* openTranscriptWriter(file)
        yield* writer.append(user("go"))
        const gate = makeGatedTool("gate")
        const sink = transcriptSink(writer)
        const bEnded = yield* Deferred.make<void>()
        const fiber = yield* runAgentLoop({ messages: [user("go")] }).pipe(
          Effect.provide(Layer.mergeAll(
            scriptedModelLayer([turn.toolCalls([toolCall("a", "gate"), toolCall("b", "gate")]), turn.text("ok")]),
            toolExecutorLayer([gate.tool]),
            callbackSinkLayer((event) =>
              Effect.andThen(
                sink.emit(event),
                event.type === "tool_end" && event.result.toolCallId === "b"
                  ? Deferred.succeed(bEnded, undefined)
                  : Effect.void
              )
            )
          )),
          Effect.forkChild
        )
        yield* gate.started("a")
        yield* gate.release("b")
        yield* Deferred.await(bEnded)
        const mid = yield* loadTranscript(file)
        // b's result is there, a's is not yet: loading pairs a as interrupted, in call order
        assert.deepStrictEqual(results(mid.messages).map((r) => [r.toolCallId, r.isError]), [["a", true], ["b", false]])
        yield* gate.release("a")
        const result = yield* Fiber.join(fiber)
        assert.deepStrictEqual((yield* loadTranscript(file)).messages, result.messages)
      })
    ))
})

const CHILD = `
const core = await import(process.env.CORE_URL)
const { NodeServices } = await import("@effect/platform-node")
const { Effect, Layer, Schema, Stream } = await import("effect")
const call = (id, name) => ({ type: "toolCall", id, name, arguments: {} })
const final = {
  role: "assistant",
  content: [call("a", "fast"), call("b", "slow"), call("c", "fast")],
  stopReason: "toolUse"
}
const model = Layer.succeed(core.Model, core.Model.of({ stream: () => Stream.make({ type: "done", message: final }) }))
const fast = core.defineTool({
  name: "fast",
  description: "",
  parameters: Schema.Struct({}),
  execute: () => Effect.succeed("fast done")
})
const slow = core.defineTool({
  name: "slow",
  description: "",
  parameters: Schema.Struct({}),
  execute: () => Effect.never
})
let ended = 0
const program = Effect.gen(function*() {
  const writer = yield* core.openTranscriptWriter(process.env.FILE)
  const input = [{ role: "user", content: "go" }]
  for (const m of input) yield* writer.append(m)
  const sink = core.transcriptSink(writer)
  const observed = Layer.succeed(core.EventSink, core.EventSink.of({
    emit: (e) => Effect.andThen(sink.emit(e), Effect.sync(() => {
      if (e.type === "tool_end" && ++ended === 2) process.stdout.write("ready\\n")
    }))
  }))
  yield* core.runAgentLoop({ messages: input }).pipe(
    Effect.provide(Layer.mergeAll(model, observed, core.toolExecutorLayer([fast, slow]))))
}).pipe(Effect.scoped, Effect.provide(NodeServices.layer))
Effect.runFork(program)
`

/** Runs the child above, kills it with SIGKILL once two of its three calls have ended. */
const runChild = (file: string) =>
  Effect.callback<{ readonly signal: NodeJS.Signals | null; readonly stderr: string }>((resume) => {
    const root = fileURLToPath(new URL("../../..", import.meta.url))
    const child = spawn(process.execPath, ["--input-type=module", "-e", CHILD], {
      cwd: root,
      env: { ...process.env, FILE: file, CORE_URL: new URL("../src/index.ts", import.meta.url).href },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stderr = ""
    child.stderr.on("data", (d) => (stderr += String(d)))
    child.stdout.on("data", (d) => {
      if (String(d).includes("ready")) child.kill("SIGKILL")
    })
    child.on("exit", (_code, signal) => resume(Effect.succeed({ signal, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })
