/**
 * `write`: create or replace a file, atomically (temporary file + rename), creating parent
 * folders.
 *
 * @since 0.1.0
 */
import { Effect, FileSystem, Schema } from "effect"
import { defineTool, ToolError } from "@agentloop/core"
import { writeAtomically } from "./internal/files.ts"
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
      const fs = yield* FileSystem.FileSystem
      const target = yield* workspace.resolve(input)
      const shown = workspace.display(target)
      const existing = yield* Effect.result(fs.stat(target))
      if (existing._tag === "Success" && existing.success.type === "Directory") {
        return yield* new ToolError({ message: `${shown} is a directory` })
      }
      const bytes = new TextEncoder().encode(content)
      yield* writeAtomically(target, bytes, shown)
      const verb = existing._tag === "Success" ? "Replaced" : "Created"
      return {
        content: [{ type: "text" as const, text: `${verb} ${shown} (${bytes.length} bytes).` }],
        details: { path: shown, bytes: bytes.length, created: existing._tag === "Failure" }
      }
    })
})
