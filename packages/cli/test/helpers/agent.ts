/**
 * Test helpers for `agentloop run` / `chat` as real processes: a loopback server speaking the
 * OpenAI (`/v1/chat/completions`) and Anthropic (`/v1/messages`) streaming formats from one
 * script of steps, and the CLI spawned in a pipe or in a real pseudo-terminal (python3's `pty`),
 * whose screen a terminal emulator shows (`Running.screen`).
 */
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import type { Server } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll } from "vitest"
import { virtualTerminal } from "./terminal.ts"

export const bin = fileURLToPath(new URL("../../bin/agentloop.js", import.meta.url))

export interface Call {
  readonly id: string
  readonly name: string
  readonly args: Record<string, unknown>
}

/** One scripted model answer. */
export type Step =
  | {
    readonly text?: string
    readonly calls?: ReadonlyArray<Call>
    readonly usage?: { input: number; output: number; cached?: number }
    /** The text is streamed at once, the rest of the answer only when this settles (OpenAI format). */
    readonly hold?: Promise<unknown>
  }
  | { readonly hang: true }
  /** An HTTP error answer (e.g. a server refusing images with 400, or 429 with `retry-after-ms`). */
  | { readonly status: number; readonly error?: string; readonly headers?: Record<string, string> }

export interface RecordedBody {
  readonly path: string
  readonly body: Record<string, unknown>
}

export interface ScriptServer {
  readonly url: string
  readonly bodies: Array<RecordedBody>
  readonly close: () => Promise<void>
}

type TextStep = Exclude<Step, { hang: true } | { status: number }>

const sse = (chunks: ReadonlyArray<unknown>) => chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("")

const openAiBody = (step: TextStep) => {
  const chunks: Array<unknown> = []
  if (step.text !== undefined) {
    chunks.push({ choices: [{ index: 0, delta: { role: "assistant", content: step.text }, finish_reason: null }] })
  }
  ;(step.calls ?? []).forEach((c, index) =>
    chunks.push({
      choices: [{
        index: 0,
        delta: {
          tool_calls: [{
            index,
            id: c.id,
            type: "function",
            function: { name: c.name, arguments: JSON.stringify(c.args) }
          }]
        },
        finish_reason: null
      }]
    })
  )
  chunks.push({
    choices: [{ index: 0, delta: {}, finish_reason: (step.calls ?? []).length > 0 ? "tool_calls" : "stop" }]
  })
  if (step.usage !== undefined) {
    chunks.push({
      choices: [],
      usage: {
        prompt_tokens: step.usage.input,
        completion_tokens: step.usage.output,
        prompt_tokens_details: { cached_tokens: step.usage.cached ?? 0 }
      }
    })
  }
  return sse(chunks) + "data: [DONE]\n\n"
}

const anthropicBody = (step: TextStep) => {
  const events: Array<{ type: string } & Record<string, unknown>> = []
  const usage = step.usage ?? { input: 0, output: 0 }
  events.push({
    type: "message_start",
    message: {
      id: "msg_1",
      type: "message",
      role: "assistant",
      model: "claude-test",
      content: [],
      usage: { input_tokens: usage.input, output_tokens: 1, cache_read_input_tokens: usage.cached ?? 0 }
    }
  })
  let index = 0
  if (step.text !== undefined) {
    events.push({ type: "content_block_start", index, content_block: { type: "text", text: "" } })
    events.push({ type: "content_block_delta", index, delta: { type: "text_delta", text: step.text } })
    events.push({ type: "content_block_stop", index })
    index++
  }
  for (const c of step.calls ?? []) {
    events.push({
      type: "content_block_start",
      index,
      content_block: { type: "tool_use", id: c.id, name: c.name, input: {} }
    })
    events.push({
      type: "content_block_delta",
      index,
      delta: { type: "input_json_delta", partial_json: JSON.stringify(c.args) }
    })
    events.push({ type: "content_block_stop", index })
    index++
  }
  events.push({
    type: "message_delta",
    delta: { stop_reason: (step.calls ?? []).length > 0 ? "tool_use" : "end_turn" },
    usage: { output_tokens: usage.output }
  })
  events.push({ type: "message_stop" })
  return events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("")
}

/** Whether a request is compaction's summary request. */
export const isSummaryRequest = (body: Record<string, unknown>): boolean =>
  JSON.stringify(body).includes("You summarise the earlier part of a coding session")

/**
 * A script that fills a small context window: `calls` bash calls (the first prints 400 lines), then
 * a text answer; a summary request is answered with a summary (with `summaryUsage`).
 */
