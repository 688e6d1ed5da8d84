/**
 * How long `agentloop chat` takes to exit, in a real pseudo-terminal: after `--continue`,
 * `/compact`, `/model` and `/clear` (the path issue 24 found slow), the time from Ctrl-D (and,
 * separately, from `/exit`) to the process's end, against a loopback model. Median of N fresh
 * processes, printed; a figure, not a test.
 *
 *     node packages/bench/src/exit.ts            # BENCH_EXIT_RUNS (default 10) processes per row
 */
import { fileURLToPath } from "node:url"

/** What this script uses of the CLI's test helpers (loaded at run time: they live in the CLI's tests). */
interface Running {
  readonly output: () => string
  readonly write: (text: string) => void
  readonly waitFor: (pattern: RegExp | string, timeoutMs?: number, from?: number) => Promise<void>
  readonly exitedWithin: (limitMs: number) => Promise<{ readonly code: number | null }>
}
interface Helpers {
  readonly scriptServer: (
    next: (body: Record<string, unknown>, index: number) => { readonly text: string }
  ) => Promise<{ readonly url: string; readonly close: () => Promise<void> }>
  readonly isSummaryRequest: (body: Record<string, unknown>) => boolean
  readonly makeWorkspace: () => string
  readonly testEnv: (workspace: string) => NodeJS.ProcessEnv
  readonly providerFlags: (server: { readonly url: string }) => Array<string>
  readonly startCli: (
    args: ReadonlyArray<string>,
    options: { readonly cwd: string; readonly env: NodeJS.ProcessEnv; readonly pty?: boolean }
  ) => Running
}

const helpersPath = fileURLToPath(new URL("../../cli/test/helpers/agent.ts", import.meta.url))
const h = (await import(helpersPath)) as Helpers
const runs = Number(process.env["BENCH_EXIT_RUNS"] ?? 10)

const server = await h.scriptServer((body, index) =>
  h.isSummaryRequest(body) ? { text: "summary" } : { text: `answer ${index + 1}` }
)
const median = (xs: Array<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

/** One chat: the commands, then `leave`; the milliseconds from `leave` to the exit. */
const once = async (ws: string, leave: string): Promise<number> => {
  const env = h.testEnv(ws)
  const cli = h.startCli(["chat", "--continue", ...h.providerFlags(server)], { cwd: ws, env, pty: true })
  await cli.waitFor("/help for commands")
  for (const [line, marker] of [["/compact", "compact"], ["/model other", "model: other"], ["/clear", "new session"]]) {
    const at = cli.output().length
    cli.write(`${line}\r`)
    await cli.waitFor(new RegExp(`${marker}[\\s\\S]*> `), 120_000, at)
  }
  const start = performance.now()
  cli.write(leave)
  const { code } = await cli.exitedWithin(120_000)
  const ms = performance.now() - start
  if (code !== 0) throw new Error(`agentloop chat exited ${code}`)
  return ms
}

try {
  const ws = h.makeWorkspace()
  const first = h.startCli(["run", ...h.providerFlags(server), "hello"], { cwd: ws, env: h.testEnv(ws) })
  await first.exitedWithin(120_000)
  for (const [name, leave] of [["Ctrl-D", "\u0004"], ["/exit", "/exit\r"]] as const) {
    const times: Array<number> = []
    for (let i = 0; i < runs; i++) times.push(await once(ws, leave))
    console.log(
      `chat exit after --continue, /compact, /model, /clear, on ${name}: median ${median(times).toFixed(0)} ms ` +
        `(min ${Math.min(...times).toFixed(0)}, max ${Math.max(...times).toFixed(0)}, ${runs} processes)`
    )
  }
} finally {
  await server.close()
}
