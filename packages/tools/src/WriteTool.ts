/**
 * `write`: create or replace a file, atomically (a temporary file with an unpredictable name,
 * created exclusively beside the target, then renamed over it), creating parent folders. An
 * existing file keeps its mode (and owner, where permitted); a hard-linked target is replaced by a
 * new file (its other links keep the old content).
 *
 * @since 0.1.0
 */
import { defineTool } from "@agentloop/core"
import { Effect, Schema } from "effect"
import { attempt, Confined } from "./internal/confined.ts"
import { toToolError } from "./internal/files.ts"
import { Workspace } from "./Workspace.ts"

/**
 * The `write` tool.
 *
 * @since 0.1.0
 * @category tools
 */
export const writeTool = defineTool({
  name: "write",
  exclusive: true,
  description: "Create or overwrite a file in the workspace with the given content. Parent folders are created. " +
    "The write is atomic: the file is either fully written or left as it was.",
  parameters: Schema.Struct({
    path: Schema.String.annotate({ description: "file path, relative to the workspace root" }),
    content: Schema.String.annotate({ description: "the complete new content of the file" })
  }),
  execute: ({ path: input, content }) =>
    Effect.gen(function*() {
      const workspace = yield* Workspace
      const files = new Confined(workspace.root)
      const bytes = new TextEncoder().encode(content)
      const written = yield* attempt(() => files.write(input, { exclusive: false, content: () => bytes })).pipe(
        Effect.mapError(toToolError("write"))
      )
      const verb = written.created ? "Created" : "Replaced"
      return {
        content: [{ type: "text" as const, text: `${verb} ${written.shown} (${bytes.length} bytes).` }],
        details: { path: written.shown, bytes: bytes.length, created: written.created }
      }
    })
})
