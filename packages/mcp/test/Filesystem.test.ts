/**
 * `@modelcontextprotocol/server-filesystem` from the npm registry, confined to a temporary
 * directory, started once for this file: a scripted session writes, reads, edits, lists, moves
 * and inspects files, and is refused outside the directory.
 */
import { toolCall, turn } from "@agentloop/testkit"
import { afterAll, assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { node, resultsOf, runWithMcp, serverBin, serversLayer, textOf } from "./helpers.ts"

const root = realpathSync(mkdtempSync(join(tmpdir(), "agentloop-mcp-fs-")))
afterAll(() => rmSync(root, { recursive: true, force: true }))

const filesystem = serversLayer([
  {
    name: "files",
    transport: "stdio",
    command: node,
    args: [serverBin("@modelcontextprotocol/server-filesystem"), root]
  }
])

describe("server-filesystem confined to a temporary directory", { timeout: 30_000 }, () => {
  layer(filesystem, { timeout: "60 seconds" })((it) => {
    it.effect("a session writes, reads, edits, lists, moves and inspects files, and is refused outside", () =>
      Effect.gen(function*() {
        const notes = join(root, "notes.txt")
        const run = yield* runWithMcp([
          turn.toolCalls([
            toolCall("w", "files__write_file", { path: notes, content: "alpha\nbeta\n" }),
            toolCall("d", "files__create_directory", { path: join(root, "sub") })
          ]),
          turn.toolCalls([
            toolCall("r", "files__read_text_file", { path: notes }),
            toolCall("e", "files__edit_file", { path: notes, edits: [{ oldText: "beta", newText: "gamma" }] }),
            toolCall("x", "files__read_text_file", { path: "/etc/hostname" }),
            toolCall("v", "files__read_multiple_files", { paths: [] })
          ]),
          turn.toolCalls([
            toolCall("m", "files__move_file", { source: notes, destination: join(root, "sub", "n.txt") })
          ]),
          turn.toolCalls([
            toolCall("l", "files__list_directory", { path: join(root, "sub") }),
            toolCall("i", "files__get_file_info", { path: join(root, "sub", "n.txt") }),
            toolCall("a", "files__list_allowed_directories")
          ]),
          turn.text("done")
        ])
        assert.strictEqual(run.result.reason, "stop")
        const results = new Map(resultsOf(run.result.messages).map((r) => [r.toolCallId, r]))
        const get = (id: string) => results.get(id)!

        assert.isFalse(get("w").isError)
        assert.isFalse(get("d").isError)
        // the read and the edit ran in the same batch: the read saw either text, the file has the edit
        assert.match(textOf(get("r")), /^alpha\n(beta|gamma)\n$/)
        assert.isFalse(get("e").isError)
        assert.match(textOf(get("e")), /-beta\n\+gamma/)
        assert.isTrue(get("x").isError)
        assert.match(textOf(get("x")), /access denied|outside allowed/i)
        assert.strictEqual(
          textOf(get("v")),
          "Invalid arguments for tool \"files__read_multiple_files\": paths: must NOT have fewer than 1 items"
        )
        assert.isFalse(get("m").isError)
        assert.strictEqual(textOf(get("l")), "[FILE] n.txt")
        assert.match(textOf(get("i")), /size: 12/)
        assert.include(textOf(get("a")), root)
        assert.strictEqual(readFileSync(join(root, "sub", "n.txt"), "utf8"), "alpha\ngamma\n")
      }))
  })
})
