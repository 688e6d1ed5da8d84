/**
 * Messages this loop produced and checked itself (SPEC §5, "Messages the loop produced itself"):
 * a shortcut beside `prepareTranscript`'s check, and the only place that knows about it. Not part
 * of the public API.
 *
 * Every message the loop appends to a transcript has been checked (the model's final message and
 * every tool result against their schemas, steering and follow-up messages against
 * `UserMessage`) or built by the loop (skipped and error results, repair prompts). `trust`
 * freezes it, so nothing can change it afterwards, and remembers the very object in a WeakSet;
 * `isTrusted` is then true for that object only. A run resumed from such messages (the next
 * prompt of a chat, on `result.messages`) need not check them again. Anything else is checked:
 * a copy (`structuredClone`, a spread, a message parsed from a file or sent by another process)
 * is another object, and a message a caller built by hand was never in the set.
 *
 * What is frozen is everything the message schemas read: the message, its `content` array, each
 * content part, a tool call's `arguments` object (the schema reads only that it is an object, and
 * what keys it has) and `usage`. A tool result's `details` and the values inside `arguments` are
 * `Unknown` to the schema: no change to them can make the message invalid, so they are left as they
 * are (a tool may keep what it put there). Freezing never copies: the objects stay the caller's
 * and the model's, and a frozen message is exactly the message that was appended.
 *
 * Trusted.test.ts holds the shortcut to the rule: whatever a caller does to a message (mutate it,
 * copy it, rebuild it), `prepareTranscript` gives what it gives without the shortcut.
 */
import type { Message } from "../Message.ts"

const checked = new WeakSet<object>()

const freeze = Object.freeze
const descriptor = Object.getOwnPropertyDescriptor
const isArray = Array.isArray

/**
 * Freezes `o` and says whether its own enumerable properties are all data properties: a getter
 * survives freezing and could answer differently on every read, so an object with one is frozen
 * but not trusted.
 */
const freezeData = (o: object): boolean => {
  freeze(o)
  for (const key in o) {
    if (descriptor(o, key)?.get !== undefined) return false
  }
  return true
}

/**
 * Freezes what the schemas read of `message` (see the module) and remembers it as checked by this
 * loop. Call it only on a message that has been checked or that the loop built, as it is
 * appended. Returns the message. A message that cannot be frozen (a proxy refusing it) or that
 * reads through a getter stays untrusted, and is checked again if a run is resumed from it.
 *
 * @internal
 */
export const trust = <M extends Message>(message: M): M => {
  try {
    let data = true
    const content: unknown = message.content
    if (isArray(content)) {
      for (let i = 0; i < content.length; i++) {
        const part: unknown = content[i]
        if (typeof part !== "object" || part === null) continue
        if ((part as { readonly type?: unknown }).type === "toolCall") {
          const args: unknown = (part as { readonly arguments?: unknown }).arguments
          if (typeof args === "object" && args !== null && !freezeData(args)) data = false
        }
        if (!freezeData(part)) data = false
      }
      freeze(content)
    }
    if (message.role === "assistant" && message.usage !== undefined && !freezeData(message.usage)) data = false
    if (freezeData(message) && data) checked.add(message)
  } catch {
    // not trusted: checked again on resume
  }
  return message
}

/**
 * Whether `u` is a message this loop appended (and froze) in this process.
 *
 * @internal
 */
export const isTrusted = (u: unknown): boolean => typeof u === "object" && u !== null && checked.has(u)
