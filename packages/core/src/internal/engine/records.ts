/**
 * What each step of a run answers, as schemas: the values a journal records (see RunJournal.ts).
 * The in-memory journal never looks at them.
 */
import { Schema } from "effect"
import { ModelErrorReason } from "../../Errors.ts"
import { RunReason } from "../../LoopEvent.ts"
import { AssistantMessage, ToolResultMessage, Usage, UserMessage } from "../../Message.ts"

/** How a run ends, as far as a step knows. */
export const Ending = Schema.Struct({
  reason: RunReason,
  error: Schema.optionalKey(Schema.String),
  errorReason: Schema.optionalKey(ModelErrorReason)
})
export type Ending = typeof Ending.Type

/**
 * A turn step (`turn/<n>`): the safe boundary before the request (the steering messages taken
 * there) and what the turn gave. `requested`: a model request was made (it counts as a step).
 * `usage`: what shaping the request cost (`TurnContext.addUsage`, e.g. a compaction's summary).
 */
export const TurnRecord = Schema.Union([
  Schema.TaggedStruct("Ended", {
    steering: Schema.Array(UserMessage),
    requested: Schema.Boolean,
    ending: Ending,
    usage: Schema.optionalKey(Usage)
  }),
  Schema.TaggedStruct("Message", {
    steering: Schema.Array(UserMessage),
    message: AssistantMessage,
    usage: Schema.optionalKey(Usage)
  })
])
export type TurnRecord = typeof TurnRecord.Type

/**
 * A boundary step where the run would stop (`stop/<n>`, after a turn that ended `stop`;
 * `answer/<n>`, after an accepted final answer): what was pushed, or the repair request of a run
 * with an output schema that got no answer, or why the run ends there.
 */
export const BoundaryRecord = Schema.Union([
  Schema.TaggedStruct("None", {}),
  Schema.TaggedStruct("Aborted", {}),
  Schema.TaggedStruct("Bad", { error: Schema.String }),
  Schema.TaggedStruct("More", { steering: Schema.Array(UserMessage), followUps: Schema.Array(UserMessage) }),
  Schema.TaggedStruct("Repair", { message: UserMessage }),
  Schema.TaggedStruct("Over", {})
])
export type BoundaryRecord = typeof BoundaryRecord.Type

/** A policy step (`policy/<n>/<i>`): the policy's decision, how it failed, or the run was aborted first. */
export const PolicyRecord = Schema.Union([
  Schema.TaggedStruct("Aborted", {}),
  Schema.TaggedStruct("Allow", {}),
  Schema.TaggedStruct("Deny", { reason: Schema.String }),
  Schema.TaggedStruct("Ask", {}),
  Schema.TaggedStruct("Failed", { error: Schema.String })
])
export type PolicyRecord = typeof PolicyRecord.Type

/** A call step (`call/<n>/<i>`): the call's result. */
export const CallRecord = ToolResultMessage
