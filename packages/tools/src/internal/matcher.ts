/**
 * `grep`'s regular expression runs in a worker thread: a JavaScript `RegExp` cannot be stopped
 * from the thread running it, and a pathological one (`(a+)+$` on a long line of `a`s)
 * backtracks for longer than the universe is old. In a worker, the calling fiber stays free to
 * notice the time limit, a timeout or an abort, and terminating the worker stops the match.
 *
 * The worker's code is a string (`eval`), so it needs no file of its own next to the built
 * module: bundlers and the sources-through-conditions setup of the tests work alike. It only
 * matches texts it is sent; it reads no file and has no access to the workspace.
 */
import { ToolError } from "@agentloop/core"
import { Deferred, Effect } from "effect"
import type { Scope } from "effect"
import type { Worker } from "node:worker_threads"

/**
 * What a batch asks: the line numbers that match (`content`), whether a text matches (`files`), how
 * many lines (`count`).
 */
export type MatchMode = "content" | "files" | "count"

export interface MatchRequest {
  readonly mode: MatchMode
  readonly texts: ReadonlyArray<string>
  /** Stop after this many matching lines (`content`) or matching texts (`files`, `count`). */
  readonly max: number
}

/** Per text: the indexes of the matching lines (`content`), or their number (`files`: 0 or 1, `count`). */
export type MatchAnswer = ReadonlyArray<ReadonlyArray<number>> | ReadonlyArray<number>

/** The lines of a text as grep sees them: split at `\n`, a final empty line dropped, a trailing `\r` removed. */
export const linesOf = (text: string): Array<string> => {
  const lines = text.split("\n")
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop()
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    if (line.endsWith("\r")) lines[i] = line.slice(0, -1)
  }
  return lines
}

const workerSource = `
"use strict"
const { parentPort, workerData } = require("node:worker_threads")
const re = new RegExp(workerData.source, workerData.flags)
// the same split as linesOf above (written out: a function's source text is not safe to ship when
// tools instrument or rename code)
const linesOf = (text) => {
  const lines = text.split("\\n")
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop()
  for (let i = 0; i < lines.length; i++) if (lines[i].endsWith("\\r")) lines[i] = lines[i].slice(0, -1)
  return lines
}
parentPort.on("message", ({ id, mode, texts, max }) => {
  parentPort.postMessage({ id, started: true })
  try {
    let left = max
    const answer = []
    for (const text of texts) {
      if (left <= 0) {
        answer.push(mode === "content" ? [] : 0)
        continue
      }
      const lines = linesOf(text)
      if (mode === "content") {
        const hits = []
        for (let i = 0; i < lines.length && left > 0; i++) {
          if (re.test(lines[i])) {
            hits.push(i)
            left--
          }
        }
        answer.push(hits)
      } else {
        let count = 0
        for (let i = 0; i < lines.length; i++) {
          if (re.test(lines[i])) {
            count++
            if (mode === "files") break
          }
        }
        if (count > 0) left--
        answer.push(count)
      }
    }
    parentPort.postMessage({ id, answer })
  } catch (error) {
    parentPort.postMessage({ id, error: String(error && error.message || error) })
  }
})
`

/** A worker matching one regular expression; started on the first batch, terminated with its scope. */
export interface Matcher {
  /**
   * Sends a batch: succeeds once the worker has begun on it, with the effect that waits for its
   * answer (so a caller can report progress knowing the match runs).
   */
  readonly start: (request: MatchRequest) => Effect.Effect<Effect.Effect<MatchAnswer, ToolError>, ToolError>
}

interface Pending {
  readonly started: Deferred.Deferred<void, ToolError>
  readonly answer: Deferred.Deferred<MatchAnswer, ToolError>
}

type WorkerMessage =
  | { readonly id: number; readonly started: true }
  | { readonly id: number; readonly answer: MatchAnswer }
  | { readonly id: number; readonly error: string }

const failAll = (pending: Map<number, Pending>, error: ToolError): void => {
  for (const { started, answer } of pending.values()) {
    Deferred.doneUnsafe(started, Effect.fail(error))
    Deferred.doneUnsafe(answer, Effect.fail(error))
  }
  pending.clear()
}

const spawn = (source: string, flags: string, pending: Map<number, Pending>): Worker => {
  // loaded on the first grep, not with the tools: worker_threads costs every run's start-up about 1 ms
  const { Worker } = process.getBuiltinModule("node:worker_threads")
  const worker = new Worker(workerSource, {
    eval: true,
    workerData: { source, flags },
    // a batch is at most a few MiB of text: this bounds what a runaway match can take
    resourceLimits: { maxOldGenerationSizeMb: 512 },
    stdout: true,
    stderr: true
  })
  worker.on("message", (message: WorkerMessage) => {
    const request = pending.get(message.id)
    if (request === undefined) return
    if ("started" in message) {
      Deferred.doneUnsafe(request.started, Effect.void)
      return
    }
    pending.delete(message.id)
    const result = "answer" in message ?
      Effect.succeed(message.answer) :
      Effect.fail(new ToolError({ message: `the pattern failed: ${message.error}` }))
    Deferred.doneUnsafe(request.started, Effect.void)
    Deferred.doneUnsafe(request.answer, result)
  })
  worker.on(
    "error",
    (error: Error) => failAll(pending, new ToolError({ message: `the search failed: ${error.message.split("\n")[0]}` }))
  )
  worker.on("exit", () => failAll(pending, new ToolError({ message: "the search failed: its worker stopped" })))
  return worker
}

/**
 * A matcher for `source` with `flags` (which must compile: the caller checks it first). Its
 * worker is terminated when the scope closes, also when a match is still running.
 */
export const makeMatcher = (source: string, flags: string): Effect.Effect<Matcher, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => ({ worker: undefined as Worker | undefined, ids: 0, pending: new Map<number, Pending>() })),
      (state) => state.worker === undefined ? Effect.void : Effect.promise(() => state.worker!.terminate())
    ),
    (state): Matcher => ({
      start: (request) =>
        Effect.suspend(() => {
          const worker = state.worker ??= spawn(source, flags, state.pending)
          const id = ++state.ids
          const pending: Pending = { started: Deferred.makeUnsafe(), answer: Deferred.makeUnsafe() }
          state.pending.set(id, pending)
          worker.postMessage({ id, mode: request.mode, texts: request.texts, max: request.max })
          return Effect.as(Deferred.await(pending.started), Deferred.await(pending.answer))
        })
    })
  )