export const countingScript = (
  calls: number,
  summaryUsage?: { input: number; output: number }
): (body: Record<string, unknown>) => Step => {
  let turns = 0
  return (body) => {
    if (isSummaryRequest(body)) {
      return { text: "Ran seq; it printed numbers.", ...(summaryUsage === undefined ? {} : { usage: summaryUsage }) }
    }
    const index = turns++
    if (index === 0) return { calls: [{ id: "s1", name: "bash", args: { command: "seq 1 400" } }] }
    if (index < calls) {
      return { calls: [{ id: `s${index + 1}`, name: "bash", args: { command: `echo step ${index}` } }] }
    }
    return { text: "finished" }
  }
}

/**
 * A server answering each request with the next step (or `next(body, index)`), in the format the
 * request's path asks for.
 */
export const scriptServer = async (
  steps: ReadonlyArray<Step> | ((body: Record<string, unknown>, index: number) => Step)
): Promise<ScriptServer> => {
  const bodies: Array<RecordedBody> = []
  const server: Server = createServer((req, res) => {
    let raw = ""
    req.on("data", (d) => (raw += d))
    req.on("end", () => {
      // the model list (`/model` in chat): two models, in either provider's format
      if (req.method === "GET" && /\/models(\?|$)/.test(req.url ?? "")) {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({ data: [{ id: "test-model" }, { id: "other-model", display_name: "Other" }] }))
        return
      }
      const body = JSON.parse(raw) as Record<string, unknown>
      const index = bodies.length
      bodies.push({ path: req.url ?? "", body })
      const step = typeof steps === "function" ? steps(body, index) : steps[index]
      if (step === undefined) {
        res.writeHead(500, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message: `no scripted answer for request ${index}` } }))
        return
      }
      if ("status" in step) {
        res.writeHead(step.status, { "content-type": "application/json", ...step.headers })
        res.end(JSON.stringify({ error: { message: step.error ?? `scripted HTTP ${step.status}` } }))
        return
      }
      res.writeHead(200, { "content-type": "text/event-stream" })
      if ("hang" in step) {
        res.write(": waiting\n\n")
        return
      }
      const events = (req.url ?? "").includes("/messages") ? anthropicBody(step) : openAiBody(step)
      if (step.hold !== undefined) {
        // the first event (the text) now, the rest once the test lets it go
        const first = events.indexOf("\n\n") + 2
        res.write(events.slice(0, first))
        void step.hold.then(() => res.end(events.slice(first)))
        return
      }
      res.end(events)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    bodies,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

/** A real PNG file, 2×2 red pixels (96 bytes): attachments decode an image before sending it. */
export const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAACXBIWXMAAAPoAAAD6AG1e1JrAAAAEklEQVQImWM4ISd3Qk6OAUIBAB8mBBGF" +
    "RCvEAAAAAElFTkSuQmCC",
  "base64"
)

const workspaces: Array<string> = []
// The workspaces of a test file are removed once its tests are done (a run of the suite made ~500);
// outside vitest (the exit bench uses these helpers) there is no test file to wait for
if (process.env["VITEST"] !== undefined) {
  afterAll(() => {
    for (const workspace of workspaces.splice(0)) rmSync(workspace, { recursive: true, force: true, maxRetries: 3 })
  })
}

/** A fresh workspace folder (real path), removed after the test file's last test. */
export const makeWorkspace = (): string => {
  const workspace = realpathSync(mkdtempSync(join(tmpdir(), "agentloop-agent-test-")))
  workspaces.push(workspace)
  return workspace
}

/** The environment the CLI runs with in tests: no config or history from the machine, no colours forced. */
export const testEnv = (workspace: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    XDG_CONFIG_HOME: join(workspace, ".no-user-config"),
    XDG_STATE_HOME: join(workspace, ".no-user-state"),
    ...extra
  }
  for (
    const name of [
      "AGENTLOOP_PROVIDER",
      "AGENTLOOP_MODEL",
      "AGENTLOOP_BASE_URL",
      "AGENTLOOP_API_KEY_ENV",
      "NO_COLOR",
      "FORCE_COLOR"
    ]
  ) {
    if (!(name in extra)) delete env[name]
  }
  return env
}

/** What a terminal shows: the rows of the screen, and every row (the scrollback, then the screen). */
export interface Screen {
  readonly rows: Array<string>
  readonly all: Array<string>
}

/** A running CLI process. */
export interface Running {
  readonly child: ChildProcess
  /** Everything written so far (stdout and, for a pty, the terminal). */
  readonly output: () => string
  readonly stderr: () => string
  readonly write: (text: string) => void
  readonly endInput: () => void
  /** Resolves when `pattern` appears in the output after `from` (default: anywhere). */
  readonly waitFor: (pattern: RegExp | string, timeoutMs?: number, from?: number) => Promise<void>
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
  /**
   * What the terminal shows of the output so far (a pseudo-terminal started with a `size`): the rows
   * of the screen, and every row (scrollback, then the screen).
   */
  readonly screen: () => Promise<Screen>
  /** Resolves with the screen once `test` holds of it (checked as output comes), failing past `timeoutMs`. */
  readonly waitForScreen: (test: (screen: Screen) => boolean, timeoutMs?: number) => Promise<Screen>
  /**
   * The exit, or, past `limitMs`, a failure of its own ("still running after N s", with the output)
   * after killing it: a bound a loaded machine can reach never shows as a wrong exit code.
   */
  readonly exitedWithin: (
    limitMs: number
  ) => Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
}

