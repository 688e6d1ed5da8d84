/**
 * Permission modes and rules: what runs without asking, what never runs.
 *
 * **Modes.** `ask` (the default: read-only tools run, the rest asks), `read-only` (plan: only
 * read-only tools run; any other call is denied with a reason telling the model so), `accept-edits`
 * (`write` and `edit`, confined to the workspace, run; `bash` and MCP tools ask) and `yes`
 * (everything runs, except what a deny rule names).
 *
 * **Rules.** `tool` names every call of a tool (`read`, `grep`, or a glob over tool names such as
 * `everything__*` for an MCP server's tools); `tool(pattern)` narrows it:
 * - for `bash`, the pattern is a command's words: `bash(git status)` is exactly `git status`;
 *   `bash(npm test*)` is every command whose words start with `npm` and a word starting with
 *   `test`; `*` inside a word matches any characters. The command line is parsed (see
 *   `internal/Shell.ts`), and each simple command in it is checked: `npm test; rm -rf /` holds two,
 *   and an allow rule allows the line only when every one of them is allowed and the parse saw
 *   all it does (no computed word a rule did not cover, no write to a file, no function);
 * - for any other tool, the pattern is a glob (picomatch) over its `path` argument, relative to the
 *   workspace: `write(src/**)`, `edit(*.md)`, `read(.env)`.
 *
 * A deny rule wins over everything, `--yes` included. Deny rules are a guard against a model's
 * mistakes, not a sandbox: a command they may match but cannot be sure of (a computed word, a line
 * continuation, `sh -c` with a computed script) asks instead, in every mode; `sudo`, `env`,
 * `xargs`, `nohup`, `time`, `timeout`, `nice`, `command`, `exec` are looked through, and `sh -c`,
 * `bash -c` and `eval` scripts are parsed in turn.
 *
 * @since 0.1.0
 */
import * as nodePath from "node:path"
import picomatch from "picomatch"
import { PERMISSION_MODES as MODES } from "./internal/Names.ts"
import { parseCommand } from "./internal/Shell.ts"
import type { ParsedCommand, SimpleCommand, Word } from "./internal/Shell.ts"

/**
 * The permission modes, in the order `Shift+Tab` cycles through them.
 *
 * @since 0.1.0
 * @category models
 */
export const PERMISSION_MODES = MODES

/**
 * @since 0.1.0
 * @category models
 */
export type PermissionMode = (typeof PERMISSION_MODES)[number]

/**
 * One rule, as written, and where it came from (a config file, or the session's answers).
 *
 * @since 0.1.0
 * @category models
 */
export interface PermissionRule {
  /** The rule as written, e.g. `bash(npm test*)`. */
  readonly text: string
  /** A glob over tool names. */
  readonly tool: string
  /** For bash, the words to match; for other tools, a glob over the path. */
  readonly pattern: string | undefined
  /** Where the rule is from: a file's path, or `session`. */
  readonly source: string
}

/**
 * The rules in force.
 *
 * @since 0.1.0
 * @category models
 */
export interface PermissionRules {
  readonly allow: ReadonlyArray<PermissionRule>
  readonly deny: ReadonlyArray<PermissionRule>
}

/**
 * A rule that cannot be read (the message names it and says why).
 *
 * @since 0.1.0
 * @category errors
 */
export class RuleError {
  readonly _tag = "RuleError"
  readonly message: string
  constructor(message: string) {
    this.message = message
  }
}

/**
 * Reads a rule: `tool` or `tool(pattern)`.
 *
 * @since 0.1.0
 * @category rules
 */
export const parseRule = (text: string, source: string): PermissionRule | RuleError => {
  const match = /^\s*([A-Za-z0-9_.*-]+)\s*(?:\((.*)\))?\s*$/s.exec(text)
  if (match === null) {
    return new RuleError(
      `permission rule ${JSON.stringify(text)} (${source}) is not "tool" or "tool(pattern)", e.g. "bash(npm test*)"`
    )
  }
  const pattern = match[2]?.trim()
  if (pattern !== undefined && pattern.length === 0) {
    return new RuleError(`permission rule ${JSON.stringify(text)} (${source}) has an empty pattern: leave out "()"`)
  }
  return { text: text.trim(), tool: match[1]!, pattern, source }
}

/** `*` in `glob` matches any characters (and nothing else is special). */
const wildcard = (glob: string, value: string): boolean =>
  new RegExp(`^${glob.split("*").map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`, "s")
    .test(value)

/** How words match a pattern: surely, perhaps (a computed word might be what it names), or not. */
type Verdict = "yes" | "maybe" | "no"

const patternWords = (pattern: string): ReadonlyArray<string> => pattern.split(/\s+/).filter((w) => w.length > 0)

