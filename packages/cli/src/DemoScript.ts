/**
 * The built-in demo: a small project with a bug, and the scripted model session that fixes it.
 *
 * The session reads two files at once, meets a failing edit (the text does not match) and
 * recovers, edits the file, runs the tests with bash (their output streams while they run), is
 * cut off by the token limit in the middle of a call (which is skipped, not run), continues when
 * asked, and finishes.
 *
 * @since 0.1.0
 */
import type { ScriptedTurn } from "@agentloop/testkit"
import { toolCall, turn } from "@agentloop/testkit"

/**
 * The files of the demo project.
 *
 * @since 0.1.0
 * @category demo
 */
export const demoFiles: Record<string, string> = {
  "README.md": "# calc\n\nA tiny calculator library. Run the tests with `node test.js`.\n",
  "src/math.js": [
    "// Arithmetic helpers.",
    "function add(a, b) {",
    "  return a - b",
    "}",
    "",
    "function mul(a, b) {",
    "  return a * b",
    "}",
    "",
    "module.exports = { add, mul }",
    ""
  ].join("\n"),
  "test.js": [
    "const { add, mul } = require(\"./src/math.js\")",
    "const cases = [",
    "  [\"add(2, 3)\", () => add(2, 3), 5],",
    "  [\"add(-1, 1)\", () => add(-1, 1), 0],",
    "  [\"mul(4, 5)\", () => mul(4, 5), 20]",
    "]",
    "let failed = 0",
    "const run = (i) => {",
    "  if (i === cases.length) {",
    "    console.log(failed === 0 ? \"all tests passed\" : `${failed} test(s) failed`)",
    "    process.exit(failed === 0 ? 0 : 1)",
    "  }",
    "  const [name, f, want] = cases[i]",
    "  const got = f()",
    "  if (got === want) console.log(`ok    ${name} = ${got}`)",
    "  else { failed++; console.log(`FAIL  ${name} = ${got}, expected ${want}`) }",
    "  setTimeout(() => run(i + 1), 300)",
    "}",
    "run(0)",
    ""
  ].join("\n")
}

/**
 * What the user asks in the demo.
 *
 * @since 0.1.0
 * @category demo
 */
export const demoPrompt = "The tests in this project fail. Find the bug, fix it, make sure the tests pass, " +
  "and write a short NOTES.md about what you changed."

/**
 * The scripted model's turns for the demo, in order (both runs of the session).
 *
 * @since 0.1.0
 * @category demo
 */
export const demoScript: ReadonlyArray<ScriptedTurn> = [
  turn.toolCalls(
    [
      toolCall("call_read_math", "read", { path: "src/math.js" }),
      toolCall("call_read_test", "read", { path: "test.js" })
    ],
    "Let me look at the code and the tests together."
  ),
  turn.toolCalls(
    [toolCall("call_edit_1", "edit", { path: "src/math.js", oldText: "return a-b", newText: "return a + b" })],
    "`add` subtracts instead of adding. Fixing it."
  ),
  turn.toolCalls(
    [toolCall("call_edit_2", "edit", { path: "src/math.js", oldText: "return a - b", newText: "return a + b" })],
    "That text did not match the file exactly; using the exact line from the file."
  ),
  turn.toolCalls([toolCall("call_test", "bash", { command: "node test.js" })], "Now the tests."),
  turn.truncated(
    [toolCall("call_notes_1", "write", { path: "NOTES.md", content: "# Notes\n\n- Fixed `add`" })],
    "All three tests pass. I'll write NOTES.md with a summary of the change and the te"
  ),
  turn.toolCalls(
    [
      toolCall("call_notes_2", "write", {
        path: "NOTES.md",
        content: "# Notes\n\n- `add` in src/math.js subtracted its arguments; it now adds them.\n" +
          "- `node test.js` passes (3 tests).\n"
      })
    ],
    "Continuing: writing NOTES.md."
  ),
  turn.streamed([
    "Done. ",
    "`add` in `src/math.js` returned `a - b`; it now returns `a + b`. ",
    "All tests pass, and NOTES.md describes the change."
  ])
]
