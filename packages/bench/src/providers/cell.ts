/**
 * One cell of the providers bench, in a process of its own (so its heap figures are its own):
 * `node --expose-gc cell.ts <provider> <contender> <server url>`. Reads a small stream once (warm-up),
 * then the large one timed, then the large one again sampling the live heap; prints one JSON line.
 *
 * Contenders: `agentloop` (the provider's `Model` layer, consumed by core's loop: one turn of
 * `runAgentLoop`, every event, then the final message; its calls go to an executor without tools), `agentloop-before`
 * (the same, with the
 * providers module at the path in `BENCH_PROVIDERS_BEFORE`: another checkout's
 * `packages/providers/src/index.ts`, to compare two versions under the same load), `sdk` (the official client's raw
 * streaming iterator: events only, nothing assembled), `sdk-final` (the official client's stream
 * helper, iterated, then its assembled final message).
 *
 * @since 0.1.0
 */
import { EventSink, Executor, Model, runAgentLoop } from "@agentloop/core"
import type { AssistantMessage, ModelRequest } from "@agentloop/core"
import * as Providers from "@agentloop/providers"
import Anthropic from "@anthropic-ai/sdk"
import { Effect, Layer } from "effect"
import { getHeapStatistics } from "node:v8"
import OpenAI from "openai"

/**
 * A provider of the bench.
 *
 * @since 0.1.0
 * @category models
 */
export type ProviderKey = "openai" | "anthropic"

/**
 * A contender of the bench.
 *
 * @since 0.1.0
 * @category models
 */
export type ContenderKey = "agentloop" | "agentloop-before" | "sdk" | "sdk-final"

/**
 * What one cell measured.
 *
 * @since 0.1.0
 * @category models
 */
export interface CellResult {
  readonly ms: number
  /** CPU time of the process (user + system, all threads) during the timed run. */
  readonly cpuMs: number
  /** Events the contender's own stream gave (in its own vocabulary). */
  readonly events: number
  /** Peak of `heapUsed` (garbage included) above the heap before the timed run, sampled every 1,024 events. */
  readonly heapUsedPeak: number
  /** Peak live heap (after a full collection) above the heap before the memory run, sampled every 4,096 events. */
  readonly livePeak: number
  /** The process's peak resident set size (bytes). */
  readonly maxRss: number
  /** What the contender assembled (text characters, tool calls, argument characters), to check the contenders agree. */
  readonly digest: string
}

const gc = (): void => (globalThis as { gc?: () => void }).gc?.()

/** Calls `onEvent` for every event of one response; resolves to the digest. */
type Reader = (base: string, onEvent: () => void) => Promise<string>

const request: ModelRequest = { messages: [{ role: "user", content: "Write the files." }], tools: [] }

const digestOf = (message: AssistantMessage): string => {
  let text = 0
  let calls = 0
  let args = 0
  for (const part of message.content) {
    if (part.type === "text") text += part.text.length
    if (part.type === "toolCall") {
      calls++
      args += JSON.stringify(part.arguments).length
    }
  }
  return `${message.stopReason} text=${text} calls=${calls} args=${args}`
}

/** The executor of the bench's one turn: no tools (its calls are answered unknown, not run). */
const noTools = Executor.of({
  definitions: [],
  execute: (call) => Effect.die(new Error(`no tool ${call.name}`))
})

const agentloopReader = async (provider: ProviderKey, before = false): Promise<Reader> => {
  const path = process.env["BENCH_PROVIDERS_BEFORE"]
  if (before && path === undefined) throw new Error("agentloop-before needs BENCH_PROVIDERS_BEFORE")
  const { anthropicFetchLayer, openAiCompatFetchLayer }: typeof Providers = before ? await import(path!) : Providers
  const modelFor = (base: string) =>
    provider === "openai" ?
      openAiCompatFetchLayer({ model: "gpt-4o", baseUrl: `${base}/v1`, apiKey: "sk-bench", prices: false }) :
      anthropicFetchLayer({ model: "claude-bench", baseUrl: base, apiKey: "sk-bench", prices: false })
  const models = new Map<string, typeof Model.Service>()
  return async (base, onEvent) => {
    let model = models.get(base)
    if (model === undefined) {
      model = await Effect.runPromise(Effect.provide(Effect.service(Model), modelFor(base) as Layer.Layer<Model>))
      models.set(base, model)
    }
    const sink = EventSink.of({
      emit: (event) => {
        if (event.type === "model_event") onEvent()
        return Effect.void
      }
    })
    const result = await Effect.runPromise(
      runAgentLoop({ messages: request.messages, maxSteps: 1 }).pipe(
        Effect.provideService(Model, model),
        Effect.provideService(Executor, noTools),
        Effect.provideService(EventSink, sink)
      )
    )
    const message = result.messages.find((m): m is AssistantMessage => m.role === "assistant")
    if (message === undefined) throw new Error(`agentloop: ${result.reason}: ${result.error ?? ""}`)
    onEvent() // the final `done`
    return digestOf(message)
  }
}

