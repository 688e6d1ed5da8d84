/**
 * Images for `read`: recognised by their first bytes (never by the name), checked by decoding
 * them, and made to fit what providers accept (a side of at most `maxSide` pixels and at most
 * `maxBytes` encoded) by resizing and re-encoding, with a note of what was read and what is sent.
 *
 * The image library is sharp (libvips), loaded on first use: its prebuilt binaries come as npm
 * packages for each platform (`@img/sharp-*`), nothing is downloaded at install time, and it
 * decodes and resizes a 24-megapixel JPEG in a fraction of a second, with shrink-on-load for JPEG
 * and WebP. Where it cannot be loaded (no prebuilt binary for the platform) images that already
 * fit are sent as they are, unchecked, and larger ones are refused with the reason.
 */
import { ToolError } from "@agentloop/core"
import { Effect } from "effect"

/** The image types providers accept, with the first bytes that mark each. */
export type ImageType = "image/png" | "image/jpeg" | "image/gif" | "image/webp"

const startsWith = (bytes: Uint8Array, at: number, expected: ReadonlyArray<number>): boolean =>
  bytes.length >= at + expected.length && expected.every((b, i) => bytes[at + i] === b)

const ascii = (s: string): Array<number> => Array.from(s, (c) => c.charCodeAt(0))

