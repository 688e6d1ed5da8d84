/**
 * A recorded session replays as a regression test: recorded here with the scripted model and the
 * real coding tools in a temporary workspace, written in the session file format (core's
 * `SessionRecord`), then replayed in a fresh workspace against its recorded answers.
 */
import { EventSink, makeTranscriptWriter, messageOfEvent, runAgentLoop, toolExecutorLayer } from "@agentloop/core"
import type { AgentRunResult, AnyTool, Message, SessionRecord } from "@agentloop/core"
import {
  loadRecording,
  makeReplayModel,
  recordingOf,
  replayModelLayer,
  replaySession,
  scriptedModelLayer,
  toolCall,
  turn
} from "@agentloop/testkit"
import type { ScriptedTurn } from "@agentloop/testkit"
import { bashOptionsLayer, codingTools, codingToolsLayer, outputStoreLayer, workspaceLayer } from "@agentloop/tools"
import { NodeServices } from "@effect/platform-node"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const SYSTEM_PROMPT = "You are a careful coding agent."

const folders: Array<string> = []
const workspace = () => {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "agentloop-replay-"))
  folders.push(folder)
  return folder
}
afterAll(() => {
  for (const folder of folders) fs.rmSync(folder, { recursive: true, force: true })
})

/**
 * Runs `runs` (a prompt and its script each) in `root` with the coding tools, writing the session
 * file as the CLI does (in a folder of its own): the header, then for each run its `run_start`, its prompt, its calls'
 * records and its messages as they join, and its `run_end`.
 */
const recordSession = (
  root: string,
  runs: ReadonlyArray<{ readonly prompt: string; readonly script: ReadonlyArray<ScriptedTurn> }>,
  options: { readonly maxSteps?: number } = {}
) =>
  Effect.gen(function*() {
    // (outside the workspace, so that the tools do not see it)
    const file = path.join(workspace(), "session.jsonl")
    const writer = yield* makeTranscriptWriter((line) => Effect.sync(() => fs.appendFileSync(file, line)))
    let at = 1_800_000_000_000
    const record = (entry: SessionRecord | Message) => writer.append(entry)
    yield* record({
      type: "session",
      version: 1,
      at: at++,
      id: "s",
      cwd: root,
      model: "scripted",
      systemPrompt: SYSTEM_PROMPT
    })
    let history: ReadonlyArray<Message> = []
    for (const run of runs) {
      yield* record({ type: "run_start", at: at++, prompt: run.prompt })
      const prompt: Message = { role: "user", content: run.prompt, timestamp: at++ }
      yield* record(prompt)
      const sink = Layer.succeed(
        EventSink,
        EventSink.of({
          emit: (event) =>
            Effect.gen(function*() {
              if (event.type === "tool_start") {
                yield* record({ type: "tool_start", at: at++, toolCallId: event.call.id, name: event.call.name })
              }
              if (event.type === "tool_end") {
                yield* record({ type: "tool_end", at: at++, toolCallId: event.result.toolCallId })
              }
              const message = messageOfEvent(event)
              if (message !== undefined) yield* record(message)
            }).pipe(Effect.orDie)
        })
      )
      const result: AgentRunResult = yield* runAgentLoop({
        ...options,
        systemPrompt: SYSTEM_PROMPT,
        messages: [...history, prompt]
      }).pipe(Effect.provide(Layer.mergeAll(scriptedModelLayer(run.script), sink, codingToolsLayer(root))))
      yield* record({ type: "run_end", at: at++, reason: result.reason, steps: result.steps })
      history = result.messages
    }
    return file
  })

/** Two runs: write a file and read it back; then edit it and read it again. */
const session = [
  {
    prompt: "Write hello into notes.txt and check it",
    script: [
      turn.toolCalls([toolCall("w1", "write", { path: "notes.txt", content: "hello world\n" })]),
      turn.toolCalls([toolCall("r1", "read", { path: "notes.txt" })]),
      turn.text("notes.txt says hello world.")
    ]
  },
  {
    prompt: "Now say goodbye instead",
    script: [
      turn.toolCalls([toolCall("e1", "edit", { path: "notes.txt", oldText: "hello", newText: "goodbye" })]),
      turn.toolCalls([toolCall("r2", "read", { path: "notes.txt" })]),
      turn.text("Done: it says goodbye world.")
    ]
  }
]

