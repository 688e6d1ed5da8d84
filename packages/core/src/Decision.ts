/**
 * The decision table of SPEC §2, in one place: a pure function of the final message's
 * `stopReason` and its number of tool calls. The loop only carries out what it returns.
 *
 * @since 0.1.0
 */
import type { RunReason } from "./LoopEvent.ts"
import type { StopReason } from "./Message.ts"

/**
 * Why a tool call was answered without running.
 *
 * - `unexpected-stop`, `length`, `error`, `aborted`: the decision table skipped the calls of a turn.
 * - `interrupted`: a call in the input transcript had no result (repaired on the way in).
 * - `denied`: the run's policy, or the person asked, refused the call.
 *
 * @since 0.1.0
 * @category models
 */
export type SkipReason = "unexpected-stop" | "length" | "error" | "aborted" | "interrupted" | "denied"

/**
 * What to do with one model turn once its final message has been appended.
 *
 * - `Execute`: run every call, append the results in call order, ask the model again.
 * - `Finish`: pair every call (if any) with a skipped result for `skip`, then end the run with
 *   `reason` (and `error`, when the turn itself is the error).
 *
 * @since 0.1.0
 * @category models
 */
export type TurnDecision =
  | { readonly _tag: "Execute" }
  | {
    readonly _tag: "Finish"
    readonly reason: RunReason
    readonly skip: SkipReason | undefined
    readonly error: string | undefined
  }

const execute: TurnDecision = { _tag: "Execute" }
const finish = (reason: RunReason, skip: SkipReason | undefined, error?: string): TurnDecision => ({
  _tag: "Finish",
  reason,
  skip,
  error
})

/**
 * SPEC §2, row by row.
 *
 * | stopReason | calls | decision                                   |
 * |------------|-------|--------------------------------------------|
 * | stop       | 0     | finish `stop`                              |
 * | toolUse    | ≥ 1   | execute                                    |
 * | toolUse    | 0     | finish `error` (nothing to pair)           |
 * | stop       | ≥ 1   | skip (`unexpected-stop`), finish `error`   |
 * | length     | any   | skip (`length`), finish `length`           |
 * | error      | any   | skip (`error`), finish `error`             |
 * | aborted    | any   | skip (`aborted`), finish `aborted`         |
 *
 * `errorMessage` is the model's own `errorMessage`, used for the run's error on an `error` turn.
 *
 * @since 0.1.0
 * @category decisions
 */
export const decideTurn = (stopReason: StopReason, callCount: number, errorMessage?: string): TurnDecision => {
  switch (stopReason) {
    case "stop":
      return callCount === 0 ?
        finish("stop", undefined) :
        finish(
          "error",
          "unexpected-stop",
          `protocol violation: the model ended its turn with stopReason "stop" but made ${callCount} tool call(s); ` +
            "they were not executed"
        )
    case "toolUse":
      return callCount > 0 ?
        execute :
        finish(
          "error",
          undefined,
          "protocol violation: the model ended its turn with stopReason \"toolUse\" but made no tool call"
        )
    case "length":
      return finish("length", "length")
    case "error":
      return finish("error", "error", errorMessage ?? "the model ended its turn with an error")
    case "aborted":
      return finish("aborted", "aborted")
  }
}

const skipTexts: Record<SkipReason, string> = {
  "unexpected-stop": "Tool call was not executed because the model ended its turn without asking for tool use.",
  length: "Tool call was not executed because the model response was truncated.",
  error: "Tool call was not executed because the model response ended with an error.",
  aborted: "Tool call was not executed because the run was aborted.",
  interrupted: "Tool call has no result because the run that made it was interrupted before it finished.",
  denied: "Tool call was not executed because it was denied."
}

/**
 * The text a skipped result carries for each reason.
 *
 * @since 0.1.0
 * @category decisions
 */
export const skipText = (reason: SkipReason): string => skipTexts[reason]
