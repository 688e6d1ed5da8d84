/**
 * File helpers shared by the tools: atomic writes and friendly I/O errors.
 */
import { Effect, FileSystem, Path } from "effect"
import type { PlatformError } from "effect"
import { ToolError } from "@agentloop/core"

/** A `ToolError` for a failed file operation, naming the path as the model knows it. */
export const fileError = (shown: string, error: PlatformError.PlatformError): ToolError => {
  const reason = error.reason
  const text = reason._tag === "NotFound" ?
    "no such file or directory" :
    reason._tag === "PermissionDenied" ?
    "permission denied" :
    reason.message
  return new ToolError({ message: `${shown}: ${text}` })
}

let counter = 0

/**
 * Writes `content` to `target` atomically: into a temporary file beside it, then renamed over it.
 * A crash or an interruption leaves either the old file or the new one, never half of one; the
 * temporary file is removed when anything fails. Parent folders are created.
 */
export const writeAtomically = (target: string, content: Uint8Array, shown: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const directory = path.dirname(target)
    yield* fs.makeDirectory(directory, { recursive: true }).pipe(Effect.mapError((e) => fileError(shown, e)))
    const temporary = path.join(directory, `.${path.basename(target)}.agentloop-${process.pid}-${++counter}.tmp`)
    yield* Effect.uninterruptibleMask((restore) =>
      restore(fs.writeFile(temporary, content).pipe(Effect.andThen(fs.rename(temporary, target)))).pipe(
        Effect.onError(() => Effect.ignore(fs.remove(temporary))),
        Effect.mapError((e) => fileError(shown, e))
      )
    )
  })
