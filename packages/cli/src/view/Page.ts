/**
 * The viewer's page: one self-contained HTML document (styles and the small script inline, no
 * font, image or script from anywhere else), rendered on the server from a `Timeline`. Each turn
 * has a time axis of its own; the model's answer and each tool call are lanes on it, so calls
 * that ran in parallel show as bars side by side in time.
 *
 * Elements carry `data-testid` attributes (`run`, `turn`, `lane`, `approval`, `tokens`,
 * `invariant`) that tests and scripts can rely on.
 *
 * @since 0.1.0
 */
import type { Usage } from "@agentloop/core"
import { createHash } from "node:crypto"
import type { Compaction, Lane, LaneStatus, Run, SubAgentView, Timeline, Turn } from "./Timeline.ts"

const escapeHtml = (text: string): string =>
  text.replace(
    /[&<>"']/g,
    (c) => c === "&" ? "&amp;" : c === "<" ? "&lt;" : c === ">" ? "&gt;" : c === "\"" ? "&quot;" : "&#39;"
  )

const clip = (text: string, max: number): string => text.length <= max ? text : `${text.slice(0, max - 1)}…`

const number = (n: number): string => Math.round(n).toLocaleString("en-US")

/**
 * A duration for people: `830 ms`, `2.4 s`, `3 m 12 s`.
 *
 * @since 0.1.0
 * @category formatting
 */
export const formatDuration = (ms: number): string => {
  if (ms < 1000) return `${Math.round(ms)} ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`
  const minutes = Math.floor(ms / 60_000)
  const seconds = Math.round((ms % 60_000) / 1000)
  return minutes < 60 ? `${minutes} m ${seconds} s` : `${Math.floor(minutes / 60)} h ${minutes % 60} m`
}

const formatCost = (cost: number): string => cost >= 1 ? `$${cost.toFixed(2)}` : `$${cost.toFixed(4)}`

const formatTime = (at: number | undefined): string =>
  at === undefined ? "" : new Date(at).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC")

const usageText = (usage: Usage): string => {
  const parts = [`${number(usage.input)} in`, `${number(usage.output)} out`]
  if ((usage.cacheRead ?? 0) > 0) parts.push(`${number(usage.cacheRead!)} cache read`)
  if ((usage.cacheWrite ?? 0) > 0) parts.push(`${number(usage.cacheWrite!)} cache write`)
  if (usage.cost !== undefined) parts.push(formatCost(usage.cost))
  return parts.join(" · ")
}

const statusLabel: Record<LaneStatus, string> = {
  ok: "ok",
  error: "error",
  denied: "denied",
  skipped: "skipped",
  interrupted: "interrupted",
  timedOut: "timed out",
  running: "no result",
  unanswered: "no result"
}

const statusIcon: Record<LaneStatus, string> = {
  ok: "✓",
  error: "✗",
  denied: "⊘",
  skipped: "⊘",
  interrupted: "■",
  timedOut: "⏱",
  running: "…",
  unanswered: "?"
}

const reasonClass = (reason: string | undefined): string =>
  reason === undefined ? "warn" : reason === "stop" ? "good" : reason === "aborted" ? "abort" : "bad"

const badge = (text: string, kind: string, testId?: string): string =>
  `<span class="badge ${kind}"${testId === undefined ? "" : ` data-testid="${testId}"`}>${escapeHtml(text)}</span>`

const bar = (from: number, to: number, span: { start: number; length: number }, kind: string, title: string) => {
  const left = ((from - span.start) / span.length) * 100
  const width = Math.max(((to - from) / span.length) * 100, 0.6)
  return `<div class="bar ${kind}" style="left:${left.toFixed(3)}%;width:${
    Math.min(width, 100 - left).toFixed(3)
  }%" title="${escapeHtml(title)}"></div>`
}

const renderApproval = (lane: Lane): string => {
  const approval = lane.approval
  if (approval === undefined) return ""
  const who = approval.by === undefined ? "" : ` by ${approval.by}`
  const kind = approval.decision === "denied" ? "bad" : "good"
  const text = `${approval.decision}${who}${approval.reason === undefined ? "" : `: ${approval.reason}`}`
  return `<span class="approval ${kind}" data-testid="approval" data-decision="${approval.decision}" title="${
    escapeHtml(text)
  }">${approval.decision === "denied" ? "⊘" : "✓"} ${escapeHtml(clip(text, 90))}</span>`
}

const renderLane = (lane: Lane, turn: Turn, span: { start: number; length: number } | undefined): string => {
  const timed = lane.startedAt !== undefined && lane.endedAt !== undefined
  const duration = timed ? formatDuration(lane.endedAt! - lane.startedAt!) : statusLabel[lane.status]
  // The time the call waited for a decision: from the question (or, for older files, from when
  // its stage could start: the answer, or the last call that ended before the decision).
  const approval = lane.approval
  const asked = approval === undefined ? undefined : approval.askedAt ?? Math.max(
    turn.answeredAt ?? -Infinity,
    ...turn.lanes.flatMap((other) => other.endedAt !== undefined && other.endedAt <= approval.at ? [other.endedAt] : [])
  )
  const wait = span !== undefined && approval !== undefined && asked !== undefined && Number.isFinite(asked) &&
      approval.at > asked ?
    bar(asked, approval.at, span, "lane-wait", `waiting for approval: ${formatDuration(approval.at - asked)}`) :
    ""
  const run = span !== undefined && lane.startedAt !== undefined ?
    bar(
      lane.startedAt,
      lane.endedAt ?? span.start + span.length,
      span,
      `lane-${lane.status}`,
      `${lane.name}: ${duration}`
    ) :
    ""
  const track = wait + run !== "" ?
    wait + run :
    `<div class="untimed">${lane.status === "ok" || lane.status === "error" ? "no timing recorded" : "not run"}</div>`
  const result = lane.resultText === undefined ? "" : `<pre>${escapeHtml(clip(lane.resultText, 4000))}</pre>`
  return `<div class="lane status-${lane.status}" data-testid="lane" data-status="${lane.status}" data-tool="${
    escapeHtml(lane.name)
  }">
  <details>
    <summary>
      <span class="lane-label"><span class="icon">${statusIcon[lane.status]}</span><b>${escapeHtml(lane.name)}</b>
        <span class="args">${escapeHtml(clip(lane.summary, 80))}</span></span>
      <span class="track">${track}</span>
      <span class="lane-meta">${renderApproval(lane)}<span class="dur">${escapeHtml(duration)}</span></span>
    </summary>
    <div class="lane-detail">
      <div class="kv"><span>call</span><code>${escapeHtml(lane.toolCallId)}</code> <span>status</span> ${
    escapeHtml(statusLabel[lane.status])
  }${
    lane.skipReason === undefined || lane.skipReason === statusLabel[lane.status]
      ? ""
      : ` (${escapeHtml(lane.skipReason)})`
  }</div>
      <pre class="args-full">${escapeHtml(clip(JSON.stringify(lane.arguments, null, 2), 4000))}</pre>
      ${result}
    </div>
  </details>${lane.subAgent === undefined ? "" : renderSubAgent(lane.subAgent)}
</div>`
}

/** A run with no markers, for the turns of a sub-agent. */
const noMarkers: Run = {
  index: 0,
  prompt: "",
  startedAt: undefined,
  turns: [],
  compactions: [],
  modelChanges: [],
  end: undefined,
  runEnds: 0
}

/** A sub-agent's run, nested under the call that started it (its own sub-agents nested in turn). */
const renderSubAgent = (view: SubAgentView): string => {
  const tokens = view.usage === undefined ? "no usage reported" : usageText(view.usage)
  const error = view.error === undefined ?
    "" :
    `<div class="error-text" data-testid="subagent-error">${escapeHtml(clip(view.error, 600))}</div>`
  const output = view.output === undefined ?
    "" :
    `<details class="subagent-output"><summary>typed answer</summary><pre>${
      escapeHtml(clip(JSON.stringify(view.output, null, 2) ?? "", 4000))
    }</pre></details>`
  const broken = view.violations.length === 0 ?
    "" :
    `<div class="error-text" data-testid="subagent-violations">${
      view.violations.map((v) => escapeHtml(v.message)).join("<br>")
    }</div>`
  const reasonBadge = badge(view.reason, reasonClass(view.reason))
  return `<div class="subagent" data-testid="subagent" data-agent="${
    escapeHtml(view.agent)
  }" data-reason="${view.reason}">
  <div class="subagent-head">↳ sub-agent <b>${escapeHtml(view.agent)}</b>${reasonBadge}
    <span class="muted">${view.steps} step(s)</span><span class="spacer"></span>
    <span class="tokens">${escapeHtml(tokens)}</span></div>
  <div class="subagent-task">${escapeHtml(clip(view.task, 600))}</div>
  ${error}${broken}${output}
  ${view.turns.map((turn) => renderTurn(noMarkers, turn)).join("\n")}
</div>`
}

const renderCompaction = (c: Compaction): string =>
  `<div class="marker compaction" data-testid="compaction">⇣ context compacted${
    c.summarized === undefined ? "" : `: ${c.summarized} message(s) summarised`
  }${c.kept === undefined ? "" : `, ${c.kept} kept`}${
    c.usage === undefined ? "" : ` · ${escapeHtml(usageText(c.usage))}`
  }${
    c.summary === undefined
      ? ""
      : `<details><summary>summary</summary><pre>${escapeHtml(clip(c.summary, 4000))}</pre></details>`
  }</div>`

/** The compactions and model switches of a run placed before the turns `where` accepts, in time order. */
const renderMarkers = (run: Run, where: (beforeTurn: number) => boolean): string =>
  [
    ...run.compactions.filter((c) => where(c.beforeTurn)).map((c) => ({ at: c.at, html: renderCompaction(c) })),
    ...run.modelChanges.filter((m) => where(m.beforeTurn)).map((m) => ({
      at: m.at,
      html: `<div class="marker model-change" data-testid="model-change">⇄ model switched to <b>${
        escapeHtml(m.model)
      }</b></div>`
    }))
  ].sort((a, b) => a.at - b.at).map((marker) => marker.html).join("")

const renderTurn = (run: Run, turn: Turn): string => {
  const start = turn.startedAt ?? turn.lanes.find((l) => l.startedAt !== undefined)?.startedAt
  const end = turn.endedAt
  const span = start !== undefined && end !== undefined && end >= start ?
    { start, length: Math.max(end - start, 1) } :
    undefined
  const tokens = turn.usage === undefined ?
    `<span class="tokens none" data-testid="tokens">no usage reported</span>` :
    `<span class="tokens" data-testid="tokens">${escapeHtml(usageText(turn.usage))}</span>`
  const stop = turn.stopReason === undefined ?
    badge("no answer", "warn") :
    badge(
      turn.stopReason,
      turn.stopReason === "stop" || turn.stopReason === "toolUse" ? "neutral" : reasonClass(turn.stopReason)
    )
  const parallel = turn.maxParallel > 1 ? badge(`${turn.maxParallel} in parallel`, "info") : ""
  // A request with no answer (its stream failed or was aborted) ran until the turn ended.
  const answered = turn.answeredAt ?? (turn.stopReason === undefined ? turn.endedAt : undefined)
  const modelKind = turn.answeredAt === undefined ? "lane-unanswered" : "lane-model"
  const modelLane = span !== undefined && turn.startedAt !== undefined && answered !== undefined ?
    `<div class="lane model-lane"><div class="row"><span class="lane-label"><span class="icon">◆</span><b>model</b>
      <span class="args">${escapeHtml(turn.model ?? "")}</span></span><span class="track">${
      bar(turn.startedAt, answered, span, modelKind, turn.answeredAt === undefined ? "no answer" : "model response")
    }</span><span class="lane-meta"><span class="dur">${
      formatDuration(answered - turn.startedAt)
    }</span></span></div></div>` :
    ""
  const error = turn.errorMessage === undefined ?
    "" :
    `<div class="error-text" data-testid="turn-error">${escapeHtml(clip(turn.errorMessage, 600))}</div>`
  const text = turn.text.trim() === "" ? "" : `<div class="turn-text">${escapeHtml(clip(turn.text.trim(), 600))}</div>`
  return `${
    renderMarkers(run, (beforeTurn) => beforeTurn === turn.index)
  }<div class="turn" data-testid="turn" data-lanes="${turn.lanes.length}">
  <div class="turn-head">
    <span class="turn-title">Turn ${turn.index}</span>${stop}${parallel}
    <span class="spacer"></span>${tokens}
    <span class="dur">${span === undefined ? "" : formatDuration(span.length)}</span>
  </div>
  ${text}${error}
  <div class="lanes">${modelLane}${turn.lanes.map((lane) => renderLane(lane, turn, span)).join("\n")}</div>
</div>`
}

const renderRun = (run: Run): string => {
  const end = run.end
  const reason = end === undefined ?
    badge("no run_end (killed or still going)", "warn", "run-reason") :
    badge(end.reason, reasonClass(end.reason), "run-reason")
  const lastTurnEnd = run.turns[run.turns.length - 1]?.endedAt
  const endAt = end?.at ?? lastTurnEnd
  const duration = run.startedAt !== undefined && endAt !== undefined ? formatDuration(endAt - run.startedAt) : ""
  const usage = end?.usage ?? sumUsage(run.turns)
  const abort = end?.reason === "aborted" ?
    `<div class="banner abort" data-testid="abort">■ Aborted${
      end.error === undefined ? "" : `: ${escapeHtml(end.error)}`
    } — every call still got a result</div>` :
    ""
  const error = end !== undefined && end.reason !== "aborted" && end.error !== undefined ?
    `<div class="banner bad" data-testid="run-error">✗ ${escapeHtml(clip(end.error, 800))}</div>` :
    ""
  return `<section class="run" data-testid="run" data-reason="${escapeHtml(end?.reason ?? "unfinished")}">
  <div class="run-head">
    <span class="run-title">Run ${run.index}</span>${reason}
    <span class="prompt" title="${escapeHtml(run.prompt)}">${
    escapeHtml(clip(run.prompt.replace(/\s+/g, " "), 160))
  }</span>
    <span class="spacer"></span>
    <span class="meta">${run.turns.length} turn(s)${duration === "" ? "" : ` · ${duration}`}${
    usage === undefined ? "" : ` · ${escapeHtml(usageText(usage))}`
  }</span>
  </div>
  ${abort}${error}
  ${run.turns.map((turn) => renderTurn(run, turn)).join("\n")}${
    renderMarkers(run, (beforeTurn) => beforeTurn > run.turns.length)
  }
</section>`
}

const sumUsage = (turns: ReadonlyArray<Turn>): Usage | undefined => {
  const withUsage = turns.flatMap((t) => t.usage === undefined ? [] : [t.usage])
  if (withUsage.length === 0) return undefined
  let input = 0, output = 0, cacheRead = 0, cacheWrite = 0
  let cost: number | undefined
  for (const u of withUsage) {
    input += u.input
    output += u.output
    cacheRead += u.cacheRead ?? 0
    cacheWrite += u.cacheWrite ?? 0
    if (u.cost !== undefined) cost = (cost ?? 0) + u.cost
  }
  return { input, output, cacheRead, cacheWrite, ...(cost === undefined ? {} : { cost }) }
}

const card = (label: string, value: string, testId: string, sub = ""): string =>
  `<div class="card" data-testid="${testId}"><div class="card-label">${
    escapeHtml(label)
  }</div><div class="card-value">${escapeHtml(value)}</div>${
    sub === "" ? "" : `<div class="card-sub">${escapeHtml(sub)}</div>`
  }</div>`

const renderInvariants = (timeline: Timeline): string => {
  const failed = timeline.invariants.filter((c) => c.violations.length > 0).length
  const items = timeline.invariants.map((check) => {
    const ok = check.violations.length === 0
    const list = [
      ...check.violations.map((v) => `<li class="bad">${escapeHtml(v)}</li>`),
      ...check.notes.map((n) => `<li class="note">${escapeHtml(n)}</li>`)
    ]
    return `<li class="check ${ok ? "ok" : "failed"}" data-testid="invariant" data-check="${check.id}" data-ok="${ok}">
      <span class="icon">${ok ? "✓" : "✗"}</span>${escapeHtml(check.title)}${
      list.length === 0
        ? ""
        : `<ul>${list.slice(0, 50).join("")}${list.length > 50 ? `<li>… ${list.length - 50} more</li>` : ""}</ul>`
    }</li>`
  }).join("")
  return `<section class="invariants ${
    failed === 0 ? "ok" : "failed"
  }" data-testid="invariants" data-failed="${failed}">
  <h2>${failed === 0 ? "✓ Invariants hold" : `✗ ${failed} invariant check(s) failed`}</h2>
  <ul>${items}</ul>
</section>`
}

/**
 * The JSON of `value` for a `<script type="application/json">` block: `<`, `>`, `&` and the two
 * JavaScript line separators as `\u` escapes, so no text in it (`</script>`, `<!--`) can end the
 * block or start another element; `JSON.parse` of the block's text gives `value` back.
 *
 * @since 0.1.0
 * @category rendering
 */
export const jsonForScript = (value: unknown): string =>
  JSON.stringify(value).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`
  )

/**
 * The Content-Security-Policy of an exported page (in its `<meta>`): nothing loads from anywhere
 * and no script runs at all, its own included (it has none: there is no server to poll).
 *
 * @since 0.1.0
 * @category rendering
 */
export const standalonePolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; " +
  "form-action 'none'"

/**
 * The whole page for a timeline. `source` names the file shown; `version` (a number that changes
 * when the file grows) lets the page's script reload itself while a session is still being written.
 * `standalone`: the page as one file to keep or send (`agentloop export`): no live reload and no
 * script, a Content-Security-Policy of its own in a `<meta>` (`standalonePolicy`), and the data
 * the server gives at `/api/session` (`{ file, timeline }`) embedded as a JSON block
 * (`<script type="application/json" id="agentloop-session">`, never run).
 *
 * @since 0.1.0
 * @category rendering
 */
export const renderPage = (
  timeline: Timeline,
  source: { readonly file: string; readonly version: string; readonly standalone?: boolean | undefined }
): string => {
  const standalone = source.standalone === true
  const header = timeline.header
  const totals = timeline.totals
  const title = header?.id ?? source.file.split("/").pop() ?? "session"
  const duration = timeline.startedAt !== undefined && timeline.endedAt !== undefined ?
    formatDuration(timeline.endedAt - timeline.startedAt) :
    "—"
  const tokens = `${number(totals.input)} in · ${number(totals.output)} out`
  const cache = [
    totals.cacheRead > 0 ? `${number(totals.cacheRead)} cache read` : "",
    totals.cacheWrite > 0 ? `${number(totals.cacheWrite)} cache write` : ""
  ].filter((x) => x !== "").join(" · ")
  const byStatus = new Map<string, number>()
  for (const run of timeline.runs) {
    for (const turn of run.turns) {
      for (const lane of turn.lanes) {
        byStatus.set(statusLabel[lane.status], (byStatus.get(statusLabel[lane.status]) ?? 0) + 1)
      }
    }
  }
  const calls = [...byStatus].map(([status, n]) => `${n} ${status}`).join(" · ")
  const problems = timeline.problems.length === 0 ?
    "" :
    `<section class="problems" data-testid="problems">` +
    `<h2>${timeline.problems.length} line(s) could not be read</h2><ul>${
      timeline.problems.slice(0, 50).map((p) => `<li>line ${p.line}: ${escapeHtml(p.problem)}</li>`).join("")
    }</ul></section>`
  const meta = [
    header?.provider === undefined ? "" : `provider <b>${escapeHtml(header.provider)}</b>`,
    header?.model === undefined ? "" : `model <b>${escapeHtml(header.model)}</b>`,
    header?.cwd === undefined ? "" : `in <code>${escapeHtml(header.cwd)}</code>`,
    timeline.startedAt === undefined ? "" : `started ${escapeHtml(formatTime(timeline.startedAt))}`,
    header?.forkedFrom === undefined ?
      "" :
      `forked from <b>${escapeHtml(header.forkedFrom.session)}</b> at prompt ${
        escapeHtml(String(header.forkedFrom.prompt))
      }`
  ].filter((x) => x !== "").join(" · ")
  const system = header?.systemPrompt === undefined ?
    "" :
    `<details class="system"><summary>System prompt</summary><pre>${escapeHtml(header.systemPrompt)}</pre></details>`
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">${
    standalone ? `\n<meta http-equiv="Content-Security-Policy" content="${escapeHtml(standalonePolicy)}">` : ""
  }
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agentloop · ${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body data-version="${escapeHtml(source.version)}">
<header class="top">
  <div class="brand">agentloop <span>view</span></div>
  <div class="session"><h1>${escapeHtml(title)}</h1><div class="meta">${meta}</div>
  <div class="file"><code>${escapeHtml(source.file)}</code></div></div>
${standalone ? "" : `  <label class="live"><input type="checkbox" id="live" checked> live</label>\n`}</header>
<main>
<section class="cards">
  ${card("Runs", number(totals.runs), "total-runs")}
  ${card("Turns", number(totals.turns), "total-turns")}
  ${card("Tool calls", number(totals.toolCalls), "total-calls", calls)}
  ${card("Tokens", tokens, "total-tokens", cache)}
  ${card("Cost", totals.cost === undefined ? "—" : formatCost(totals.cost), "total-cost")}
  ${card("Duration", duration, "total-duration")}
</section>
${renderInvariants(timeline)}
${problems}
${system}
${
    timeline.runs.length === 0
      ? `<p class="empty">This session has no runs yet.</p>`
      : timeline.runs.map(renderRun).join("\n")
  }
</main>
${
    standalone ?
      `<footer>Exported by <code>agentloop export</code>; this page loads nothing from the network and runs no ` +
      `script.</footer>\n<script type="application/json" id="agentloop-session">${
        jsonForScript({ file: source.file, timeline })
      }</script>` :
      `<footer>Served locally by <code>agentloop view</code>; this page loads nothing from the network.</footer>\n` +
      `<script>${SCRIPT}</script>`
  }
</body>
</html>
`
}

