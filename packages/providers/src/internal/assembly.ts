/**
 * The provider-independent half of streaming: the content blocks of one assistant turn built
 * from deltas, the `ModelEvent`s to emit for them, tool-call argument fragments assembled per
 * call (interleaved fragments of parallel calls included) and the final `AssistantMessage`.
 *
 * The wire modules (OpenAI chunks, Anthropic events) only decide *which* block a delta belongs
 * to, by a key of their choosing; everything else is here, once.
 */
import type { AssistantMessage, ModelEvent, StopReason, ToolCall, Usage } from "@agentloop/core"
import { Result } from "effect"
import { clip } from "./text.ts"

/**
 * Text built from many small deltas. `text += delta` keeps every delta alive inside a rope (a node
 * of about 40 bytes for each delta, on top of the delta itself: a 250,000-character answer in
 * 50,000 deltas held 5 MB); this joins the pending deltas into one flat string every
 * `TextBuilder.batch` appends, so a message holds about its own size.
 */
export class TextBuilder {
  static readonly batch = 256
  private joined = ""
  private pending: Array<string> = []
  /** Characters so far. */
  length = 0

  append(delta: string): void {
    if (delta.length === 0) return
    this.pending.push(delta)
    this.length += delta.length
    if (this.pending.length >= TextBuilder.batch) this.flush()
  }

  /** Replaces the whole text. */
  set(text: string): void {
    this.joined = text
    this.pending = []
    this.length = text.length
  }

  private flush(): void {
    this.joined += this.pending.join("")
    this.pending = []
  }

  toString(): string {
    if (this.pending.length > 0) this.flush()
    return this.joined
  }
}

type Block =
  | { readonly kind: "text"; readonly text: TextBuilder }
  | { readonly kind: "thinking"; readonly thinking: TextBuilder; readonly signature: TextBuilder; redacted: boolean }
  | {
    readonly kind: "toolCall"
    readonly id: string
    name: string
    nameAnnounced: boolean
    readonly arguments: TextBuilder
    /** Arguments given whole (not as fragments), used when no fragment arrives. */
    initial: Record<string, unknown> | undefined
    /** The provider's own decoding of the arguments, which wins over the fragments. */
    final: { readonly value: unknown } | undefined
  }

type ToolCallBlock = Extract<Block, { kind: "toolCall" }>

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * Parses the concatenated argument fragments of one tool call. Empty text is `{}` (a call
 * without arguments); anything else must be a JSON object.
 */
export const parseToolArguments = (text: string): Result.Result<Record<string, unknown>, string> => {
  if (text.trim() === "") return Result.succeed({})
  const parsed = Result.try({
    try: (): unknown => JSON.parse(text),
    catch: (e) => (e instanceof Error ? e.message : String(e))
  })
  if (Result.isFailure(parsed)) return Result.fail(`are not valid JSON (${clip(parsed.failure, 200)})`)
  return isRecord(parsed.success) ? Result.succeed(parsed.success) : Result.fail("are JSON but not an object")
}

/** What the final message says besides its content. */
export interface Ending {
  readonly stopReason: StopReason
  readonly errorMessage?: string | undefined
  readonly usage?: Usage | undefined
  readonly model?: string | undefined
  readonly timestamp?: number | undefined
}

/**
 * One assistant turn under construction. Blocks keep the order in which they first received
 * content; deltas return the events to emit (empty deltas emit nothing).
 */
export class MessageAssembly {
  private readonly blocks: Array<Block> = []
  private readonly byKey = new Map<string, Block>()
  private generatedIds = 0

  /** `idPrefix` makes ids for tool calls whose provider sent none. */
  private readonly idPrefix: string
  constructor(idPrefix: string) {
    this.idPrefix = idPrefix
  }

  /** Starts a block under `key` (the callers look it up first, without a closure per delta). */
  private add<B extends Block>(key: string, created: B): B {
    this.byKey.set(key, created)
    this.blocks.push(created)
    return created
  }

  /** Appends a text delta; its event goes to `out` (returned). */
  text(key: string, delta: string, out: Array<ModelEvent> = []): Array<ModelEvent> {
    if (delta.length === 0) return out
    const found = this.byKey.get(key)
    const block = found?.kind === "text" ? found : this.add(key, { kind: "text", text: new TextBuilder() })
    block.text.append(delta)
    out.push({ type: "text_delta", delta })
    return out
  }

  /** Appends a thinking delta; its event goes to `out` (returned). */
  thinking(key: string, delta: string, out: Array<ModelEvent> = []): Array<ModelEvent> {
    if (delta.length === 0) return out
    this.thinkingBlock(key).thinking.append(delta)
    out.push({ type: "thinking_delta", delta })
    return out
  }

  /** Appends to the signature that lets the provider verify the thinking block when it is replayed. */
  signature(key: string, delta: string): void {
    if (delta.length > 0) this.thinkingBlock(key).signature.append(delta)
  }

