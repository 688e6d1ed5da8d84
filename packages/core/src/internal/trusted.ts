/**
 * Messages this loop produced and checked itself (SPEC §5, "Messages the loop produced itself"):
 * a shortcut beside `prepareTranscript`'s check, and the only place that knows about it. Not part
 * of the public API.
 *
 * Every message the loop appends to a transcript has been checked (the model's final message and
 * every tool result against their schemas, steering and follow-up messages against
 * `UserMessage`) or built by the loop (skipped and error results, repair prompts). `trust`
 * freezes it, so nothing can change it afterwards, and remembers the very object (a brand, below);
 * `isTrusted` is then true for that object only. A run resumed from such messages (the next
 * prompt of a chat, on `result.messages`) need not check them again: `prepareTranscript` (through
 * `isSoundTranscriptFast` in guards.ts) skips their guards, never their pairing. Anything else is
 * checked: a copy (`structuredClone`, a spread, a message parsed from a file or sent by another
 * process) is another object, and a message a caller built by hand never got the brand.
 *
 * What is frozen is everything the message schemas read: the message, its `content` array, each
 * content part, a tool call's `arguments` object (the schema reads only that it is an object, and
 * what keys it has) and `usage`. A tool result's `details` and the values inside `arguments` are
 * `Unknown` to the schema: no change to them can make the message invalid, so they are left as they
 * are (a tool may keep what it put there). Freezing never copies: the objects stay the caller's
 * and the model's, and a frozen message is exactly the message that was appended. A property read
 * through a getter is not made constant by freezing; such a message could answer the check one
 * thing and the model another on any run, trusted or not, so it is not looked for (looking costs
 * more than the rest of `trust`).
 *
 * "Remembered" is a brand: a private field added to the message object itself (the class below
 * returns the object it is given from its base constructor, so its field initializer installs
 * the field on that object). Unlike a WeakSet entry it costs about nothing to add (a WeakSet's add
 * cost more than the whole check it saves), it cannot be forged or read from outside this
 * module, and no copy carries it: `structuredClone`, a spread, `Object.assign` and JSON see only
 * the message's own public properties. Either way a message remembered costs about 40 bytes (the
 * field takes a property store of its own; a WeakSet entry costs the same).
 *
 * Trusted.test.ts holds the shortcut to the rule: whatever a caller does to a message (mutate it,
 * copy it, rebuild it), `prepareTranscript` gives what it gives without the shortcut.
 */
import type { Message } from "../Message.ts"

const freeze = Object.freeze
const isArray = Array.isArray

/** A base class whose constructor returns the object it is given, so a subclass brands that object. */
const ReturnsItsArgument = function(this: unknown, target: object) {
  return target
} as unknown as new(target: object) => object

class Checked extends ReturnsItsArgument {
  // read by `#checked in u` below, which the linter does not count as a use
  // oxlint-disable-next-line no-unused-private-class-members
  #checked = true
  static add(target: object): void {
    new Checked(target)
  }
  static has(u: object): boolean {
    return #checked in u
  }
}

/**
 * Freezes what the schemas read of `message` (see the module) and remembers it as checked by this
 * loop. Call it only on a message that has been checked or that the loop built, as it is
 * appended. Returns the message. A message that cannot be frozen (a proxy refusing it) stays
 * untrusted, and is checked again if a run is resumed from it.
 *
 * @internal
 */
export const trust = <M extends Message>(message: M): M => {
  if (Checked.has(message)) return message
  try {
    const content: unknown = message.content
    if (isArray(content)) {
      for (let i = 0; i < content.length; i++) {
        const part: unknown = content[i]
        if (typeof part !== "object" || part === null) continue
        if ((part as { readonly type?: unknown }).type === "toolCall") {
          const args: unknown = (part as { readonly arguments?: unknown }).arguments
          if (typeof args === "object" && args !== null) freeze(args)
        }
        freeze(part)
      }
      freeze(content)
    }
    if (message.role === "assistant" && message.usage !== undefined) freeze(message.usage)
    freeze(message)
    // only a frozen message is branded (an engine that refused a private field on a frozen object
    // would throw here, and the message would merely be checked again)
    Checked.add(message)
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
export const isTrusted = (u: unknown): boolean => typeof u === "object" && u !== null && Checked.has(u)
