/** Small text helpers for messages: cutting long provider text and removing secrets. */

/** `text` cut to `max` characters. */
export const clip = (text: string, max = 500): string => (text.length > max ? `${text.slice(0, max)}…` : text)

/** `text` with every secret replaced by `[redacted]`. */
export const scrub = (text: string, secrets: ReadonlyArray<string>): string =>
  secrets.reduce((out, secret) => (secret.length > 0 ? out.split(secret).join("[redacted]") : out), text)
