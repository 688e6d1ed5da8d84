/**
 * The roots offered to the servers (the `roots` option of `mcpToolsLayer`): what a server's
 * `roots/list` is answered with, and `setRoots`, which replaces them and tells the connected
 * servers. Without the option no roots are offered and none can be set.
 */
import { Effect } from "effect"
import { McpConfigError } from "../Errors.ts"
import { checkRoots } from "../Roots.ts"
import type { McpRoot } from "../Roots.ts"
import type { ServerState } from "./connection.ts"
import { request } from "./requests.ts"

export interface OfferedRoots {
  /** Whether roots are offered (the client then declares `roots` and answers `roots/list`). */
  readonly offered: boolean
  /** The roots as they are now, as `roots/list` answers them. */
  readonly list: () => Array<{ uri: string; name?: string }>
  /**
   * New roots; the connected servers are told with `notifications/roots/list_changed` (one that is
   * gone is told when it connects again: it then asks for the roots).
   */
  readonly set: (next: ReadonlyArray<McpRoot>, servers: ReadonlyArray<ServerState>) => Effect.Effect<
    void,
    McpConfigError
  >
}

/** The roots of the `roots` option, each checked to be a `file://` URI. */
export const makeOfferedRoots = Effect.fnUntraced(function*(
  initial: ReadonlyArray<McpRoot> | undefined
): Effect.fn.Return<OfferedRoots, McpConfigError> {
  let roots = initial === undefined ? undefined : yield* checkRoots(initial)
  return {
    offered: roots !== undefined,
    list: () =>
      (roots ?? []).map((root) => ({
        uri: root.uri,
        ...(root.name === undefined ? {} : { name: root.name })
      })),
    set: Effect.fnUntraced(function*(next: ReadonlyArray<McpRoot>, servers: ReadonlyArray<ServerState>) {
      if (roots === undefined) {
        return yield* new McpConfigError({
          message: "no roots were offered to the MCP servers (mcpToolsLayer has no roots option), so none can change"
        })
      }
      roots = yield* checkRoots(next)
      const clients = servers.flatMap((s) => (s.client === undefined ? [] : [s.client]))
      yield* Effect.forEach(clients, (client) => Effect.ignore(request(() => client.sendRootsListChanged())), {
        concurrency: "unbounded",
        discard: true
      })
    })
  }
})
