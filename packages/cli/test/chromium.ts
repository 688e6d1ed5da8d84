/**
 * The Chromium the browser tests drive, from npm: the headless Chromium that `@sparticuz/chromium`
 * ships (brotli-compressed inside the package, so `npm ci` brings it and nothing downloads),
 * unpacked into a fresh folder of its own and removed afterwards, so two test runs at once never
 * share or half-read one. `AGENTLOOP_CHROMIUM` names another Chromium or Chrome to use instead
 * (needed where the package has no build: it ships Linux x64 and arm64 only).
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface Chromium {
  readonly executablePath: string
  /** Removes the unpacked browser (a no-op for one named by `AGENTLOOP_CHROMIUM`). */
  readonly remove: () => void
}

export const unpackChromium = async (): Promise<Chromium> => {
  const named = process.env["AGENTLOOP_CHROMIUM"]
  if (named !== undefined) {
    if (!existsSync(named)) throw new Error(`AGENTLOOP_CHROMIUM names ${named}, which does not exist`)
    return { executablePath: named, remove: () => {} }
  }
  if (process.platform !== "linux" || (process.arch !== "x64" && process.arch !== "arm64")) {
    throw new Error(
      `the browser tests use the Chromium of the npm package @sparticuz/chromium, which has no build for ` +
        `${process.platform} ${process.arch}: set AGENTLOOP_CHROMIUM to a Chromium or Chrome executable`
    )
  }
  const { default: chromium } = await import("@sparticuz/chromium")
  // the package unpacks into os.tmpdir(): point that at a folder of this run's own while it does
  const dir = mkdtempSync(join(tmpdir(), "agentloop-chromium-"))
  const before = process.env["TMPDIR"]
  process.env["TMPDIR"] = dir
  try {
    const executablePath = await chromium.executablePath()
    return { executablePath, remove: () => rmSync(dir, { recursive: true, force: true }) }
  } catch (error) {
    rmSync(dir, { recursive: true, force: true })
    throw error
  } finally {
    if (before === undefined) delete process.env["TMPDIR"]
    else process.env["TMPDIR"] = before
  }
}
