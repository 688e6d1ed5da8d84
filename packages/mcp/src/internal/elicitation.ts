/**
 * How a server's `elicitation/create` reaches the `Elicitation` service: the fields are read from
 * its schema, the service asked, and the defaults of the fields an accepted answer leaves out
 * filled in.
 */
import { Effect } from "effect"
import { elicitationFields } from "../Elicitation.ts"
import type {
  ElicitationAnswer,
  ElicitationField,
  ElicitationRequest,
  ElicitationShape,
  ElicitationValue
} from "../Elicitation.ts"

/** The answer with the defaults of the fields it leaves out. */
export const withDefaults = (
  answer: ElicitationAnswer,
  fields: ReadonlyArray<ElicitationField>
): ElicitationAnswer => {
  if (answer.action !== "accept") return answer
  const content: Record<string, ElicitationValue> = { ...answer.content }
  for (const field of fields) {
    if (!(field.name in content) && field.default !== undefined) content[field.name] = field.default
  }
  return { action: "accept", content }
}

/** Runs `ask`, answering `cancel` for a defect (interruption is left to the caller). */
export const askSafely = (service: ElicitationShape, request: ElicitationRequest): Effect.Effect<ElicitationAnswer> =>
  Effect.suspend(() => service.ask(request)).pipe(
    Effect.catchDefect(() => Effect.succeed<ElicitationAnswer>({ action: "cancel" })),
    Effect.map((answer) => withDefaults(answer, request.fields))
  )

/** The question of an `elicitation/create` request's params (form mode). */
export const requestOf = (
  server: string,
  params: { readonly message: string; readonly requestedSchema: Readonly<Record<string, unknown>> }
): ElicitationRequest => ({
  server,
  message: params.message,
  fields: elicitationFields(params.requestedSchema),
  requestedSchema: params.requestedSchema
})
