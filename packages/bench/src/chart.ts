/**
 * The SVG chart of a benchmark run, written by hand (no dependency): one panel per mode (cold,
 * warm), one group of bars per cell of the table, and in each group agentloop's cost divided by
 * each reference's (pi-agent-core at its cheapest, the hand-written floor), on a log scale with the
 * 1× line marked.
 *
 * @since 0.1.0
 */

/**
 * One series of the chart: a ratio and its colour.
 *
 * @since 0.1.0
 * @category models
 */
export interface Series {
  readonly key: string
  readonly label: string
  readonly color: string
}

/**
 * One panel: a mode and its groups of bars, a value per series key (NaN or absent: no bar).
 *
 * @since 0.1.0
 * @category models
 */
export interface Panel {
  readonly label: string
  readonly groups: ReadonlyArray<{ readonly label: string; readonly values: Readonly<Record<string, number>> }>
}

/**
 * What the chart shows.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChartData {
  readonly title: string
  readonly subtitle: string
  readonly series: ReadonlyArray<Series>
  readonly panels: ReadonlyArray<Panel>
}

const escape = (text: string): string =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

const fmt = (n: number): string => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2))

/** A power of ten as a label: 0.1, 1, 10, 1000. */
const fmtTick = (n: number): string => (n >= 1 ? n.toFixed(0) : String(Number(n.toPrecision(1))))

/** Powers of ten covering [min, max]. */
const decades = (min: number, max: number): Array<number> => {
  const out: Array<number> = []
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) out.push(10 ** e)
  return out
}

/**
 * Renders the chart as a standalone SVG document.
 *
 * @since 0.1.0
 * @category rendering
 */
export const renderChart = (data: ChartData): string => {
  const width = 1100
  const panelH = 250
  const top = 90
  const gap = 70
  const height = top + data.panels.length * (panelH + gap) + 10
  const parts: Array<string> = []
  const text = (x: number, y: number, body: string, attrs = "") =>
    parts.push(`<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attrs}>${escape(body)}</text>`)
  const line = (x1: number, y1: number, x2: number, y2: number, attrs: string) =>
    parts.push(
      `<line x1="${x1.toFixed(1)}" y1="${y1.toFixed(1)}" x2="${x2.toFixed(1)}" y2="${y2.toFixed(1)}" ${attrs}/>`
    )

  text(20, 28, data.title, `font-size="18" font-weight="bold"`)
  text(20, 48, data.subtitle, `font-size="12" fill="#555"`)
  data.series.forEach((s, i) => {
    const x = 20 + i * 330
    parts.push(`<rect x="${x}" y="60" width="12" height="12" fill="${s.color}"/>`)
    text(x + 18, 71, s.label, `font-size="12"`)
  })

  // one scale for every panel, so cold and warm compare at a glance
  const values = data.panels.flatMap((p) => p.groups.flatMap((g) => Object.values(g.values))).filter((v) => v > 0)
  const ticks = decades(Math.min(0.5, ...values), Math.max(2, ...values))
  const lo = Math.log10(ticks[0]!)
  const hi = Math.log10(ticks[ticks.length - 1]!)

  data.panels.forEach((panel, pi) => {
    const P = { x: 60, y: top + 20 + pi * (panelH + gap), w: width - 80, h: panelH - 40 }
    const yOf = (v: number) => P.y + P.h - ((Math.log10(v) - lo) / (hi - lo)) * P.h
    text(
      P.x,
      P.y - 8,
      `${panel.label} — agentloop's cost ÷ the other's (log scale; below 1× agentloop is cheaper)`,
      `font-size="13" font-weight="bold"`
    )
    for (const t of ticks) {
      line(P.x, yOf(t), P.x + P.w, yOf(t), `stroke="#ddd"`)
      text(P.x - 6, yOf(t) + 4, `${fmtTick(t)}×`, `font-size="11" text-anchor="end" fill="#555"`)
    }
    line(P.x, yOf(1), P.x + P.w, yOf(1), `stroke="#c00" stroke-dasharray="5 3"`)
    const groupW = P.w / Math.max(1, panel.groups.length)
    const barW = (groupW - 10) / data.series.length
    panel.groups.forEach((g, gi) => {
      const gx = P.x + gi * groupW + 5
      data.series.forEach((s, si) => {
        const v = g.values[s.key]
        if (v === undefined || !(v > 0)) return
        const x = gx + si * barW
        const base = yOf(ticks[0]!)
        const y = yOf(v)
        parts.push(
          `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${
            (base - y).toFixed(1)
          }" fill="${s.color}"><title>${escape(`${panel.label}, ${g.label}: ${s.label} ${fmt(v)}×`)}</title></rect>`
        )
        text(x + (barW - 2) / 2, y - 3, fmt(v), `font-size="9" text-anchor="middle" fill="#333"`)
      })
      const lines = g.label.split("\n")
      lines.forEach((l, li) =>
        text(gx + (groupW - 10) / 2, P.y + P.h + 14 + li * 12, l, `font-size="10" text-anchor="middle"`)
      )
    })
    line(P.x, P.y + P.h, P.x + P.w, P.y + P.h, `stroke="#333"`)
    line(P.x, P.y, P.x, P.y + P.h, `stroke="#333"`)
  })

  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" ` +
    `viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    ...parts,
    `</svg>`,
    ""
  ].join("\n")
}
