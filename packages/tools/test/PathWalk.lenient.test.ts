import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { descriptorPaths, setDescriptorPaths } from "../src/internal/confined.ts"
import { inWorkspace } from "./helpers.ts"
import { lenientAttacks } from "./lenientAttacks.ts"

// The walk used where /proc/self/fd is missing (macOS, the BSDs), forced for this file's one test:
// the setting is process-wide and the tests of one file run concurrently (see PathWalk.test.ts).
describe("lenient paths on the path-based walk (systems without /proc/self/fd)", () => {
  beforeAll(() => setDescriptorPaths(false))
  afterAll(() => setDescriptorPaths(undefined))

  it.effect("links behind lenient names lead nowhere outside", () =>
    inWorkspace((root) => {
      assert.isFalse(descriptorPaths())
      return lenientAttacks(root)
    }))
})
