import {
  BASH_MAX_COMMAND_BYTES,
  BASH_OUTPUT_HEAD,
  BASH_OUTPUT_TAIL,
  bashEnvironment,
  bashOptionsLayer,
  bashTool,
  DEFAULT_HIDDEN_ENV,
  detectContainment
} from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { execFile, spawn } from "node:child_process"
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { fileURLToPath } from "node:url"
import { context, details, failed, inWorkspace, text } from "./helpers.ts"

/** Whether a process is running (a zombie counts as gone: it runs nothing). */
const alive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z"
  } catch {
    return false
  }
}

/**
 * Host pids of the running processes whose command line holds `marker` (processes in a PID
 * namespace report other pids to themselves, so they are found by a unique argument instead).
 */
const running = (marker: string): Array<number> =>
  readdirSync("/proc").filter((d) => /^\d+$/.test(d)).map(Number).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\u0000").includes(marker) && alive(pid)
    } catch {
      return false
    }
  })

/** Kills whatever a failed test left behind, so one failure does not leak sleepers. */
const reap = (marker: string) =>
  Effect.sync(() => {
    for (const pid of running(marker)) process.kill(pid, "SIGKILL")
  })

let markers = 0
/** A unique `sleep` duration, so this test's sleepers are recognisable in /proc. */
const uniqueSleep = () => `${3000 + process.pid % 1000}.${++markers}${Math.floor(Math.random() * 1e6)}`

/**
 * A command that starts sleepers in every way a process can leave its parent's group: `setsid -f`,
 * a `setsid` in a subshell that exits (double fork), a plain double fork, and a background job.
 */
const escapers = (s: string) => `setsid -f sleep ${s}; (setsid sleep ${s} &); (sleep ${s} &); sleep ${s} & echo ready; `

/** A context whose progress is recorded, with a Deferred that completes when `marker` is printed. */
const watching = (marker: string) =>
  Effect.sync(() => {
    const seen: Array<unknown> = []
    const ready = Deferred.makeUnsafe<void>()
    const ctx = context({
      reportProgress: (p) =>
        Effect.sync(() => {
          seen.push(p)
          const chunk = (p as { text?: string }).text
          if (chunk?.includes(marker)) Deferred.doneUnsafe(ready, Exit.void)
        })
    })
    return { seen, ready, ctx }
  })

/** Waits (in real time, bounded) until the four sleepers of `escapers` are all running. */
const allStarted = (s: string) =>
  Effect.promise(async () => {
    for (let i = 0; i < 200 && running(s).length < 4; i++) await new Promise((r) => setTimeout(r, 10))
    return running(s).length
  })

