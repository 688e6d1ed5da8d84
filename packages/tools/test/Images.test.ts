import { READ_MAX_IMAGE_BYTES, READ_MAX_IMAGE_SIDE, readTool } from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { writeFileSync } from "node:fs"
import { crc32, deflateSync } from "node:zlib"
import sharp from "sharp"
import { context, details, failed, inWorkspace } from "./helpers.ts"
import { blocks, image, note } from "./imageBlocks.ts"

const ctx = context()

/** A solid image of `width` × `height` in `format`. */
const solid = (width: number, height: number, format: "png" | "jpeg" | "gif" | "webp") =>
  Effect.promise(() =>
    sharp({ create: { width, height, channels: 3, background: { r: 200, g: 60, b: 20 } } }).toFormat(format).toBuffer()
  )

/** A PNG of random pixels (which does not compress), `side` × `side`. */
const noise = (side: number) =>
  Effect.promise(() =>
    sharp(randomBytes(side * side * 3), { raw: { width: side, height: side, channels: 3 } }).png().toBuffer()
  )

const dimensions = (bytes: Uint8Array) =>
  Effect.promise(async () => {
    const { width, height, format } = await sharp(bytes).metadata()
    return { width, height, format }
  })

/** A PNG chunk: length, type, data, CRC of type and data. */
const chunk = (type: string, data: Uint8Array): Buffer => {
  const length = Buffer.alloc(4)
  length.writeUInt32BE(data.length)
  const body = Buffer.concat([Buffer.from(type, "latin1"), data])
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(crc32(body))
  return Buffer.concat([length, body, crc])
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

describe("read: images are recognised by their content, never by the name alone", () => {
  it.effect("pi's scenario: not-an-image.png holding text is read as text, with no image block", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        writeFileSync(`${root}/not-an-image.png`, "definitely not a png")
        const out = yield* readTool.execute({ path: "not-an-image.png" }, ctx)
        assert.deepStrictEqual(blocks(out), [{ type: "text", text: "     1\tdefinitely not a png" }])
      })
    ))

  it.effect("a PNG named image.txt is an image (pi's scenario), and the note says the name disagrees", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const png = yield* solid(4, 3, "png")
        writeFileSync(`${root}/image.txt`, png)
        const out = yield* readTool.execute({ path: "image.txt" }, ctx)
        assert.strictEqual(
          note(out),
          `[Image image.txt: image/png (by its content; the name says .txt), 4×3 px, ${png.length} B.]`
        )
        assert.deepStrictEqual(image(out), { mimeType: "image/png", bytes: png }, "sent as it is")
        assert.deepStrictEqual(details(out), {
          path: "image.txt",
          bytes: png.length,
          mimeType: "image/png",
          originalMimeType: "image/png",
          originalWidth: 4,
          originalHeight: 3,
          width: 4,
          height: 3,
          resized: false
        })
      })
    ))

  it.effect("JPEG, GIF and WebP by their signatures, whatever the extension; a lying .png of bytes is binary", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        for (const [format, type] of [["jpeg", "image/jpeg"], ["gif", "image/gif"], ["webp", "image/webp"]] as const) {
          const bytes = yield* solid(10, 20, format)
          writeFileSync(`${root}/picture.png`, bytes)
          const out = yield* readTool.execute({ path: "picture.png" }, ctx)
          assert.strictEqual(image(out).mimeType, type)
          assert.match(
            note(out),
            new RegExp(`^\\[Image picture\\.png: ${type} \\(by its content; the name says \\.png\\), 10×20 px`)
          )
        }
        writeFileSync(`${root}/fake.png`, new Uint8Array([137, 80, 78, 71, 0, 1]))
        assert.match(
          (yield* failed(readTool.execute({ path: "fake.png" }, ctx))).message,
          /^fake\.png is a binary file/
        )
      })
    ))
})

