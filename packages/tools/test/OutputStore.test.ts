/**
 * The output store as an attacker meets it: links planted at its folders, a process racing it,
 * folders left by dead processes (and links dressed up as them), and the bounds on what it keeps.
 */
import {
  bashTool,
  makeOutputStore,
  OUTPUT_FOLDER,
  OUTPUT_KEEP_MAX_BYTES,
  OUTPUT_STORE_MAX_BYTES,
  OutputStore,
  READ_MAX_FILE_BYTES
} from "@agentloop/tools"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { spawn } from "node:child_process"
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync
} from "node:fs"
import { context, inWorkspace, text } from "./helpers.ts"

const ctx = context()

/** A store of the test's workspace, and a way to close it. */
const openStore = Effect.gen(function*() {
  const scope = yield* Scope.make()
  const store = yield* makeOutputStore.pipe(Scope.provide(scope))
  return { store, close: Scope.close(scope, Exit.void) }
})

/** A pid that runs no process here. */
const deadPid = (): number => {
  for (let pid = 32767; pid > 1000; pid--) if (!existsSync(`/proc/${pid}`)) return pid
  throw new Error("no free pid")
}

const outsideOf = (root: string) => {
  const outside = `${root}/../outside`
  mkdirSync(outside, { recursive: true })
  return outside
}

