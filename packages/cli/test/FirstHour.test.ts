/**
 * What a new user reads in their first hour (issue 40, item 7): the approval question, the line after
 * each run, a denied call in a pipe, and the errors of a first `agentloop run` (no provider, no key,
 * an image that is not there, `scripted`), each as the user meets it: the CLI as a process, in a pipe
 * or in a pseudo-terminal.
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { usageLine } from "../src/Agent.ts"
import { answer, makeWorkspace, providerFlags, scriptServer, startCli, testEnv } from "./helpers/agent.ts"

/** Runs the CLI in a pipe to its end: exit code, stdout, stderr. */
const runCli = async (args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv) => {
  const cli = startCli(args, { cwd, env })
  cli.endInput()
  const { code } = await cli.exitedWithin(60_000)
  return { code, stdout: cli.output(), stderr: cli.stderr() }
}

/** One line on stderr (the `agentloop:` error), nothing on stdout, exit 2. */
const oneError = (r: { code: number | null; stdout: string; stderr: string }): string => {
  assert.strictEqual(r.code, 2, r.stderr)
  assert.strictEqual(r.stdout, "", "nothing printed before the error")
  assert.match(r.stderr, /^agentloop: [^\n]+\n$/, r.stderr)
  return r.stderr
}

describe("the first hour", () => {
  it("the usage line: the session's total only when it differs; parts left out from the end to fit", () => {
    const run = { input: 1200, output: 34 }
    const context = "context: 1234 of 10.0k (12%)"
    const line = (columns: number | undefined, session = run, costNote = true) =>
      usageLine({ last: run, session, context, costNote, columns })
    const full = "  usage: 1200 tokens in, 34 out · context: 1234 of 10.0k (12%) · cost unknown for this model"
    assert.strictEqual(line(undefined), full, "a pipe: the whole line")
    assert.strictEqual(line(0), full, "a terminal that does not say its width: the whole line")
    assert.strictEqual(line(80), "  usage: 1200 tokens in, 34 out · context: 1234 of 10.0k (12%)")
    assert.strictEqual(line(40), "  usage: 1200 tokens in, 34 out")
    assert.strictEqual(line(undefined, run, false), "  usage: 1200 tokens in, 34 out · context: 1234 of 10.0k (12%)")
    assert.strictEqual(
      line(undefined, { input: 2400, output: 68 }, false),
      "  usage: 1200 tokens in, 34 out · session: 2400 tokens in, 68 out · context: 1234 of 10.0k (12%)"
    )
  })

  it(
    "on a 120-column terminal: the approval question says what a! does; the line after each run fits one row, " +
      "names the session's total only once it differs, and says the cost is unknown once",
    async () => {
      const ws = makeWorkspace()
      // (input: the prompt's tokens, the cached ones included)
      const usage = { input: 123_456, output: 7890, cached: 100_000 }
      const server = await scriptServer([
        { calls: [{ id: "b1", name: "bash", args: { command: "touch z" } }] },
        { text: "first done", usage },
        { text: "second done", usage }
      ])
      try {
        const cli = startCli(["chat", "--context-window", "400000", ...providerFlags(server)], {
          cwd: ws,
          env: testEnv(ws),
          pty: true,
          size: { cols: 120, rows: 40 }
        })
        let at = await answer(cli, "/help for commands", "go")
        await cli.waitFor("allow?", 90_000, at)
        const asked = await cli.waitForScreen((s) => s.rows.some((r) => r.includes("allow?")))
        assert.include(
          asked.rows.find((r) => r.includes("allow?")),
          "a!/p!: also save to .agentloop/config.json",
          "the question says what ! does"
        )
        at = await answer(cli, "allow?", "y", at)
        at = await answer(cli, /first done[\s\S]*usage:[^\n]*\n[\s\S]*> /, "again", at)
        await cli.waitFor(/second done[\s\S]*usage:[^\n]*\n/, 90_000, at)
        const shown = await cli.waitForScreen((s) => s.all.filter((r) => r.startsWith("  usage:")).length === 2)
        // each is one whole row: a line that wrapped would not be equal to its text
        assert.deepStrictEqual(shown.all.filter((r) => r.startsWith("  usage:")), [
          "  usage: 23.5k tokens in (100.0k cached), 7890 out · context: 131.3k of 400.0k (33%) · " +
          "cost unknown for this model",
          "  usage: 23.5k tokens in (100.0k cached), 7890 out · session: 46.9k tokens in (200.0k cached), 15.8k out"
        ])
        cli.write("/exit\r")
        assert.strictEqual((await cli.exitedWithin(60_000)).code, 0, cli.output())
      } finally {
        await server.close()
      }
    },
    240_000
  )

  it("in a pipe, a call that needs approval is denied in one line, with the reason and --yes", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([
      { calls: [{ id: "b1", name: "bash", args: { command: "touch pwned" } }] },
      { text: "understood" }
    ])
    try {
      const run = await runCli(["run", ...providerFlags(server), "try"], ws, testEnv(ws))
      assert.strictEqual(run.code, 0, run.stderr)
      const denied = run.stdout.split("\n").filter((l) => l.includes("denied"))
      assert.deepStrictEqual(denied, [
        "⊘ bash  denied: needs approval, but agentloop is not running in a terminal to ask in (--yes allows it)"
      ])
      assert.isFalse(existsSync(join(ws, "pwned")))
      assert.include(JSON.stringify(server.bodies[1]!.body["messages"]), "(--yes allows it)", "the model is told")
    } finally {
      await server.close()
    }
  }, 120_000)

  it(
    "--model without a provider names the flag, the config key and the choices (the known model's provider)",
    async () => {
      const ws = makeWorkspace()
      const env = testEnv(ws)
      const [known, claude, other] = await Promise.all([
        runCli(["run", "--model", "gpt-4.1", "hi"], ws, env),
        runCli(["run", "--model", "claude-sonnet-4-5", "hi"], ws, env),
        runCli(["run", "--model", "qwen2.5-coder", "hi"], ws, env)
      ])
      assert.strictEqual(
        oneError(known),
        "agentloop: the model gpt-4.1 needs a provider: add --provider openai-compat (gpt-4.1 is an OpenAI " +
          "model; the choices are openai-compat and anthropic), or set AGENTLOOP_PROVIDER or \"provider\" in " +
          ".agentloop/config.json\n"
      )
      assert.include(oneError(claude), "add --provider anthropic (claude-sonnet-4-5 is an Anthropic model;")
      assert.strictEqual(
        oneError(other),
        "agentloop: the model qwen2.5-coder needs a provider: add --provider openai-compat (OpenAI, Ollama, " +
          "llama.cpp, " +
          "vLLM, LM Studio...) or --provider anthropic, or set AGENTLOOP_PROVIDER or \"provider\" in " +
          ".agentloop/config.json\n"
      )
      assert.isFalse(existsSync(join(ws, ".agentloop")), "no session was started")
    },
    120_000
  )

  it("a missing API key and a key in --base-url are told in the CLI's words: the variable and the flag", async () => {
    const ws = makeWorkspace()
    const env = testEnv(ws)
    delete env["OPENAI_API_KEY"]
    delete env["ANTHROPIC_API_KEY"]
    const [openai, anthropic, inUrl] = await Promise.all([
      runCli(["run", "--provider", "openai-compat", "--model", "gpt-4.1", "hi"], ws, env),
      runCli(["run", "--provider", "anthropic", "--model", "claude-sonnet-4-5", "hi"], ws, env),
      runCli(
        [
          "run",
          "--provider",
          "openai-compat",
          "--model",
          "m",
          "--base-url",
          "http://me:s3cret-key@127.0.0.1:9/v1",
          "hi"
        ],
        ws,
        env
      )
    ])
    assert.strictEqual(
      oneError(openai),
      "agentloop: no API key for api.openai.com: set OPENAI_API_KEY, or name the variable that holds the key with " +
        "--api-key-env (apiKeyEnv in .agentloop/config.json)\n"
    )
    assert.include(oneError(anthropic), "no API key for api.anthropic.com: set ANTHROPIC_API_KEY, or name")
    assert.strictEqual(
      oneError(inUrl),
      "agentloop: the API root (--base-url, baseUrl) must not contain credentials: put the API key in an environment " +
        "variable and name it with --api-key-env (apiKeyEnv in .agentloop/config.json)\n"
    )
    for (const r of [openai, anthropic, inUrl]) assert.notInclude(r.stderr, "pass apiKey")
  }, 120_000)

  it("--provider: run and chat offer the real providers only; the demo's help says what scripted is", async () => {
    const ws = makeWorkspace()
    const env = testEnv(ws)
    const [runHelp, chatHelp, demoHelp, scripted] = await Promise.all([
      runCli(["run", "--help"], ws, env),
      runCli(["chat", "--help"], ws, env),
      runCli(["demo", "--help"], ws, env),
      runCli(["run", "--provider", "scripted", "--model", "x", "hi"], ws, env)
    ])
    for (const help of [runHelp, chatHelp]) {
      const line = help.stdout.split("\n").find((l) => l.includes("--provider"))
      assert.include(line, "(choices: openai-compat, anthropic)")
      assert.notInclude(line, "scripted")
    }
    assert.include(
      demoHelp.stdout,
      "scripted (the built-in scripted model the demo and the tests use: offline, no API key)"
    )
    assert.include(oneError(scripted), "Invalid value for flag --provider: \"scripted\". Expected: \"openai-compat\"")
  }, 120_000)

  it("run --image of a missing file: one error naming it, nothing printed, no session file", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([{ text: "never asked" }])
    try {
      const r = await runCli(["run", ...providerFlags(server), "--image", "nope.png", "look"], ws, testEnv(ws))
      assert.strictEqual(oneError(r), `agentloop: --image nope.png: no such file in the workspace ${ws}\n`)
      assert.isFalse(existsSync(join(ws, ".agentloop")), "no session file")
      assert.strictEqual(server.bodies.length, 0)
    } finally {
      await server.close()
    }
  }, 120_000)
})