describe("read: images are made to fit what providers accept", () => {
  it.effect(`a side over ${READ_MAX_IMAGE_SIDE} px is resized, and the note gives both sizes`, () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        writeFileSync(`${root}/wide.png`, yield* solid(3000, 1200, "png"))
        const out = yield* readTool.execute({ path: "wide.png" }, ctx)
        const sent = image(out)
        assert.strictEqual(sent.mimeType, "image/png")
        assert.deepStrictEqual(yield* dimensions(sent.bytes), { width: 2000, height: 800, format: "png" })
        assert.match(
          note(out),
          new RegExp(
            String.raw`^\[Image wide\.png: image/png, 3000×1200 px, [\d.]+ KiB; sent as 2000×800 px image/png, ` +
              String.raw`[\d.]+ (KiB|B) \(providers take at most 2000 px a side\)\.\]$`
          )
        )
        assert.include(details(out), {
          originalWidth: 3000,
          originalHeight: 1200,
          width: 2000,
          height: 800,
          resized: true
        })
      })
    ))

  it.effect("an image over 3.75 MiB (READ_MAX_IMAGE_BYTES) is re-encoded under it instead of refused", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const big = yield* noise(1400)
        assert.isAbove(big.length, 5 * 1024 * 1024)
        writeFileSync(`${root}/noise.png`, big)
        const out = yield* readTool.execute({ path: "noise.png" }, ctx)
        const sent = image(out)
        assert.isAtMost(sent.bytes.length, READ_MAX_IMAGE_BYTES)
        assert.isAtMost(Buffer.from(sent.bytes).toString("base64").length, 5 * 1024 * 1024, "its base64 fits 5 MiB")
        assert.strictEqual(sent.mimeType, "image/jpeg")
        assert.match(
          note(out),
          new RegExp(
            String.raw`^\[Image noise\.png: image/png, 1400×1400 px, [\d.]+ MiB; sent as \d+×\d+ px image/jpeg, .* ` +
              String.raw`\(providers take at most 3\.75 MiB\)\.\]$`
          )
        )
      })
    ))

  it.effect("an EXIF orientation is applied, so the model sees the picture upright", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const turned = yield* Effect.promise(() =>
          sharp({ create: { width: 40, height: 20, channels: 3, background: "#336699" } })
            .jpeg()
            .withMetadata({ orientation: 6 })
            .toBuffer()
        )
        writeFileSync(`${root}/phone.jpg`, turned)
        const out = yield* readTool.execute({ path: "phone.jpg" }, ctx)
        assert.deepStrictEqual(yield* dimensions(image(out).bytes), { width: 20, height: 40, format: "jpeg" })
        assert.match(
          note(out),
          /^\[Image phone\.jpg: image\/jpeg, 20×40 px, .*; sent as 20×40 px image\/jpeg, .*upright/
        )
      })
    ))
})

describe("read: an image a provider would refuse is refused here", () => {
  it.effect("a truncated PNG (right signature and header, data cut) is an error, not an image block", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const png = yield* noise(64)
        writeFileSync(`${root}/cut.png`, png.subarray(0, Math.floor(png.length / 2)))
        const error = yield* failed(readTool.execute({ path: "cut.png" }, ctx))
        assert.match(error.message, /^cut\.png is a PNG image by its first bytes, but it cannot be (read|decoded)/)
        assert.notInclude(error.message, "\n    at ", "no stack trace")
      })
    ))

  it.effect("a PNG whose header claims 30000×30000 pixels is refused before anything is decoded", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const header = Buffer.alloc(13)
        header.writeUInt32BE(30_000, 0)
        header.writeUInt32BE(30_000, 4)
        header.set([8, 2, 0, 0, 0], 8) // 8-bit RGB
        const data = chunk("IDAT", deflateSync(Buffer.alloc(100)))
        const bomb = Buffer.concat([PNG_SIGNATURE, chunk("IHDR", header), data, chunk("IEND", new Uint8Array())])
        writeFileSync(`${root}/bomb.png`, bomb)
        const error = yield* failed(readTool.execute({ path: "bomb.png" }, ctx))
        assert.strictEqual(
          error.message,
          "bomb.png is a PNG image of 30000×30000 pixels, over the 100 megapixels read decodes; make a " +
            "smaller copy (with bash) and read that"
        )
      })
    ))
})