  /** A thinking block the provider encrypted: kept opaque, only for replay. */
  redactedThinking(key: string, data: string): void {
    const block = this.thinkingBlock(key)
    block.signature.set(data)
    block.redacted = true
  }

  private thinkingBlock(key: string) {
    const found = this.byKey.get(key)
    return found?.kind === "thinking" ?
      found :
      this.add(key, { kind: "thinking", thinking: new TextBuilder(), signature: new TextBuilder(), redacted: false })
  }

  /** The id of the tool call under `key`, if there is one. */
  toolCallIdOf(key: string): string | undefined {
    const block = this.byKey.get(key)
    return block?.kind === "toolCall" ? block.id : undefined
  }

  /**
   * Feeds one piece of a tool call. The first non-empty `id` and `name` win (some servers repeat
   * them, or send `""`, on every fragment); a call whose provider sends no id gets a made-up one.
   * The first event of a call carries its name. Its event, if any, goes to `out` (returned).
   */
  toolCall(
    key: string,
    part: {
      readonly id?: string | null | undefined
      readonly name?: string | null | undefined
      readonly fragment?: string | null | undefined
      readonly initial?: unknown
    },
    out: Array<ModelEvent> = []
  ): Array<ModelEvent> {
    const found = this.byKey.get(key)
    const block = found?.kind === "toolCall" ? found : this.add<ToolCallBlock>(key, {
      kind: "toolCall",
      id: part.id !== undefined && part.id !== null && part.id.length > 0 ?
        part.id :
        `${this.idPrefix}_${this.generatedIds++}`,
      name: "",
      nameAnnounced: false,
      arguments: new TextBuilder(),
      initial: undefined,
      final: undefined
    })
    if (block.name === "" && typeof part.name === "string") block.name = part.name
    if (isRecord(part.initial) && Object.keys(part.initial).length > 0) block.initial = part.initial
    const fragment = part.fragment ?? ""
    block.arguments.append(fragment)
    const announce = !block.nameAnnounced && block.name !== ""
    if (!announce && fragment.length === 0) return out
    block.nameAnnounced ||= announce
    out.push(
      announce ?
        { type: "toolcall_delta", id: block.id, name: block.name, delta: fragment } :
        { type: "toolcall_delta", id: block.id, delta: fragment }
    )
    return out
  }

  /** Sets the arguments of the call under `key` as the provider decoded them (they must be an object). */
  toolCallArguments(key: string, value: unknown): void {
    const block = this.byKey.get(key)
    if (block?.kind === "toolCall") block.final = { value }
  }

  hasToolCalls(): boolean {
    return this.blocks.some((b) => b.kind === "toolCall")
  }

  /**
   * The final message. Tool calls whose arguments do not parse get `{}` and turn a `stop` or
   * `toolUse` ending into `error`, naming each bad call, so that nothing runs (the loop pairs
   * every call with a skipped result). A `length` ending stays `length`: truncation explains the
   * broken arguments. An `error` ending keeps its own message.
   */
  finish(ending: Ending): AssistantMessage {
    const content: Array<AssistantMessage["content"][number]> = []
    const problems: Array<string> = []
    for (const block of this.blocks) {
      switch (block.kind) {
        case "text":
          content.push({ type: "text", text: block.text.toString() })
          break
        case "thinking": {
          const thinking = block.thinking.toString()
          const signature = block.signature.toString()
          content.push(
            block.redacted ?
              { type: "thinking", thinking, signature, redacted: true } :
              signature.length > 0 ?
              { type: "thinking", thinking, signature } :
              { type: "thinking", thinking }
          )
          break
        }
        case "toolCall": {
          const parsed = block.final !== undefined ?
            (isRecord(block.final.value) ? Result.succeed(block.final.value) : Result.fail("are not an object")) :
            block.arguments.length === 0 && block.initial !== undefined ?
            Result.succeed(block.initial) :
            parseToolArguments(block.arguments.toString())
          const name = block.name === "" ? "unknown_tool" : block.name
          if (block.name === "") problems.push(`tool call "${block.id}" has no tool name`)
          if (Result.isFailure(parsed)) {
            problems.push(`the arguments of tool call "${block.id}" (${name}) ${parsed.failure}`)
          }
          const call: ToolCall = {
            type: "toolCall",
            id: block.id,
            name,
            arguments: Result.isSuccess(parsed) ? parsed.success : {}
          }
          content.push(call)
          break
        }
      }
    }
    const broken = problems.length > 0 && (ending.stopReason === "stop" || ending.stopReason === "toolUse")
    const stopReason: StopReason = broken ? "error" : ending.stopReason
    const errorMessage = broken ? `${problems.join("; ")}; no tool was run` : ending.errorMessage
    return {
      role: "assistant",
      content,
      stopReason,
      ...(errorMessage === undefined ? {} : { errorMessage }),
      ...(ending.usage === undefined ? {} : { usage: ending.usage }),
      ...(ending.model === undefined ? {} : { model: ending.model }),
      ...(ending.timestamp === undefined ? {} : { timestamp: ending.timestamp })
    }
  }
}
