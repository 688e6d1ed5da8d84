/**
 * What a server may ask of the client, and who answers: `Elicitation` (questions) and `Sampling`
 * (completions) from the layer's context, the offered roots (`roots.ts`). Each is declared in the
 * client's capabilities only when there is someone to answer, and answered by handlers set on each
 * client as it connects.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import {
  CancelledNotificationSchema,
  ElicitRequestSchema,
  ErrorCode,
  ListRootsRequestSchema
} from "@modelcontextprotocol/sdk/types.js"
import type { ClientCapabilities } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import type { ChildProcessSpawner } from "effect/process"
import { Elicitation } from "../Elicitation.ts"
import type { PrepareImage } from "../Results.ts"
import { Sampling } from "../Sampling.ts"
import { askSafely, requestOf } from "./elicitation.ts"
import type { OfferedRoots } from "./roots.ts"
import { answerSampling, RpcFailure } from "./sampling.ts"

/** Runs an effect of the layer for a promise the SDK waits on (interrupted when the layer closes). */
export type RunPromise = <A, E>(
  effect: Effect.Effect<A, E, ChildProcessSpawner.ChildProcessSpawner>,
  options?: { readonly signal?: AbortSignal | undefined } | undefined
) => Promise<A>

export interface ClientFeatures {
  /** What the client declares it answers. */
  readonly capabilities: ClientCapabilities
  /** Sets the handlers of a new client of the server named `server`. */
  readonly install: (client: Client, server: string, runPromise: RunPromise) => void
}

/** The features the layer's context can answer (elicitation and sampling when their services are there). */
export const makeClientFeatures = Effect.fnUntraced(function*(
  roots: OfferedRoots,
  prepareImage: PrepareImage
): Effect.fn.Return<ClientFeatures> {
  const elicitation = yield* Effect.serviceOption(Elicitation)
  const sampling = yield* Effect.serviceOption(Sampling)
  const capabilities = {
    ...(elicitation._tag === "Some" ? { elicitation: { form: { applyDefaults: true } } } : {}),
    ...(sampling._tag === "Some" ? { sampling: {} } : {}),
    ...(roots.offered ? { roots: { listChanged: true } } : {})
  }
  const install = (client: Client, server: string, runPromise: RunPromise): void => {
    // The server's requests this client takes time to answer (a question, a completion), each
    // with an abort of its own: the SDK's handler of `notifications/cancelled` skips a falsy
    // request id, so it never cancels the first request a server sends (id 0). Cancellation
    // is handled here instead, for these requests (the others are answered at once).
    const answering = new Map<string | number, AbortController>()
    const cancellable = <A>(
      id: string | number,
      signal: AbortSignal,
      answer: (signal: AbortSignal) => Promise<A>
    ): Promise<A> => {
      const own = new AbortController()
      answering.set(id, own)
      return answer(AbortSignal.any([signal, own.signal])).finally(() => answering.delete(id))
    }
    client.setNotificationHandler(CancelledNotificationSchema, (notification) => {
      const id = notification.params.requestId
      if (id !== undefined) answering.get(id)?.abort(notification.params.reason)
    })
    if (elicitation._tag === "Some") {
      const service = elicitation.value
      // form mode only (the capability declares no URL mode); interrupted when the server
      // cancels the question or the layer closes
      client.setRequestHandler(ElicitRequestSchema, (request, extra) => {
        const params = request.params
        if (params.mode === "url") return Promise.resolve({ action: "decline" as const })
        return cancellable(
          extra.requestId,
          extra.signal,
          (signal) => runPromise(askSafely(service, requestOf(server, params)), { signal })
        )
          .then((answer) =>
            answer.action === "accept" ? { action: "accept" as const, content: { ...answer.content } } : answer
          )
      })
    }
    if (roots.offered) {
      // the roots as they are when the server asks (`setRoots` tells it when they change)
      client.setRequestHandler(ListRootsRequestSchema, () => ({ roots: roots.list() }))
    }
    if (sampling._tag === "Some") {
      const service = sampling.value
      // the fallback handler, not `setRequestHandler`: the SDK would check the request with its
      // schema first and answer a malformed one with the schema library's dump as an internal
      // error; `answerSampling` checks it with the same schema and names each wrong field
      // (invalid params). Interrupted when the server cancels the request or the layer closes.
      client.fallbackRequestHandler = (request, extra) =>
        request.method === "sampling/createMessage" ?
          cancellable(
            request.id,
            extra.signal,
            (signal) => runPromise(answerSampling(service, server, request, prepareImage), { signal })
          ) :
          Promise.reject(new RpcFailure(ErrorCode.MethodNotFound, "Method not found"))
    }
  }
  return { capabilities, install }
})
