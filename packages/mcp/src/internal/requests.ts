/**
 * A request to a server: the SDK's promise as an effect.
 */
import { Effect } from "effect"

/** The SDK's per-request timeout is turned off (its largest value): time limits are the loop's. */
const NO_SDK_TIMEOUT = 2_147_483_647

/** A request of the SDK's client as an effect (interrupting it sends `notifications/cancelled`). */
export const request = <A>(f: (options: { signal: AbortSignal; timeout: number }) => Promise<A>) =>
  Effect.tryPromise({ try: (signal) => f({ signal, timeout: NO_SDK_TIMEOUT }), catch: (error) => error })
