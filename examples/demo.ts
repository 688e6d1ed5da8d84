/**
 * `npm run demo`: a scripted agent session, no network, no API key. It shows text streaming,
 * two tools running concurrently (finishing out of call order), a failing tool the model recovers
 * from, a truncated response whose call is skipped, and a second run resumed from the first run's
 * transcript. Every event is printed as it happens, then the transcript and the invariant check.
 */
import { Effect, Layer, Schema } from "effect"
import { callbackSinkLayer, defineTool, runAgentLoop, ToolError, toolExecutorLayer } from "@agentloop/core"
import type { LoopEvent, Message } from "@agentloop/core"
import { checkInvariants, makeScriptedModel, toolCall, turn } from "@agentloop/testkit"

const color = process.stdout.isTTY === true && process.env["NO_COLOR"] === undefined
const paint = (code: number) => (text: string) => (color ? `\u001b[${code}m${text}\u001b[0m` : text)
const dim = paint(2)
const red = paint(31)
const green = paint(32)
const yellow = paint(33)
const cyan = paint(36)
const bold = paint(1)

// --- tools -------------------------------------------------------------------------------------

const forecasts: Record<string, string> = { Paris: "12°C, light rain", Tokyo: "18°C, clear" }

const weather = defineTool({
  name: "weather",
  description: "Current weather for a city",
  parameters: Schema.Struct({ city: Schema.String.annotate({ description: "city name" }) }),
  execute: ({ city }, ctx) =>
    Effect.gen(function*() {
      yield* ctx.reportProgress(`asking the weather service about ${city}`)
      yield* Effect.sleep(city === "Paris" ? "300 millis" : "100 millis")
      const forecast = forecasts[city]
      if (forecast === undefined) return yield* new ToolError({ message: `no forecast for ${city}` })
      return `${city}: ${forecast}`
    })
})

const files: Record<string, string> = { "notes.md": "# Trip\n- pack an umbrella\n" }

const readFile = defineTool({
  name: "read_file",
  description: "Reads a text file",
  parameters: Schema.Struct({ path: Schema.String }),
  execute: ({ path }) =>
    files[path] === undefined ?
      Effect.fail(new ToolError({ message: `ENOENT: no such file '${path}'` })) :
      Effect.succeed(files[path])
})

const listFiles = defineTool({
  name: "list_files",
  description: "Lists the files in the workspace",
  parameters: Schema.Struct({}),
  execute: () => Effect.succeed(Object.keys(files).join("\n"))
})

// --- the script the model follows ----------------------------------------------------------------

const firstRun = [
  turn.toolCalls(
    [toolCall("call_1", "weather", { city: "Paris" }), toolCall("call_2", "weather", { city: "Tokyo" })],
    "Let me check both cities at once."
  ),
  turn.toolCalls([toolCall("call_3", "read_file", { path: "trip.md" })], "Now your trip notes."),
  turn.toolCalls([toolCall("call_4", "list_files", {})], "That file does not exist; let me see what is there."),
  turn.truncated([toolCall("call_5", "read_file", { path: "notes.md" })], "Found notes.md, reading it and then I will wri")
]
const secondRun = [
  turn.toolCalls([toolCall("call_6", "read_file", { path: "notes.md" })], "Picking up where I was cut off."),
  turn.streamed(["Paris is rainy (12°C), Tokyo clear (18°C). ", "Your notes say: pack an umbrella — ", "good idea for Paris."])
]

// --- rendering ---------------------------------------------------------------------------------

const short = (value: unknown) => {
  const text = (typeof value === "string" ? value : JSON.stringify(value)).trim().replace(/\s*\n\s*/g, " ⏎ ")
  return text.length > 70 ? `${text.slice(0, 67)}...` : text
}

