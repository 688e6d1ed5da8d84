import {
  decodeMcpServers,
  McpServersSection,
  serverNameForCommand,
  serverNameForUrl,
  serverPrefix,
  serversFromFlags,
  splitCommandLine,
  toolNameFor
} from "@agentloop/mcp"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Schema } from "effect"

const providerName = /^[a-zA-Z0-9_-]{1,64}$/

describe("the mcpServers section", () => {
  it.effect("decodes stdio and HTTP entries in the format other agents use; names are the keys", () =>
    Effect.gen(function*() {
      const servers = yield* decodeMcpServers({
        everything: { command: "npx", args: ["-y", "@modelcontextprotocol/server-everything"], env: { A: "1" } },
        remote: { url: "https://mcp.example.com/mcp", headers: { Authorization: "Bearer x" } },
        typed: { type: "http", url: "http://127.0.0.1:3001/mcp", timeoutMs: 30000 },
        bare: { type: "stdio", command: "my-server" }
      })
      assert.deepStrictEqual(servers, [
        {
          name: "everything",
          transport: "stdio",
          command: "npx",
          args: ["-y", "@modelcontextprotocol/server-everything"],
          env: { A: "1" }
        },
        {
          name: "remote",
          transport: "http",
          url: "https://mcp.example.com/mcp",
          headers: { Authorization: "Bearer x" }
        },
        { name: "typed", transport: "http", url: "http://127.0.0.1:3001/mcp", timeoutMs: 30000 },
        { name: "bare", transport: "stdio", command: "my-server", args: [] }
      ])
    }))

  it.effect("a malformed entry fails with an McpConfigError naming the entry and the field", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<[unknown, RegExp]> = [
        [{ broken: { command: "" } }, /\["broken"\]\["command"\]/],
        [{ broken: { command: "x", args: "not a list" } }, /\["broken"\]\["args"\]/],
        [{ broken: { url: "ftp://example.com" } }, /an http:\/\/ or https:\/\/ URL/],
        [{ broken: { url: "http://x", headers: { A: 1 } } }, /\["broken"\]\["headers"\]\["A"\]/],
        [["not", "a", "record"], /invalid mcpServers section/]
      ]
      for (const [input, expected] of cases) {
        const exit = yield* Effect.exit(decodeMcpServers(input))
        assert.isTrue(Exit.isFailure(exit), JSON.stringify(input))
        const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail")?.error : undefined
        assert.strictEqual(error?._tag, "McpConfigError")
        assert.match(error!.message, expected)
      }
    }))

  it.effect("an HTTP entry's oauth (credentials, scope, grant, key) or false reaches the server config", () =>
    Effect.gen(function*() {
      const servers = yield* decodeMcpServers({
        registered: {
          url: "https://mcp.example.com/mcp",
          oauth: { clientId: "agentloop", clientSecret: "s3cret-value", scope: "read write" }
        },
        machine: {
          url: "https://api.example.com/mcp",
          oauth: {
            grant: "client_credentials",
            clientId: "ci",
            privateKey: "-----BEGIN PRIVATE KEY-----",
            signingAlgorithm: "RS256"
          }
        },
        published: {
          url: "https://docs.example.com/mcp",
          oauth: { clientMetadataUrl: "https://agentloop.dev/client.json" }
        },
        off: { url: "https://plain.example.com/mcp", oauth: false }
      })
      assert.deepStrictEqual(servers.map((s) => (s.transport === "http" ? s.oauth : "stdio")), [
        { clientId: "agentloop", clientSecret: "s3cret-value", scope: "read write" },
        {
          grant: "client_credentials",
          clientId: "ci",
          privateKey: "-----BEGIN PRIVATE KEY-----",
          signingAlgorithm: "RS256"
        },
        { clientMetadataUrl: "https://agentloop.dev/client.json" },
        false
      ])
    }))

  it.effect("a malformed oauth names the field, never the value", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<[unknown, RegExp]> = [
        [
          { grant: "password", clientSecret: "s3cret-value" },
          /Expected "authorization_code" \| "client_credentials"\n\s+at \["r"\]\["oauth"\]\["grant"\]/
        ],
        ["s3cret-value", /Expected object \| false\n\s+at \["r"\]\["oauth"\]/],
        [true, /Expected object \| false\n\s+at \["r"\]\["oauth"\]/],
        [{ clientId: "", clientSecret: "s3cret-value" }, /at \["r"\]\["oauth"\]\["clientId"\]/]
      ]
      for (const [oauth, expected] of cases) {
        const error = yield* Effect.flip(decodeMcpServers({ r: { url: "https://mcp.example.com/mcp", oauth } }))
        assert.strictEqual(error._tag, "McpConfigError")
        assert.match(error.message, expected)
        assert.notInclude(error.message, "s3cret-value")
      }
    }))

  it("is a Schema a config file's schema can embed", () => {
    const Config = Schema.Struct({ mcpServers: Schema.optionalKey(McpServersSection) })
    const decoded = Schema.decodeUnknownSync(Config)({ mcpServers: { a: { command: "a" } } })
    assert.deepStrictEqual(decoded, { mcpServers: { a: { command: "a" } } })
  })
})

