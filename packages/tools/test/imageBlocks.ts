import type { ToolOutput } from "@agentloop/core"

/** The content blocks of a tool's result. */
export const blocks = (output: ToolOutput) => (typeof output === "string" ? [] : output.content)

/** The text of the first block: `read`'s note before an image. */
export const note = (output: ToolOutput): string => {
  const first = blocks(output)[0]
  return first?.type === "text" ? first.text : ""
}

/** The image block's type and decoded bytes (fails the test when there is none). */
export const image = (output: ToolOutput) => {
  const found = blocks(output).find((c) => c.type === "image")
  if (found?.type !== "image") throw new Error("no image block")
  return { mimeType: found.mimeType, bytes: Buffer.from(found.data, "base64") }
}
