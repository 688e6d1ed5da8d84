/**
 * `agentloop export [SESSION] [--out FILE]`: the viewer's page of a session as one HTML file to
 * keep or send. It is the page `agentloop view` serves (Page.ts, from the same timeline), in its
 * standalone form: the session's data embedded (as HTML, and as a JSON block), no script, and a
 * Content-Security-Policy of its own that lets nothing load or run. The session is found and read
 * as `view` finds and reads it (an id, a unique prefix of one, or a path; the confined reader).
 *
 * Where it writes: by default `.agentloop/exports/<session>.html` in the workspace, through the
 * confined writer (never through a link). `--out FILE` inside the workspace goes through the same
 * writer; outside it, the page is written to a new file next to FILE (created exclusively, with an
 * unpredictable name) and renamed onto FILE, so a link planted at FILE is replaced, never followed.
 *
 * @since 0.1.0
 */
import { Effect, FileSystem, Option, Random } from "effect"
import * as NodePath from "node:path"
import { CliError, reportCliError } from "./CliError.ts"
import { workspaceOf } from "./internal/Setup.ts"
import { stripControl } from "./Sanitize.ts"
import { renderPage } from "./view/Page.ts"
import { parseSessionText } from "./view/SessionFile.ts"
import { buildTimeline } from "./view/Timeline.ts"
import { readSessionText, resolveSessionFile } from "./view/Viewer.ts"
import * as WorkspaceIO from "./WorkspaceIO.ts"

/**
 * The folder of exported pages, relative to the workspace.
 *
 * @since 0.1.0
 * @category constants
 */
export const EXPORTS_FOLDER = ".agentloop/exports"

const isInside = (root: string, file: string): boolean => {
  const relative = NodePath.relative(root, file)
  return relative !== "" && !relative.startsWith("..") && !NodePath.isAbsolute(relative)
}

/** Writes `text` to `path` outside the workspace: an exclusive new file next to it, renamed onto it. */
const writeOutside = (path: string, text: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const suffix = (yield* Random.nextIntBetween(0, 2 ** 48)).toString(36)
    const temporary = `${path}.${suffix}.tmp`
    const cannot = (e: { readonly message: string }) => new CliError(`cannot write ${path}: ${e.message}`)
    const info = yield* Effect.option(fs.stat(path))
    if (Option.isSome(info) && info.value.type === "Directory") {
      return yield* Effect.fail(new CliError(`--out ${path} is a folder: name the file to write`))
    }
    yield* fs.writeFileString(temporary, text, { flag: "wx" }).pipe(
      Effect.andThen(fs.rename(temporary, path)),
      Effect.mapError(cannot),
      Effect.onError(() => Effect.ignore(fs.remove(temporary)))
    )
  })

/**
 * `agentloop export [SESSION] [--out FILE]` (see the module's description): prints where the page
 * went; exit 2 with one line when the session cannot be found or read, or the page not written.
 *
 * @since 0.1.0
 * @category commands
 */
export const exportCommand = (options: {
  readonly workspace: Option.Option<string>
  readonly session: Option.Option<string>
  readonly out: Option.Option<string>
}) =>
  Effect.gen(function*() {
    const root = yield* workspaceOf(options.workspace)
    const viewError = (e: { readonly message: string }) => new CliError(e.message)
    const file = yield* resolveSessionFile(root, Option.getOrUndefined(options.session)).pipe(
      Effect.mapError(viewError)
    )
    const text = yield* readSessionText(file, root).pipe(Effect.mapError(viewError))
    const html = renderPage(buildTimeline(parseSessionText(text)), { file, version: "", standalone: true })
    const name = NodePath.basename(file).replace(/\.jsonl$/, "")
    let written: string
    if (Option.isNone(options.out)) {
      const relative = `${EXPORTS_FOLDER}/${name}.html`
      yield* WorkspaceIO.makeDirectory(root, EXPORTS_FOLDER).pipe(
        Effect.andThen(WorkspaceIO.writeFile(root, relative, html)),
        Effect.mapError((e) => new CliError(e.message))
      )
      written = NodePath.join(root, relative)
    } else {
      if (options.out.value.trim().length === 0) return yield* Effect.fail(new CliError("--out is empty: name a file"))
      const out = NodePath.resolve(options.out.value)
      if (isInside(root, out)) {
        yield* WorkspaceIO.writeFile(root, NodePath.relative(root, out), html).pipe(
          Effect.mapError((e) => new CliError(e.message))
        )
      } else {
        yield* writeOutside(out, html)
      }
      written = out
    }
    process.stdout.write(
      `${stripControl(written)}\nexported ${stripControl(file)}: one HTML file (no network, no script)\n`
    )
  }).pipe(Effect.catchIf((e): e is CliError => e instanceof CliError, reportCliError))
