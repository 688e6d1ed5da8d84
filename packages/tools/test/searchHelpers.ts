import { mkdirSync, symlinkSync, writeFileSync } from "node:fs"
import { dirname } from "node:path"

/** Writes `files` under `root` (parents made); a value `{ link }` makes a symbolic link instead. */
export const plant = (root: string, files: Record<string, string | Uint8Array | { readonly link: string }>) => {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(`${root}/${path}`), { recursive: true })
    if (typeof content === "object" && "link" in content) symlinkSync(content.link, `${root}/${path}`)
    else writeFileSync(`${root}/${path}`, content)
  }
}