/** Whether `words` match the pattern's words (a last word ending in `*` lets any words follow). */
const matchWords = (pattern: ReadonlyArray<string>, words: ReadonlyArray<Word>): Verdict => {
  const last = pattern[pattern.length - 1] ?? ""
  const open = last.endsWith("*")
  const head = last === "*" ? pattern.slice(0, -1) : pattern
  if (open ? words.length < head.length : words.length !== head.length) return "no"
  let verdict: Verdict = "yes"
  for (let i = 0; i < head.length; i++) {
    const word = words[i]
    if (word === undefined) verdict = "maybe"
    else if (!wildcard(head[i]!, word)) return "no"
  }
  return verdict
}

/** Commands that run the rest of their words as a command. */
const WRAPPERS = new Set(["sudo", "doas", "env", "nohup", "time", "timeout", "nice", "command", "exec", "xargs"])

const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/

/**
 * The commands a deny rule also looks at: without the assignments before the name, by the basename
 * of a path (`/bin/rm`), and through wrappers (`sudo rm …`, `timeout 5 rm …`) with their options.
 */
const viewsForDeny = (words: ReadonlyArray<Word>): Array<ReadonlyArray<Word>> => {
  const views: Array<ReadonlyArray<Word>> = [words]
  let rest = words
  for (let guard = 0; guard < 8; guard++) {
    while (rest.length > 0 && rest[0] !== undefined && ASSIGNMENT.test(rest[0])) rest = rest.slice(1)
    const name = rest[0]
    if (name === undefined) break
    const base = nodePath.posix.basename(name)
    views.push(rest, [base, ...rest.slice(1)])
    if (!WRAPPERS.has(base)) break
    rest = rest.slice(1)
    // the wrapper's own options and values (timeout's duration, nice's -n 10, env's assignments)
    while (
      rest.length > 0 &&
      (rest[0] === undefined || rest[0].startsWith("-") || ASSIGNMENT.test(rest[0]) ||
        /^\d+(\.\d+)?[smhd]?$/.test(rest[0]))
    ) rest = rest.slice(1)
  }
  return views
}

/** The scripts a command runs in turn: `sh -c SCRIPT`, `bash -c SCRIPT`, `eval WORDS`. */
const innerScripts = (words: ReadonlyArray<Word>): Array<Word> => {
  const base = words[0] === undefined ? undefined : nodePath.posix.basename(words[0])
  if (base === "eval") return [words.slice(1).every((w) => w !== undefined) ? words.slice(1).join(" ") : undefined]
  if (base !== undefined && ["sh", "bash", "zsh", "dash", "ksh"].includes(base)) {
    const c = words.indexOf("-c")
    if (c > 0) return [words[c + 1]]
  }
  return []
}

/** How a deny rule's pattern matches one simple command (and the scripts it runs). */
const denyVerdict = async (pattern: ReadonlyArray<string>, command: SimpleCommand, depth = 0): Promise<Verdict> => {
  let verdict: Verdict = "no"
  for (const view of viewsForDeny(command.words)) {
    const m = matchWords(pattern, view)
    if (m === "yes") return "yes"
    if (m === "maybe") verdict = "maybe"
    for (const script of innerScripts(view)) {
      if (script === undefined || depth > 3) {
        verdict = "maybe"
        continue
      }
      const inner = await parseCommand(script)
      if (inner.unsure.length > 0) verdict = "maybe"
      for (const c of inner.commands) {
        const m = await denyVerdict(pattern, c, depth + 1)
        if (m === "yes") return "yes"
        if (m === "maybe") verdict = "maybe"
      }
    }
  }
  return verdict
}