// While "live" is checked, reload when the session file changes (a run still going).
const SCRIPT = `
(() => {
  const box = document.getElementById("live");
  const key = "agentloop-view-live";
  box.checked = sessionStorage.getItem(key) !== "off";
  box.addEventListener("change", () => sessionStorage.setItem(key, box.checked ? "on" : "off"));
  const version = document.body.dataset.version;
  setInterval(async () => {
    if (!box.checked || document.querySelector("details[open]")) return;
    try {
      const res = await fetch("/api/version", { cache: "no-store" });
      if (res.ok && (await res.text()) !== version) location.reload();
    } catch {}
  }, 2000);
})();
`

const STYLE = `
:root {
  --bg: #f6f7f9; --panel: #fff; --ink: #1c2330; --muted: #6b7585; --line: #e3e6eb;
  --good: #1f8a4c; --good-bg: #e5f5ec; --bad: #c23a3a; --bad-bg: #fbe9e9; --warn: #a86b00; --warn-bg: #fff3d6;
  --abort: #8a3fb8; --abort-bg: #f3e8fa; --info: #2a62c9; --info-bg: #e6eefc; --model: #7c8799;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
code, pre, .args, .tokens, .dur {
  font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace; }
pre { white-space: pre-wrap; word-break: break-word; background: #f3f4f6; border-radius: 6px; padding: 8px 10px;
  margin: 6px 0 0; font-size: 12px; max-height: 320px; overflow: auto; }
header.top { display: flex; gap: 24px; align-items: center; padding: 14px 28px; background: #141a24; color: #e8ecf2; }
.brand { font-weight: 700; font-size: 16px; letter-spacing: .3px; white-space: nowrap; }
.brand span { color: #8fb3ff; font-weight: 500; }
.session h1 { margin: 0; font-size: 17px; font-weight: 600; }
.session .meta { color: #aab4c3; font-size: 12.5px; }
.session .meta b { color: #e8ecf2; font-weight: 600; }
.session .file { color: #7f8a9b; font-size: 11.5px; }
.session code { color: inherit; }
.live { margin-left: auto; color: #aab4c3; font-size: 12px; user-select: none; white-space: nowrap; }
main { max-width: 1280px; margin: 0 auto; padding: 20px 28px 40px; }
.cards { display: grid; grid-template-columns: repeat(6, 1fr); gap: 12px; margin-bottom: 16px; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; padding: 10px 14px; }
.card-label { color: var(--muted); font-size: 11.5px; text-transform: uppercase; letter-spacing: .6px; }
.card-value { font-size: 18px; font-weight: 600; margin-top: 2px; white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; }
.card-sub { color: var(--muted); font-size: 12px; }
.invariants { background: var(--panel); border: 1px solid var(--line); border-left: 4px solid var(--good);
  border-radius: 10px;
  padding: 10px 16px; margin-bottom: 16px; }
.invariants.failed { border-left-color: var(--bad); }
.invariants h2 { font-size: 14px; margin: 0 0 4px; color: var(--good); }
.invariants.failed h2 { color: var(--bad); }
.invariants > ul { list-style: none; margin: 0; padding: 0; display: grid; grid-template-columns: 1fr 1fr;
  gap: 2px 24px; }
.check { font-size: 13px; }
.check .icon { display: inline-block; width: 18px; font-weight: 700; }
.check.ok .icon { color: var(--good); } .check.failed .icon { color: var(--bad); }
.check ul { margin: 2px 0 6px 18px; padding-left: 14px; font-size: 12px; }
.check li.bad { color: var(--bad); } .check li.note { color: var(--warn); }
.problems { background: var(--warn-bg); border-radius: 10px; padding: 8px 16px; margin-bottom: 16px;
  color: var(--warn); }
.problems h2 { font-size: 14px; margin: 0; }
details.system { margin-bottom: 16px; color: var(--muted); }
details.system summary { cursor: pointer; }
.run { background: var(--panel); border: 1px solid var(--line); border-radius: 12px; margin-bottom: 18px;
  overflow: hidden; }
.run-head { display: flex; align-items: center; gap: 10px; padding: 12px 16px; border-bottom: 1px solid var(--line);
  background: #fbfbfc; }
.run-title { font-weight: 700; font-size: 15px; white-space: nowrap; }
.prompt { color: var(--ink); font-style: italic; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
  min-width: 0; }
.prompt::before { content: "“"; } .prompt::after { content: "”"; }
.spacer { flex: 1; }
.meta { color: var(--muted); font-size: 12.5px; white-space: nowrap; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 11.5px; font-weight: 600;
  white-space: nowrap; }
.badge.good { color: var(--good); background: var(--good-bg); }
.badge.bad { color: var(--bad); background: var(--bad-bg); }
.badge.warn { color: var(--warn); background: var(--warn-bg); }
.badge.abort { color: var(--abort); background: var(--abort-bg); }
.badge.info { color: var(--info); background: var(--info-bg); }
.badge.neutral { color: #4a5566; background: #eef0f3; }
.banner { margin: 10px 16px 0; padding: 8px 12px; border-radius: 8px; font-weight: 600; font-size: 13px; }
.banner.abort { color: var(--abort); background: var(--abort-bg); }
.banner.bad { color: var(--bad); background: var(--bad-bg); }
.turn { margin: 12px 16px; padding: 10px 12px; border: 1px solid var(--line); border-radius: 10px; }
.turn-head { display: flex; align-items: center; gap: 8px; }
.turn-title { font-weight: 600; }
.tokens { font-size: 12px; color: #3d4756; background: #f1f3f6; padding: 1px 8px; border-radius: 6px; }
.tokens.none { color: var(--muted); background: none; }
.dur { font-size: 12px; color: var(--muted); min-width: 56px; text-align: right; }
.turn-text { margin: 6px 0 2px; color: #3d4756; font-size: 13px; white-space: pre-wrap; max-height: 4.4em;
  overflow: hidden; }
.error-text { margin: 6px 0 2px; color: var(--bad); font-size: 13px; }
.lanes { margin-top: 8px; display: flex; flex-direction: column; gap: 3px; }
.lane summary, .lane .row { display: grid; grid-template-columns: minmax(140px, 24%) 1fr minmax(100px, 22%);
  align-items: center; gap: 10px;
  padding: 3px 6px; border-radius: 6px; }
.lane summary { cursor: pointer; list-style: none; }
.lane summary::-webkit-details-marker { display: none; }
.lane summary:hover { background: #f4f6f9; }
.lane-label { display: flex; gap: 6px; align-items: baseline; min-width: 0; white-space: nowrap; }
.lane-label .icon { width: 14px; text-align: center; font-weight: 700; }
.lane-label .args { color: var(--muted); font-size: 12px; overflow: hidden; text-overflow: ellipsis; }
.track { position: relative; height: 16px;
  background: repeating-linear-gradient(90deg, #f0f2f5 0 1px, transparent 1px 10%);
  border-radius: 4px; background-color: #fafbfc; }
.bar { position: absolute; top: 2px; bottom: 2px; border-radius: 4px; min-width: 3px; }
.lane-model { background: var(--model); opacity: .55; }
.lane-ok { background: var(--good); } .lane-error { background: var(--bad); }
.lane-timedOut { background: var(--warn); }
.lane-interrupted { background: var(--abort); }
.lane-running, .lane-unanswered { background: repeating-linear-gradient(45deg, var(--warn) 0 6px, #f5c25c 6px 12px); }
.lane-denied, .lane-skipped { background: #c5cad3; }
.lane-wait { background: repeating-linear-gradient(45deg, #dfe3ea 0 4px, #f3f5f8 4px 8px); border: 1px solid #d3d8e0; }
.untimed { color: var(--muted); font-size: 11.5px; font-style: italic; padding-left: 4px; }
.lane-meta { display: flex; justify-content: flex-end; gap: 8px; align-items: center; min-width: 0; }
.status-ok .icon { color: var(--good); } .status-error .icon { color: var(--bad); }
.status-denied .icon, .status-skipped .icon { color: var(--muted); } .status-interrupted .icon { color: var(--abort); }
.status-timedOut .icon, .status-unanswered .icon, .status-running .icon { color: var(--warn); }
.model-lane .icon { color: var(--model); }
.approval { font-size: 11.5px; padding: 1px 8px; border-radius: 999px; white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; }
.approval.good { color: var(--good); background: var(--good-bg); }
.approval.bad { color: var(--bad); background: var(--bad-bg); }
.lane-detail { margin: 2px 6px 8px 26px; font-size: 12px; }
.subagent { margin: 4px 0 8px 26px; padding: 6px 8px; border-left: 3px solid var(--model); background: #f8f9fc; }
.subagent-head { display: flex; gap: 8px; align-items: baseline; font-size: 13px; }
.subagent-task { color: var(--muted); font-size: 12px; margin: 2px 0 4px; white-space: pre-wrap; }
.subagent .turn { margin-top: 6px; }
.subagent-head .muted { color: var(--muted); }
.lane-detail .kv span { color: var(--muted); margin-right: 4px; }
.marker { margin: 12px 16px; padding: 6px 12px; border: 1px dashed var(--info); color: var(--info);
  border-radius: 8px; font-size: 12.5px; }
.marker details summary { cursor: pointer; }
.empty { color: var(--muted); }
footer { color: var(--muted); font-size: 12px; text-align: center; padding: 0 0 24px; }
@media (max-width: 900px) {
  .cards { grid-template-columns: repeat(3, 1fr); }
  .invariants > ul { grid-template-columns: 1fr; }
  header.top, main { padding-left: 14px; padding-right: 14px; }
}
`

/**
 * The `script-src` source of the page's only script (its SHA-256), for a Content-Security-Policy
 * that lets that script run and no other, even one that found its way into the page's text.
 *
 * @since 0.1.0
 * @category rendering
 */
export const pageScriptSource = `'sha256-${createHash("sha256").update(SCRIPT).digest("base64")}'`