let streaming = false
const render = (event: LoopEvent) =>
  Effect.sync(() => {
    if (event.type !== "model_event" && streaming) {
      process.stdout.write("\n")
      streaming = false
    }
    switch (event.type) {
      case "model_event": {
        const e = event.event
        if (e.type === "text_delta") {
          if (!streaming) process.stdout.write(cyan("  model  "))
          process.stdout.write(e.delta)
          streaming = true
        }
        return
      }
      case "assistant_message": {
        const calls = event.message.content.filter((c) => c.type === "toolCall").length
        return console.log(dim(`  turn   stopReason=${event.message.stopReason}, ${calls} tool call(s)`))
      }
      case "tool_start":
        return console.log(yellow(`  tool ▶ ${event.call.name} ${short(event.call.arguments)}  [${event.call.id}]`))
      case "tool_progress":
        return console.log(dim(`  tool … ${event.toolCallId}: ${short(event.progress)}`))
      case "tool_end": {
        const r = event.result
        const text = r.content.map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join(" ")
        const mark = r.isError ? red("  tool ✗") : green("  tool ✓")
        return console.log(`${mark} ${r.toolName} [${r.toolCallId}] ${short(text)}`)
      }
      case "turn_end":
        return console.log(
          bold(`  end    reason=${event.reason} steps=${event.steps}${event.error ? ` error=${event.error}` : ""}`)
        )
    }
  })

const printTranscript = (messages: ReadonlyArray<Message>, from = 0) => {
  console.log(bold(from === 0 ? "\nTranscript" : `\nTranscript (from message ${from})`))
  messages.slice(from).forEach((m, i) => {
    const n = String(from + i).padStart(2)
    if (m.role === "user") return console.log(`${n} user       ${short(m.content)}`)
    if (m.role === "assistant") {
      const parts = m.content.map((c) =>
        c.type === "text" ? short(c.text) : c.type === "toolCall" ? `→ ${c.name}(${short(c.arguments)}) [${c.id}]` : "(thinking)"
      )
      return console.log(`${n} assistant  ${parts.join("  ")}  ${dim(`(${m.stopReason})`)}`)
    }
    const text = m.content.map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join(" ")
    const tag = m.isError ? red("error") : green("ok")
    console.log(`${n} toolResult [${m.toolCallId}] ${tag} ${short(text)}`)
  })
}

// --- the program -----------------------------------------------------------------------------

const program = Effect.gen(function*() {
  const tools = toolExecutorLayer([weather, readFile, listFiles])
  const events: Array<LoopEvent> = []
  const sink = callbackSinkLayer((event) => {
    events.push(event)
    return render(event)
  })

  console.log(bold("Run 1: concurrent tools, a failing tool, a truncated response\n"))
  const model1 = yield* makeScriptedModel(firstRun)
  const input: Array<Message> = [{ role: "user", content: "What's the weather in Paris and Tokyo? Check my trip notes." }]
  const first = yield* runAgentLoop({ systemPrompt: "You are a travel assistant.", messages: input }).pipe(
    Effect.provide(Layer.mergeAll(model1.layer, tools, sink))
  )
  printTranscript(first.messages)
  const check1 = checkInvariants({ input, result: first, events, requests: yield* model1.requests })

  console.log(bold("\nRun 2: resumed from run 1's transcript with a follow-up\n"))
  events.length = 0
  const model2 = yield* makeScriptedModel(secondRun)
  const input2: Array<Message> = [...first.messages, { role: "user", content: "You were cut off; please continue." }]
  const second = yield* runAgentLoop({ systemPrompt: "You are a travel assistant.", messages: input2 }).pipe(
    Effect.provide(Layer.mergeAll(model2.layer, tools, sink))
  )
  printTranscript(second.messages, input2.length - 1)
  const check2 = checkInvariants({ input: input2, result: second, events, requests: yield* model2.requests })

  const violations = [...check1, ...check2]
  console.log(bold("\nSummary"))
  console.log(`  run 1: reason=${first.reason}, steps=${first.steps}, messages=${first.messages.length}`)
  console.log(`  run 2: reason=${second.reason}, steps=${second.steps}, messages=${second.messages.length}`)
  console.log(
    violations.length === 0 ?
      green("  invariants: all three hold for both runs") :
      red(`  invariants: ${violations.length} violation(s)\n${violations.map((v) => `   - [${v.invariant}] ${v.message}`).join("\n")}`)
  )
  if (violations.length > 0) process.exitCode = 1
})

Effect.runPromise(program).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
