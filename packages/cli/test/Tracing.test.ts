/**
 * `agentloop run --otlp URL` (and OpenTelemetry's environment) as real processes: the run's spans
 * reach an in-process OTLP/HTTP receiver before the process exits, as a tree, and no credential is
 * in them.
 */
import { assert, describe, it } from "@effect/vitest"
import { childrenOf, startOtlpReceiver } from "../../core/test/fixtures/otlp-receiver.ts"
import type { ReceivedSpan } from "../../core/test/fixtures/otlp-receiver.ts"
import { CliError } from "../src/CliError.ts"
import { otlpTarget } from "../src/internal/Tracing.ts"
import {
  jsonLines,
  makeWorkspace,
  providerFlags,
  scriptServer,
  sessionFiles,
  startCli,
  testEnv
} from "./helpers/agent.ts"

const apiKey = "sk-trace-secret-0123456789abcdef"

const named = (spans: ReadonlyArray<ReceivedSpan>, name: string): ReceivedSpan => {
  const found = spans.filter((s) => s.name === name)
  assert.strictEqual(found.length, 1, `one span named "${name}" among ${spans.map((s) => s.name).join(", ")}`)
  return found[0]!
}

describe("agentloop run --otlp", () => {
  it("sends the run's spans (the agent, its turns, its calls) before it exits; the API key is in none", async () => {
    const ws = makeWorkspace()
    const otlp = await startOtlpReceiver()
    const server = await scriptServer([
      {
        calls: [{ id: "c1", name: "write", args: { path: "hello.txt", content: "hi\n" } }],
        usage: { input: 100, output: 10, cached: 40 }
      },
      { text: "done", usage: { input: 120, output: 5 } }
    ])
    try {
      const cli = startCli(
        ["run", "--yes", "--otlp", otlp.url, ...providerFlags(server), "--api-key-env", "AGENTLOOP_TEST_KEY", "hi"],
        { cwd: ws, env: testEnv(ws, { AGENTLOOP_TEST_KEY: apiKey }) }
      )
      const { code } = await cli.exitedWithin(120_000)
      assert.strictEqual(code, 0, cli.output() + cli.stderr())
      // the key was sent to the model's server, and is in no export
      assert.strictEqual(server.bodies.length, 2)
      assert.isAbove(otlp.exports.length, 0, "the spans were sent before the process exited")
      assert.isTrue(otlp.exports.every((e) => e.path === "/v1/traces"), "URL is a base: traces go to URL/v1/traces")
      for (const e of otlp.exports) assert.notInclude(e.body, apiKey)

      const spans = otlp.spans()
      assert.isTrue(spans.every((s) => s.service === "agentloop"))
      const run = named(spans, "invoke_agent agentloop")
      assert.isUndefined(run.parentSpanId)
      const session = jsonLines(sessionFiles(ws)[0]!)[0]!
      assert.deepInclude(run.attributes, {
        "gen_ai.agent.name": "agentloop",
        "gen_ai.conversation.id": session["id"],
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "test-model",
        "agentloop.reason": "stop"
      })
      const top = childrenOf(spans, run)
      assert.sameMembers(top.map((s) => s.name), ["chat test-model", "chat test-model", "execute_tool write"])
      const chats = top.filter((s) => s.name === "chat test-model")
        .sort((a, b) => Number(a.attributes["agentloop.step"]) - Number(b.attributes["agentloop.step"]))
      // OpenAI's prompt_tokens include the cached ones: the conventions' input_tokens are that total
      assert.deepInclude(chats[0]!.attributes, {
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.cache_read.input_tokens": 40,
        "gen_ai.usage.output_tokens": 10,
        "gen_ai.response.finish_reasons": ["tool_calls"]
      })
      // inside each turn: the provider's request, and the HTTP request inside that
      const [stream] = childrenOf(spans, chats[0]!)
      assert.strictEqual(stream?.name, "agentloop.provider.stream")
      assert.deepStrictEqual(childrenOf(spans, stream!).map((s) => s.name), ["POST"])
      assert.strictEqual(named(top, "execute_tool write").attributes["agentloop.tool.outcome"], "ok")
    } finally {
      await server.close()
      await otlp.close()
    }
  })

  it("without the flag, OTEL_EXPORTER_OTLP_ENDPOINT and its headers: sent, never shown", async () => {
    const ws = makeWorkspace()
    const otlp = await startOtlpReceiver()
    const server = await scriptServer([{ text: "done" }])
    const headerSecret = "collector-token-9f8e7d6c5b4a"
    try {
      const cli = startCli(["run", ...providerFlags(server), "hi"], {
        cwd: ws,
        env: testEnv(ws, {
          OTEL_EXPORTER_OTLP_ENDPOINT: `${otlp.url}/collector/`,
          OTEL_EXPORTER_OTLP_HEADERS: `x-collector-key=${headerSecret},x-team=a%20b`
        })
      })
      const { code } = await cli.exitedWithin(120_000)
      assert.strictEqual(code, 0, cli.output() + cli.stderr())
      assert.isAbove(otlp.exports.length, 0)
      for (const e of otlp.exports) {
        assert.strictEqual(e.path, "/collector/v1/traces")
        assert.strictEqual(e.headers["x-collector-key"], headerSecret)
        assert.strictEqual(e.headers["x-team"], "a b")
        assert.notInclude(e.body, headerSecret)
      }
      assert.notInclude(cli.output() + cli.stderr(), headerSecret)
      assert.deepStrictEqual(otlp.spans().filter((s) => s.parentSpanId === undefined).map((s) => s.name), [
        "invoke_agent agentloop"
      ])
    } finally {
      await server.close()
      await otlp.close()
    }
  })

  it("a URL that is not http(s) is refused before anything runs", async () => {
    const ws = makeWorkspace()
    const cli = startCli(["run", "--otlp", "ftp://127.0.0.1:1/", "--provider", "openai-compat", "--model", "m", "hi"], {
      cwd: ws,
      env: testEnv(ws)
    })
    const { code } = await cli.exitedWithin(120_000)
    assert.notStrictEqual(code, 0)
    assert.include(cli.stderr(), "--otlp must be an http:// or https:// URL")
  })
})

