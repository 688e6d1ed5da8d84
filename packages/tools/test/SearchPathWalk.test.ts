import { afterAll, assert, beforeAll, it } from "@effect/vitest"
import { descriptorPaths, setDescriptorPaths } from "../src/internal/confined.ts"
import { describeStaticAttacks } from "./searchAttacks.ts"

// The walk used where /proc/self/fd is missing (macOS, the BSDs): folders opened by path with
// O_NOFOLLOW. It is not race-free (see the README), but every static attack must fail.
beforeAll(() => setDescriptorPaths(false))
afterAll(() => setDescriptorPaths(undefined))

it("runs the path walk", () => assert.isFalse(descriptorPaths()))

describeStaticAttacks("path walk")