describe("OutputStore", () => {
  it.effect("keeps a file under .agentloop/output/<pid>-<hex>/, 0600 in a 0700 folder, removed on close", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const { close, store } = yield* openStore
        const kept = yield* store.keep("bash", "one\ntwo")
        assert.match(kept.path, new RegExp(`^${OUTPUT_FOLDER}/${process.pid}-[0-9a-f]{8}/bash-1\\.txt$`))
        assert.deepStrictEqual({ ...kept, path: "" }, { path: "", bytes: 7, lines: 2, complete: true })
        assert.strictEqual(readFileSync(`${root}/${kept.path}`, "utf8"), "one\ntwo")
        assert.strictEqual(statSync(`${root}/${kept.path}`).mode & 0o777, 0o600)
        const folder = kept.path.slice(0, kept.path.lastIndexOf("/"))
        assert.strictEqual(statSync(`${root}/${folder}`).mode & 0o777, 0o700)
        assert.strictEqual((yield* store.keep("x y/z", "2")).path, `${folder}/x_y_z-2.txt`)
        yield* close
        assert.isFalse(existsSync(`${root}/${folder}`))
        assert.deepStrictEqual(readdirSync(`${root}/${OUTPUT_FOLDER}`), [])
        const after = yield* Effect.flip(store.keep("bash", "late"))
        assert.strictEqual(after.message, "the output store is closed")
      })
    ))

  it.effect("a file is under its name only once complete; one not kept is removed with its scope", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const { close, store } = yield* openStore
        const folder = yield* Effect.scoped(Effect.gen(function*() {
          const file = yield* store.create("bash")
          yield* file.write(new TextEncoder().encode("partial\n"))
          const [own] = readdirSync(`${root}/${OUTPUT_FOLDER}`)
          const names = readdirSync(`${root}/${OUTPUT_FOLDER}/${own}`)
          assert.strictEqual(names.length, 1)
          assert.match(names[0]!, /^\.[0-9a-f]{16}\.tmp$/, "only a temporary name while it is written")
          return `${root}/${OUTPUT_FOLDER}/${own}`
        }))
        assert.deepStrictEqual(readdirSync(folder), [], "dropped without keep: gone")
        yield* close
      })
    ))

  it.effect("a link planted at .agentloop (to outside) is not followed: nothing is written there", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const outside = outsideOf(root)
        symlinkSync(outside, `${root}/.agentloop`)
        const { close, store } = yield* openStore
        const error = yield* Effect.flip(store.keep("bash", "secret output"))
        assert.strictEqual(error.message, ".agentloop is a symbolic link")
        const out = yield* bashTool.execute({ command: "seq 1 100000" }, ctx).pipe(
          Effect.provideService(OutputStore, store)
        )
        assert.match(text(out), /The full output was not kept: \.agentloop is a symbolic link\. \.\.\.\]/)
        assert.deepStrictEqual(readdirSync(outside), [])
        yield* close
      })
    ))

  it.effect("a link at .agentloop/output, even to a folder inside the workspace, is refused", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        mkdirSync(`${root}/src`)
        mkdirSync(`${root}/.agentloop`)
        symlinkSync(`${root}/src`, `${root}/.agentloop/output`)
        const { close, store } = yield* openStore
        assert.strictEqual((yield* Effect.flip(store.keep("bash", "x"))).message, `${OUTPUT_FOLDER} is a symbolic link`)
        assert.deepStrictEqual(readdirSync(`${root}/src`), [])
        yield* close
      })
    ))

  it.effect("an output folder others may write to is refused (they could swap the store's folder)", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        mkdirSync(`${root}/${OUTPUT_FOLDER}`, { recursive: true })
        chmodSync(`${root}/${OUTPUT_FOLDER}`, 0o777)
        const { close, store } = yield* openStore
        const error = yield* Effect.flip(store.keep("bash", "x"))
        assert.strictEqual(error.message, `${OUTPUT_FOLDER} is writable by other users`)
        yield* close
      })
    ))

  it.effect(
    "a process swapping .agentloop for a link to outside, over and over, never gets a byte outside",
    () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          const outside = outsideOf(root)
          mkdirSync(`${root}/.agentloop`)
          // renames and links only: the swapper itself never writes into the folder outside
          const script = `const fs = require("node:fs"); process.chdir(${JSON.stringify(root)});
          const quiet = (f) => { try { f() } catch {} };
          for (let i = 0; i < 20000; i++) {
            quiet(() => fs.renameSync(".agentloop", ".real"));
            quiet(() => fs.symlinkSync(${JSON.stringify(outside)}, ".agentloop"));
            quiet(() => fs.lstatSync(".agentloop").isSymbolicLink() && fs.unlinkSync(".agentloop"));
            quiet(() => fs.renameSync(".real", ".agentloop"));
          }`
          const swapper = spawn(process.execPath, ["-e", script], { stdio: "ignore" })
          const done = new Promise((resolve) => swapper.on("exit", resolve))
          let kept = 0
          let attempts = 0
          // new stores, so that every run walks the folders again while the swapper runs
          while (swapper.exitCode === null && attempts < 400) {
            attempts++
            const { close, store } = yield* openStore
            const result = yield* Effect.result(store.keep("bash", `run ${attempts}\n`))
            if (result._tag === "Success") {
              kept++
              assert.match(result.success.path, new RegExp(`^${OUTPUT_FOLDER}/`))
            }
            yield* close
          }
          yield* Effect.promise(() => done)
          assert.deepStrictEqual(readdirSync(outside), [], "nothing was made outside the workspace")
          assert.isAbove(kept, 0, "some runs found the real folder")
        })
      ),
    60_000
  )

  it.effect("folders of dead processes are removed on first use; live ones, and links dressed as folders, stay", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const output = `${root}/${OUTPUT_FOLDER}`
        const dead = `${deadPid()}-deadbeef`
        const live = `1-0badc0de`
        mkdirSync(`${output}/${dead}`, { recursive: true, mode: 0o700 })
        chmodSync(output, 0o700)
        writeFileSync(`${output}/${dead}/bash-1.txt`, "old")
        symlinkSync("/etc/passwd", `${output}/${dead}/planted`)
        mkdirSync(`${output}/${live}`)
        writeFileSync(`${output}/${live}/bash-1.txt`, "theirs")
        const outside = outsideOf(root)
        writeFileSync(`${outside}/precious`, "keep me")
        symlinkSync(outside, `${output}/${deadPid() - 1}-cafebabe`)
        mkdirSync(`${output}/not-ours`)
        const old = new Date(Date.now() - 86_400_000)
        utimesSync(`${output}/${dead}`, old, old)
        const { close, store } = yield* openStore
        yield* store.keep("bash", "new")
        assert.isFalse(existsSync(`${output}/${dead}`), "the dead process's folder is gone")
        assert.isTrue(existsSync("/etc/passwd"), "a link in it was removed, not followed")
        assert.strictEqual(readFileSync(`${output}/${live}/bash-1.txt`, "utf8"), "theirs")
        assert.isTrue(lstatSync(`${output}/${deadPid() - 1}-cafebabe`).isSymbolicLink())
        assert.strictEqual(readFileSync(`${outside}/precious`, "utf8"), "keep me")
        assert.isTrue(existsSync(`${output}/not-ours`))
        yield* close
      })
    ))

  it.effect(
    `one output keeps at most ${OUTPUT_KEEP_MAX_BYTES} bytes (what read opens), ending on a line break`,
    () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          assert.strictEqual(OUTPUT_KEEP_MAX_BYTES, READ_MAX_FILE_BYTES)
          const { close, store } = yield* openStore
          const line = `${"é".repeat(499)}\n` // 999 bytes
          const big = line.repeat(Math.ceil(OUTPUT_KEEP_MAX_BYTES / 999) + 10)
          const kept = yield* store.keep("bash", big)
          assert.isFalse(kept.complete)
          assert.strictEqual(kept.bytes, Math.floor(OUTPUT_KEEP_MAX_BYTES / 999) * 999)
          assert.strictEqual(kept.lines, Math.floor(OUTPUT_KEEP_MAX_BYTES / 999))
          assert.isTrue(readFileSync(`${root}/${kept.path}`).equals(Buffer.from(big).subarray(0, kept.bytes)))
          // one line longer than the limit: cut between two characters
          const wide = yield* store.keep("bash", "é".repeat(OUTPUT_KEEP_MAX_BYTES))
          assert.strictEqual(wide.bytes, OUTPUT_KEEP_MAX_BYTES)
          const odd = yield* store.keep("bash", `x${"é".repeat(OUTPUT_KEEP_MAX_BYTES / 2)}`)
          assert.strictEqual(odd.bytes, OUTPUT_KEEP_MAX_BYTES - 1, "not half of an é")
          yield* close
        })
      ),
    60_000
  )

  it.effect(
    `a store keeps at most ${OUTPUT_STORE_MAX_BYTES} bytes: the oldest files go first`,
    () =>
      inWorkspace((root) =>
        Effect.gen(function*() {
          const { close, store } = yield* openStore
          const chunk = "x".repeat(OUTPUT_KEEP_MAX_BYTES - 1) + "\n"
          const paths: Array<string> = []
          for (let i = 0; i < OUTPUT_STORE_MAX_BYTES / OUTPUT_KEEP_MAX_BYTES + 1; i++) {
            paths.push((yield* store.keep("bash", chunk)).path)
          }
          assert.isFalse(existsSync(`${root}/${paths[0]}`), "the oldest is removed")
          for (const path of paths.slice(1)) assert.isTrue(existsSync(`${root}/${path}`))
          yield* close
        })
      ),
    60_000
  )
})
