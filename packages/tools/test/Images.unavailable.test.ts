import { readTool } from "@agentloop/tools"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { writeFileSync } from "node:fs"
import sharp from "sharp"
import { setImageLibrary } from "../src/internal/images.ts"
import { context, failed, inWorkspace } from "./helpers.ts"
import { image, note } from "./imageBlocks.ts"

// The image library is process-wide and the tests of one file run concurrently: this file's one
// test replaces it, alone in its own worker, as PathWalk.test.ts does with the walk.

const ctx = context()

describe("read: without the image library", () => {
  beforeAll(() => setImageLibrary(() => Promise.resolve("the image library (sharp) cannot be loaded here: no binary")))
  afterAll(() => setImageLibrary(undefined))

  it.effect("an image that fits is sent as it is, saying so; a larger one is refused with the reason", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const small = yield* Effect.promise(() =>
          sharp({ create: { width: 5, height: 5, channels: 3, background: "#808080" } }).png().toBuffer()
        )
        const big = yield* Effect.promise(() =>
          sharp(randomBytes(1200 * 1200 * 3), { raw: { width: 1200, height: 1200, channels: 3 } }).png().toBuffer()
        )
        writeFileSync(`${root}/small.png`, small)
        const out = yield* readTool.execute({ path: "small.png" }, ctx)
        assert.deepStrictEqual(image(out), { mimeType: "image/png", bytes: small })
        assert.strictEqual(
          note(out),
          `[Image small.png: image/png, ${small.length} B; sent as it is, neither checked nor resized: the image ` +
            "library (sharp) cannot be loaded here: no binary.]"
        )
        writeFileSync(`${root}/big.png`, big)
        const error = yield* failed(readTool.execute({ path: "big.png" }, ctx))
        assert.match(
          error.message,
          new RegExp(
            String.raw`^big\.png is a PNG image of [\d.]+ MiB, over the 3\.75 MiB providers accept, and the image ` +
              String.raw`library \(sharp\) cannot be loaded here: no binary, so it cannot be made smaller`
          )
        )
      })
    ))
})
