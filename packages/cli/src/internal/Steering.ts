/**
 * The messages typed while a chat run works: each goes to the run's inbox (steering, or a
 * follow-up) and waits in the screen's footer until the run takes it — its `user_message` event,
 * which the renderer shows as a line of the output — and the ones the run had not taken when it
 * ended are given back, to be the next prompts: nothing typed is lost. A slash command typed
 * meanwhile waits there too, for the run to end.
 */
import type { UserMessage } from "@agentloop/core"
import { Clock, Effect, Queue } from "effect"
import type { RunEvent, RunInbox } from "../RunEngine.ts"
import { stripControl } from "../Sanitize.ts"
import type { Screen } from "../Screen.ts"
import type { Style } from "../Style.ts"

/** The typed messages of one run (see the module's description). */
export interface Steering {
  readonly inbox: RunInbox
  /** Sends a message the user typed: `content` is its text with what it attaches. */
  readonly push: (kind: "steering" | "followUp", text: string, content: UserMessage["content"]) => Effect.Effect<void>
  /** A command typed meanwhile: it waits for the run to end. */
  readonly hold: (text: string) => void
  /**
   * An event of the run: a message it took stops waiting. Returns the event to show: a message typed as
   * steering that came too late for the turn it was typed in (the loop announces it with the follow-ups,
   * `kind: "followUp"`: it joins after the answer, and the run goes on) keeps its kind, `"steering"`.
   */
  readonly seen: (event: RunEvent) => RunEvent
  /**
   * After the run: the texts of the messages it did not take and of the commands, in the order typed
   * (the footer lets them go).
   */
  readonly leftovers: () => ReadonlyArray<string>
}

interface Waiting {
  readonly kind: "steering" | "followUp" | "command"
  readonly text: string
  readonly message: UserMessage | undefined
}

/** The same message: the one pushed, or its copy come back from a durable run's store. */
const same = (a: UserMessage | undefined, b: UserMessage) =>
  a === b ||
  (a !== undefined && a.timestamp === b.timestamp && JSON.stringify(a.content) === JSON.stringify(b.content))

const WHEN = {
  steering: "steering, at the next safe point",
  followUp: "follow-up, after the run",
  command: "after the run"
}

/** The typed messages of a run, shown in `screen`'s footer while they wait. */
export const makeSteering = (screen: Screen, style: Style): Effect.Effect<Steering> =>
  Effect.gen(function*() {
    const steering = yield* Queue.unbounded<UserMessage>()
    const followUps = yield* Queue.unbounded<UserMessage>()
    const waiting: Array<Waiting> = []
    const show = () =>
      screen.setBlock(
        "queue",
        waiting.length === 0 ? undefined : {
          lines: waiting.map((w) => style.dim(`⇢ ${WHEN[w.kind]}: ${stripControl(w.text).replace(/\s+/g, " ")}`))
        }
      )
    return {
      inbox: { steering, followUps },
      push: (kind, text, content) =>
        Effect.gen(function*() {
          const message: UserMessage = { role: "user", content, timestamp: yield* Clock.currentTimeMillis }
          waiting.push({ kind, text, message })
          show()
          yield* Queue.offer(kind === "steering" ? steering : followUps, message)
        }),
      hold: (text) => {
        waiting.push({ kind: "command", text, message: undefined })
        show()
      },
      seen: (event) => {
        if (event.type !== "user_message" || event.kind === "repair") return event
        const index = waiting.findIndex((w) => same(w.message, event.message))
        if (index < 0) return event
        const [taken] = waiting.splice(index, 1)
        show()
        return taken!.kind === "steering" && event.kind !== "steering" ? { ...event, kind: "steering" } : event
      },
      leftovers: () => {
        const left = waiting.splice(0).map((w) => w.text)
        show()
        return left
      }
    }
  })