/** The coding tools with `write` changed: it writes its content in capitals. */
const shoutingTools = (root: string) => {
  const tools: ReadonlyArray<AnyTool> = codingTools.map((tool): AnyTool =>
    tool.name === "write" ?
      { ...tool, execute: (args, context) => tool.execute({ ...args, content: args.content.toUpperCase() }, context) } :
      tool
  )
  return toolExecutorLayer(tools).pipe(
    Layer.provide(bashOptionsLayer({})),
    Layer.provide(outputStoreLayer.pipe(Layer.provideMerge(workspaceLayer(root)))),
    Layer.provide(NodeServices.layer)
  )
}

describe("replaying a recorded session", () => {
  it.effect("replays against its recorded answers with the real tools: every run matches, the invariants hold", () =>
    Effect.gen(function*() {
      const file = yield* recordSession(workspace(), session)
      const recording = yield* loadRecording(file).pipe(Effect.provide(NodeServices.layer))
      assert.deepStrictEqual(recording.runs.map((r) => [r.reason, r.steps]), [["stop", 3], ["stop", 3]])
      // (every call of the recording did its work)
      assert.isFalse(recording.runs.some((r) => r.messages.some((m) => m.role === "toolResult" && m.isError)))
      assert.strictEqual(recording.systemPrompt, SYSTEM_PROMPT)
      // a fresh workspace: the tools do the work again
      const fresh = workspace()
      const replayed = yield* replaySession(recording).pipe(Effect.provide(codingToolsLayer(fresh)))
      assert.deepStrictEqual(replayed.map((r) => [r.result.reason, r.result.steps, r.violations.length]), [
        ["stop", 3, 0],
        ["stop", 3, 0]
      ])
      assert.strictEqual(fs.readFileSync(path.join(fresh, "notes.txt"), "utf8"), "goodbye world\n")
      // the second run continued the transcript the first one replayed
      assert.strictEqual(replayed[1]!.result.messages.length, replayed[0]!.result.messages.length + 6)
    }))

  it.effect("a tool that behaves differently now fails the replay, naming the run, the step and the difference", () =>
    Effect.gen(function*() {
      const file = yield* recordSession(workspace(), session)
      const recording = yield* loadRecording(file).pipe(Effect.provide(NodeServices.layer))
      const error = yield* Effect.flip(replaySession(recording).pipe(Effect.provide(shoutingTools(workspace()))))
      assert.isTrue(error._tag === "ReplayError")
      if (error._tag !== "ReplayError") return
      assert.strictEqual(error.reason, "diverged")
      assert.deepStrictEqual([error.run, error.step], [1, 3])
      assert.match(error.message, /^run 1, step 3: the result of call "r1" \(read\) differs from the recorded one: /)
      assert.include(error.message, "hello world")
      assert.include(error.message, "HELLO WORLD")
    }))

  it.effect("the results of a run's last batch are checked too (a run that ended maxSteps after its tools)", () =>
    Effect.gen(function*() {
      const root = workspace()
      fs.writeFileSync(path.join(root, "notes.txt"), "recorded text\n")
      const file = yield* recordSession(root, [{
        prompt: "Read notes.txt",
        script: [turn.toolCalls([toolCall("r1", "read", { path: "notes.txt" })])]
      }], { maxSteps: 1 })
      const recording = yield* loadRecording(file).pipe(Effect.provide(NodeServices.layer))
      const same = workspace()
      fs.writeFileSync(path.join(same, "notes.txt"), "recorded text\n")
      const replayed = yield* replaySession(recording, { maxSteps: 1 }).pipe(Effect.provide(codingToolsLayer(same)))
      assert.deepStrictEqual(replayed.map((r) => r.result.reason), ["maxSteps"])
      const other = workspace()
      fs.writeFileSync(path.join(other, "notes.txt"), "changed text\n")
      const error = yield* Effect.flip(
        replaySession(recording, { maxSteps: 1 }).pipe(Effect.provide(codingToolsLayer(other)))
      )
      assert.isTrue(error._tag === "ReplayError")
      assert.match(error.message, /^run 1, after step 1: the result of call "r1" \(read\) differs/)
    }))

  it.effect("a step whose model stream failed is replayed failing the same way", () =>
    Effect.gen(function*() {
      const file = yield* recordSession(workspace(), [{
        prompt: "List the files",
        script: [turn.toolCalls([toolCall("l1", "ls", {})]), turn.failing("overloaded")]
      }])
      const recording = yield* loadRecording(file).pipe(Effect.provide(NodeServices.layer))
      assert.deepStrictEqual(recording.runs.map((r) => [r.reason, r.steps]), [["error", 2]])
      const replayed = yield* replaySession(recording).pipe(Effect.provide(codingToolsLayer(workspace())))
      assert.deepStrictEqual(replayed.map((r) => [r.result.reason, r.result.steps]), [["error", 2]])
    }))

  it.effect("a run the file has no end for (its process was killed) is replayed as far as it was recorded", () =>
    Effect.gen(function*() {
      const file = yield* recordSession(workspace(), session)
      // cut the file after the second run's first answer, as a killed process leaves it
      const lines = fs.readFileSync(file, "utf8").split("\n")
      const edit = lines.findIndex((l) => l.includes("\"e1\"") && l.includes("\"role\":\"assistant\""))
      const recording = yield* recordingOf(`${lines.slice(0, edit + 1).join("\n")}\n`, "killed.jsonl")
      assert.deepStrictEqual(recording.runs.map((r) => r.reason), ["stop", undefined])
      const replayed = yield* replaySession(recording).pipe(Effect.provide(codingToolsLayer(workspace())))
      assert.deepStrictEqual(replayed.map((r) => [r.result.reason, r.violations.length]), [["stop", 0], ["aborted", 0]])
      // its recorded call ran again, and the run stopped where the recording does
      assert.strictEqual(replayed[1]!.result.messages.at(-1)!.role, "toolResult")
    }))

  it.effect("the model layer alone: your run gets the recorded answers, or an error naming the divergence", () =>
    Effect.gen(function*() {
      const file = yield* recordSession(workspace(), session.slice(0, 1))
      const recording = yield* loadRecording(file).pipe(Effect.provide(NodeServices.layer))
      const input = recording.runs[0]!.input
      const same = yield* runAgentLoop({ systemPrompt: SYSTEM_PROMPT, messages: input }).pipe(
        Effect.provide(Layer.mergeAll(
          replayModelLayer(file).pipe(Layer.provide(NodeServices.layer)),
          codingToolsLayer(workspace())
        ))
      )
      assert.deepStrictEqual([same.reason, same.steps], ["stop", 3])
      const model = yield* makeReplayModel(recording)
      const changed = yield* runAgentLoop({ messages: input }).pipe(
        Effect.provide(Layer.mergeAll(model.layer, shoutingTools(workspace())))
      )
      assert.strictEqual(changed.reason, "error")
      assert.match(changed.error!, /replay: run 1, step 3: the result of call "r1" \(read\) differs/)
      // the transcript stays paired: nothing of the diverged request was appended
      assert.strictEqual(changed.messages.at(-1)!.role, "toolResult")
      const divergence = yield* model.divergence
      assert.deepStrictEqual([divergence?.reason, divergence?.run, divergence?.step], ["diverged", 1, 3])
    }))

  it.effect("a real CLI session file is read with core's reader: its runs, their prompts and ends", () =>
    Effect.gen(function*() {
      const fixture = fileURLToPath(new URL("../../core/test/fixtures/session-0.1.jsonl", import.meta.url))
      const text = fs.readFileSync(fixture, "utf8")
      const recording = yield* recordingOf(text, "session-0.1.jsonl")
      const starts = text.split("\n").filter((l) => l.includes("\"type\":\"run_start\"")).map((l) => JSON.parse(l))
      assert.strictEqual(recording.runs.length, starts.length)
      recording.runs.forEach((run, i) => {
        const prompt = run.input.at(-1)!
        assert.strictEqual(prompt.role, "user")
        assert.strictEqual(prompt.content, starts[i].prompt)
      })
      const empty = yield* Effect.flip(recordingOf(`${JSON.stringify({ type: "session", at: 1 })}\n`, "empty.jsonl"))
      assert.deepStrictEqual([empty.reason, empty.message], ["unreadable", "empty.jsonl has no run to replay"])
      const broken = yield* Effect.flip(recordingOf("{not json\n", "broken.jsonl"))
      assert.deepStrictEqual([broken.reason, broken.message], ["unreadable", "line 1 is not valid JSON"])
    }))
})
