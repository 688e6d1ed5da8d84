/**
 * The providers bench: agentloop's `openAiCompatFetchLayer` and `anthropicFetchLayer` against the
 * official `openai` and `@anthropic-ai/sdk` clients, all reading the same large generated
 * response (≥ 10 MB of server-sent events in each provider's wire format) from the same HTTP
 * server on 127.0.0.1. Every cell runs in a fresh process (`cell.ts`), several times, contenders
 * in a rotating order; the table gives medians.
 *
 * `node packages/bench/src/providers/bench.ts` (Node 22). Environment: `BENCH_PROVIDERS_MB`
 * (size of the large response, default 12; 10 with `BENCH_QUICK=1`), `BENCH_PROVIDERS_RUNS` (processes per cell,
 * default 5),
 * `BENCH_QUICK=1` (3 processes per cell, about a minute), `BENCH_PROVIDERS_ONLY` (`openai` or
 * `anthropic`), `BENCH_PROVIDERS_CONTENDERS` (a comma-separated subset of `agentloop,sdk,sdk-final`),
 * `BENCH_PROVIDERS_BEFORE` (the `packages/providers/src/index.ts` of another checkout, measured as
 * one more contender: before → after under the same load), `BENCH_PROVIDERS_JSON` (a file to write the figures to).
 *
 * @since 0.1.0
 */
import { spawn } from "node:child_process"
import { writeFileSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import type { CellResult, ContenderKey, ProviderKey } from "./cell.ts"
import { anthropicStream, openAiStream, shapeOf } from "./wire.ts"
import type { GeneratedStream } from "./wire.ts"

const here = dirname(fileURLToPath(import.meta.url))
const quick = process.env["BENCH_QUICK"] === "1"
const megabytes = Number(process.env["BENCH_PROVIDERS_MB"] ?? (quick ? 10 : 12))
const runs = Number(process.env["BENCH_PROVIDERS_RUNS"] ?? (quick ? 3 : 5))
const only = process.env["BENCH_PROVIDERS_ONLY"]
const providers: ReadonlyArray<ProviderKey> = (["openai", "anthropic"] as const).filter((p) =>
  only === undefined || p === only
)
const before = process.env["BENCH_PROVIDERS_BEFORE"]
const contenders: ReadonlyArray<ContenderKey> = (["agentloop", "agentloop-before", "sdk", "sdk-final"] as const).filter(
  (c) =>
    (c !== "agentloop-before" || before !== undefined) &&
    (process.env["BENCH_PROVIDERS_CONTENDERS"] === undefined ||
      process.env["BENCH_PROVIDERS_CONTENDERS"].split(",").includes(c))
)
const names: Record<ContenderKey, Record<ProviderKey, string>> = {
  agentloop: { openai: "agentloop openAiCompatFetchLayer", anthropic: "agentloop anthropicFetchLayer" },
  "agentloop-before": {
    openai: "agentloop openAiCompatFetchLayer (BENCH_PROVIDERS_BEFORE)",
    anthropic: "agentloop anthropicFetchLayer (BENCH_PROVIDERS_BEFORE)"
  },
  sdk: {
    openai: "openai: chat.completions.create (iterator)",
    anthropic: "@anthropic-ai/sdk: messages.create (iterator)"
  },
  "sdk-final": {
    openai: "openai: chat.completions.stream + finalChatCompletion()",
    anthropic: "@anthropic-ai/sdk: messages.stream + finalMessage()"
  }
}

const streams: Record<ProviderKey, { readonly small: GeneratedStream; readonly full: GeneratedStream }> = {
  openai: { small: openAiStream(shapeOf(1)), full: openAiStream(shapeOf(megabytes)) },
  anthropic: { small: anthropicStream(shapeOf(1)), full: anthropicStream(shapeOf(megabytes)) }
}

/** The body is written in 16 KiB pieces (a TLS record's worth), waiting for the socket to drain. */
const PIECE = 16 * 1024

const server = createServer((req, res) => {
  req.resume()
  req.on("end", () => {
    const url = req.url ?? ""
    const provider: ProviderKey | undefined = url.endsWith("/v1/chat/completions") ?
      "openai" :
      url.endsWith("/v1/messages") ?
      "anthropic" :
      undefined
    const size = url.startsWith("/small/") ? "small" : url.startsWith("/full/") ? "full" : undefined
    if (provider === undefined || size === undefined) {
      res.writeHead(404).end()
      return
    }
    const body = streams[provider][size].body
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" })
    let offset = 0
    const pump = () => {
      while (offset < body.length) {
        const piece = body.subarray(offset, offset + PIECE)
        offset += piece.length
        if (!res.write(piece)) {
          res.once("drain", pump)
          return
        }
      }
      res.end()
    }
    pump()
  })
})

const median = (values: ReadonlyArray<number>): number => {
  const sorted = values.slice().sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const runCell = (provider: ProviderKey, contender: ContenderKey, url: string): Promise<CellResult> =>
  new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        "--expose-gc",
        "--conditions=agentloop-source",
        ...(process.env["BENCH_PROVIDERS_NODE_ARGS"] ?? "").split(" ").filter(
          (arg) => arg !== ""
        ),
        join(here, "cell.ts"),
        provider,
        contender,
        url
      ],
      { stdio: ["ignore", "pipe", "inherit"] }
    )
    let out = ""
    child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()))
    child.on("error", reject)
    child.on("close", (code) => {
      const line = out.trim().split("\n").pop() ?? ""
      if (code !== 0 || line === "") reject(new Error(`${provider}/${contender} exited ${code}: ${out}`))
      else resolve(JSON.parse(line) as CellResult)
    })
  })

