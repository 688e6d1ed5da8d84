/**
 * Hands a transport's incoming messages to the SDK one microtask apart, in order.
 *
 * The SDK runs notification handlers (progress, `tools/list_changed`) a microtask after a
 * notification arrives, but settles a request as soon as its response arrives. When a server
 * writes a progress notification and then the result, and both are read in one chunk, the result
 * wins: the request's progress handler is gone before the notification is handled, and the last
 * progress (or a list change announced before the result) is lost. One microtask between
 * messages lets each notification's handler run before the next message.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"

export const orderedDelivery = (inner: Transport): Transport => {
  let chain: Promise<void> = Promise.resolve()
  const later = (f: () => void) => {
    chain = chain.then(f)
  }
  const outer: Transport = {
    start: () => inner.start(),
    send: (message, options) => inner.send(message, options),
    close: () => inner.close(),
    get sessionId() {
      return inner.sessionId
    },
    setProtocolVersion: (version) => inner.setProtocolVersion?.(version)
  }
  inner.onmessage = (message, extra) => later(() => outer.onmessage?.(message, extra))
  inner.onclose = () => later(() => outer.onclose?.())
  inner.onerror = (error) => outer.onerror?.(error)
  return outer
}
