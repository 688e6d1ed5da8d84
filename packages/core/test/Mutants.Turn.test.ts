/**
 * `streamTurn` (internal: one model turn as the loop runs it) on its own: the outcome's
 * shape, and the `errorReason` taken from a typed `ModelError` (found unpinned by mutation
 * testing).
 */
import { Model, ModelError } from "@agentloop/core"
import type { LoopEvent, ModelEvent, ModelRequest } from "@agentloop/core"
import { assistant, user } from "@agentloop/testkit"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Stream } from "effect"
import { streamTurn } from "../src/internal/engine/turn.ts"
import type { TurnOutcome } from "../src/internal/engine/turn.ts"

const request: ModelRequest = { messages: [user("go")], tools: [] }

const outcomeOf = (stream: Stream.Stream<ModelEvent, ModelError>): Effect.Effect<TurnOutcome> => {
  const events: Array<LoopEvent> = []
  const model = Model.of({ stream: () => stream })
  return streamTurn(model, request, (event) => Effect.sync(() => void events.push(event)), undefined)
}

describe("streamTurn", () => {
  it.effect("a valid final message is the outcome, tagged Message", () =>
    Effect.gen(function*() {
      const message = assistant("stop", { text: "hello" })
      const outcome = yield* outcomeOf(Stream.make<Array<ModelEvent>>({ type: "done", message }))
      assert.deepStrictEqual(outcome, { _tag: "Message", message })
    }))

  it.effect("a ModelError with a reason: the ending carries it; without one, there is no errorReason key", () =>
    Effect.gen(function*() {
      const limited = yield* outcomeOf(Stream.fail(new ModelError({ message: "slow down", reason: "rate_limit" })))
      assert.deepStrictEqual(limited, {
        _tag: "Ended",
        outcome: { reason: "error", error: "model error: slow down", errorReason: "rate_limit" }
      })
      const plain = yield* outcomeOf(Stream.fail(new ModelError({ message: "broken" })))
      assert.deepStrictEqual(plain, { _tag: "Ended", outcome: { reason: "error", error: "model error: broken" } })
      assert.isFalse(plain._tag === "Ended" && "errorReason" in plain.outcome)
    }))

  it.effect("a failure that is not a ModelError never gives an errorReason, whatever fields it has", () =>
    Effect.gen(function*() {
      const impostor = { message: "not ours", reason: "rate_limit" } as unknown as ModelError
      const outcome = yield* outcomeOf(Stream.fail(impostor))
      assert.strictEqual(outcome._tag, "Ended")
      if (outcome._tag === "Ended") assert.isFalse("errorReason" in outcome.outcome)
    }))

  it.effect("of several ModelErrors, the first that says why gives the reason", () =>
    Effect.gen(function*() {
      const cause = Cause.combine(
        Cause.fail(new ModelError({ message: "first, no reason" })),
        Cause.fail(new ModelError({ message: "second", reason: "overloaded" }))
      )
      const outcome = yield* outcomeOf(Stream.failCause(cause))
      assert.strictEqual(outcome._tag, "Ended")
      if (outcome._tag === "Ended") assert.strictEqual(outcome.outcome.errorReason, "overloaded")
    }))
})