describe("bash", () => {
  it.effect("runs in the workspace root and returns the output with exit code 0 and the containment used", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const out = yield* bashTool.execute({ command: "pwd; echo hi" }, context())
        assert.strictEqual(text(out), `${root}\nhi\n`)
        assert.deepStrictEqual(details(out), {
          command: "pwd; echo hi",
          exitCode: 0,
          signal: null,
          timedOut: false,
          truncated: false,
          containment: yield* detectContainment,
          outputLines: 2,
          outputBytes: Buffer.byteLength(`${root}\nhi\n`)
        })
        assert.isFalse(typeof out !== "string" && out.isError === true)
      })
    ))

  it.effect("on Linux with unshare, commands run in their own PID namespace", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        // this machine (the CI's) allows it, as root and as a normal user: the stronger containment must be the one
        // used
        assert.strictEqual(yield* detectContainment, "pid-namespace")
        const out = yield* bashTool.execute({ command: "echo $$; ls /proc | grep -c '^[0-9]'" }, context())
        assert.strictEqual(text(out).split("\n")[0], "1", "the command is PID 1 of its namespace")
      })
    ))

  it.effect(
    "as an unprivileged user too (user + PID namespace): the uid is kept and a setsid survivor is killed",
    () => {
      const s = uniqueSleep()
      return Effect.gen(function*() {
        // the tests run as root on CI; a normal user gets `unshare --user --map-current-user ...`
        assert.strictEqual(process.getuid?.(), 0, "this check needs root to switch to nobody")
        const base = mkdtempSync(`${tmpdir()}/agentloop-user-`)
        chmodSync(base, 0o777)
        const probe = fileURLToPath(new URL("./fixtures/bash-as-user.ts", import.meta.url))
        const shellQuote = (a: string) => `'${a.replaceAll("'", "'\\''")}'`
        const output = yield* Effect.promise(() =>
          new Promise<string>((resolve, reject) =>
            execFile(
              "su",
              [
                "nobody",
                "-s",
                "/bin/sh",
                "-c",
                [
                  process.execPath,
                  "--experimental-strip-types",
                  "--no-warnings",
                  probe,
                  base,
                  `id -u; echo $$; setsid -f sleep ${s}; (sleep ${s} &); echo started`
                ].map(shellQuote).join(" ")
              ],
              { cwd: fileURLToPath(new URL("..", import.meta.url)) },
              (error, stdout) => error ? reject(error) : resolve(stdout)
            )
          )
        ).pipe(Effect.ensuring(Effect.sync(() => rmSync(base, { recursive: true, force: true }))))
        const { containment, out } = JSON.parse(output) as {
          containment: string
          out: { content: Array<{ text: string }> }
        }
        assert.strictEqual(containment, "pid-namespace")
        assert.strictEqual(out.content[0]!.text, "65534\n1\nstarted\n")
        assert.deepStrictEqual(running(s), [])
      }).pipe(Effect.ensuring(reap(s)))
    },
    10_000
  )

  it.effect("a non-zero exit is an error result with the code in details", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const out = yield* bashTool.execute({ command: "echo failing >&2; exit 3" }, context())
        assert.strictEqual(text(out), "failing\n\n[Command exited with code 3.]")
        assert.strictEqual(details(out)["exitCode"], 3)
        assert.isTrue(typeof out !== "string" && out.isError === true)
      })
    ))

  it.effect("a process killed by a signal reports the signal (process-group containment)", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const out = yield* bashTool.execute({ command: "kill -KILL $$" }, context()).pipe(
          Effect.provide(bashOptionsLayer({ containment: "process-group" }))
        )
        assert.strictEqual(details(out)["containment"], "process-group")
        assert.strictEqual(details(out)["signal"], "SIGKILL")
        assert.match(text(out), /killed by signal SIGKILL/)
      })
    ))

  it.effect("stdout and stderr stream as progress while the command runs", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const { seen, ctx } = yield* watching("never")
        yield* bashTool.execute({ command: "echo out; echo err >&2" }, ctx)
        assert.sameDeepMembers(seen, [{ stream: "stdout", text: "out\n" }, { stream: "stderr", text: "err\n" }])
      })
    ))

  it.effect(`output is cut to its first ${BASH_OUTPUT_HEAD} and last ${BASH_OUTPUT_TAIL} characters`, () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const out = yield* bashTool.execute({ command: "seq 1 100000; echo THE-END" }, context())
        const t = text(out)
        assert.isTrue(details(out)["truncated"])
        assert.isAtMost(t.length, BASH_OUTPUT_HEAD + BASH_OUTPUT_TAIL + 400)
        assert.isTrue(t.startsWith("1\n2\n3\n"))
        assert.isTrue(t.endsWith("100000\nTHE-END\n"))
        assert.match(t, /\n\[\.\.\. [\d,]+ characters omitted \(lines [\d,]+-[\d,]+ of 100,001\): output cut at 30,000/)
      })
    ))

  it.effect("details give the whole output's size, not the shown text's: lines and bytes, none for no output", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const long = yield* bashTool.execute({ command: "seq 1 300000; printf 'no newline é'" }, context())
        assert.isTrue(details(long)["truncated"])
        const seqBytes = Array.from({ length: 300000 }, (_, i) => `${i + 1}\n`).join("").length
        assert.strictEqual(details(long)["outputLines"], 300001)
        assert.strictEqual(details(long)["outputBytes"], seqBytes + Buffer.byteLength("no newline é"))
        const quiet = yield* bashTool.execute({ command: "echo one > b.txt" }, context())
        assert.strictEqual(text(quiet), "(no output)")
        assert.strictEqual(details(quiet)["outputLines"], 0)
        assert.strictEqual(details(quiet)["outputBytes"], 0)
        const failing = yield* bashTool.execute({ command: "echo oops >&2; exit 2" }, context())
        assert.strictEqual(details(failing)["outputLines"], 1, "the exit note is not output")
        assert.strictEqual(details(failing)["outputBytes"], 5)
      })
    ))

  it.effect("timeout (TestClock) kills every process, also those that called setsid or double-forked", () => {
    const s = uniqueSleep()
    return inWorkspace(() =>
      Effect.gen(function*() {
        const { ready, ctx } = yield* watching("ready")
        const fiber = yield* bashTool.execute({ command: `${escapers(s)}wait`, timeout: 5 }, ctx).pipe(Effect.forkChild)
        yield* Deferred.await(ready)
        assert.strictEqual(yield* allStarted(s), 4, "the four sleepers are running")
        yield* TestClock.adjust("5 seconds")
        const out = yield* Fiber.join(fiber)
        assert.isTrue(details(out)["timedOut"])
        assert.match(text(out), /ready\n\n\[Command timed out after 5 s; every process it started was killed\.\]/)
        assert.deepStrictEqual(running(s), [], "no process survives")
      })
    ).pipe(Effect.ensuring(reap(s)))
  })

  it.live(
    "kill -9 of the process that runs bash (no finalizer runs) still kills every process the command started",
    () => {
      const s = uniqueSleep()
      return Effect.gen(function*() {
        const base = mkdtempSync(`${tmpdir()}/agentloop-orphan-`)
        const probe = fileURLToPath(new URL("./fixtures/bash-as-user.ts", import.meta.url))
        const child = spawn(process.execPath, ["--no-warnings", probe, base, `${escapers(s)}wait`], {
          cwd: fileURLToPath(new URL("..", import.meta.url)),
          stdio: "ignore"
        })
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(base, { recursive: true, force: true })))
        // the four sleepers (and the namespace's bash) are up: the tool is in the middle of its call
        const started = yield* Effect.promise(async () => {
          for (let i = 0; i < 1000 && running(s).length < 4; i++) await new Promise((r) => setTimeout(r, 10))
          return running(s).length
        })
        assert.strictEqual(started, 4, "the four sleepers are running")
        child.kill("SIGKILL")
        // every chance to survive: a survivor would still be there after these 2 s
        const left = yield* Effect.promise(async () => {
          for (let i = 0; i < 200 && running(s).length > 0; i++) await new Promise((r) => setTimeout(r, 10))
          return running(s)
        })
        assert.deepStrictEqual(left, [], "no process of the command outlives the process that ran it")
      }).pipe(Effect.scoped, Effect.ensuring(reap(s)))
    },
    20_000
  )

  it.effect("interruption (abort) kills every process, also those that called setsid or double-forked", () => {
    const s = uniqueSleep()
    return inWorkspace(() =>
      Effect.gen(function*() {
        const { ready, ctx } = yield* watching("ready")
        const fiber = yield* bashTool.execute({ command: `${escapers(s)}wait` }, ctx).pipe(Effect.forkChild)
        yield* Deferred.await(ready)
        assert.strictEqual(yield* allStarted(s), 4)
        yield* Fiber.interrupt(fiber)
        assert.deepStrictEqual(running(s), [])
      })
    ).pipe(Effect.ensuring(reap(s)))
  })

  it.effect("the command's normal end kills what it left running, and its output is returned at once", () => {
    const s = uniqueSleep()
    return inWorkspace(() =>
      Effect.gen(function*() {
        const { ctx } = yield* watching("ready")
        // a started-and-checked variant: the command itself waits until its sleepers run, then exits 0
        const count =
          `for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^sleep ${s} $'`
        const command = `${
          escapers(s)
        }for i in $(seq 500); do [ "$(${count})" -ge 4 ] && break; done; echo started $(${count})`
        const out = yield* bashTool.execute({ command }, ctx)
        assert.strictEqual(text(out), "ready\nstarted 4\n")
        assert.strictEqual(details(out)["exitCode"], 0)
        assert.deepStrictEqual(running(s), [], "no process outlives the command")
      })
    ).pipe(Effect.ensuring(reap(s)))
  })

  it.effect("process-group fallback: background jobs still die at timeout and at the normal end", () => {
    const s = uniqueSleep()
    return inWorkspace(() =>
      Effect.gen(function*() {
        const out = yield* bashTool.execute({ command: `sleep ${s} & sleep ${s} & echo started` }, context()).pipe(
          Effect.provide(bashOptionsLayer({ containment: "process-group" }))
        )
        assert.strictEqual(text(out), "started\n")
        assert.deepStrictEqual(running(s), [])
      })
    ).pipe(Effect.ensuring(reap(s)))
  })

  it.effect("an empty command is refused", () =>
    inWorkspace(() =>
      Effect.map(
        failed(bashTool.execute({ command: "  " }, context())),
        (e) => assert.strictEqual(e.message, "command is empty")
      )
    ))

  it.effect("a 200 KB command is a clear error, not a spawn failure", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const command = `echo ${"x".repeat(200 * 1024)}`
        const error = yield* failed(bashTool.execute({ command }, context()))
        assert.strictEqual(
          error.message,
          `command is ${command.length} bytes, over the ${BASH_MAX_COMMAND_BYTES}-byte limit; write a script ` +
            `with the write tool and run it`
        )
      })
    ))
})

