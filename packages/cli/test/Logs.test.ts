import { assert, describe, it } from "@effect/vitest"
import { describeRetry } from "../src/Logs.ts"
import { makeWorkspace, providerFlags, scriptServer, startCli, testEnv } from "./helpers/agent.ts"

const retry = (reason: string, attempt: number, delay: number, status?: number) => ({
  "agentloop.retry.attempt": attempt,
  "agentloop.retry.attempts": 4,
  "agentloop.retry.delay_ms": delay,
  "agentloop.error.reason": reason,
  ...(status === undefined ? {} : { "http.response.status_code": status })
})

describe("log lines", () => {
  it("a provider's retry reads as what failed, the wait and the attempt coming out of those allowed", () => {
    assert.strictEqual(describeRetry(retry("rate_limit", 1, 428.7, 429)), "rate limited, retrying in 0.4 s (2/4)")
    assert.strictEqual(
      describeRetry(retry("server", 2, 1000, 503)),
      "server error (HTTP 503), retrying in 1.0 s (3/4)"
    )
    assert.strictEqual(describeRetry(retry("network", 3, 12_400)), "the connection failed, retrying in 12 s (4/4)")
    assert.isUndefined(describeRetry({ "agentloop.provider": "x" }), "not a retry")
  })

  it("agentloop run: a 429 then an answer shows one readable retry line, no log record", async () => {
    const ws = makeWorkspace()
    const server = await scriptServer([{ status: 429, headers: { "retry-after-ms": "300" } }, { text: "fine" }])
    try {
      const cli = startCli(["run", ...providerFlags(server), "hello"], { cwd: ws, env: testEnv(ws) })
      const { code } = await cli.exitedWithin(120_000)
      assert.strictEqual(code, 0, cli.stderr())
      assert.include(cli.output(), "fine")
      assert.strictEqual(cli.stderr(), "⚠ rate limited, retrying in 0.3 s (2/4)\n")
    } finally {
      await server.close()
    }
  }, 240_000)
})
