/**
 * A bash command line as the permission rules see it: every simple command in it (in lists,
 * pipelines, subshells, loops, command substitutions...), each as its words, parsed by tree-sitter's
 * bash grammar (`web-tree-sitter` + `tree-sitter-bash`, the grammar's own WebAssembly build), never
 * by a regular expression over the text. What the parse cannot pin down is said, so a rule never
 * allows what it did not see: a word whose value is only known when it runs (`$X`, `$(…)`), a
 * write to a file (`> out`), a function definition, a line continuation, text that does not parse.
 *
 * The parser loads on the first command that needs it (about 20 ms), not with the command line.
 */
import { createRequire } from "node:module"
import type { Node, Parser } from "web-tree-sitter"

/** One word of a command: its text after quote removal, or `undefined` when it is computed when run. */
export type Word = string | undefined

/** One simple command: its words (assignments first, then the name and its arguments). */
export interface SimpleCommand {
  readonly words: ReadonlyArray<Word>
  /** The command's text as written. */
  readonly text: string
}

/** What a command line holds. */
export interface ParsedCommand {
  readonly commands: ReadonlyArray<SimpleCommand>
  /** Why the words may not be all it does (empty: they are). A rule allows only a line with none. */
  readonly unsure: ReadonlyArray<string>
}

let parser: Promise<Parser> | undefined

const load = (): Promise<Parser> =>
  parser ??= (async () => {
    const { Language, Parser } = await import("web-tree-sitter")
    await Parser.init()
    const wasm = createRequire(import.meta.url).resolve("tree-sitter-bash/tree-sitter-bash.wasm")
    const bash = await Language.load(wasm)
    const made = new Parser()
    made.setLanguage(bash)
    return made
  })()

/** `\x` escapes of an unquoted word (a backslash keeps the next character). */
const unescapeBare = (text: string) => text.replace(/\\(.)/gs, "$1")

/** The value of a word node, or `undefined` when it is computed when the command runs. */
const wordOf = (node: Node): Word => {
  switch (node.type) {
    case "word":
    case "number":
      return unescapeBare(node.text)
    case "raw_string":
      return node.text.slice(1, -1)
    case "string": {
      // "…" with no expansion inside: its text, with \" \\ \$ \` unescaped
      if (node.namedChildren.some((c) => c !== null && c.type !== "string_content")) return undefined
      return node.text.slice(1, -1).replace(/\\(["\\$`])/g, "$1").replace(/\\\n/g, "")
    }
    case "concatenation": {
      let out = ""
      for (const part of node.namedChildren) {
        if (part === null) continue
        const value = wordOf(part)
        if (value === undefined) return undefined
        out += value
      }
      return out
    }
    case "command_name": {
      const inner = node.namedChild(0)
      return inner === null ? unescapeBare(node.text) : wordOf(inner)
    }
    default:
      // $x, ${x}, $(…), `…`, $((…)), <(…), $'…', globs with brace expansion...
      return undefined
  }
}

const WRITES = new Set([">", ">>", "&>", "&>>", ">|", "<>"])

/** Walks the tree: collects the simple commands and what makes the words not the whole story. */
const walk = (node: Node, commands: Array<SimpleCommand>, unsure: Set<string>) => {
  if (node.isError || node.isMissing) unsure.add("it does not parse as bash")
  switch (node.type) {
    case "command": {
      const words: Array<Word> = []
      for (const child of node.namedChildren) {
        if (child === null) continue
        if (child.type === "variable_assignment") {
          const value = child.childForFieldName("value")
          const name = child.childForFieldName("name")?.text ?? ""
          const assigned = value === null ? "" : wordOf(value)
          words.push(assigned === undefined ? undefined : `${name}=${assigned}`)
        } else if (!/redirect$|^comment$/.test(child.type)) {
          words.push(wordOf(child))
        }
      }
      const name = node.childForFieldName("name")
      if (name !== null && wordOf(name) === undefined) unsure.add("the command's name is computed when it runs")
      commands.push({ words, text: node.text })
      break
    }
    case "file_redirect": {
      const op = node.children.find((c) => c !== null && !c.isNamed)?.text ?? ""
      const destination = node.childForFieldName("destination")
      const target = destination === null ? undefined : wordOf(destination)
      if (WRITES.has(op) && target !== "/dev/null" && !/^\d+$/.test(target ?? "")) {
        unsure.add("it writes to a file (a redirection)")
      }
      break
    }
    case "function_definition":
      unsure.add("it defines a function")
      break
  }
  for (const child of node.namedChildren) if (child !== null) walk(child, commands, unsure)
}

/**
 * Parses a bash command line (see the module's description). Never fails: text that does not
 * parse yields the commands that did, with the reason in `unsure`.
 */
export const parseCommand = async (text: string): Promise<ParsedCommand> => {
  const p = await load()
  const tree = p.parse(text)
  const commands: Array<SimpleCommand> = []
  const unsure = new Set<string>()
  if (tree === null) return { commands, unsure: ["it does not parse as bash"] }
  try {
    walk(tree.rootNode, commands, unsure)
  } finally {
    tree.delete()
  }
  // bash joins `\` + newline before it reads words; the grammar keeps them apart

  return { commands, unsure: [...unsure] }
}
