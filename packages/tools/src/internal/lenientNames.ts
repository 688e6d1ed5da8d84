/**
 * Lenient file names for reading: a name the model typed that does not exist is looked up among
 * the directory's entries with the differences a person cannot see made equal. macOS writes
 * screenshot names with U+202F (narrow no-break space) before AM/PM and a curly apostrophe in
 * "Capture d’écran"; names arrive in NFD from macOS archives and in NFC from a keyboard. The
 * lookup only ever picks a name the directory lists (read through the directory as opened), and
 * only when exactly one entry matches; the walk then treats it as if the model had typed it.
 */

/** Spaces a name may hold that look like a space. */
const SPACES = /[\u00A0\u2000-\u200A\u202F\u205F\u3000]/g
/** Apostrophes and single quotes that look like `'`. */
const APOSTROPHES = /[\u2018\u2019\u201B\u02BC\u2032]/g
/** Double quotes that look like `"`. */
const QUOTES = /[\u201C\u201D\u201F\u2033]/g

/** A name with the invisible differences made equal: NFC, spaces, apostrophes and quotes. */
export const nameKey = (name: string): string =>
  name.normalize("NFC").replace(SPACES, " ").replace(APOSTROPHES, "'").replace(QUOTES, "\"")

const utf8 = new TextDecoder("utf-8", { fatal: true })

/**
 * The entries of a directory listing that match `name` leniently, not `name` itself, sorted;
 * entries that are not valid UTF-8 are skipped (their decoded name would not reach them).
 */
export const lenientMatches = (name: string, entries: ReadonlyArray<Uint8Array>): Array<string> => {
  const wanted = nameKey(name)
  const found: Array<string> = []
  for (const raw of entries) {
    let entry: string
    // TextDecoder's only report of invalid input is an exception
    try {
      entry = utf8.decode(raw)
    } catch {
      continue
    }
    if (entry !== name && nameKey(entry) === wanted) found.push(entry)
  }
  // in one order whatever the file system lists first, so a refusal names them the same way each time
  return found.sort()
}

const named: Readonly<Record<string, string>> = {
  "\u00A0": "no-break space",
  "\u2007": "figure space",
  "\u2009": "thin space",
  "\u202F": "narrow no-break space",
  "\u3000": "ideographic space",
  "\u2018": "left single quotation mark",
  "\u2019": "right single quotation mark (curly apostrophe)",
  "\u02BC": "modifier letter apostrophe",
  "\u201C": "left double quotation mark",
  "\u201D": "right double quotation mark"
}

const codePoint = (c: string): string => `U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`
const label = (c: string): string => `${codePoint(c)}${named[c] === undefined ? "" : ` (${named[c]})`}`
const plain = (c: string): string => (nameKey(c) === " " ? "a space" : `\`${nameKey(c)}\``)
const special = (c: string): boolean => nameKey(c) !== c && c.length === 1

/** A name in quotes with every space and quote that is not ASCII written as `\uXXXX`, so it shows. */
export const visible = (name: string): string =>
  `"${[...name].map((c) => (special(c) ? `\\u${codePoint(c).slice(2)}` : c)).join("")}"`

/** How the name on disk differs from the one asked for, in words. */
export const describeDifference = (asked: string, found: string): string => {
  const parts: Array<string> = []
  const inFound = new Set([...found].filter(special))
  const inAsked = new Set([...asked].filter(special))
  for (const c of inFound) if (!inAsked.has(c)) parts.push(`${label(c)} where the path has ${plain(c)}`)
  for (const c of inAsked) if (!inFound.has(c)) parts.push(`${plain(c)} where the path has ${label(c)}`)
  if (found.normalize("NFC") !== found || asked.normalize("NFC") !== asked) {
    parts.push(
      found.normalize("NFC") === found ?
        "composed letters (NFC) where the path has decomposed ones (NFD)" :
        "decomposed letters (NFD) where the path has composed ones (NFC)"
    )
  }
  return parts.length === 0 ? "a name that differs only in invisible characters" : parts.join(", ")
}

/** The note of a lenient lookup, for the model: what was asked, what was used, how they differ. */
export const lenientNote = (
  input: string,
  shown: string,
  renamed: ReadonlyArray<{ readonly asked: string; readonly found: string }>
): string | undefined => {
  if (renamed.length === 0) return undefined
  const how = renamed.map((r) => describeDifference(r.asked, r.found)).join("; ")
  return `[${JSON.stringify(input)} does not exist; used ${visible(shown)}, the only name that matches it: ${how}.]`
}