describe("bash environment policy", () => {
  const withEnv = <A, E, R>(vars: Record<string, string>, effect: Effect.Effect<A, E, R>) =>
    Effect.acquireUseRelease(
      Effect.sync(() => {
        const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]))
        Object.assign(process.env, vars)
        return saved
      }),
      () => effect,
      (saved) =>
        Effect.sync(() => {
          for (const [k, v] of Object.entries(saved)) {
            if (v === undefined) delete process.env[k]
            else process.env[k] = v
          }
        })
    )

  const show = "for v in OPENAI_API_KEY ANTHROPIC_API_KEY MY_KEY PLAIN; do echo \"$v=${!v-unset}\"; done"

  it.effect("provider keys are hidden from bash by default; other variables pass", () =>
    inWorkspace(() =>
      withEnv(
        { OPENAI_API_KEY: "sk-test-openai", ANTHROPIC_API_KEY: "sk-ant-test", MY_KEY: "mine", PLAIN: "plain" },
        Effect.gen(function*() {
          const out = yield* bashTool.execute({ command: show }, context())
          assert.strictEqual(text(out), "OPENAI_API_KEY=unset\nANTHROPIC_API_KEY=unset\nMY_KEY=mine\nPLAIN=plain\n")
          const all = yield* bashTool.execute({ command: "env" }, context())
          assert.notInclude(text(all), "sk-test-openai")
          assert.notInclude(text(all), "sk-ant-test")
        })
      )
    ))

  it.effect(
    "hideEnv hides more (the CLI's --api-key-env name), passEnv passes a hidden one, env has the last " +
      "word",
    () =>
      inWorkspace(() =>
        withEnv(
          { OPENAI_API_KEY: "sk-test-openai", ANTHROPIC_API_KEY: "sk-ant-test", MY_KEY: "mine", PLAIN: "plain" },
          Effect.gen(function*() {
            const hidden = yield* bashTool.execute({ command: show }, context()).pipe(
              Effect.provide(bashOptionsLayer({ hideEnv: ["MY_KEY"], passEnv: ["ANTHROPIC_API_KEY"] }))
            )
            assert.strictEqual(
              text(hidden),
              "OPENAI_API_KEY=unset\nANTHROPIC_API_KEY=sk-ant-test\nMY_KEY=unset\nPLAIN=plain\n"
            )
            const custom = yield* bashTool.execute({ command: show }, context()).pipe(
              Effect.provide(bashOptionsLayer({ env: (env) => ({ PATH: env["PATH"] ?? "/usr/bin:/bin" }) }))
            )
            assert.strictEqual(
              text(custom),
              "OPENAI_API_KEY=unset\nANTHROPIC_API_KEY=unset\nMY_KEY=unset\nPLAIN=unset\n"
            )
          })
        )
      )
  )

  it("bashEnvironment: hidden names never pass, every other name passes unchanged (property)", () => {
    const name = fc.stringMatching(/^[A-Z][A-Z0-9_]{0,12}$/)
    fc.assert(fc.property(
      fc.dictionary(fc.oneof(name, fc.constantFrom(...DEFAULT_HIDDEN_ENV)), fc.string()),
      fc.array(name, { maxLength: 4 }),
      fc.array(fc.oneof(name, fc.constantFrom(...DEFAULT_HIDDEN_ENV)), { maxLength: 3 }),
      (base, hideEnv, passEnv) => {
        const env = bashEnvironment({ hideEnv, passEnv }, base)
        for (const [k, v] of Object.entries(base)) {
          const hidden = (DEFAULT_HIDDEN_ENV.includes(k) || hideEnv.includes(k)) && !passEnv.includes(k)
          assert.strictEqual(env[k], hidden ? undefined : v, k)
        }
        assert.isTrue(Object.keys(env).every((k) => k in base))
      }
    ))
  })
})
