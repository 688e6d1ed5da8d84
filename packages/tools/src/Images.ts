/**
 * Images as providers accept them, for every place an image comes from: `read`, an MCP server's
 * result, a file the CLI attaches. One set of rules: an image is recognised by its bytes (PNG,
 * JPEG, GIF, WebP magic numbers, never by a name), decoded to check it, and resized and
 * re-encoded to fit `READ_MAX_IMAGE_SIDE` and `READ_MAX_IMAGE_BYTES` (`READ_MAX_IMAGE_PIXELS` is
 * the most decoded), with a text note of its type and its original and sent dimensions.
 *
 * @since 0.1.0
 */
import type { ImageContent, TextContent } from "@agentloop/core"
import { Effect } from "effect"
import { prepareImage, sniffImage as sniff } from "./internal/images.ts"
import type { ImageType as SniffedType } from "./internal/images.ts"
import { READ_MAX_IMAGE_BYTES, READ_MAX_IMAGE_PIXELS, READ_MAX_IMAGE_SIDE } from "./ReadTool.ts"

/**
 * The image types recognised by their bytes.
 *
 * @since 0.1.0
 * @category images
 */
export type ImageType = SniffedType

/**
 * The image type of `bytes` by their magic number, or `undefined` when they are not a PNG, JPEG,
 * GIF or WebP image.
 *
 * @since 0.1.0
 * @category images
 */
export const sniffImage = (bytes: Uint8Array): ImageType | undefined => sniff(bytes)

/**
 * `bytes` (an image of `type`, see `sniffImage`) as the image block providers accept, after the
 * note that describes it, or the `ToolError` saying why it cannot be sent (corrupt, too many
 * pixels, too large where the image library cannot be loaded). `shown` names the image in the
 * note and the error.
 *
 * @since 0.1.0
 * @category images
 */
export const fitImage = (bytes: Uint8Array, type: ImageType, shown: string) =>
  Effect.map(
    prepareImage(bytes, type, shown, shown, {
      maxSide: READ_MAX_IMAGE_SIDE,
      maxBytes: READ_MAX_IMAGE_BYTES,
      maxInputPixels: READ_MAX_IMAGE_PIXELS
    }),
    (image) => ({
      note: { type: "text", text: image.note } satisfies TextContent as TextContent,
      image: {
        type: "image",
        data: Buffer.from(image.data).toString("base64"),
        mimeType: image.mimeType
      } satisfies ImageContent as ImageContent,
      details: image.details
    })
  )

/**
 * An image block from elsewhere (an MCP server's result, say) made fit to send: its note and the
 * checked, resized image; or one text part saying why it was left out (its bytes are no image, or
 * it cannot be sent). Never fails.
 *
 * @since 0.1.0
 * @category images
 */
export const fitImageContent = (
  image: ImageContent,
  shown: string
): Effect.Effect<ReadonlyArray<TextContent | ImageContent>> => {
  const bytes = Buffer.from(image.data, "base64")
  const type = sniff(bytes)
  if (type === undefined) {
    return Effect.succeed([{
      type: "text",
      text: `[${shown} (declared ${image.mimeType}) was left out: its bytes are no PNG, JPEG, GIF or WebP image.]`
    }])
  }
  return fitImage(bytes, type, shown).pipe(
    Effect.map((fitted): ReadonlyArray<TextContent | ImageContent> => [fitted.note, fitted.image]),
    Effect.catch((error) =>
      Effect.succeed<ReadonlyArray<TextContent | ImageContent>>([
        { type: "text", text: `[${error.message}; it was left out.]` }
      ])
    )
  )
}
