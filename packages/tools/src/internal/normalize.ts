/**
 * Loose text matching for `edit`: a model's everyday slips (`\n` for a file's `\r\n`, trailing
 * whitespace it did not copy, ASCII quotes and dashes for typographic ones, a plain space for a
 * no-break space, another Unicode form of the same letter) normalised away on both sides, with a
 * map from every normalised position back to the original text, so that a match found in the
 * normalised text replaces exactly the original characters it covers and nothing around them.
 *
 * The normalisation, applied alike to the file and to `oldText`:
 * - `\r\n` becomes `\n` (a lone `\r` stays: line numbers stay those of `read`);
 * - spaces and tabs just before a line break are dropped;
 * - Unicode compatibility normalisation (NFKC) of each character with its combining marks, so
 *   `e` + U+0301 matches `é`, fullwidth `Ａ` matches `A`, `…` matches `...`;
 * - typographic quotes become ASCII (`‘ ’ ‚ ‛` → `'`, `“ ” „ ‟` → `"`), dashes and the minus sign
 *   become `-` (U+2010–U+2015, U+2212), and no-break and other spaces become a space (U+00A0,
 *   U+1680, U+2000–U+200A, U+202F, U+205F, U+3000).
 */

/** What a normalisation step changed, for the result's note. */
export type LooseKind = "lineEndings" | "trailingWhitespace" | "quotes" | "dashes" | "spaces" | "unicode"

/** The words for each kind, in the order they are listed. */
export const looseKindWords: Readonly<Record<LooseKind, string>> = {
  lineEndings: "line endings",
  trailingWhitespace: "trailing whitespace",
  quotes: "typographic quotes",
  dashes: "dashes",
  spaces: "no-break and other spaces",
  unicode: "Unicode forms"
}

const KINDS: ReadonlyArray<LooseKind> = ["lineEndings", "trailingWhitespace", "quotes", "dashes", "spaces", "unicode"]

const QUOTE_SINGLE = /[\u2018\u2019\u201A\u201B]/g
const QUOTE_DOUBLE = /[\u201C\u201D\u201E\u201F]/g
const DASH = /[\u2010-\u2015\u2212]/g
const SPACE = /[\u00A0\u1680\u2000-\u200A\u202F\u205F\u3000]/g
const MARK = /^\p{M}/u

const isQuote = (c: number): boolean => c >= 0x2018 && c <= 0x201f
const isDash = (c: number): boolean => (c >= 0x2010 && c <= 0x2015) || c === 0x2212
const isSpace = (c: number): boolean =>
  c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x202f || c === 0x205f || c === 0x3000

/** Whether a code unit may change when folded or normalised: a quick test before the exact one. */
const foldable = (c: number): boolean =>
  c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x205f) || c === 0x2212 || c === 0x3000

/** A space or tab, or one of the spaces folded to a space. */
const isBlank = (c: number): boolean => c === 0x20 || c === 0x09 || isSpace(c)

/** Whether the code unit at `i` starts a combining mark (which belongs to the character before it). */
const markAt = (text: string, i: number): boolean => text.charCodeAt(i) >= 0x300 && MARK.test(text.slice(i, i + 2))

const fold = (s: string): string =>
  s.replace(QUOTE_SINGLE, "'").replace(QUOTE_DOUBLE, "\"").replace(DASH, "-").replace(SPACE, " ")

/** The kind of change of a character with its marks (the index of its kind in `KINDS`). */
const kindOf = (original: string): number => {
  const c = original.charCodeAt(0)
  if (original.length > 1) return 5
  return isQuote(c) ? 2 : isDash(c) ? 3 : isSpace(c) ? 4 : 5
}

/**
 * A text in normalised form, with the way back to the original: a list of units, each a stretch
 * of the original that the normalised text shows otherwise (`origLength` characters at `orig`
 * became the `normLength` characters at `norm`, 0 when dropped). Everything between two units
 * is copied one to one.
 */
export class Normalized {
  readonly text: string
  private readonly norm: ReadonlyArray<number>
  private readonly normLength: ReadonlyArray<number>
  private readonly orig: ReadonlyArray<number>
  private readonly origLength: ReadonlyArray<number>
  private readonly kind: ReadonlyArray<number>
  constructor(
    text: string,
    units: {
      readonly norm: ReadonlyArray<number>
      readonly normLength: ReadonlyArray<number>
      readonly orig: ReadonlyArray<number>
      readonly origLength: ReadonlyArray<number>
      readonly kind: ReadonlyArray<number>
    }
  ) {
    this.text = text
    this.norm = units.norm
    this.normLength = units.normLength
    this.orig = units.orig
    this.origLength = units.origLength
    this.kind = units.kind
  }

