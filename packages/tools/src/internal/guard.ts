/**
 * A time guard for synchronous matching that cannot be cut into steps: `.gitignore` rules (the
 * `ignore` library) and globs (picomatch) are regular expressions, and some shapes of them
 * backtrack for seconds on long names (`**\/a*\/**\/b` on a deep path). `guarded` runs such work
 * through a `node:vm` script with a `timeout`: V8 stops the execution after that long, also inside
 * functions of this realm the script calls, and the caller learns it timed out instead of hanging.
 *
 * Starting the watchdog costs about a third of a millisecond, so callers guard one batch (the names
 * of one folder), not one name.
 */
import * as NodeVm from "node:vm"
import { codeOf } from "./confined.ts"

const script = new NodeVm.Script("job()")
let sandbox: { job: (() => void) | undefined } | undefined

/** `f()`, or `undefined` when it ran longer than `ms` milliseconds and was stopped. */
export const guarded = <A>(f: () => A, ms: number): { readonly value: A } | undefined => {
  const context = (sandbox ??= NodeVm.createContext({ job: undefined }) as { job: (() => void) | undefined })
  let result: { readonly value: A } | undefined
  context.job = () => {
    result = { value: f() }
  }
  try {
    script.runInContext(context, { timeout: Math.max(1, Math.floor(ms)) })
  } catch (error) {
    if (codeOf(error) === "ERR_SCRIPT_EXECUTION_TIMEOUT") return undefined
    throw error
  } finally {
    context.job = undefined
  }
  return result
}
