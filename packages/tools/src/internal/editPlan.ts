/**
 * What `edit` does to a file's text: find every place `oldText` matches, exactly or loosely (see
 * `normalize.ts`), decide whether the edit is unambiguous, and build the new text, changing
 * nothing outside the replaced places.
 */
import { ToolError } from "@agentloop/core"
import { HINT_MAX_CHARS, nearMatch } from "./nearMatch.ts"
import { exactPositions, kindsUsed, looseKindWords, loosePlaces, normalize } from "./normalize.ts"
import type { LooseKind, Place } from "./normalize.ts"

/** Occurrences counted at most: enough to say "not unique" without scanning a huge file for every one. */
export const COUNT_CAP = 1000

/** Line numbers named in an "occurs N times" error at most. */
const LINES_NAMED = 5

/** The outcome of a planned edit. */
export interface EditPlan {
  readonly text: string
  readonly replacements: number
  /** Places matched loosely, and which normalisations they needed. */
  readonly loose: { readonly replacements: number; readonly kinds: ReadonlyArray<LooseKind> } | undefined
  /** Whether the replacement's line breaks were written as the file's `\r\n`. */
  readonly crlfKept: boolean
}

/** Replaces the first or every non-overlapping occurrence, left to right, in linear time. */
const replaceExact = (text: string, needle: string, replacement: string, all: boolean): EditPlan => {
  const parts: Array<string> = []
  let from = 0
  let count = 0
  for (let at = text.indexOf(needle); at >= 0; at = all ? text.indexOf(needle, from) : -1) {
    parts.push(text.slice(from, at), replacement)
    from = at + needle.length
    count++
  }
  parts.push(text.slice(from))
  return { text: parts.join(""), replacements: count, loose: undefined, crlfKept: false }
}

/** Whether the original text a loose match covers breaks its lines with `\r\n` only. */
const crlfOnly = (matched: string): boolean => matched.includes("\r\n") && !/(^|[^\r])\n/.test(matched)

/** 1-based line numbers of sorted offsets, in one pass. */
const lineNumbers = (text: string, offsets: ReadonlyArray<number>): Array<number> => {
  const lines: Array<number> = []
  let line = 1
  let from = 0
  for (const offset of offsets) {
    for (let at = text.indexOf("\n", from); at >= 0 && at < offset; at = text.indexOf("\n", at + 1)) {
      line++
      from = at + 1
    }
    lines.push(line)
  }
  return lines
}

const listed = (numbers: ReadonlyArray<number>, more: boolean): string =>
  numbers.length === 1 ?
    `${numbers[0]}` :
    more ?
    `${numbers.join(", ")} and more` :
    `${numbers.slice(0, -1).join(", ")} and ${numbers[numbers.length - 1]}`

const LOOSELY = "once line endings, trailing whitespace, typographic quotes, dashes, special spaces and Unicode " +
  "forms are normalised"

/**
 * Plans replacing `oldText` by `newText` in `text` (a file shown as `shown`), or throws the
 * `ToolError` the model should see: not found (with the closest place), or found more than once.
 */
export const planEdit = (text: string, oldText: string, newText: string, all: boolean, shown: string): EditPlan => {
  const file = normalize(text)
  const wanted = normalize(oldText)
  const cap = all ? Number.POSITIVE_INFINITY : COUNT_CAP
  const loose = loosePlaces(text, file, oldText, wanted, cap)
  if (all && loose.length === 0) {
    const plan = replaceExact(text, oldText, newText, true)
    if (plan.replacements > 0) return plan
  }
  const exact = all ? [] : exactPositions(text, oldText, COUNT_CAP)
  if (!all) {
    const total = exact.length + loose.length
    if (total > 1) throw occursMore(text, oldText, exact, loose, shown)
    if (exact.length === 1) return replaceExact(text, oldText, newText, false)
  }
  if (loose.length === 0) throw notFound(text, file.text, wanted.text, shown)
  // every exact place (overlapping ones too) and every loose one, taken left to right without overlaps
  const places: Array<Place> = all ?
    [
      ...exactPositions(text, oldText, Number.POSITIVE_INFINITY).map((at) => ({
        start: at,
        end: at + oldText.length,
        exact: true
      })),
      ...loose
    ].sort((a, b) => a.start - b.start || a.end - b.end) :
    loose
  const parts: Array<string> = []
  const kinds = new Set<LooseKind>()
  let from = 0
  let count = 0
  let looseCount = 0
  let crlfKept = false
  for (const place of places) {
    if (place.start < from) continue
    parts.push(text.slice(from, place.start))
    if (place.exact) {
      parts.push(newText)
    } else {
      const matched = text.slice(place.start, place.end)
      const crlf = crlfOnly(matched) && !oldText.includes("\r")
      crlfKept ||= crlf && /\n/.test(newText)
      parts.push(crlf ? newText.replace(/\r?\n/g, "\r\n") : newText)
      for (const kind of kindsUsed(file, place, wanted, oldText.length)) kinds.add(kind)
      looseCount++
    }
    from = place.end
    count++
  }
  parts.push(text.slice(from))
  const order = Object.keys(looseKindWords) as Array<LooseKind>
  return {
    text: parts.join(""),
    replacements: count,
    loose: { replacements: looseCount, kinds: order.filter((k) => kinds.has(k)) },
    crlfKept
  }
}

const occursMore = (
  text: string,
  oldText: string,
  exact: ReadonlyArray<number>,
  loose: ReadonlyArray<Place>,
  shown: string
): ToolError => {
  const places = [
    ...exact.map((at) => ({ start: at, end: at + oldText.length, exact: true })),
    ...loose
  ].sort((a, b) => a.start - b.start)
  const total = places.length
  const capped = exact.length >= COUNT_CAP || loose.length >= COUNT_CAP
  const overlapping = places.some((p, i) => i > 0 && p.start < places[i - 1]!.end)
  const lines = [...new Set(lineNumbers(text, places.slice(0, LINES_NAMED * 4).map((p) => p.start)))]
  const at = `at line${lines.length === 1 ? "" : "s"} ${
    listed(lines.slice(0, LINES_NAMED), lines.length > LINES_NAMED)
  }`
  const how = loose.length === 0 ?
    "" :
    `: ${exact.length === 0 ? "none" : exact.length} exactly, ${loose.length} ${LOOSELY}`
  return new ToolError({
    message: `oldText occurs ${capped ? `at least ${total}` : total} times in ${shown}` +
      (loose.length > 0 ? ", counting loose matches" : "") +
      ` (${at}${how}${overlapping ? "; overlapping occurrences count" : ""}); include more surrounding text to ` +
      "make it unique, or set replaceAll to true"
  })
}

const notFound = (text: string, normalizedText: string, normalizedNeedle: string, shown: string): ToolError => {
  let hint: string | undefined
  if (text.length <= HINT_MAX_CHARS) {
    const originalLines = text.split("\n")
    const normalizedLines = normalizedText.split("\n")
    if (originalLines.length === normalizedLines.length) {
      hint = nearMatch(originalLines, normalizedLines, normalizedNeedle)
    }
  }
  return new ToolError({
    message: `oldText was not found in ${shown}, not even ${LOOSELY}. ` +
      `${hint ?? "No line of the file is close to it."} Read the file again and copy the text exactly, ` +
      "including whitespace and indentation."
  })
}
