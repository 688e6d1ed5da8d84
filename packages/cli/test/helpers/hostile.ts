/**
 * A hostile session for the export tests: the viewer's fixture session with text that tries to end
 * the page's JSON block, start a script and add an element with a handler, in a prompt and in a
 * tool's result.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { makeWorkspace } from "./agent.ts"

const fixture = (name: string) =>
  readFileSync(fileURLToPath(new URL(`../fixtures/view/${name}`, import.meta.url)), "utf8")

/** What an attacker puts in a message: end the JSON block, run a script, and an element with a handler. */
export const ATTACK = `</script><script>window.pwned = 1; document.title = "pwned"</script>` +
  `<img src=x onerror="window.pwned = 2"><!-- \u2028`

/** The viewer's fixture session with the attack in its first prompt and in a tool's result. */
export const hostileSession = (): string =>
  fixture("coding-session.jsonl")
    .replaceAll("Fix the failing test in src/math.js", `Fix it ${ATTACK.replaceAll("\"", "\\\"")}`)
    .replace("export const add = (a, b) => a - b\\n", `${ATTACK.replaceAll("\"", "\\\"")}\\n`)

/** A workspace holding the hostile session as `.agentloop/sessions/hostile.jsonl`. */
export const hostileWorkspace = (): string => {
  const ws = makeWorkspace()
  mkdirSync(join(ws, ".agentloop", "sessions"), { recursive: true })
  writeFileSync(join(ws, ".agentloop", "sessions", "hostile.jsonl"), hostileSession())
  return ws
}