/** The image type the content's signature (magic number) says, or undefined when it is no such image. */
export const sniffImage = (bytes: Uint8Array): ImageType | undefined => {
  if (startsWith(bytes, 0, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return "image/png"
  if (startsWith(bytes, 0, [0xff, 0xd8, 0xff])) return "image/jpeg"
  if (startsWith(bytes, 0, ascii("GIF87a")) || startsWith(bytes, 0, ascii("GIF89a"))) return "image/gif"
  if (startsWith(bytes, 0, ascii("RIFF")) && startsWith(bytes, 8, ascii("WEBP"))) return "image/webp"
  return undefined
}

/** What providers accept and what `read` decodes at most. */
export interface ImageLimits {
  /** Pixels on the longer side. */
  readonly maxSide: number
  /** Bytes of the encoded image sent. */
  readonly maxBytes: number
  /** Pixels (width × height) decoded at most; larger images are refused before decoding. */
  readonly maxInputPixels: number
}

/** The image sent, and what the note says of it. */
export interface PreparedImage {
  readonly data: Uint8Array
  readonly mimeType: ImageType
  readonly note: string
  readonly details: {
    readonly originalMimeType: ImageType
    readonly originalWidth?: number
    readonly originalHeight?: number
    readonly width?: number
    readonly height?: number
    readonly resized: boolean
  }
}

type Sharp = typeof import("sharp").default

let library: Promise<Sharp | string> | undefined

const firstLine = (error: unknown): string =>
  (error instanceof Error ? error.message : String(error)).split("\n")[0]!.trim()

/** Sharp, or why it cannot be loaded; loaded once. */
const loadLibrary = (): Promise<Sharp | string> => {
  library ??= import("sharp").then(
    (module) => {
      // libvips' operation cache knows an input buffer by its address and length: a later read
      // whose bytes land where an earlier one's were, at the same length, could be answered from
      // the earlier image (a truncated file passing as whole). Each read decodes its own bytes.
      module.default.cache(false)
      return module.default
    },
    (error: unknown) => `the image library (sharp) cannot be loaded here: ${firstLine(error)}`
  )
  return library
}

/**
 * Replaces the image library (tests use it to run without one: pass a function that resolves to
 * the reason), or with `undefined` loads sharp again on next use.
 */
export const setImageLibrary = (load: (() => Promise<Sharp | string>) | undefined): void => {
  library = load?.()
}

/** A size in bytes as a person reads it: `870 B`, `54.1 KiB`, `3.75 MiB`. */
export const formatBytes = (bytes: number): string =>
  bytes < 1024 ?
    `${bytes} B` :
    bytes < 1024 * 1024 ?
    `${Number((bytes / 1024).toFixed(2))} KiB` :
    `${Number((bytes / 1024 / 1024).toFixed(2))} MiB`

const typeNames: Readonly<Record<ImageType, string>> = {
  "image/png": "PNG",
  "image/jpeg": "JPEG",
  "image/gif": "GIF",
  "image/webp": "WebP"
}

const extensionsOf: Readonly<Record<ImageType, ReadonlyArray<string>>> = {
  "image/png": ["png"],
  "image/jpeg": ["jpg", "jpeg", "jpe", "jfif"],
  "image/gif": ["gif"],
  "image/webp": ["webp"]
}

/** "(by its content; the name says .txt)" when the name's extension is not one of the type's. */
const byContent = (name: string, type: ImageType): string => {
  const dot = name.lastIndexOf(".")
  const extension = dot > 0 ? name.slice(dot + 1).toLowerCase() : ""
  if (extensionsOf[type].includes(extension)) return ""
  return extension === "" ? " (by its content)" : ` (by its content; the name says .${extension})`
}

const refuse = (message: string): never => {
  throw new ToolError({ message })
}

interface Candidate {
  readonly data: Uint8Array
  readonly mimeType: ImageType
  readonly width: number
  readonly height: number
}

/** Encodes `bytes` (oriented upright) to fit `side` × `side`, in `format` at `quality` for lossy formats. */
const encode = async (
  sharp: Sharp,
  bytes: Uint8Array,
  limits: ImageLimits,
  side: number,
  format: "png" | "jpeg" | "webp",
  quality: number
): Promise<Candidate> => {
  let image = sharp(bytes, { limitInputPixels: limits.maxInputPixels, failOn: "error", autoOrient: true })
    .resize({ width: side, height: side, fit: "inside", withoutEnlargement: true })
  image = format === "png" ?
    image.png({ compressionLevel: 9 }) :
    format === "jpeg" ?
    image.flatten({ background: "#ffffff" }).jpeg({ quality, mozjpeg: true }) :
    image.webp({ quality })
  const { data, info } = await image.toBuffer({ resolveWithObject: true })
  return { data, mimeType: `image/${format}`, width: info.width, height: info.height }
}

/** The ways to re-encode an image of type `type`, best first: its own format, then JPEG at lower qualities. */
const encodings = (type: ImageType): ReadonlyArray<{ format: "png" | "jpeg" | "webp"; quality: number }> => {
  const lossy = [85, 70, 50].map((quality) => ({ format: "jpeg" as const, quality }))
  if (type === "image/jpeg") return lossy
  if (type === "image/webp") return [{ format: "webp", quality: 85 }, ...lossy]
  return [{ format: "png", quality: 100 }, ...lossy]
}

const prepare = async (
  bytes: Uint8Array,
  type: ImageType,
  name: string,
  shown: string,
  limits: ImageLimits
): Promise<PreparedImage> => {
  const what = `${shown} is a ${typeNames[type]} image${byContent(name, type)}`
  const sharp = await loadLibrary()
  if (typeof sharp === "string") {
    if (bytes.length > limits.maxBytes) {
      refuse(
        `${what} of ${formatBytes(bytes.length)}, over the ${formatBytes(limits.maxBytes)} providers accept, ` +
          `and ${sharp}, so it cannot be made smaller; make a smaller copy (with bash) and read that`
      )
    }
    return {
      data: bytes,
      mimeType: type,
      note: `[Image ${shown}: ${type}${byContent(name, type)}, ${formatBytes(bytes.length)}; sent as it is, ` +
        `neither checked nor resized: ${sharp}.]`,
      details: { originalMimeType: type, resized: false }
    }
  }
  let width: number
  let height: number
  let oriented: boolean
  try {
    const metadata = await sharp(bytes, { limitInputPixels: false }).metadata()
    width = metadata.autoOrient.width
    height = metadata.autoOrient.height
    oriented = metadata.orientation !== undefined && metadata.orientation !== 1
  } catch (error) {
    return refuse(`${what} by its first bytes, but it cannot be read as one (${firstLine(error)})`)
  }
  if (width * height > limits.maxInputPixels) {
    refuse(
      `${what} of ${width}×${height} pixels, over the ${Math.round(limits.maxInputPixels / 1e6)} megapixels ` +
        "read decodes; make a smaller copy (with bash) and read that"
    )
  }
  const original = `${type}${byContent(name, type)}, ${width}×${height} px, ${formatBytes(bytes.length)}`
  const fits = Math.max(width, height) <= limits.maxSide && bytes.length <= limits.maxBytes && !oriented
  try {
    if (fits) {
      // decoded whole, so an image a provider would refuse (truncated, corrupt) is refused here instead
      await sharp(bytes, { limitInputPixels: limits.maxInputPixels, failOn: "error" }).stats()
      return {
        data: bytes,
        mimeType: type,
        note: `[Image ${shown}: ${original}.]`,
        details: { originalMimeType: type, originalWidth: width, originalHeight: height, width, height, resized: false }
      }
    }
    // the largest side allowed first, then smaller ones down to 64 pixels, until one fits in maxBytes
    const sides = [Math.min(limits.maxSide, Math.max(width, height))]
    while (sides[sides.length - 1]! * 0.75 >= 64) sides.push(Math.floor(sides[sides.length - 1]! * 0.75))
    for (const side of sides) {
      for (const { format, quality } of encodings(type)) {
        const candidate = await encode(sharp, bytes, limits, side, format, quality)
        if (candidate.data.length > limits.maxBytes) continue
        const why = Math.max(width, height) > limits.maxSide ?
          `at most ${limits.maxSide} px a side` :
          oriented ?
          "it upright (its EXIF orientation applied)" :
          `at most ${formatBytes(limits.maxBytes)}`
        return {
          data: candidate.data,
          mimeType: candidate.mimeType,
          note: `[Image ${shown}: ${original}; sent as ${candidate.width}×${candidate.height} px ` +
            `${candidate.mimeType}, ${formatBytes(candidate.data.length)} (providers take ${why}).]`,
          details: {
            originalMimeType: type,
            originalWidth: width,
            originalHeight: height,
            width: candidate.width,
            height: candidate.height,
            resized: candidate.width !== width || candidate.height !== height
          }
        }
      }
    }
  } catch (error) {
    if (error instanceof ToolError) throw error
    return refuse(`${what} by its first bytes, but it cannot be decoded (${firstLine(error)})`)
  }
  return refuse(`${what} (${original}) that stays over ${formatBytes(limits.maxBytes)} even made small`)
}

/**
 * The image `bytes` (of `type`, by content) as `read` sends it, with its note; a `ToolError` when
 * it cannot be sent (corrupt, too many pixels, too large without the image library).
 */
export const prepareImage = (
  bytes: Uint8Array,
  type: ImageType,
  name: string,
  shown: string,
  limits: ImageLimits
): Effect.Effect<PreparedImage, ToolError> =>
  Effect.tryPromise({
    try: () => prepare(bytes, type, name, shown, limits),
    catch: (error) =>
      error instanceof ToolError ?
        error :
        new ToolError({ message: `${shown}: the image cannot be prepared (${firstLine(error)})` })
  })
