/**
 * The SVG chart of a benchmark run, written by hand (no dependency): on the left, each
 * workload's time relative to the floor (log scale, one bar per contender); on the right, the
 * time per step of workload (b) against the number of steps (log scale), which is flat for a
 * loop whose cost per step does not grow with the transcript.
 *
 * @since 0.1.0
 */

/**
 * One series of the chart: a contender and its colour.
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
 * What the chart shows.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChartData {
  readonly title: string
  readonly subtitle: string
  readonly series: ReadonlyArray<Series>
  /** Bar groups: one per workload, a value per series key (time ÷ floor time). */
  readonly groups: ReadonlyArray<{ readonly label: string; readonly values: Readonly<Record<string, number>> }>
  /** Lines: x = steps, y = µs per step, per series key. */
  readonly steps: ReadonlyArray<number>
  readonly perStep: Readonly<Record<string, ReadonlyArray<number>>>
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
  const width = 1000
  const height = 440
  const parts: Array<string> = []
  const text = (x: number, y: number, body: string, attrs = "") =>
    parts.push(`<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attrs}>${escape(body)}</text>`)
  const line = (x1: number, y1: number, x2: number, y2: number, attrs: string) =>
    parts.push(
      `<line x1="${x1.toFixed(1)}" y1="${y1.toFixed(1)}" x2="${x2.toFixed(1)}" y2="${y2.toFixed(1)}" ${attrs}/>`
    )

  text(20, 28, data.title, `font-size="18" font-weight="bold"`)
  text(20, 48, data.subtitle, `font-size="12" fill="#555"`)

  // legend
  data.series.forEach((s, i) => {
    const x = 20 + i * 190
    parts.push(`<rect x="${x}" y="60" width="12" height="12" fill="${s.color}"/>`)
    text(x + 18, 71, s.label, `font-size="12"`)
  })

  // ---- left panel: bars, time ÷ floor, log scale
  const L = { x: 70, y: 100, w: 470, h: 270 }
  const values = data.groups.flatMap((g) => Object.values(g.values)).filter((v) => v > 0)
  const ticks = decades(Math.min(0.5, ...values), Math.max(2, ...values))
  const lo = Math.log10(ticks[0]!)
  const hi = Math.log10(ticks[ticks.length - 1]!)
  const yOf = (v: number) => L.y + L.h - ((Math.log10(v) - lo) / (hi - lo)) * L.h
  text(L.x, L.y - 12, "time relative to the floor (log scale; lower is better)", `font-size="13" font-weight="bold"`)
  for (const t of ticks) {
    line(L.x, yOf(t), L.x + L.w, yOf(t), `stroke="#ddd"`)
    text(L.x - 8, yOf(t) + 4, `${fmtTick(t)}×`, `font-size="11" text-anchor="end" fill="#555"`)
  }
  line(L.x, yOf(1), L.x + L.w, yOf(1), `stroke="#888" stroke-dasharray="4 3"`)
  const groupW = L.w / data.groups.length
  const barW = (groupW - 16) / data.series.length
  data.groups.forEach((g, gi) => {
    const gx = L.x + gi * groupW + 8
    data.series.forEach((s, si) => {
      const v = g.values[s.key]
      if (v === undefined || !(v > 0)) return
      const x = gx + si * barW
      const base = yOf(ticks[0]!)
      const y = yOf(v)
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${
          (base - y).toFixed(1)
        }" fill="${s.color}"><title>${escape(`${s.label}: ${fmt(v)}× the floor`)}</title></rect>`
      )
      text(x + (barW - 2) / 2, y - 3, fmt(v), `font-size="9" text-anchor="middle" fill="#333"`)
    })
    text(gx + (groupW - 16) / 2, L.y + L.h + 16, g.label, `font-size="11" text-anchor="middle"`)
  })
  line(L.x, L.y + L.h, L.x + L.w, L.y + L.h, `stroke="#333"`)
  line(L.x, L.y, L.x, L.y + L.h, `stroke="#333"`)

  // ---- right panel: µs per step against steps, log y
  const R = { x: 640, y: 100, w: 330, h: 270 }
  const all = Object.values(data.perStep).flat().filter((v) => v > 0)
  const rt = decades(Math.min(...all), Math.max(...all))
  const rlo = Math.log10(rt[0]!)
  const rhi = Math.log10(rt[rt.length - 1]!)
  const ry = (v: number) => R.y + R.h - ((Math.log10(v) - rlo) / (rhi - rlo)) * R.h
  const xs = data.steps
  const rx = (i: number) => R.x + (xs.length === 1 ? R.w / 2 : (i / (xs.length - 1)) * R.w)
  text(R.x - 40, R.y - 12, "(b) µs per step vs steps (log scale; flat = linear)", `font-size="13" font-weight="bold"`)
  for (const t of rt) {
    line(R.x, ry(t), R.x + R.w, ry(t), `stroke="#ddd"`)
    text(R.x - 8, ry(t) + 4, fmtTick(t), `font-size="11" text-anchor="end" fill="#555"`)
  }
  xs.forEach((s, i) => text(rx(i), R.y + R.h + 16, String(s), `font-size="11" text-anchor="middle"`))
  text(R.x + R.w / 2, R.y + R.h + 32, "steps", `font-size="11" text-anchor="middle" fill="#555"`)
  for (const s of data.series) {
    const ys = data.perStep[s.key]
    if (ys === undefined) continue
    const pts = ys.map((v, i) => `${rx(i).toFixed(1)},${ry(v).toFixed(1)}`).join(" ")
    parts.push(`<polyline points="${pts}" fill="none" stroke="${s.color}" stroke-width="2"/>`)
    ys.forEach((v, i) =>
      parts.push(
        `<circle cx="${rx(i).toFixed(1)}" cy="${ry(v).toFixed(1)}" r="3" fill="${s.color}"><title>${
          escape(`${s.label}: ${fmt(v)} µs/step at ${xs[i]} steps`)
        }</title></circle>`
      )
    )
  }
  line(R.x, R.y + R.h, R.x + R.w, R.y + R.h, `stroke="#333"`)
  line(R.x, R.y, R.x, R.y + R.h, `stroke="#333"`)

  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" ` +
    `viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    ...parts,
    `</svg>`,
    ""
  ].join("\n")
}