  /** Whether normalising changed nothing. */
  get unchanged(): boolean {
    return this.norm.length === 0
  }

  /** The index of the last unit whose normalised start is at or before `p`, or -1. */
  private unitBefore(p: number): number {
    let lo = 0
    let hi = this.norm.length - 1
    let found = -1
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      if (this.norm[mid]! <= p) {
        found = mid
        lo = mid + 1
      } else {
        hi = mid - 1
      }
    }
    return found
  }

  /**
   * Where the normalised character at `p` comes from: inside unit `unit` (`inside`), or copied
   * one to one from the original position `at`.
   */
  private origin(p: number): { readonly unit: number; readonly at: number; readonly inside: boolean } {
    const u = this.unitBefore(p)
    if (u < 0) return { unit: u, at: p, inside: false }
    const normEnd = this.norm[u]! + this.normLength[u]!
    if (p < normEnd) return { unit: u, at: this.orig[u]!, inside: true }
    return { unit: u, at: this.orig[u]! + this.origLength[u]! + (p - normEnd), inside: false }
  }

  /**
   * The original range `[start, end)` that the normalised characters `[from, to)` come from, or
   * undefined when either end falls inside a unit (a match of `.` inside the `...` of an `…`).
   */
  span(from: number, to: number): { readonly start: number; readonly end: number } | undefined {
    const first = this.origin(from)
    if (first.inside && from !== this.norm[first.unit]) return undefined
    const last = this.origin(to - 1)
    if (last.inside && to !== this.norm[last.unit]! + this.normLength[last.unit]!) return undefined
    return {
      start: first.at,
      end: last.inside ? this.orig[last.unit]! + this.origLength[last.unit]! : last.at + 1
    }
  }

  /** How many units of each kind lie inside the original range `[start, end)`. */
  kindsIn(start: number, end: number): Map<LooseKind, number> {
    const counts = new Map<LooseKind, number>()
    for (let u = 0; u < this.orig.length && this.orig[u]! < end; u++) {
      if (this.orig[u]! >= start && this.orig[u]! + this.origLength[u]! <= end) {
        const kind = KINDS[this.kind[u]!]!
        counts.set(kind, (counts.get(kind) ?? 0) + 1)
      }
    }
    return counts
  }
}

/** `text` normalised (see the module's comment), in time linear in its length. */
export const normalize = (text: string): Normalized => {
  const parts: Array<string> = []
  const units = {
    norm: [] as Array<number>,
    normLength: [] as Array<number>,
    orig: [] as Array<number>,
    origLength: [] as Array<number>,
    kind: [] as Array<number>
  }
  const n = text.length
  let normAt = 0
  let copyFrom = 0
  const emit = (orig: number, origEnd: number, out: string, kind: number) => {
    if (orig > copyFrom) {
      parts.push(text.slice(copyFrom, orig))
      normAt += orig - copyFrom
    }
    parts.push(out)
    units.norm.push(normAt)
    units.normLength.push(out.length)
    units.orig.push(orig)
    units.origLength.push(origEnd - orig)
    units.kind.push(kind)
    normAt += out.length
    copyFrom = origEnd
  }
  // a character with its combining marks, normalised on its own (or, in a line already in NFKC,
  // only folded); returns where it ends
  const cluster = (at: number, stable: boolean): number => {
    let end = at + (text.codePointAt(at)! > 0xffff ? 2 : 1)
    while (end < n && markAt(text, end)) end += text.codePointAt(end)! > 0xffff ? 2 : 1
    if (stable && end === at + 1) {
      const c = text.charCodeAt(at)
      const folded = isQuote(c) ? (c <= 0x201b ? "'" : "\"") : isDash(c) ? "-" : isSpace(c) ? " " : undefined
      if (folded !== undefined) emit(at, end, folded, isQuote(c) ? 2 : isDash(c) ? 3 : 4)
      return end
    }
    const original = text.slice(at, end)
    const out = fold(stable ? original : original.normalize("NFKC"))
    if (out !== original) emit(at, end, out, kindOf(original))
    return end
  }
  let lineStart = 0
  while (lineStart < n) {
    let lineEnd = text.indexOf("\n", lineStart)
    const broken = lineEnd >= 0
    if (!broken) lineEnd = n
    // the line's content ends before its \r\n; blanks just before a line break trail it
    const crlf = broken && lineEnd > lineStart && text.charCodeAt(lineEnd - 1) === 0x0d
    const contentEnd = crlf ? lineEnd - 1 : lineEnd
    let trailStart = contentEnd
    if (broken) { while (trailStart > lineStart && isBlank(text.charCodeAt(trailStart - 1))) trailStart-- }
    let ascii = true
    for (let k = lineStart; k < trailStart; k++) {
      if (text.charCodeAt(k) >= 0x80) {
        ascii = false
        break
      }
    }
    if (!ascii) {
      // lines already in NFKC (most of them) only have their quotes, dashes and spaces folded
      const line = text.slice(lineStart, trailStart)
      const stable = line.normalize("NFKC") === line
      for (let k = lineStart; k < trailStart;) {
        const c = text.charCodeAt(k)
        if (stable ? !foldable(c) : c < 0x80 && !(k + 1 < trailStart && markAt(text, k + 1))) k++
        else k = cluster(k, stable)
      }
    }
    if (trailStart < contentEnd) emit(trailStart, contentEnd, "", 1)
    if (crlf) emit(contentEnd, lineEnd + 1, "\n", 0)
    lineStart = lineEnd + 1
  }
  if (units.norm.length === 0) return new Normalized(text, units)
  if (copyFrom < n) parts.push(text.slice(copyFrom))
  return new Normalized(parts.join(""), units)
}