describe("where spans go (otlpTarget)", () => {
  const base = "http://collector:4318"
  it("--otlp is a base URL, like OTEL_EXPORTER_OTLP_ENDPOINT, unless it is already the traces URL", () => {
    assert.strictEqual((otlpTarget(base, {}) as { url: string }).url, `${base}/v1/traces`)
    assert.strictEqual((otlpTarget(`${base}/otlp/`, {}) as { url: string }).url, `${base}/otlp/v1/traces`)
    assert.strictEqual((otlpTarget(`${base}/v1/traces`, {}) as { url: string }).url, `${base}/v1/traces`)
  })

  it("the flag wins over the environment; the traces endpoint over the base one, taken as it is", () => {
    const env = {
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://base:4318",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://traces:4318/custom"
    }
    assert.strictEqual((otlpTarget(base, env) as { url: string }).url, `${base}/v1/traces`)
    assert.strictEqual((otlpTarget(undefined, env) as { url: string }).url, "http://traces:4318/custom")
    assert.strictEqual(
      (otlpTarget(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://base:4318" }) as { url: string }).url,
      "http://base:4318/v1/traces"
    )
    assert.isUndefined(otlpTarget(undefined, {}), "nothing asked for: no tracing")
  })

  it("OTEL_SDK_DISABLED and OTEL_TRACES_EXPORTER=none turn the environment's endpoint off, not the flag", () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://base:4318" }
    assert.isUndefined(otlpTarget(undefined, { ...env, OTEL_SDK_DISABLED: "true" }))
    assert.isUndefined(otlpTarget(undefined, { ...env, OTEL_TRACES_EXPORTER: "none" }))
    assert.isDefined(otlpTarget(base, { ...env, OTEL_SDK_DISABLED: "true" }))
  })

  it("headers: the traces ones over the general ones, percent-decoded, entries without a key skipped", () => {
    const target = otlpTarget(base, {
      OTEL_EXPORTER_OTLP_HEADERS: "x-general=1",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "Api-Key=a%3Db, =nokey, junk ,x-team = two words"
    }) as { headers: Record<string, string> }
    assert.deepStrictEqual(target.headers, { "api-key": "a=b", "x-team": "two words" })
  })

  it("a value that is no http(s) URL is an error naming where it came from, not the value", () => {
    const wrong = otlpTarget(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "https://user:secret@%zz" })
    assert.instanceOf(wrong, CliError)
    assert.strictEqual(
      (wrong as CliError).message,
      "OTEL_EXPORTER_OTLP_ENDPOINT is not a URL (e.g. http://127.0.0.1:4318)"
    )
  })
})
