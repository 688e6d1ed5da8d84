/**
 * Images the user attaches (`@shot.png`, a dropped path, `run --image FILE`): recognised by their
 * bytes (the magic numbers of PNG, JPEG, GIF and WebP), never by the file name, then checked and
 * shaped by `@agentloop/tools`' `fitImage`, exactly as the `read` tool and MCP results are (decoded,
 * resized to what providers accept, with a note of the original and what is sent).
 */
import { sniffImage } from "@agentloop/tools"

/** File names that are worth checking for image bytes when a bare path is pasted or dropped. */
export const IMAGE_NAME = /\.(png|jpe?g|gif|webp)$/i

/**
 * The image type of `bytes` by their magic number, or undefined when they are not a PNG, JPEG, GIF or WebP:
 * the tools' own rule (`sniffImage`), so an attachment and `read` recognise the same images.
 */
export const imageTypeOf = (bytes: Uint8Array) => sniffImage(bytes)