/** A place where `oldText` matches: the original range it covers, and whether it matched exactly. */
export interface Place {
  readonly start: number
  readonly end: number
  readonly exact: boolean
}

/** Start positions of `needle` in `text`, overlapping ones included (`aba` occurs twice in `ababa`), up to `cap`. */
export const exactPositions = (text: string, needle: string, cap: number): Array<number> => {
  const positions: Array<number> = []
  for (let at = text.indexOf(needle); at >= 0 && positions.length < cap; at = text.indexOf(needle, at + 1)) {
    positions.push(at)
  }
  return positions
}

/** Whether an exact occurrence of `needle` covers `[start, end)` or lies inside it: the same place. */
const coveredByExact = (text: string, needle: string, start: number, end: number): boolean => {
  // an exact start p with [p, p + length) inside [start, end) or around it: p between these two
  const lo = Math.max(0, Math.min(start, end - needle.length))
  const hi = Math.max(start, end - needle.length)
  return text.slice(lo, hi + needle.length).includes(needle)
}

/**
 * The places where `needle` matches `file` loosely but not exactly (a loose match that is the same
 * place as an exact one is not counted again), up to `cap`.
 */
export const loosePlaces = (
  text: string,
  file: Normalized,
  needle: string,
  wanted: Normalized,
  cap: number
): Array<Place> => {
  const places: Array<Place> = []
  if (wanted.text.length === 0 || (file.unchanged && wanted.unchanged)) return places
  const length = wanted.text.length
  for (
    let at = file.text.indexOf(wanted.text);
    at >= 0 && places.length < cap;
    at = file.text.indexOf(wanted.text, at + 1)
  ) {
    const span = file.span(at, at + length)
    if (span === undefined || coveredByExact(text, needle, span.start, span.end)) continue
    places.push({ start: span.start, end: span.end, exact: false })
  }
  return places
}

/**
 * Which kinds of normalisation a loose match needed: those whose count differs between the
 * matched original text and `oldText` (both have CRLF: not a difference), or, when every count
 * agrees, every kind either has.
 */
export const kindsUsed = (
  file: Normalized,
  place: Place,
  wanted: Normalized,
  needleLength: number
): Array<LooseKind> => {
  const inFile = file.kindsIn(place.start, place.end)
  const inNeedle = wanted.kindsIn(0, needleLength)
  const all = (Object.keys(looseKindWords) as Array<LooseKind>).filter((k) => inFile.has(k) || inNeedle.has(k))
  const differing = all.filter((k) => (inFile.get(k) ?? 0) !== (inNeedle.get(k) ?? 0))
  return differing.length > 0 ? differing : all
}
