import { assert, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import {
  eventually,
  jsonLines,
  makeWorkspace,
  providerFlags,
  scriptServer,
  sessionFiles,
  startCli,
  testEnv
} from "./helpers/agent.ts"

const SCHEMA = {
  type: "object",
  properties: { title: { type: "string" }, count: { type: "integer", minimum: 0 } },
  required: ["title", "count"],
  additionalProperties: false
}

const ESC = "\u001b"

describe("agentloop run --output-schema", () => {
  it("an invalid answer goes back to the model; the valid one is printed alone as JSON on stdout, exit 0", async () => {
    const ws = makeWorkspace()
    writeFileSync(join(ws, "answer.schema.json"), JSON.stringify(SCHEMA))
    const server = await scriptServer([
      { text: "Looking.", calls: [{ id: "f1", name: "final_answer", args: { title: "calc", count: "two" } }] },
      { calls: [{ id: "f2", name: "final_answer", args: { title: "calc", count: 2 } }] }
    ])
    try {
      const cli = startCli(["run", ...providerFlags(server), "--output-schema", "answer.schema.json", "summarise"], {
        cwd: ws,
        env: testEnv(ws)
      })
      const { code } = await cli.exited
      assert.strictEqual(code, 0, cli.output() + cli.stderr())
      assert.strictEqual(
        cli.output(),
        `${JSON.stringify({ title: "calc", count: 2 }, null, 2)}\n`,
        "stdout holds the answer only"
      )
      assert.include(cli.stderr(), "assistant Looking.", "the run is shown on stderr")
      assert.notInclude(cli.stderr(), ESC)
      const tools = server.bodies[0]!.body["tools"] as Array<{ function: { name: string; parameters: unknown } }>
      const finalAnswer = tools.find((t) => t.function.name === "final_answer")
      assert.deepStrictEqual(finalAnswer?.function.parameters, SCHEMA, "the model is given the file's schema")
      const second = JSON.stringify(server.bodies[1]!.body["messages"])
      assert.include(second, "Invalid final answer", "the problem goes back to the model")
      assert.strictEqual(server.bodies.length, 2, "no request after the accepted answer")
      const [file] = sessionFiles(ws)
      const end = jsonLines(file!).find((l) => l["type"] === "run_end")!
      assert.deepStrictEqual([end["reason"], end["output"]], ["stop", { title: "calc", count: 2 }])
    } finally {
      await server.close()
    }
  }, 120_000)

  it(
    "--durable: killed with SIGKILL while the answer's turn streams, the same command again resumes the run and " +
      "prints its answer",
    async () => {
      const ws = makeWorkspace()
      writeFileSync(join(ws, "answer.schema.json"), JSON.stringify(SCHEMA))
      const server = await scriptServer((_body, index) =>
        index === 0 ?
          { calls: [{ id: "f1", name: "final_answer", args: { title: "calc", count: "two" } }] } :
          index === 1 ?
          { hang: true } :
          { calls: [{ id: "f2", name: "final_answer", args: { title: "calc", count: 2 } }] }
      )
      const args = [
        "run",
        "--durable",
        "--yes",
        ...providerFlags(server),
        "--output-schema",
        "answer.schema.json",
        "summarise"
      ]
      try {
        const first = startCli(args, { cwd: ws, env: testEnv(ws) })
        assert.isTrue(await eventually(() => server.bodies.length === 2, 90_000), first.output() + first.stderr())
        first.child.kill("SIGKILL")
        await first.exited
        const second = startCli(args, { cwd: ws, env: testEnv(ws) })
        const { code } = await second.exited
        assert.strictEqual(code, 0, second.output() + second.stderr())
        assert.strictEqual(
          second.output(),
          `${JSON.stringify({ title: "calc", count: 2 }, null, 2)}\n`,
          "stdout holds the answer only"
        )
        assert.strictEqual(
          server.bodies.length,
          3,
          "the interrupted turn was asked again, once; no request after the answer"
        )
        const tools = server.bodies[2]!.body["tools"] as Array<{ function: { name: string; parameters: unknown } }>
        assert.deepStrictEqual(tools.find((t) => t.function.name === "final_answer")?.function.parameters, SCHEMA)
        assert.include(
          JSON.stringify(server.bodies[2]!.body["messages"]),
          "Invalid final answer",
          "the journaled rejection is kept"
        )
        const [file] = sessionFiles(ws)
        const end = jsonLines(file!).filter((l) => l["type"] === "run_end").at(-1)!
        assert.deepStrictEqual([end["reason"], end["output"]], ["stop", { title: "calc", count: 2 }])
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it("no valid answer within the bound: non-zero exit naming why, nothing on stdout", async () => {
    const ws = makeWorkspace()
    writeFileSync(join(ws, "answer.schema.json"), JSON.stringify(SCHEMA))
    const server = await scriptServer((_body, index) => ({
      calls: [{ id: `f${index}`, name: "final_answer", args: { title: 7, count: -1 } }]
    }))
    try {
      const cli = startCli(["run", ...providerFlags(server), "--output-schema", "answer.schema.json", "summarise"], {
        cwd: ws,
        env: testEnv(ws)
      })
      const { code } = await cli.exited
      assert.strictEqual(code, 1, cli.stderr())
      assert.strictEqual(cli.output(), "")
      assert.match(
        cli.stderr(),
        /agentloop: run ended: error \(the model gave no valid final answer after 3 attempt\(s\): /
      )
      assert.strictEqual(server.bodies.length, 3)
    } finally {
      await server.close()
    }
  }, 120_000)

  it("a bad schema file is a clear error (exit 2) before any request", async () => {
    const ws = makeWorkspace()
    writeFileSync(join(ws, "broken.json"), "{ not json")
    writeFileSync(join(ws, "ref.json"), JSON.stringify({ type: "object", properties: { a: { $ref: "#/$defs/a" } } }))
    writeFileSync(join(ws, "ok.json"), JSON.stringify(SCHEMA))
    const server = await scriptServer([])
    try {
      const run = async (...args: Array<string>) => {
        const cli = startCli(["run", ...providerFlags(server), ...args, "task"], { cwd: ws, env: testEnv(ws) })
        const { code } = await cli.exited
        return { code, out: cli.output(), err: cli.stderr() }
      }
      const [broken, ref, missing, durable] = await Promise.all([
        run("--output-schema", "broken.json"),
        run("--output-schema", "ref.json"),
        run("--output-schema", "missing.json"),
        run("--durable", "--output-schema", "broken.json")
      ])
      assert.strictEqual(broken.code, 2)
      assert.strictEqual(broken.err, "agentloop: --output-schema broken.json: not valid JSON at line 1, column 3\n")
      assert.strictEqual(ref.code, 2)
      assert.match(
        ref.err,
        /^agentloop: --output-schema ref\.json: unsupported JSON Schema at [^\n]*properties\/a[^\n]*\$ref[^\n]*\n$/
      )
      assert.strictEqual(missing.code, 2)
      assert.strictEqual(missing.err, "agentloop: --output-schema missing.json: cannot read it (ENOENT)\n")
      assert.strictEqual(durable.code, 2)
      assert.strictEqual(durable.err, "agentloop: --output-schema broken.json: not valid JSON at line 1, column 3\n")
      for (const r of [broken, ref, missing, durable]) assert.strictEqual(r.out, "")
      assert.strictEqual(server.bodies.length, 0, "no request was made")
      assert.deepStrictEqual(sessionFiles(ws), [], "no session was started")
    } finally {
      await server.close()
    }
  }, 120_000)

  it(
    "hostile schema files: a FIFO, a folder, a device, a huge file, deep nesting, a link to a secret: one clear " +
      "line each, no hang, no secret",
    async () => {
      const ws = makeWorkspace()
      execFileSync("mkfifo", [join(ws, "fifo.json")])
      mkdirSync(join(ws, "folder.json"))
      writeFileSync(join(ws, "huge.json"), `{"type":"object","description":"${"x".repeat(2 * 1024 * 1024)}"}`)
      let deep = `{"type":"string"}`
      for (let i = 0; i < 20_000; i++) deep = `{"type":"object","properties":{"a":${deep}}}`
      writeFileSync(join(ws, "deep.json"), deep)
      const secrets = makeWorkspace()
      writeFileSync(join(secrets, "credentials"), "SECRET-abcdef0123456789\n")
      symlinkSync(join(secrets, "credentials"), join(ws, "linked.json"))
      const server = await scriptServer([])
      try {
        const run = async (file: string) => {
          const cli = startCli(["run", ...providerFlags(server), "--output-schema", file, "task"], {
            cwd: ws,
            env: testEnv(ws)
          })
          // a read that blocks (a FIFO with no writer) would never end: the bound makes that a failure
          // of its own; it is generous, as six CLIs start at once on a machine that may be busy
          const { code } = await cli.exitedWithin(240_000)
          return { code, out: cli.output(), err: cli.stderr() }
        }
        const [fifo, folder, device, huge, nested, linked] = await Promise.all(
          ["fifo.json", "folder.json", "/dev/zero", "huge.json", "deep.json", "linked.json"].map(run)
        )
        assert.deepStrictEqual(
          [fifo, folder, device, huge, nested, linked].map((r) => [r.code, r.out]),
          [[2, ""], [2, ""], [2, ""], [2, ""], [2, ""], [2, ""]],
          JSON.stringify([fifo, folder, device, huge, nested, linked].map((r) => r.err))
        )
        assert.strictEqual(
          fifo.err,
          "agentloop: --output-schema fifo.json: cannot read it (it is not a regular file (a FIFO, a device or a " +
            "socket))\n"
        )
        assert.strictEqual(folder.err, "agentloop: --output-schema folder.json: cannot read it (it is a folder)\n")
        assert.strictEqual(
          device.err,
          "agentloop: --output-schema /dev/zero: cannot read it (it is not a regular file (a FIFO, a device or a " +
            "socket))\n"
        )
        assert.strictEqual(
          huge.err,
          "agentloop: --output-schema huge.json: cannot read it (it is larger than 1048576 bytes)\n"
        )
        assert.strictEqual(nested.err, "agentloop: --output-schema deep.json: nested deeper than 64 levels\n")
        assert.strictEqual(linked.err, "agentloop: --output-schema linked.json: not valid JSON\n")
        assert.notInclude(linked.err, "SECRET")
        assert.strictEqual(server.bodies.length, 0, "no request was made")
      } finally {
        await server.close()
      }
    },
    300_000
  )
})
