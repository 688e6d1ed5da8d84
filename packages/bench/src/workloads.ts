/**
 * The four workloads of the benchmark, described once and independently of any loop, and the
 * interface every contender implements.
 *
 * Every contender gets the same scripted model behaviour: the same turns, the same number of
 * streamed events per turn (one per text delta or per tool call, plus whatever framing its stream
 * protocol requires), the same tool calls with the same arguments, the same tool work and a sink
 * that only counts. Scripts are built before the clock starts (`prepare`), so the model costs
 * nothing measurable and what is timed is the loop.
 *
 * @since 0.1.0
 */
import type { Message } from "@agentloop/core"

/**
 * What one run did, to check that every contender did the same work (never a timing).
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkCount {
  /** Events the sink received (each loop has its own event vocabulary: not comparable across loops). */
  readonly events: number
  /** Tool executions. */
  readonly toolRuns: number
  /** Model requests. */
  readonly requests: number
  /** Messages in the final transcript (input included), in the loop's own message format. */
  readonly messages: number
  /** The run's result, held by the harness while it measures retained memory. */
  readonly result: unknown
}

/**
 * Hooks the harness uses to sample memory at the same points of every run: when a tool executes
 * and when the model receives a request. They cost nothing when absent.
 *
 * @since 0.1.0
 * @category models
 */
export interface Probe {
  readonly onToolExecute?: ((index: number) => void) | undefined
  readonly onRequest?: ((index: number) => void) | undefined
}

/**
 * A prepared run: everything is built, calling it runs the loop once.
 *
 * @since 0.1.0
 * @category models
 */
export type Prepared = () => Promise<WorkCount>

/**
 * One loop under test. Each method prepares one run of a workload.
 *
 * @since 0.1.0
 * @category models
 */
export interface Contender {
  /** Short key used in results.json. */
  readonly key: ContenderKey
  /** Name shown in tables. */
  readonly label: string
  /** (a) one turn streaming `deltas` text deltas to a counting sink. */
  readonly streamDeltas: (deltas: number, probe: Probe) => Prepared
  /** (b) `steps` turns of one tool call each, then a final text turn. */
  readonly toolSteps: (steps: number, probe: Probe) => Prepared
  /** (c) one turn with `calls` concurrent instant tool calls, then a final text turn. */
  readonly toolBatch: (calls: number, probe: Probe) => Prepared
  /** (d) resume from a `history`-message transcript, one tool turn, then a final text turn. */
  readonly longTranscript: (history: number, probe: Probe) => Prepared
  /**
   * (g) a run that grows: `turns` turns of `calls` concurrent tool calls each, then a final text
   * turn (2,222 × 8 grows the transcript to 20,000 messages).
   */
  readonly growingRun: (turns: number, calls: number, probe: Probe) => Prepared
}

/**
 * @since 0.1.0
 * @category models
 */
export type ContenderKey = "floor" | "agentloop" | "baseline" | "pi" | "piFilter" | "aisdk"

/**
 * The sizes of one set of workloads.
 *
 * @since 0.1.0
 * @category models
 */
export interface Sizes {
  /** (a) text deltas in the one turn. */
  readonly deltas: number
  /** (b) the step counts N measured. */
  readonly stepCounts: ReadonlyArray<number>
  /** (c) tool calls in the one batch. */
  readonly batch: number
  /** (d) messages of the resumed history. */
  readonly history: number
  /** (g) turns of the growing run, and tool calls per turn. */
  readonly growing: { readonly turns: number; readonly calls: number }
}

/**
 * Workload sizes: the (`full`), the smoke run's (`quick`, `BENCH_QUICK=1`), and the small
 * warm-up run a cold process makes before its measured run (`small`).
 *
 * @since 0.1.0
 * @category constants
 */
