/**
 * Error mapping shared by the tools.
 */
import { ToolError } from "@agentloop/core"
import type { WorkspaceFileError } from "../WorkspaceFileError.ts"

/** A confined file layer's error as the model sees it (the message names the path). */
export const toToolError = (tool: string) => (error: WorkspaceFileError): ToolError => {
  if (error.reason === "IsDirectory" && tool === "read") {
    return new ToolError({ message: `${error.message}; use bash (ls) to list it` })
  }
  return new ToolError({ message: error.message })
}