const openAiClient = (base: string) => new OpenAI({ apiKey: "sk-bench", baseURL: `${base}/v1`, maxRetries: 0 })
const anthropicClient = (base: string) => new Anthropic({ apiKey: "sk-bench", baseURL: base, maxRetries: 0 })

const openAiParams = { model: "gpt-4o", messages: [{ role: "user" as const, content: "Write the files." }] }
const anthropicParams = {
  model: "claude-bench",
  max_tokens: 4096,
  messages: [{ role: "user" as const, content: "Write the files." }]
}

const readers: Record<ProviderKey, Record<ContenderKey, () => Promise<Reader>>> = {
  openai: {
    agentloop: () => agentloopReader("openai"),
    "agentloop-before": () => agentloopReader("openai", true),
    sdk: async () => async (base, onEvent) => {
      const stream = await openAiClient(base).chat.completions.create({ ...openAiParams, stream: true })
      let text = 0
      for await (const chunk of stream) {
        onEvent()
        text += chunk.choices[0]?.delta.content?.length ?? 0
      }
      return `text=${text}`
    },
    "sdk-final": async () => async (base, onEvent) => {
      const stream = openAiClient(base).chat.completions.stream(openAiParams)
      for await (const _ of stream) onEvent()
      const message = (await stream.finalChatCompletion()).choices[0]!.message
      const calls = message.tool_calls ?? []
      const args = calls.reduce(
        (n, call) => n + (call.type === "function" ? JSON.stringify(JSON.parse(call.function.arguments)).length : 0),
        0
      )
      return `toolUse text=${message.content?.length ?? 0} calls=${calls.length} args=${args}`
    }
  },
  anthropic: {
    agentloop: () => agentloopReader("anthropic"),
    "agentloop-before": () => agentloopReader("anthropic", true),
    sdk: async () => async (base, onEvent) => {
      const stream = await anthropicClient(base).messages.create({ ...anthropicParams, stream: true })
      let text = 0
      for await (const event of stream) {
        onEvent()
        if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text.length
      }
      return `text=${text}`
    },
    "sdk-final": async () => async (base, onEvent) => {
      const stream = anthropicClient(base).messages.stream(anthropicParams)
      for await (const _ of stream) onEvent()
      const message = await stream.finalMessage()
      let text = 0
      let calls = 0
      let args = 0
      for (const block of message.content) {
        if (block.type === "text") text += block.text.length
        if (block.type === "tool_use") {
          calls++
          args += JSON.stringify(block.input).length
        }
      }
      return `toolUse text=${text} calls=${calls} args=${args}`
    }
  }
}

const main = async () => {
  const [provider, contender, url] = process.argv.slice(2) as [ProviderKey, ContenderKey, string]
  const read = await readers[provider][contender]()
  // warm-up: the small stream
  await read(`${url}/small`, () => {})
  // timed run
  gc()
  let events = 0
  const heapUsed = () => getHeapStatistics().used_heap_size
  const before = heapUsed()
  let heapUsedPeak = 0
  const cpu = process.cpuUsage()
  const start = performance.now()
  const digest = await read(`${url}/full`, () => {
    if ((++events & 1023) === 0) heapUsedPeak = Math.max(heapUsedPeak, heapUsed() - before)
  })
  const ms = performance.now() - start
  const cpuUsed = process.cpuUsage(cpu)
  const cpuMs = (cpuUsed.user + cpuUsed.system) / 1000
  heapUsedPeak = Math.max(heapUsedPeak, heapUsed() - before)
  // memory run (skipped with BENCH_PROVIDERS_SKIP_MEMORY=1, to profile the timed run alone)
  const skipMemory = process.env["BENCH_PROVIDERS_SKIP_MEMORY"] === "1"
  let livePeak = 0
  if (!skipMemory) {
    gc()
    gc()
    const baseline = process.memoryUsage().heapUsed
    let seen = 0
    await read(`${url}/full`, () => {
      if ((++seen & 4095) === 0) {
        gc()
        livePeak = Math.max(livePeak, process.memoryUsage().heapUsed - baseline)
      }
    })
  }
  const result: CellResult = {
    ms,
    cpuMs,
    events,
    heapUsedPeak,
    livePeak,
    maxRss: process.resourceUsage().maxRSS * 1024,
    digest
  }
  process.stdout.write(`${JSON.stringify(result)}\n`)
}

await main()