export const allSizes: { readonly full: Sizes; readonly quick: Sizes; readonly small: Sizes } = {
  full: {
    deltas: 100_000,
    stepCounts: [100, 500, 2_000],
    batch: 10_000,
    history: 20_000,
    growing: { turns: 2_222, calls: 8 }
  },
  quick: {
    deltas: 10_000,
    stepCounts: [20, 100, 200],
    batch: 1_000,
    history: 2_000,
    growing: { turns: 222, calls: 8 }
  },
  small: { deltas: 1_000, stepCounts: [10], batch: 100, history: 100, growing: { turns: 10, calls: 8 } }
}

/**
 * The sizes of this run: the issue's, or `BENCH_QUICK=1`'s smaller ones for a smoke run.
 *
 * @since 0.1.0
 * @category constants
 */
export const sizes: Sizes = process.env["BENCH_QUICK"] === "1" ? allSizes.quick : allSizes.full

/**
 * The text of every streamed delta (constant, so no loop pays for building strings).
 *
 * @since 0.1.0
 * @category constants
 */
export const DELTA = "token "

/**
 * The one tool every workload calls: `echo({ i: number })` answers the text `ok <i>`.
 *
 * @since 0.1.0
 * @category constants
 */
export const TOOL_NAME = "echo"

/**
 * The tool's work, shared by every contender: build the answer text.
 *
 * @since 0.1.0
 * @category tools
 */
export const echoOutput = (i: number): string => `ok ${i}`

/**
 * The id of call `k` of turn `turn` (unique across a run).
 *
 * @since 0.1.0
 * @category constants
 */
export const callId = (turn: number, k: number): string => `call_${turn}_${k}`

/**
 * The user message every run starts with.
 *
 * @since 0.1.0
 * @category constants
 */
export const PROMPT = "Run the workload."

/**
 * The text of the last turn of every multi-turn workload.
 *
 * @since 0.1.0
 * @category constants
 */
export const FINAL_TEXT = "All done."

/**
 * One entry of the resumed history of workload (d), in a neutral form each contender maps to its
 * own message format. The history repeats the group: user question, assistant tool call, tool
 * result, assistant answer.
 *
 * @since 0.1.0
 * @category models
 */
export type HistoryEntry =
  | { readonly kind: "user"; readonly text: string }
  | { readonly kind: "call"; readonly id: string; readonly i: number }
  | { readonly kind: "result"; readonly id: string; readonly text: string }
  | { readonly kind: "answer"; readonly text: string }

/**
 * The history of workload (d): `size` messages (a multiple of 4 is a whole number of groups).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeHistory = (size: number): Array<HistoryEntry> => {
  const out: Array<HistoryEntry> = []
  for (let g = 0; out.length < size; g++) {
    const id = `hist_${g}`
    const group: Array<HistoryEntry> = [
      { kind: "user", text: `Question number ${g}: what is the status of item ${g}?` },
      { kind: "call", id, i: g },
      { kind: "result", id, text: echoOutput(g) },
      { kind: "answer", text: `Item ${g} is fine; the tool answered ${echoOutput(g)}.` }
    ]
    for (const entry of group) if (out.length < size) out.push(entry)
  }
  return out
}

/**
 * The history of workload (d) as agentloop messages (the floor and agentloop both read them).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeHistoryMessages = (size: number): Array<Message> =>
  makeHistory(size).map((entry): Message => {
    switch (entry.kind) {
      case "user":
        return { role: "user", content: entry.text }
      case "call":
        return {
          role: "assistant",
          content: [{ type: "toolCall", id: entry.id, name: TOOL_NAME, arguments: { i: entry.i } }],
          stopReason: "toolUse"
        }
      case "result":
        return {
          role: "toolResult",
          toolCallId: entry.id,
          toolName: TOOL_NAME,
          content: [{ type: "text", text: entry.text }],
          isError: false
        }
      case "answer":
        return { role: "assistant", content: [{ type: "text", text: entry.text }], stopReason: "stop" }
    }
  })
