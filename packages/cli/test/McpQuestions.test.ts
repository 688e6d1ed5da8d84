/**
 * An MCP server's questions in `chat`, in a pseudo-terminal, on both engines: an elicitation asked
 * on the terminal (Enter keeps a default, a wrong value is asked again), a sampling request the
 * user refuses; each recorded in the session (`mcp_request`, without the values given), with the
 * run's id on a durable run, the record kept when the run's part of the file is rebuilt.
 */
import { assert, describe, it } from "@effect/vitest"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import {
  afterRun,
  answer,
  jsonLines,
  lastToolResult,
  makeWorkspace,
  providerFlags,
  scriptServer,
  sessionFiles,
  startCli,
  testEnv
} from "./helpers/agent.ts"

const capable = fileURLToPath(new URL("../../mcp/test/fixtures/capable-server.ts", import.meta.url))

const elicit = {
  message: "Who is asking?",
  requestedSchema: {
    type: "object",
    properties: {
      name: { type: "string", default: "Ada" },
      age: { type: "integer", description: "in years" }
    },
    required: ["age"]
  }
}

describe("an MCP server's questions in chat (in a pseudo-terminal)", () => {
  for (const durable of [false, true]) {
    it(
      `${durable ? "chat --durable" : "chat"}: an elicitation is answered on the terminal, a sampling request ` +
        "refused; both recorded in the session without the values",
      async () => {
        const ws = makeWorkspace()
        mkdirSync(join(ws, ".agentloop"))
        writeFileSync(
          join(ws, ".agentloop", "config.json"),
          JSON.stringify({
            mcpServers: {
              capable: {
                command: process.execPath,
                args: ["--experimental-strip-types", "--disable-warning=ExperimentalWarning", capable]
              }
            },
            permissions: { allow: ["capable__*"] }
          })
        )
        const server = await scriptServer([
          { calls: [{ id: "m1", name: "capable__elicit", args: { params: elicit } }] },
          {
            calls: [{
              id: "m2",
              name: "capable__sample",
              args: {
                params: { messages: [{ role: "user", content: { type: "text", text: "say hi" } }], maxTokens: 9 }
              }
            }]
          },
          { text: "all done" }
        ])
        try {
          const cli = startCli(["chat", ...(durable ? ["--durable"] : []), ...providerFlags(server)], {
            cwd: ws,
            env: testEnv(ws),
            pty: true
          })
          let at = await answer(cli, "/help for commands", "ask me")
          await cli.waitFor("? MCP server capable asks: Who is asking?", 90_000, at)
          await cli.waitFor("age: integer — in years", 90_000, at)
          assert.include(cli.output().slice(at), "name (optional): string (default \"Ada\")")
          at = await answer(cli, "answer? [y]es (fill in)", "y", at)
          at = await answer(cli, "name [Enter: default]: ", "", at)
          at = await answer(cli, "age: ", "forty", at)
          await cli.waitFor("age: a integer please", 90_000, at)
          at = await answer(cli, "age: ", "41", at)
          await cli.waitFor("? MCP server capable asks the model (1 message(s), up to 9 tokens): say hi", 90_000, at)
          at = await answer(cli, "let the model answer? [y]es / [n]o", "n", at)
          at = await afterRun(cli, "all done", "/exit", at)
          assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())

          const bodies = server.bodies.map((b) => b.body)
          assert.strictEqual(bodies.length, 3, "the sampling request did not reach the model")
          const elicited = lastToolResult(bodies[1]!)
          assert.include(elicited, "accept")
          assert.include(elicited, "41")
          assert.include(elicited, "Ada", "the default of the field left out was sent")
          assert.include(lastToolResult(bodies[2]!), "the user said no")

          const records = jsonLines(sessionFiles(ws)[0]!)
          const questions = records.filter((r) => r["type"] === "mcp_request")
          assert.deepStrictEqual(
            questions.map((r) => [r["server"], r["request"], r["message"], r["fields"], r["answer"], r["by"]]),
            [
              ["capable", "elicitation", "Who is asking?", ["name", "age"], "accept", "user"],
              ["capable", "sampling", "say hi", undefined, "deny", "user"]
            ]
          )
          for (const q of questions) {
            assert.isNumber(q["askedAt"])
            assert.isAtLeast(q["at"] as number, q["askedAt"] as number)
            // the values given are not in the record: it has no field for them
            const fields = ["type", "at", "server", "request", "message", "answer", "by", "askedAt"]
            assert.sameMembers(
              Object.keys(q),
              [...fields, ...(q["request"] === "elicitation" ? ["fields"] : []), ...(durable ? ["runId"] : [])]
            )
            assert.notInclude(JSON.stringify(q), "Ada")
          }
          const runIds = records.filter((r) => r["type"] === "run_start").map((r) => r["runId"])
          if (durable) {
            assert.strictEqual(runIds.length, 1)
            assert.deepStrictEqual(questions.map((q) => q["runId"]), [runIds[0], runIds[0]])
          } else {
            assert.deepStrictEqual(questions.map((q) => q["runId"]), [undefined, undefined])
          }
        } finally {
          await server.close()
        }
      },
      240_000
    )
  }

  it("a required choice field (enum, oneOf) is answered by its name or its number; the choices are shown", async () => {
    const ws = capableWorkspace()
    const choose = {
      message: "Pick a colour and a size",
      requestedSchema: {
        type: "object",
        properties: {
          colour: { type: "string", enum: ["red", "green", "blue"] },
          size: { type: "string", oneOf: [{ const: "s", title: "Small" }, { const: "l", title: "Large" }] }
        },
        required: ["colour", "size"]
      }
    }
    const server = await scriptServer([
      { calls: [{ id: "m1", name: "capable__elicit", args: { params: choose } }] },
      { text: "chosen" }
    ])
    try {
      const cli = startCli(["chat", ...providerFlags(server)], { cwd: ws, env: testEnv(ws), pty: true })
      let at = await answer(cli, "/help for commands", "choose")
      await cli.waitFor("? MCP server capable asks: Pick a colour and a size", 90_000, at)
      await cli.waitFor("size: one of 1. s (Small), 2. l (Large)", 90_000, at)
      assert.include(cli.output().slice(at), "colour: one of 1. red, 2. green, 3. blue")
      at = await answer(cli, "answer? [y]es (fill in)", "y", at)
      // not a choice: asked again, saying what would do
      at = await answer(cli, "colour (a name or number): ", "purple", at)
      await cli.waitFor("colour: one of red, green, blue (its name or number)", 90_000, at)
      at = await answer(cli, "colour (a name or number): ", "green", at)
      at = await answer(cli, "size (a name or number): ", "2", at)
      at = await afterRun(cli, "chosen", "/exit", at)
      assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())
      const elicited = lastToolResult(server.bodies[1]!.body)
      assert.include(elicited, "accept")
      assert.include(elicited, String.raw`\"colour\":\"green\"`)
      assert.include(elicited, String.raw`\"size\":\"l\"`)
    } finally {
      await server.close()
    }
  }, 240_000)
})

/** A workspace whose config starts the capable MCP server, its tools allowed. */
const capableWorkspace = () => {
  const ws = makeWorkspace()
  mkdirSync(join(ws, ".agentloop"))
  writeFileSync(
    join(ws, ".agentloop", "config.json"),
    JSON.stringify({
      mcpServers: {
        capable: {
          command: process.execPath,
          args: ["--experimental-strip-types", "--disable-warning=ExperimentalWarning", capable]
        }
      },
      permissions: { allow: ["capable__*"] }
    })
  )
  return ws
}
