/**
 * Images the user attaches (`@shot.png`, a dropped path, `run --image FILE`): recognised by their
 * bytes (the magic numbers of PNG, JPEG, GIF and WebP), never by the file name, and capped in size.
 *
 * `fitImage` is the one place an image is shaped before it is sent: today it only checks the size;
 * resizing (planned in `@agentloop/tools`) plugs in there, and every attachment path gets it.
 */
import type { ImageContent } from "@agentloop/core"
import { sniffImage } from "@agentloop/tools"

/** The largest image attached as it is (the `read` tool's limit too): 5 MiB. */
export const IMAGE_MAX_BYTES = 5 * 1024 * 1024

/** File names that are worth checking for image bytes when a bare path is pasted or dropped. */
export const IMAGE_NAME = /\.(png|jpe?g|gif|webp)$/i

/**
 * The image type of `bytes` by their magic number, or undefined when they are not a PNG, JPEG, GIF or WebP:
 * the tools' own rule (`sniffImage`), so an attachment and `read` recognise the same images.
 */
export const imageTypeOf = (bytes: Uint8Array): string | undefined => sniffImage(bytes)

const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`

/**
 * The image block for `bytes` (of type `mimeType`), or why it cannot be sent (one line, naming
 * `shown`). The seam for resizing: a resized image would be returned here instead of a refusal.
 */
export const fitImage = (
  shown: string,
  bytes: Uint8Array,
  mimeType: string
): { readonly image: ImageContent } | { readonly error: string } =>
  bytes.length > IMAGE_MAX_BYTES ?
    {
      error: `${shown} is an image of ${mib(bytes.length)}; images up to ${
        mib(IMAGE_MAX_BYTES)
      } can be attached (make it smaller first)`
    } :
    { image: { type: "image", data: Buffer.from(bytes).toString("base64"), mimeType } }