/** A call's `path` argument, relative to the workspace, with `/` separators. */
const pathOf = (args: Record<string, unknown>): string | undefined => {
  const path = args["path"]
  if (typeof path !== "string" || path.length === 0) return undefined
  return nodePath.posix.normalize(path.replaceAll("\\", "/")).replace(/^\.\//, "")
}

/**
 * What the rules say of one call.
 *
 * @since 0.1.0
 * @category models
 */
export type RuleVerdict =
  | { readonly _tag: "denied"; readonly rule: PermissionRule }
  /** A deny rule may match (the call cannot be read well enough to be sure): ask, in every mode. */
  | { readonly _tag: "unsure"; readonly rule: PermissionRule; readonly why: string }
  | { readonly _tag: "allowed"; readonly rule: PermissionRule }
  | { readonly _tag: "none" }

/**
 * The rules' verdict on a call of `tool` with `args`: a deny rule first (surely matched: denied;
 * perhaps: unsure), then an allow rule that surely matches, else none.
 *
 * @since 0.1.0
 * @category rules
 */
export const checkRules = async (
  rules: PermissionRules,
  tool: string,
  args: Record<string, unknown>
): Promise<RuleVerdict> => {
  const command = tool === "bash" && typeof args["command"] === "string" ? args["command"] : undefined
  const parsed: ParsedCommand | undefined = command === undefined ? undefined : await parseCommand(command)
  const path = pathOf(args)
  let unsure: RuleVerdict | undefined
  for (const rule of rules.deny) {
    if (!wildcard(rule.tool, tool)) continue
    if (rule.pattern === undefined) return { _tag: "denied", rule }
    if (parsed !== undefined) {
      const pattern = patternWords(rule.pattern)
      for (const c of parsed.commands) {
        const v = await denyVerdict(pattern, c)
        if (v === "yes") return { _tag: "denied", rule }
        if (v === "maybe") unsure ??= { _tag: "unsure", rule, why: `a word of "${c.text}" is computed when it runs` }
      }
      // the line as bash reads it once its `\` + newline are joined
      if (command !== undefined && /\\\r?\n/.test(command)) {
        const joined = await parseCommand(command.replace(/\\\r?\n/g, ""))
        for (const c of joined.commands) {
          if ((await denyVerdict(pattern, c)) !== "no") {
            unsure ??= { _tag: "unsure", rule, why: "it continues a line with a backslash" }
          }
        }
      }
    } else if (path !== undefined && picomatch.isMatch(path, rule.pattern, { dot: true })) {
      return { _tag: "denied", rule }
    }
  }
  if (unsure !== undefined) return unsure
  for (const rule of rules.allow) {
    if (!wildcard(rule.tool, tool)) continue
    if (rule.pattern === undefined) return { _tag: "allowed", rule }
    if (parsed !== undefined) {
      if (parsed.unsure.length > 0 || parsed.commands.length === 0) continue
      // every simple command of the line is allowed by some rule for bash
      const bashRules = rules.allow.filter((r) => r.pattern !== undefined && wildcard(r.tool, tool))
      const all = parsed.commands.every((c) =>
        bashRules.some((r) => matchWords(patternWords(r.pattern!), c.words) === "yes")
      )
      if (all) return { _tag: "allowed", rule }
      break
    }
    if (path !== undefined && picomatch.isMatch(path, rule.pattern, { dot: true })) return { _tag: "allowed", rule }
  }
  return { _tag: "none" }
}

/**
 * The rules "always" offers for a bash command at the approval prompt: `exact`, one rule per simple
 * command of the line (its words as they are), and `prefix`, commands starting with the first two
 * words (the first one when there is one), when the line is one simple command the parse saw whole.
 *
 * @since 0.1.0
 * @category rules
 */
export const suggestBashRules = async (
  command: string
): Promise<{ readonly exact: ReadonlyArray<string>; readonly prefix: string | undefined }> => {
  const parsed = await parseCommand(command)
  const plain = parsed.unsure.length === 0 && parsed.commands.every((c) => c.words.every((w) => w !== undefined))
  if (!plain || parsed.commands.length === 0) return { exact: [], prefix: undefined }
  const quote = (w: string) => (/^[^\s()*]+$/.test(w) ? w : undefined)
  const exact: Array<string> = []
  for (const c of parsed.commands) {
    const words = c.words.map((w) => quote(w!))
    if (words.some((w) => w === undefined)) return { exact: [], prefix: undefined }
    exact.push(`bash(${words.join(" ")})`)
  }
  const only = parsed.commands.length === 1 ? parsed.commands[0]!.words as ReadonlyArray<string> : undefined
  const head = only?.slice(0, only.length > 1 ? 2 : 1).map(quote)
  const prefix = head === undefined || head.some((w) => w === undefined) || only!.length < 2 ?
    undefined :
    `bash(${head.join(" ")}*)`
  return { exact: [...new Set(exact)], prefix }
}

/**
 * The rules of a config's `permissions.allow` / `permissions.deny` lists, or the first that is wrong.
 *
 * @since 0.1.0
 * @category rules
 */
export const readRules = (
  lists: { readonly allow?: ReadonlyArray<string> | undefined; readonly deny?: ReadonlyArray<string> | undefined },
  source: string
): PermissionRules | RuleError => {
  const allow: Array<PermissionRule> = []
  const deny: Array<PermissionRule> = []
  for (const [texts, into] of [[lists.allow ?? [], allow], [lists.deny ?? [], deny]] as const) {
    for (const text of texts) {
      const rule = parseRule(text, source)
      if (rule instanceof RuleError) return rule
      into.push(rule)
    }
  }
  return { allow, deny }
}

/**
 * Tools whose calls `accept-edits` runs without asking: the coding tools that change files, which
 * the workspace confines.
 *
 * @since 0.1.0
 * @category constants
 */
export const EDIT_TOOLS: ReadonlySet<string> = new Set(["write", "edit"])
