/**
 * The loop's side of structured output: the final-answer tool beside the executor's tools, the
 * answers it accepts or rejects, and the bound on attempts. Only a run with an `output` schema
 * builds any of this; a run without one never reaches this module.
 */
import { Effect, Exit } from "effect"
import type { ExecutorShape, ToolContext } from "../../Executor.ts"
import type { ToolCall, ToolResultMessage, UserMessage } from "../../Message.ts"
import type { ToolDefinition } from "../../Model.ts"
import type { OutputSchema } from "../../Output.ts"
import { errorResult } from "../../Transcript.ts"

/** Why an answer was rejected (also `details.rejected` of its result). */
type Rejection = "invalid" | "not-alone" | "no-answer"

/** One run's answers. */
export interface AnswerState {
  readonly output: OutputSchema<unknown>
  readonly retries: number
  /** The executor with the final-answer tool added; what the run uses in place of its own. */
  readonly executor: ExecutorShape
  /** Attempts that were rejected so far (at most one per turn). */
  rejected: number
  /** The accepted answer (decoded) and the model's JSON of it. */
  accepted: { readonly value: unknown; readonly answer: unknown } | undefined
  /** The last rejection's problem, for the run's error. */
  lastProblem: string | undefined
  /** Whether the final-answer call of the current turn is its only call. */
  alone: boolean
  /** Whether this turn already counted a rejected attempt. */
  rejectedThisTurn: boolean
}

const acceptedResult = (call: ToolCall): ToolResultMessage => ({
  role: "toolResult",
  toolCallId: call.id,
  toolName: call.name,
  content: [{ type: "text", text: "Final answer accepted." }],
  details: { finalAnswer: true },
  isError: false
})

const reject = (
  state: AnswerState,
  call: ToolCall,
  why: Rejection,
  problem: string,
  text: string
): ToolResultMessage => {
  if (!state.rejectedThisTurn) {
    state.rejectedThisTurn = true
    state.rejected++
  }
  state.lastProblem = problem
  return errorResult(call, text, { finalAnswer: true, rejected: why, attempt: state.rejected })
}

const answer = (state: AnswerState, call: ToolCall): Effect.Effect<ToolResultMessage> => {
  const name = state.output.name
  if (!state.alone) {
    return Effect.succeed(reject(
      state,
      call,
      "not-alone",
      `"${name}" was called together with other tool calls`,
      `Final answer not accepted: "${name}" must be the only tool call of its message, made once the results of ` +
        `your other calls are known. Those calls were run; call "${name}" again, alone.`
    ))
  }
  return Effect.map(Effect.exit(state.output.decode(call.arguments)), (exit) => {
    if (Exit.isSuccess(exit)) {
      state.accepted = { value: exit.value, answer: state.output.answerOf(call.arguments) }
      return acceptedResult(call)
    }
    const problem = exit.cause.reasons.map((r) =>
      r._tag === "Fail" ? r.error.message : "the answer could not be decoded"
    )
      .join("; ")
    return reject(
      state,
      call,
      "invalid",
      problem,
      `Invalid final answer: ${problem}. Call "${name}" again with the answer fixed.`
    )
  })
}

/**
 * The run's answer state, with an executor that answers the final-answer tool itself and passes
 * every other call to `inner`. Its definitions are `inner`'s plus the final-answer tool, the same
 * array as long as `inner`'s is the same (the loop compares them by identity).
 */
export const makeAnswerState = (output: OutputSchema<unknown>, retries: number, inner: ExecutorShape): AnswerState => {
  let source: ReadonlyArray<ToolDefinition> | undefined
  let combined: ReadonlyArray<ToolDefinition> = []
  const state: AnswerState = {
    output,
    retries,
    rejected: 0,
    accepted: undefined,
    lastProblem: undefined,
    alone: true,
    rejectedThisTurn: false,
    executor: {
      get definitions() {
        const current = inner.definitions
        if (current !== source) {
          source = current
          combined = Array.isArray(current) ? [...current, output.definition] : current
        }
        return combined
      },
      execute: (call: ToolCall, context: ToolContext) =>
        call.name === output.name ? answer(state, call) : inner.execute(call, context)
    }
  }
  return state
}

/**
 * Brings the state up to a final-answer call whose result a journal answered from its record: the
 * same decision again (it depends only on the call and the state), without its result.
 */
export const replayAnswer = (state: AnswerState, call: ToolCall): Effect.Effect<void> =>
  Effect.asVoid(answer(state, call))

/** Called before a turn's batch runs. */
export const startTurn = (state: AnswerState, calls: ReadonlyArray<ToolCall>): void => {
  state.alone = calls.length === 1
  state.rejectedThisTurn = false
}

/** The error of a run that gave no valid answer within its attempts, or `undefined` while attempts remain. */
export const overLimit = (state: AnswerState): string | undefined =>
  state.rejected > state.retries ?
    `the model gave no valid final answer after ${state.rejected} attempt(s): ${state.lastProblem ?? "no answer"}` :
    undefined

/**
 * After a turn that ended `stop` without calls: counts the attempt and returns the user message
 * asking for the answer, or `undefined` when no attempt is left (`overLimit` then says why).
 */
export const repairAfterText = (state: AnswerState): UserMessage | undefined => {
  state.rejected++
  state.lastProblem = `the model ended its turn without calling "${state.output.name}"`
  if (state.rejected > state.retries) return undefined
  return {
    role: "user",
    content: `Your turn ended without a final answer. Give it by calling the "${state.output.name}" tool` +
      `${state.output.wrapped ? ", with the answer under `value`" : ""}.`
  }
}

/**
 * Why the definitions (the executor's plus the final-answer tool) cannot be used with this output:
 * one of the run's tools has the final-answer tool's name.
 */
export const nameTaken = (state: AnswerState, definitions: ReadonlyArray<ToolDefinition>): string | undefined => {
  if (!Array.isArray(definitions)) return undefined
  let count = 0
  for (const definition of definitions) if (definition?.name === state.output.name) count++
  return count > 1 ?
    `bad input: the run has a tool named "${state.output.name}", the name of the final-answer tool; ` +
    `give the output another name (outputSchema(schema, { name }))` :
    undefined
}
