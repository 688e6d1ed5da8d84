/**
 * Prompts: `listMcpPrompts` lists a server's prompts with their arguments, `getMcpPrompt` gets one
 * as agentloop messages (text, images fitted, embedded resources as text; next messages of one
 * role joined). A wrong server, prompt or argument fails with an `McpRequestError` naming it,
 * before anything is asked of the server.
 */
import { getMcpPrompt, listMcpPrompts } from "@agentloop/mcp"
import type { McpRequestError, McpTools } from "@agentloop/mcp"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { capableServer, fakeServer, node, serverBin, serversLayer } from "./helpers.ts"

const everything = {
  name: "everything",
  transport: "stdio",
  command: node,
  args: [serverBin("@modelcontextprotocol/server-everything"), "stdio"]
} as const

describe("Prompts", { timeout: 30_000 }, () => {
  it.effect("lists a server's prompts with their arguments; all servers' without a name", () =>
    Effect.gen(function*() {
      const prompts = yield* listMcpPrompts("capable")
      assert.deepStrictEqual(prompts, [
        {
          server: "capable",
          name: "greet",
          description: "Greets someone",
          arguments: [{ name: "name", description: "Who", required: true }, { name: "mood", required: false }]
        },
        {
          server: "capable",
          name: "dialogue",
          title: "A dialogue",
          description: "User and assistant messages",
          arguments: []
        }
      ])
      // the fake server offers no prompts: it has none
      assert.deepStrictEqual((yield* listMcpPrompts()).map((p) => p.name), ["greet", "dialogue"])
      assert.deepStrictEqual(yield* listMcpPrompts("fake"), [])
    }).pipe(Effect.provide(serversLayer([capableServer(), fakeServer()]))))

  it.effect("gets a prompt with its arguments as messages, next ones of one role joined", () =>
    Effect.gen(function*() {
      const greet = yield* getMcpPrompt("capable", "greet", { name: "Ada" })
      assert.deepStrictEqual(greet, [{
        role: "user",
        content: [{ type: "text", text: "Say hello to Ada" }, { type: "text", text: "in a neutral mood" }]
      }])
      const [look, seen, notes, ...rest] = yield* getMcpPrompt("capable", "dialogue")
      assert.deepStrictEqual(rest, [])
      assert.strictEqual(look?.role, "user")
      const lookParts = look?.role === "user" && Array.isArray(look.content) ? look.content : []
      assert.deepStrictEqual(lookParts.map((p) => p.type), ["text", "text", "image"])
      assert.include(lookParts[1]?.type === "text" ? lookParts[1].text : "", "the image from capable (prompts/get)")
      assert.deepStrictEqual(seen, {
        role: "assistant",
        content: [
          { type: "text", text: "I see a red square." },
          {
            type: "text",
            text: "[an image (image/png) of the prompt was left out: an assistant message takes text only]"
          }
        ],
        stopReason: "stop"
      })
      assert.deepStrictEqual(notes, {
        role: "user",
        content: [{ type: "text", text: "[resource test://doc/1 (text/plain)]\nthe notes" }]
      })
    }).pipe(Effect.provide(serversLayer([capableServer()]))))

  it.effect("a wrong server, prompt or argument fails with an McpRequestError naming it", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [Effect.Effect<unknown, McpRequestError, McpTools>, string]> = [
        [
          getMcpPrompt("capable", "greet"),
          "The prompt \"greet\" of MCP server \"capable\" needs the argument(s) name."
        ],
        [
          getMcpPrompt("capable", "greet", { name: "Ada", color: "red" }),
          "The prompt \"greet\" of MCP server \"capable\" takes no argument(s) color (it takes: name, mood)."
        ],
        [
          getMcpPrompt("capable", "nope"),
          "MCP server \"capable\" has no prompt \"nope\" (its prompts: greet, dialogue)."
        ],
        [getMcpPrompt("nowhere", "greet"), "There is no MCP server \"nowhere\" (servers: capable, fake)."],
        [getMcpPrompt("fake", "greet"), "MCP server \"fake\" offers no prompts."]
      ]
      for (const [effect, message] of cases) {
        const error = yield* Effect.flip(effect).pipe(Effect.provide(serversLayer([capableServer(), fakeServer()])))
        assert.strictEqual(error.message, message)
        assert.strictEqual(error._tag, "McpRequestError")
      }
    }))

  it.effect("server-everything's prompts, by its name or its tool prefix", () =>
    Effect.gen(function*() {
      const names = (yield* listMcpPrompts("every_thing")).map((p) => p.name)
      assert.includeMembers(names, ["simple-prompt", "args-prompt", "resource-prompt"])
      const weather = yield* getMcpPrompt("every thing", "args-prompt", { city: "Lisbon" })
      assert.deepStrictEqual(weather, [{
        role: "user",
        content: [{ type: "text", text: "What's weather in Lisbon?" }]
      }])
      const [withResource] = yield* getMcpPrompt("every_thing", "resource-prompt", {
        resourceType: "Text",
        resourceId: "2"
      })
      const parts = withResource?.role === "user" && Array.isArray(withResource.content) ? withResource.content : []
      assert.match(parts[1]?.type === "text" ? parts[1].text : "", /^\[resource demo:\/\/resource\/dynamic\/text\/2/)
    }).pipe(Effect.provide(serversLayer([{ ...everything, name: "every thing" }]))))
})
