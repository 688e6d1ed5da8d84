/**
 * The hint of `edit`'s "not found": where in the file the text the model meant most likely is,
 * with a line number and a short excerpt, found in time linear in the file's size.
 *
 * Lines are compared after the loose normalisation (see `normalize.ts`) with runs of whitespace
 * made one space and the ends trimmed. First, every line of `oldText` that equals a line of the
 * file votes for the place its position implies; the place with the most (longest) equal lines
 * wins, and the hint names the first line there that differs. When no line is equal, the file's
 * line most like `oldText`'s longest line (by the share of common pairs of characters) is named.
 */
import { cutAt } from "./text.ts"

/** Past this many characters the file gets no hint (building one would cost more than it helps). */
export const HINT_MAX_CHARS = 4_000_000
/** Votes counted at most, so a file of ten thousand `}` lines stays fast. */
const MAX_VOTES = 200_000
/** Characters of a line shown in a hint. */
const EXCERPT_CHARS = 80
/** The least share of common character pairs for a line to be named when no line is equal. */
const MIN_SIMILARITY = 0.5

const key = (line: string): string => line.replace(/\s+/g, " ").trim()

/** A line as shown in a hint: quoted as JSON (so tabs and invisible characters show), cut short. */
const excerpt = (line: string): string => {
  const shown = line.endsWith("\r") ? line.slice(0, -1) : line
  return shown.length > EXCERPT_CHARS ?
    `${JSON.stringify(cutAt(shown, EXCERPT_CHARS)).slice(0, -1)}…"` :
    JSON.stringify(shown)
}

/** The pairs of adjacent characters of `s`, each as one number, with how often each occurs. */
const pairs = (s: string): Map<number, number> => {
  const counts = new Map<number, number>()
  for (let i = 0; i + 1 < s.length; i++) {
    const pair = s.charCodeAt(i) * 0x10000 + s.charCodeAt(i + 1)
    counts.set(pair, (counts.get(pair) ?? 0) + 1)
  }
  return counts
}

/**
 * The Sørensen–Dice coefficient of two strings' character pairs, from 0 (nothing common) to 1;
 * `used` is scratch space, cleared here.
 */
const similarity = (a: Map<number, number>, aSize: number, b: string, used: Map<number, number>): number => {
  if (aSize === 0 || b.length < 2) return 0
  used.clear()
  let common = 0
  for (let i = 0; i + 1 < b.length; i++) {
    const pair = b.charCodeAt(i) * 0x10000 + b.charCodeAt(i + 1)
    const count = used.get(pair) ?? 0
    if (count < (a.get(pair) ?? 0)) {
      common++
      used.set(pair, count + 1)
    }
  }
  return (2 * common) / (aSize + b.length - 1)
}

/**
 * A sentence naming the place in the file closest to `oldText`, or undefined when nothing is
 * close. `originalLines` are the file's lines as they are, `normalizedLines` the same lines
 * normalised (as many, one for one).
 */
export const nearMatch = (
  originalLines: ReadonlyArray<string>,
  normalizedLines: ReadonlyArray<string>,
  normalizedNeedle: string
): string | undefined => {
  const needleLines = normalizedNeedle.split("\n")
  if (needleLines.length > 1 && needleLines[needleLines.length - 1] === "") needleLines.pop()
  const needleKeys = needleLines.map(key)
  const where = new Map<string, Array<number>>()
  needleKeys.forEach((k, j) => {
    if (k.length > 0) where.set(k, [...(where.get(k) ?? []), j])
  })
  const fileKeys = normalizedLines.map(key)
  const votes = new Map<number, number>()
  let counted = 0
  for (let i = 0; i < fileKeys.length && counted < MAX_VOTES; i++) {
    const js = where.get(fileKeys[i]!)
    if (js === undefined) continue
    for (const j of js) {
      votes.set(i - j, (votes.get(i - j) ?? 0) + fileKeys[i]!.length)
      counted++
    }
  }
  let best: number | undefined
  let bestScore = 0
  for (const [start, score] of votes) {
    if (score > bestScore || (score === bestScore && best !== undefined && start < best)) {
      best = start
      bestScore = score
    }
  }
  if (best !== undefined) {
    const start = best
    const equal = needleKeys.filter((k, j) => fileKeys[start + j] === k).length
    const differs = needleKeys.findIndex((k, j) => fileKeys[start + j] !== k)
    const first = Math.max(start, 0) + 1
    if (differs < 0) {
      // every line equal once whitespace runs are one space: the difference is in the whitespace
      const j = needleLines.findIndex((line, j) => normalizedLines[start + j] !== line)
      const at = start + Math.max(j, 0)
      return `The text at line ${first} differs from oldText only in whitespace inside lines ` +
        `(indentation or spacing): line ${at + 1} is ${excerpt(originalLines[at] ?? "")}` +
        (j >= 0 ? ` where oldText has ${excerpt(needleLines[j]!)}` : "") + "."
    }
    const at = start + differs
    const fileLine = at >= 0 && at < originalLines.length ?
      `line ${at + 1} is ${excerpt(originalLines[at]!)}` :
      `the file ${at < 0 ? "starts" : "ends"} there`
    return `The closest text starts at line ${first} (${equal} of ${needleKeys.length} lines the same): ` +
      `${fileLine} where oldText has ${excerpt(needleLines[differs]!)}.`
  }
  // no line is equal: the file's line most like oldText's longest line
  const longest = needleKeys.reduce((a, b, j) => (b.length > needleKeys[a]!.length ? j : a), 0)
  const wanted = needleKeys[longest]!
  if (wanted.length < 3) return undefined
  const wantedPairs = pairs(wanted)
  const scratch = new Map<number, number>()
  let bestLine = -1
  let bestSimilarity = MIN_SIMILARITY
  for (let i = 0; i < fileKeys.length; i++) {
    const line = fileKeys[i]!
    if (line.length < wanted.length / 3 || line.length > wanted.length * 3) continue
    const s = similarity(wantedPairs, wanted.length - 1, line, scratch)
    if (s > bestSimilarity) {
      bestSimilarity = s
      bestLine = i
    }
  }
  if (bestLine < 0) return undefined
  return `The most similar line is line ${bestLine + 1}: ${excerpt(originalLines[bestLine]!)}` +
    (needleKeys.length > 1 ? ` (like oldText's line ${excerpt(needleLines[longest]!)})` : "") + "."
}