const fmt = (n: number, digits = 0) =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })
const mb = (bytes: number) => fmt(bytes / (1024 * 1024), 1)

const main = async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const results: Record<string, Array<CellResult>> = {}
  const started = performance.now()
  const loadBefore = os.loadavg()
  for (let round = 0; round < runs; round++) {
    for (const provider of providers) {
      // rotate the order so that no contender always runs first (or last) in a round
      const order = contenders.map((_, i) => contenders[(i + round) % contenders.length]!)
      for (const contender of order) {
        const result = await runCell(provider, contender, url)
        ;(results[`${provider}/${contender}`] ??= []).push(result)
      }
    }
  }
  const loadAfter = os.loadavg()
  server.close()
  const lines: Array<string> = []
  lines.push(
    `Node ${process.version}, ${os.cpus().length} cores (${os.cpus()[0]?.model.trim()}), load average ${
      loadBefore.map((l) => l.toFixed(2)).join(" ")
    } before, ${loadAfter.map((l) => l.toFixed(2)).join(" ")} after; median of ${runs} processes per cell ` +
      `(${fmt((performance.now() - started) / 1000, 0)} s in all).`
  )
  lines.push("")
  lines.push(
    "| provider | contender | events/s | time (ms) | CPU (ms) | peak heap used (MB) | peak live heap (MB) | peak " +
      "RSS (MB) | ÷ agentloop time | ÷ agentloop CPU |"
  )
  lines.push("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
  const summary: Array<Record<string, unknown>> = []
  for (const provider of providers) {
    const stream = streams[provider].full
    const ownCell = results[`${provider}/agentloop`] ?? results[`${provider}/${contenders[0]}`]!
    const own = median(ownCell.map((r) => r.ms))
    const ownCpu = median(ownCell.map((r) => r.cpuMs))
    for (const contender of contenders) {
      const cell = results[`${provider}/${contender}`]!
      const expectedText = `text=${stream.textLength}`
      const expectedFull = `toolUse text=${stream.textLength} calls=${stream.toolCalls} args=${stream.argumentsLength}`
      for (const r of cell) {
        const ok = contender === "sdk" ? r.digest === expectedText : r.digest === expectedFull
        if (!ok) throw new Error(`${provider}/${contender} assembled "${r.digest}", expected "${expectedFull}"`)
      }
      const ms = median(cell.map((r) => r.ms))
      const figures = {
        provider,
        contender,
        ms,
        cpuMs: median(cell.map((r) => r.cpuMs)),
        eventsPerSecond: stream.wireEvents / (ms / 1000),
        heapUsedPeak: median(cell.map((r) => r.heapUsedPeak)),
        livePeak: median(cell.map((r) => r.livePeak)),
        maxRss: median(cell.map((r) => r.maxRss)),
        runs: cell.map((r) => Math.round(r.ms))
      }
      summary.push(figures)
      lines.push(
        `| ${provider} | ${names[contender][provider]} | ${fmt(figures.eventsPerSecond)} | ${fmt(ms)} | ${
          fmt(figures.cpuMs)
        } | ${mb(figures.heapUsedPeak)} | ${mb(figures.livePeak)} | ${mb(figures.maxRss)} | ${
          (ms / own).toFixed(2)
        }× | ${(figures.cpuMs / ownCpu).toFixed(2)}× |`
      )
    }
  }
  lines.push("")
  for (const provider of providers) {
    const s = streams[provider].full
    lines.push(
      `${provider}: ${mb(s.body.length)} MB, ${fmt(s.wireEvents)} events (${fmt(s.textDeltas)} text deltas, ` +
        `${fmt(s.argumentDeltas)} argument fragments in ${s.toolCalls} tool calls)`
    )
  }
  lines.push(
    `times per run (ms): ${
      summary.map((s) => `${s["provider"]}/${s["contender"]} ${(s["runs"] as Array<number>).join(" ")}`).join("; ")
    }`
  )
  process.stdout.write(`${lines.join("\n")}\n`)
  const json = process.env["BENCH_PROVIDERS_JSON"]
  if (json !== undefined) writeFileSync(json, JSON.stringify({ load: { loadBefore, loadAfter }, summary }, null, 2))
}

await main()