describe("the --mcp and --mcp-url flags", () => {
  it("split command lines like a shell", () => {
    assert.deepStrictEqual(splitCommandLine("npx -y  @scope/pkg 'a b' \"c \\\" d\" e\\ f"), {
      words: ["npx", "-y", "@scope/pkg", "a b", "c \" d", "e f"]
    })
    assert.deepStrictEqual(splitCommandLine("''"), { words: [""] })
    assert.deepStrictEqual(splitCommandLine("a 'b"), { error: "a single quote is not closed" })
    assert.deepStrictEqual(splitCommandLine("a \"b"), { error: "a double quote is not closed" })
  })

  it("name servers after the package or command, or the URL's host", () => {
    const cases: ReadonlyArray<[string, string]> = [
      ["npx -y @modelcontextprotocol/server-everything", "everything"],
      ["npx -y @modelcontextprotocol/server-filesystem /tmp/x", "filesystem"],
      ["uvx mcp-server-git --repository .", "git"],
      ["node ./build/weather-server.js", "weather"],
      ["npx -y some-tool@1.2.3", "some-tool"],
      ["docker run -i --rm mcp/github", "github"],
      ["my-server", "my"],
      ["/usr/local/bin/notes-mcp --port 3", "notes"]
    ]
    for (const [line, name] of cases) {
      const split = splitCommandLine(line)
      assert.strictEqual("words" in split ? serverNameForCommand(split.words) : "", name, line)
    }
    assert.strictEqual(serverNameForUrl("https://mcp.example.com/mcp"), "example.com")
    assert.strictEqual(serverNameForUrl("http://127.0.0.1:3001/mcp"), "127.0.0.1")
  })

  it.effect("give server configs with unique names (also against names already taken)", () =>
    Effect.gen(function*() {
      const servers = yield* serversFromFlags({
        mcp: ["npx -y @modelcontextprotocol/server-everything", "node everything.js"],
        mcpUrl: ["http://127.0.0.1:3001/mcp", "http://127.0.0.1:3002/mcp"]
      }, ["everything"])
      assert.deepStrictEqual(servers, [
        {
          name: "everything_2",
          transport: "stdio",
          command: "npx",
          args: ["-y", "@modelcontextprotocol/server-everything"]
        },
        { name: "everything_3", transport: "stdio", command: "node", args: ["everything.js"] },
        { name: "127.0.0.1", transport: "http", url: "http://127.0.0.1:3001/mcp" },
        { name: "127.0.0.1_2", transport: "http", url: "http://127.0.0.1:3002/mcp" }
      ])
    }))

  it.effect("refuse a line that does not parse, an empty one and a URL that is not http(s)", () =>
    Effect.gen(function*() {
      const messages: Array<string> = []
      for (const flags of [{ mcp: ["a 'b"] }, { mcp: ["  "] }, { mcpUrl: ["file:///x"] }]) {
        const exit = yield* Effect.exit(serversFromFlags(flags))
        const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail")?.error : undefined
        messages.push(error?.message ?? "no error")
      }
      assert.deepStrictEqual(messages, [
        "--mcp \"a 'b\": a single quote is not closed",
        "--mcp needs a command",
        "--mcp-url \"file:///x\" is not an http:// or https:// URL"
      ])
    }))
})

describe("tool names", () => {
  it("are <prefix>__<tool>; the prefix never holds __ nor ends with _", () => {
    assert.strictEqual(serverPrefix("everything"), "everything")
    assert.strictEqual(serverPrefix("my server.v2"), "my_server_v2")
    assert.strictEqual(serverPrefix("a__b"), "a_b")
    assert.strictEqual(serverPrefix("_x_"), "x")
    assert.strictEqual(serverPrefix("!!!"), "mcp")
    assert.strictEqual(serverPrefix("a-very-long-server-name-that-goes-on"), "a-very-long-server-name-")
    assert.strictEqual(toolNameFor("everything", "get-sum"), "everything__get-sum")
  })

  it("two servers never give the same name, whatever their tools are called", () => {
    // tool names chosen to collide if the prefix could hold or end with `_`
    const names = [
      toolNameFor(serverPrefix("a"), "b__c"),
      toolNameFor(serverPrefix("a__b"), "c"),
      toolNameFor(serverPrefix("a_"), "_x"),
      toolNameFor(serverPrefix("a"), "__x")
    ]
    assert.strictEqual(new Set(names).size, names.length, names.join(" "))
  })

  it("stay within 64 characters of [a-zA-Z0-9_-], and distinct when they had to be changed", () => {
    const prefix = serverPrefix("a-very-long-server-name-that-goes-on")
    const long = "x".repeat(80)
    const names = [
      toolNameFor(prefix, long),
      toolNameFor(prefix, `${long}y`),
      toolNameFor(prefix, "read file"),
      toolNameFor(prefix, "read_file"),
      toolNameFor(prefix, "read.file")
    ]
    for (const name of names) assert.match(name, providerName)
    assert.strictEqual(new Set(names).size, names.length)
    assert.strictEqual(names[3], `${prefix}__read_file`)
    assert.match(names[2]!, new RegExp(`^${prefix}__read_file_[0-9a-f]{6}$`))
  })
})
