import { ToolError } from "@agentloop/core"
import type { ToolContext, ToolOutput } from "@agentloop/core"
import { Workspace, workspaceLayer } from "@agentloop/tools"
import { NodeServices } from "@effect/platform-node"
import { Effect, FileSystem, Layer } from "effect"

export const progress: Array<unknown> = []

export const context = (overrides: Partial<ToolContext> = {}): ToolContext => ({
  signal: new AbortController().signal,
  reportProgress: (p) => Effect.sync(() => void progress.push(p)),
  toolCallId: "call_1",
  toolName: "tool",
  ...overrides
})

/** A fresh temporary workspace (removed afterwards) with Node's services, and its root. */
export const inWorkspace = <A, E>(
  f: (root: string) => Effect.Effect<A, E, Workspace | NodeServices.NodeServices>
) =>
  Effect.scoped(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const base = yield* fs.makeTempDirectoryScoped({ prefix: "agentloop-tools-" })
    const root = `${yield* fs.realPath(base)}/ws`
    yield* fs.makeDirectory(root)
    return yield* f(root).pipe(Effect.provide(workspaceLayer(root)))
  })).pipe(Effect.provide(NodeServices.layer))

export const text = (output: ToolOutput): string =>
  typeof output === "string" ? output : output.content.map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join("")

export const details = (output: ToolOutput): Record<string, unknown> =>
  typeof output === "string" ? {} : (output.details as Record<string, unknown>)

/** Layer with Node services, for tests that build their own workspace. */
export const node = NodeServices.layer
export type { Layer }

/** The ToolError a tool call failed with (a defect if it succeeded or failed otherwise). */
export const failed = <A, R>(effect: Effect.Effect<A, unknown, R>): Effect.Effect<ToolError, never, R> =>
  Effect.matchEffect(effect, {
    onFailure: (e) =>
      e instanceof ToolError ? Effect.succeed(e) : Effect.die(new Error(`expected a ToolError, got ${String(e)}`)),
    onSuccess: () => Effect.die(new Error("expected the tool call to fail, it succeeded"))
  })
