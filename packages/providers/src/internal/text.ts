/** Small text helpers for messages: cutting long provider text and removing secrets. */

/** `text` cut to `max` characters. */
export const clip = (text: string, max = 500): string => (text.length > max ? `${text.slice(0, max)}…` : text)

/**
 * The forms a credential can take in a server's answer: the value itself, the token of an
 * `authorization` value (`Bearer sk-…` → `sk-…`), and the value as JSON and as a URL would
 * escape it. Longest first, so that a longer form is replaced before a shorter one inside it.
 */
export const secretForms = (values: ReadonlyArray<string>): ReadonlyArray<string> => {
  const forms = new Set<string>()
  for (const value of values) {
    const trimmed = value.trim()
    if (trimmed.length === 0) continue
    const token = /^[A-Za-z][A-Za-z0-9_-]*\s+(\S.*)$/.exec(trimmed)?.[1]
    for (const form of token === undefined ? [trimmed] : [trimmed, token.trim()]) {
      forms.add(form)
      forms.add(JSON.stringify(form).slice(1, -1))
      forms.add(encodeURIComponent(form))
    }
  }
  return [...forms].filter((form) => form.length > 0).sort((a, b) => b.length - a.length)
}

/** `text` with every secret replaced by `[redacted]`. */
export const scrub = (text: string, secrets: ReadonlyArray<string>): string =>
  secrets.reduce((out, secret) => (secret.length > 0 ? out.split(secret).join("[redacted]") : out), text)

/** Makes the cleaner of one provider: text from outside scrubbed of `secrets`, then clipped to `max`. */
export const makeCleaner = (secrets: ReadonlyArray<string>) => (text: string, max = 500): string =>
  clip(scrub(text, secrets), max)

/** Scrubs and clips text that came from outside (a server's answer, a socket error). */
export type Cleaner = ReturnType<typeof makeCleaner>