const PTY_DRIVER = `
import os, pty, select, sys
pid, fd = pty.fork()
if pid == 0:
    size = os.environ.get("AGENTLOOP_TEST_PTY_SIZE")
    if size:
        import fcntl, struct, termios
        cols, rows = (int(n) for n in size.split("x"))
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    os.execvp(sys.argv[1], sys.argv[1:])
inp = sys.stdin.fileno()
open_in = True
while True:
    fds = [fd] + ([inp] if open_in else [])
    r, _, _ = select.select(fds, [], [], 0.2)
    if fd in r:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:
            break
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    if open_in and inp in r:
        data = os.read(inp, 65536)
        if not data:
            open_in = False
        else:
            os.write(fd, data)
_, status = os.waitpid(pid, 0)
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
`

/** Starts the CLI, in a pipe (`pty: false`) or in a pseudo-terminal (of `size`, when given). */
export const startCli = (
  args: ReadonlyArray<string>,
  options: {
    readonly cwd: string
    readonly env: NodeJS.ProcessEnv
    readonly pty?: boolean
    readonly size?: { readonly cols: number; readonly rows: number }
    /** Run the built bundle, as the installed command does (default: the sources). */
    readonly bundle?: boolean
  }
): Running => {
  const node = [process.execPath, ...(options.bundle === true ? [] : ["--conditions=agentloop-source"]), bin, ...args]
  // the test run's NODE_OPTIONS carry the source condition (vitest.config.ts): not for the bundle
  const env = options.bundle === true ?
    {
      ...options.env,
      NODE_OPTIONS: (options.env["NODE_OPTIONS"] ?? "").split(" ").filter((o) => o !== "--conditions=agentloop-source")
        .join(" ")
    } :
    options.env
  const size = options.size ?? { cols: 80, rows: 24 }
  const child = options.pty === true ?
    spawn("python3", ["-c", PTY_DRIVER, ...node], {
      cwd: options.cwd,
      env: {
        ...env,
        TERM: "xterm-256color",
        ...(options.size === undefined ? {} : { AGENTLOOP_TEST_PTY_SIZE: `${size.cols}x${size.rows}` })
      }
    }) :
    spawn(node[0]!, node.slice(1), { cwd: options.cwd, env })
  let out = ""
  let err = ""
  const waiters = new Set<() => void>()
  const screen = async (): Promise<Screen> => {
    const vt = virtualTerminal(size.cols, size.rows)
    await vt.feed(out)
    return { rows: vt.screen(), all: vt.all() }
  }
  child.stdout!.on("data", (d) => {
    out += String(d)
    for (const w of waiters) w()
  })
  child.stderr!.on("data", (d) => {
    err += String(d)
    for (const w of waiters) w()
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("close", (code, signal) => {
      resolve({ code, signal })
      for (const w of waiters) w()
    })
  )
  return {
    child,
    output: () => out,
    stderr: () => err,
    write: (text) => void child.stdin!.write(text),
    endInput: () => void child.stdin!.end(),
    waitFor: (pattern, timeoutMs = 90_000, from = 0) =>
      new Promise<void>((resolve, reject) => {
        const test =
          () => (typeof pattern === "string" ? out.slice(from).includes(pattern) : pattern.test(out.slice(from)))
        if (test()) return resolve()
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(new Error(`timed out waiting for ${String(pattern)}; output so far:\n${out}\nstderr:\n${err}`))
        }, timeoutMs)
        const check = () => {
          if (test() || child.exitCode !== null) {
            clearTimeout(timer)
            waiters.delete(check)
            if (test()) resolve()
            else reject(new Error(`exited before ${String(pattern)}; output:\n${out}\nstderr:\n${err}`))
          }
        }
        waiters.add(check)
      }),
    exited,
    screen,
    waitForScreen: (test, timeoutMs = 90_000) =>
      new Promise<Screen>((resolve, reject) => {
        let busy = false
        let again = false
        let settled = false
        const finish = (f: () => void) => {
          settled = true
          clearTimeout(timer)
          waiters.delete(check)
          f()
        }
        const check = () => {
          if (settled) return
          if (busy) {
            again = true
            return
          }
          busy = true
          void (async () => {
            do {
              again = false
              const shown = await screen()
              if (test(shown)) return finish(() => resolve(shown))
            } while (again && !settled)
            busy = false
            if (child.exitCode !== null && !settled) {
              const shown = await screen()
              finish(() => reject(new Error(`exited first; the screen:\n${shown.all.join("\n")}\nstderr:\n${err}`)))
            }
          })()
        }
        const timer = setTimeout(() => {
          void screen().then((shown) =>
            finish(() =>
              reject(new Error(`timed out waiting for the screen; it shows:\n${shown.all.join("\n")}\nstderr:\n${err}`))
            )
          )
        }, timeoutMs)
        waiters.add(check)
        check()
      }),
    exitedWithin: (limitMs) => {
      let timer: ReturnType<typeof setTimeout> | undefined
      const bound = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          child.kill("SIGKILL")
          reject(
            new Error(
              `agentloop ${args.join(" ")}: still running after ${limitMs / 1000} s; output:\n${out}\nstderr:\n${err}`
            )
          )
        }, limitMs)
      })
      return Promise.race([exited, bound]).finally(() => clearTimeout(timer))
    }
  }
}

