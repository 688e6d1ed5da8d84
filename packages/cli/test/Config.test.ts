import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Option } from "effect"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { NO_FLAGS, resolveSettings } from "../src/Config.ts"
import type { FlagSettings } from "../src/Config.ts"
import { makeWorkspace } from "./helpers/agent.ts"

const noFlags: FlagSettings = NO_FLAGS

describe("settings", () => {
  it.effect("precedence: flags, then environment, then the project's config, then the user's", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      const userConfig = join(ws, "xdg")
      mkdirSync(join(userConfig, "agentloop"), { recursive: true })
      mkdirSync(join(ws, ".agentloop"), { recursive: true })
      writeFileSync(
        join(userConfig, "agentloop", "config.json"),
        JSON.stringify({ provider: "anthropic", model: "user-model", maxSteps: 7, contextWindow: 1000 })
      )
      const env = { XDG_CONFIG_HOME: userConfig }
      const user = yield* resolveSettings(noFlags, ws, env)
      assert.deepStrictEqual([user.provider, user.model, user.maxSteps, user.contextWindow], [
        "anthropic",
        "user-model",
        7,
        1000
      ])
      writeFileSync(
        join(ws, ".agentloop", "config.json"),
        JSON.stringify({ model: "project-model", timeouts: { idle: 30 } })
      )
      const project = yield* resolveSettings(noFlags, ws, env)
      assert.deepStrictEqual([project.provider, project.model, project.maxSteps], ["anthropic", "project-model", 7])
      assert.deepStrictEqual(project.timeouts, { idle: 30 })
      assert.deepStrictEqual(project.files, [
        join(ws, ".agentloop", "config.json"),
        join(userConfig, "agentloop", "config.json")
      ])
      const fromEnv = yield* resolveSettings(noFlags, ws, {
        ...env,
        AGENTLOOP_MODEL: "env-model",
        AGENTLOOP_PROVIDER: "openai-compat"
      })
      assert.deepStrictEqual([fromEnv.provider, fromEnv.model], ["openai-compat", "env-model"])
      const fromFlags = yield* resolveSettings(
        { ...noFlags, model: Option.some("flag-model"), idleTimeout: Option.some("5") },
        ws,
        { ...env, AGENTLOOP_MODEL: "env-model" }
      )
      assert.strictEqual(fromFlags.model, "flag-model")
      assert.deepStrictEqual(fromFlags.timeouts, { idle: "5 seconds" })
    }))

  it.effect("a config file with a typo or a bad value is an error naming the file, the field, the nearest name", () =>
    Effect.gen(function*() {
      const ws = makeWorkspace()
      mkdirSync(join(ws, ".agentloop"), { recursive: true })
      const file = join(ws, ".agentloop", "config.json")
      writeFileSync(file, JSON.stringify({ modle: "typo" }))
      const typo = yield* Effect.flip(resolveSettings(noFlags, ws, { XDG_CONFIG_HOME: join(ws, "none") }))
      assert.strictEqual(
        typo.message,
        `${file} is not a valid agentloop config: unknown field "modle" (did you mean "model"?)`
      )
      const problem = (config: unknown) =>
        Effect.gen(function*() {
          writeFileSync(file, JSON.stringify(config))
          const e = yield* Effect.flip(resolveSettings(noFlags, ws, { XDG_CONFIG_HOME: join(ws, "none") }))
          return e.message.replace(`${file} is not a valid agentloop config: `, "")
        })
      // nested fields by their path, the nearest valid name when one is close, the choices when none is
      assert.strictEqual(
        yield* problem({ timeouts: { idel: 30 } }),
        `unknown field "timeouts.idel" (did you mean "timeouts.idle"?)`
      )
      assert.strictEqual(
        yield* problem({ permissions: { Allow: ["read"] } }),
        `unknown field "permissions.Allow" (did you mean "permissions.allow"?)`
      )
      assert.strictEqual(
        yield* problem({ timeouts: { total: 30 } }),
        `unknown field "timeouts.total" (the fields of timeouts: firstByte, idle, request)`
      )
      assert.strictEqual(
        yield* problem({ colour: "blue" }),
        `unknown field "colour" (the README's Configuration section lists the fields)`
      )
      // a bad value: the field and what it should be, on one line
      assert.strictEqual(yield* problem({ maxSteps: 0 }), `the field "maxSteps": Expected a value greater than 0`)
      writeFileSync(file, "{ not json")
      const json = yield* Effect.flip(resolveSettings(noFlags, ws, { XDG_CONFIG_HOME: join(ws, "none") }))
      assert.strictEqual(json.message, `${file} is not valid JSON`)
      writeFileSync(file, JSON.stringify({ provider: "gemini" }))
      const provider = yield* Effect.flip(resolveSettings(noFlags, ws, { XDG_CONFIG_HOME: join(ws, "none") }))
      assert.include(provider.message, "provider")
      const env = yield* Effect.flip(resolveSettings(noFlags, makeWorkspace(), { AGENTLOOP_CONTEXT_WINDOW: "big" }))
      assert.include(env.message, "AGENTLOOP_CONTEXT_WINDOW must be a positive whole number")
    }))

  it.effect(
    "--approval-timeout and --no-prompt-cache: flags over the config file; a bad duration names where it " +
      "came from",
    () =>
      Effect.gen(function*() {
        const ws = makeWorkspace()
        mkdirSync(join(ws, ".agentloop"), { recursive: true })
        const file = join(ws, ".agentloop", "config.json")
        const env = { XDG_CONFIG_HOME: join(ws, "none") }
        const none = yield* resolveSettings(noFlags, ws, env)
        assert.deepStrictEqual([none.approvalTimeout, none.promptCaching], [undefined, undefined])
        writeFileSync(file, JSON.stringify({ approvalTimeout: "3 days", promptCaching: false }))
        const fromFile = yield* resolveSettings(noFlags, ws, env)
        assert.deepStrictEqual([fromFile.approvalTimeout, fromFile.promptCaching], [Duration.days(3), false])
        const fromFlags = yield* resolveSettings(
          { ...noFlags, approvalTimeout: Option.some("90"), promptCache: Option.some(true) },
          ws,
          env
        )
        assert.deepStrictEqual([fromFlags.approvalTimeout, fromFlags.promptCaching], [Duration.seconds(90), true])
        for (const bad of ["0", "soon", "-5 seconds", "Infinity"]) {
          const e = yield* Effect.flip(resolveSettings({ ...noFlags, approvalTimeout: Option.some(bad) }, ws, env))
          assert.strictEqual(
            e.message,
            `--approval-timeout must be a positive duration (seconds, or e.g. "3 days", "90 minutes"), got "${bad}"`
          )
        }
        writeFileSync(file, JSON.stringify({ approvalTimeout: 0 }))
        const zero = yield* Effect.flip(resolveSettings(noFlags, ws, env))
        assert.include(zero.message, "approvalTimeout must be a positive duration")
      })
  )
})
