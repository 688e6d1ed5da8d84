/**
 * The viewer's page in a real headless browser (npm's Chromium, see chromium.ts, driven by playwright-core):
 * served by `serveSession` from a recorded session, with every request the page makes recorded
 * to prove it loads nothing from the network. A full-page screenshot is kept under the OS temp
 * folder (its path is printed).
 */
import { NodeServices } from "@effect/platform-node"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { appendFileSync, copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { chromium } from "playwright-core"
import type { BrowserContext, Page } from "playwright-core"
import { serveSession } from "../src/view/index.ts"
import { unpackChromium } from "./chromium.ts"
import type { Chromium } from "./chromium.ts"
import { startCli, testEnv } from "./helpers/agent.ts"
import { ATTACK, hostileWorkspace } from "./helpers/hostile.ts"

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/view/${name}`, import.meta.url))
export const ARTIFACTS = join(tmpdir(), "agentloop-view-artifacts")

// One unpacked Chromium for the file's tests (they run concurrently), removed when they are done.
let unpacked: Promise<Chromium> | undefined
afterAll(async () => (await unpacked)?.remove())

const launch = Effect.acquireRelease(
  Effect.promise(async () => {
    unpacked ??= unpackChromium()
    const { executablePath } = await unpacked
    // A fresh user data dir: no profile, cache or extension from anywhere else.
    const profile = mkdtempSync(join(tmpdir(), "agentloop-view-chromium-"))
    const context = await chromium.launchPersistentContext(profile, {
      executablePath,
      viewport: { width: 1400, height: 900 },
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync"
      ]
    })
    // a busy machine renders slowly: a bound is generous, and reaching it is a failure of its own
    context.setDefaultTimeout(60_000)
    return { context, profile }
  }),
  ({ context, profile }) =>
    Effect.tryPromise(async () => {
      await context.close()
      // the browser has exited; a folder still being emptied is retried, then left to the OS
      rmSync(profile, { recursive: true, force: true, maxRetries: 5 })
    }).pipe(Effect.ignore)
).pipe(Effect.map(({ context }) => context))

/**
 * Opens `url` in a fresh page; returns the page and every URL it requested. With `fakeClock`, the
 * page's timers run only when the test moves its clock (`page.clock.runFor`), as TestClock does.
 */
const open = (browser: BrowserContext, url: string, options: { readonly fakeClock?: boolean } = {}) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const page = await browser.newPage()
      if (options.fakeClock === true) await page.clock.install()
      const requests: Array<string> = []
      page.on("request", (request) => requests.push(request.url()))
      const errors: Array<string> = []
      page.on("pageerror", (error) => errors.push(error.message))
      page.on("console", (message) => {
        if (message.type() === "error") errors.push(message.text())
      })
      await page.goto(url, { waitUntil: "load" })
      return { page, requests, errors }
    }),
    ({ page }) => Effect.promise(() => page.close())
  )

const count = (page: Page, selector: string) => Effect.promise(() => page.locator(selector).count())
const texts = (page: Page, selector: string) => Effect.promise(() => page.locator(selector).allInnerTexts())

describe("agentloop view in a headless browser", () => {
  it.live(
    "renders the recorded session: runs, turns, lanes, approvals, the abort, the error, tokens, invariants",
    () =>
      Effect.gen(function*() {
        const view = yield* serveSession({ workspace: tmpdir(), session: fixture("coding-session.jsonl") })
        const browser = yield* launch
        const { errors, page, requests } = yield* open(browser, view.url)

        assert.strictEqual(yield* Effect.promise(() => page.title()), "agentloop · 2026-11-18-a1b2c3")
        assert.strictEqual(yield* count(page, "[data-testid=run]"), 3)
        assert.strictEqual(yield* count(page, "[data-testid=turn]"), 5)
        // 3 parallel calls, then edit + bash, then none; bash aborted; none in the errored turn.
        assert.deepStrictEqual(
          yield* Effect.promise(() =>
            page.locator("[data-testid=turn]").evaluateAll((turns) =>
              turns.map((turn) => turn.querySelectorAll("[data-testid=lane]").length)
            )
          ),
          [3, 2, 0, 1, 0]
        )
        assert.strictEqual(yield* count(page, "[data-testid=lane]"), 6)

        // The 3 parallel calls are drawn side by side in time: their bars overlap horizontally.
        const boxes = yield* Effect.promise(() =>
          page.locator("[data-testid=turn]").first().locator("[data-testid=lane] .bar").evaluateAll((bars) =>
            bars.map((bar) => {
              const box = bar.getBoundingClientRect()
              return { left: box.left, right: box.right }
            })
          )
        )
        assert.strictEqual(boxes.length, 3)
        const overlapStart = Math.max(...boxes.map((b) => b.left))
        const overlapEnd = Math.min(...boxes.map((b) => b.right))
        assert.isTrue(overlapStart < overlapEnd, `the parallel bars overlap: ${JSON.stringify(boxes)}`)
        assert.include((yield* texts(page, "[data-testid=turn]"))[0], "3 in parallel")

        // Approvals: approved, denied with its reason, always.
        const approvals = yield* texts(page, "[data-testid=approval]")
        assert.strictEqual(approvals.length, 3)
        assert.include(approvals[0], "approved by user")
        assert.include(approvals[1], "denied by user: do not reinstall; just run node test.js")
        assert.include(approvals[2], "always by user")
        assert.strictEqual(yield* count(page, "[data-testid=lane][data-status=denied]"), 1)

        // The aborted run and its interrupted call; the model error.
        const abort = yield* texts(page, "[data-testid=abort]")
        assert.strictEqual(abort.length, 1)
        assert.include(abort[0], "interrupted by the user (Ctrl-C)")
        assert.strictEqual(yield* count(page, "[data-testid=lane][data-status=interrupted]"), 1)
        assert.deepStrictEqual(
          yield* Effect.promise(() =>
            page.locator("[data-testid=run]").evaluateAll((runs) => runs.map((run) => run.getAttribute("data-reason")))
          ),
          ["stop", "aborted", "error"]
        )
        assert.include((yield* texts(page, "[data-testid=turn-error]"))[0], "Anthropic API error 529: overloaded")

        // Tokens per turn (and cost), and the session's sums.
        const tokens = yield* texts(page, "[data-testid=tokens]")
        assert.strictEqual(tokens.length, 5)
        assert.strictEqual(tokens[0], "1,840 in · 96 out · 1,200 cache read · $0.0069")
        assert.strictEqual(tokens[4], "no usage reported")
        assert.include((yield* texts(page, "[data-testid=total-tokens]"))[0], "9,130 in · 306 out")
        assert.include((yield* texts(page, "[data-testid=total-cost]"))[0], "$0.0319")

        // /compact and /model between the first two runs.
        const markers = yield* texts(page, "[data-testid=run] .marker")
        assert.strictEqual(markers.length, 2)
        assert.include(markers[0], "context compacted: 6 message(s) summarised, 2 kept")
        assert.include(markers[1], "model switched to claude-opus-4-1")

        // The invariant checks all pass on this session.
        assert.strictEqual(yield* count(page, "[data-testid=invariant][data-ok=true]"), 4)
        assert.include((yield* texts(page, "[data-testid=invariants] h2"))[0], "Invariants hold")

        // A lane opens to show the call's arguments and result.
        yield* Effect.promise(() => page.locator("[data-testid=lane][data-status=denied] summary").click())
        assert.include(
          (yield* texts(page, "[data-testid=lane][data-status=denied] .lane-detail"))[0],
          "Tool call was not executed because it was denied"
        )
        yield* Effect.promise(() => page.locator("[data-testid=lane][data-status=denied] summary").click())

        mkdirSync(ARTIFACTS, { recursive: true })
        const shot = join(ARTIFACTS, "coding-session.png")
        yield* Effect.promise(() => page.screenshot({ path: shot, fullPage: true }))
        console.log(`agentloop view screenshot: ${shot}`)

        // Nothing but the page itself (and its own JSON polling) was requested: no network.
        assert.isTrue(requests.length >= 1)
        for (const url of requests) assert.isTrue(url.startsWith(view.url), `request outside the viewer: ${url}`)
        assert.deepStrictEqual(errors, [])
      }).pipe(Effect.provide(NodeServices.layer)),
    180_000
  )

  it.live(
    "shows a failed invariant and an unfinished run for a session killed mid-batch",
    () =>
      Effect.gen(function*() {
        const view = yield* serveSession({ workspace: tmpdir(), session: fixture("killed-mid-batch.jsonl") })
        const browser = yield* launch
        const { page } = yield* open(browser, view.url)

        assert.strictEqual(yield* count(page, "[data-testid=turn]"), 1)
        assert.strictEqual(yield* count(page, "[data-testid=lane]"), 2)
        assert.strictEqual(
          yield* Effect.promise(() =>
            page.locator("[data-testid=invariant][data-check=pairing]").getAttribute("data-ok")
          ),
          "false"
        )
        const pairing = (yield* texts(page, "[data-testid=invariant][data-check=pairing]"))[0]!
        assert.include(pairing, `tool call "k1" has no result`)
        assert.include(pairing, `tool call "k2" has no result`)
        assert.include((yield* texts(page, "[data-testid=run-reason]"))[0], "no run_end")
        assert.include((yield* texts(page, "[data-testid=invariants] h2"))[0], "1 invariant check(s) failed")

        mkdirSync(ARTIFACTS, { recursive: true })
        const shot = join(ARTIFACTS, "killed-mid-batch.png")
        yield* Effect.promise(() => page.screenshot({ path: shot, fullPage: true }))
        console.log(`agentloop view screenshot: ${shot}`)
      }).pipe(Effect.provide(NodeServices.layer)),
    180_000
  )

  it.live(
    "reloads itself while the session file grows (live), and not when live is unchecked",
    () =>
      Effect.gen(function*() {
        const file = join(mkdtempSync(join(tmpdir(), "agentloop-view-live-")), "growing.jsonl")
        copyFileSync(fixture("coding-session.jsonl"), file)
        const view = yield* serveSession({ workspace: tmpdir(), session: file })
        const browser = yield* launch
        // the page polls every 2 s: its clock is the test's, so no poll depends on how busy the machine is
        const { page, requests } = yield* open(browser, view.url, { fakeClock: true })
        assert.strictEqual(yield* count(page, "[data-testid=run]"), 3)
        const served = (text: string) =>
          Effect.promise(async () => {
            for (let i = 0; !(await (await fetch(`${view.url}api/session`)).text()).includes(text); i++) {
              if (i === 600) throw new Error(`the server still does not serve "${text}" after 60 s`)
              await new Promise((r) => setTimeout(r, 100))
            }
          })

        const at = 1795000200000
        appendFileSync(file, JSON.stringify({ type: "run_start", at, prompt: "A fourth task" }) + "\n")
        yield* served("A fourth task")
        yield* Effect.promise(() => page.clock.runFor(2_000)) // one poll: it sees the change and reloads
        yield* Effect.promise(() => page.locator("[data-testid=run]").nth(3).waitFor({ timeout: 60_000 }))
        assert.include((yield* texts(page, "[data-testid=run]"))[3], "A fourth task")

        // Unchecked, the page stays as it is: the change is served, then two polls' time passes, and
        // the page asked nothing and shows what it showed.
        yield* Effect.promise(() => page.locator("#live").uncheck())
        const asked = requests.length
        appendFileSync(file, JSON.stringify({ type: "run_start", at: at + 1, prompt: "A fifth task" }) + "\n")
        yield* served("A fifth task")
        yield* Effect.promise(() => page.clock.runFor(4_500))
        yield* Effect.promise(() => page.evaluate(() => 0)) // a round trip: what the polls started is reported
        assert.deepStrictEqual(requests.slice(asked), [], "no poll asked for the version")
        assert.strictEqual(yield* count(page, "[data-testid=run]"), 4)
      }).pipe(Effect.provide(NodeServices.layer)),
    180_000
  )
  it.live(
    "agentloop export: the file:// page shows the timeline offline, and a hostile message stays text",
    () =>
      Effect.gen(function*() {
        const ws = hostileWorkspace()
        const out = join(ws, "exported.html")
        const cli = startCli(["export", "hostile", "--out", out], { cwd: ws, env: testEnv(ws) })
        const { code } = yield* Effect.promise(() => cli.exitedWithin(60_000))
        assert.strictEqual(code, 0, cli.stderr())
        const browser = yield* launch
        const url = `file://${out}`
        const { errors, page, requests } = yield* open(browser, url)

        assert.strictEqual(yield* Effect.promise(() => page.title()), "agentloop · 2026-11-18-a1b2c3")
        assert.strictEqual(yield* count(page, "[data-testid=run]"), 3)
        assert.strictEqual(yield* count(page, "[data-testid=turn]"), 5)
        assert.strictEqual(yield* count(page, "[data-testid=lane]"), 6)
        assert.strictEqual(yield* count(page, "[data-testid=invariant][data-ok=true]"), 4)
        assert.strictEqual(yield* count(page, "#live"), 0, "no live reload in a file")
        // the attack is shown as the text it is, and nothing of it ran
        assert.include((yield* texts(page, "[data-testid=run] .prompt"))[0], "</script><script>window.pwned = 1;")
        assert.strictEqual(yield* Effect.promise(() => page.evaluate("window.pwned")), undefined)
        assert.strictEqual(yield* count(page, "img"), 0)
        yield* Effect.promise(() => page.locator("[data-testid=lane]").first().locator("summary").click())
        assert.include((yield* texts(page, "[data-testid=lane] .lane-detail"))[0], "<img src=x onerror=")
        // the embedded data reads back as the timeline
        const block = yield* Effect.promise(() => page.locator("#agentloop-session").textContent())
        const prompt =
          (JSON.parse(block!) as { timeline: { runs: Array<{ prompt: string }> } }).timeline.runs[0]!.prompt
        assert.strictEqual(prompt, `Fix it ${ATTACK}`)

        mkdirSync(ARTIFACTS, { recursive: true })
        const shot = join(ARTIFACTS, "exported.png")
        yield* Effect.promise(() => page.screenshot({ path: shot, fullPage: true }))
        console.log(`agentloop export screenshot: ${shot}`)
        // nothing but the file itself was requested
        assert.deepStrictEqual(requests, [url])
        assert.deepStrictEqual(errors, [])
      }).pipe(Effect.provide(NodeServices.layer)),
    180_000
  )
})
