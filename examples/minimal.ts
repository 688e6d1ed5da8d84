/**
 * The loop guide's example (docs/guide/loop.md): `runAgentLoop` composed into a larger Effect program with layers.
 * A scripted model stands in for a provider here, so it runs offline; swap `ModelLive` for a provider layer in a
 * real program.
 *
 * Run it from the root of a clone after `npm ci` (which builds the packages and brings Node.js 22, whose type
 * stripping runs a .ts file as it is; a Node.js older than 22.18 on your PATH cannot):
 *
 * $ node_modules/.bin/node examples/minimal.ts
 *
 * (`npm run docs:check` runs every `$` line of an example's header, so the command above keeps working.)
 */
import { callbackSinkLayer, defineTool, runAgentLoop, ToolError, toolExecutorLayer } from "@agentloop/core"
import { scriptedModelLayer, toolCall, turn } from "@agentloop/testkit"
import { Context, Effect, Layer, Schema } from "effect"

// A service of your application that a tool needs.
class NoteStore extends Context.Service<NoteStore, {
  readonly get: (title: string) => Effect.Effect<string, ToolError>
}>()("example/NoteStore") {}

const NoteStoreLive = Layer.succeed(NoteStore, {
  get: (title) =>
    title === "effect" ?
      Effect.succeed("Effect 4: services are Context.Service classes.") :
      Effect.fail(new ToolError({ message: `no note titled "${title}"` }))
})

// A tool: name, description, a Schema for its parameters, an execute effect.
const readNote = defineTool({
  name: "read_note",
  description: "Reads a note by title",
  parameters: Schema.Struct({ title: Schema.String.annotate({ description: "the note's title" }) }),
  execute: ({ title }, ctx) =>
    Effect.gen(function*() {
      yield* ctx.reportProgress(`looking up ${title}`) // becomes a tool_progress event
      const notes = yield* NoteStore // tools may use your application's services
      return yield* notes.get(title) // a ToolError becomes an error result the model sees
    })
})

// Stand-in for a provider's Model layer.
const ModelLive = scriptedModelLayer([
  turn.toolCalls([toolCall("call_1", "read_note", { title: "effect" })]),
  turn.text("You wrote that Effect 4 services are Context.Service classes.")
])

export const program = Effect.gen(function*() {
  const result = yield* runAgentLoop({
    systemPrompt: "You answer from the user's notes.",
    messages: [{ role: "user", content: "What did I write about Effect?" }],
    maxSteps: 20
  })
  yield* Effect.log(`ended: ${result.reason} after ${result.steps} step(s)`)
  return result
})

export const MainLayer = Layer.mergeAll(
  ModelLive,
  toolExecutorLayer([readNote]).pipe(Layer.provide(NoteStoreLive)),
  callbackSinkLayer((event) => Effect.logDebug(event.type))
)

if (import.meta.url === `file://${process.argv[1]}`) {
  Effect.runPromise(program.pipe(Effect.provide(MainLayer))).then((result) =>
    console.log(JSON.stringify(result.messages, null, 2))
  )
}