/** The session files of a workspace, oldest first. */
export const sessionFiles = (workspace: string): Array<string> => {
  try {
    return readdirSync(join(workspace, ".agentloop", "sessions")).sort().map((n) =>
      join(workspace, ".agentloop", "sessions", n)
    )
  } catch {
    return []
  }
}

/** The parsed lines of a file. */
export const jsonLines = (file: string): Array<Record<string, unknown>> =>
  readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0).map((l) =>
    JSON.parse(l) as Record<string, unknown>
  )

/** Whether process `pid` still exists (and is not a zombie). */
export const alive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return !/\) Z /.test(stat)
  } catch {
    return false
  }
}

/**
 * The host pids of live processes whose command line contains `marker` (a PID namespace hides the
 * host pid from the command itself, so tests find their processes by a unique argument).
 */
export const processesWith = (marker: string): Array<number> => {
  const found: Array<number> = []
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").join(" ")
      if (cmdline.includes(marker) && alive(Number(name))) found.push(Number(name))
    } catch {
      // gone meanwhile
    }
  }
  return found
}

/**
 * The `sleep` processes of `marker` (`sleep <marker>`), not the shell whose command line holds it:
 * a command `echo … >> file; … sleep <marker>` has written its file once its sleep runs, while the
 * shell exists (with the marker in its command line) before it has run anything.
 */
export const sleepingWith = (marker: string): Array<number> =>
  processesWith(marker).filter((pid) => {
    try {
      const [program, ...args] = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((a) => a.length > 0)
      return /(^|\/)sleep$/.test(program ?? "") && args.includes(marker)
    } catch {
      return false
    }
  })

/** Kills the processes whose command line holds `marker` (one may end by itself meanwhile). */
export const killAll = (marker: string) => {
  for (const pid of processesWith(marker)) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // already gone
    }
  }
}

/** A `sleep` duration no other process uses, to find a test's processes in /proc. */
export const uniqueSleep = (): string => `${300 + Math.floor(Math.random() * 1000)}.${Math.floor(Math.random() * 1000)}`

/** Waits up to `ms` for `test` to hold, checking every 50 ms. */
export const eventually = async (test: () => boolean, ms: number): Promise<boolean> => {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (test()) return true
    await new Promise((r) => setTimeout(r, 50))
  }
  return test()
}

/**
 * Types `line` and Enter into the terminal once `marker` has appeared after `from`; returns where the
 * output stood just before, for the next wait.
 */
export const answer = async (cli: Running, marker: string | RegExp, line: string, from = 0): Promise<number> => {
  await cli.waitFor(marker, 90_000, from)
  const at = cli.output().length
  cli.write(`${line}\r`)
  return at
}

/**
 * Types a line once the run that printed `text` has ended (its usage line after it): typed while a
 * run works, the line would steer that run instead of being the next prompt.
 */
export const afterRun = (cli: Running, text: string, line: string, from = 0): Promise<number> =>
  answer(cli, new RegExp(`${text}[\\s\\S]*usage:[^\\n]*\\n`), line, from)

/** The content of the last tool result a request to the script server carried, as JSON text. */
export const lastToolResult = (body: Record<string, unknown>): string => {
  const messages = body["messages"] as Array<{ role: string; content: unknown }>
  return JSON.stringify(messages.filter((m) => m.role === "tool").at(-1)?.content)
}

/** The flags pointing the CLI at a script server. */
export const providerFlags = (server: ScriptServer, provider: "openai-compat" | "anthropic" = "openai-compat") =>
  provider === "openai-compat" ?
    ["--provider", "openai-compat", "--base-url", `${server.url}/v1`, "--model", "test-model"] :
    [
      "--provider",
      "anthropic",
      "--base-url",
      server.url,
      "--model",
      "claude-test",
      "--api-key-env",
      "AGENTLOOP_TEST_KEY"
    ]
