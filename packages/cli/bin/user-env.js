// The environment the user typed `agentloop` in. agentloop.js computes it once, when the command
// starts, and makes it the process's own: every process agentloop starts (the bash tool and what
// it runs, git, MCP servers, an editor) inherits it, with the tools' own filtering (the bash tool
// hides model providers' keys) applied on top.
//
// Started directly (an installed command, `npm run link`'s launcher, `node bin/agentloop.js`), it is
// `process.env` as it came. Started by `npm exec` / `npx` (the README's alias `npm exec --prefix
// ~/agentloop -- agentloop`), npm ran the command as a script (@npmcli/run-script), in an environment
// of its own making; what that adds is taken away again, and nothing else:
// - PATH: run-script puts its bin folders first (the `node_modules/.bin` of the package and of every
//   folder above the current one, npx's own), then its `node-gyp-bin` folder, then the PATH it was
//   given, unchanged (set-path.js). So everything up to and including the first `node-gyp-bin` entry
//   goes; the user's own entries, whatever they are (a `node_modules/.bin` of their own too), stay.
// - `npm_*` (lowercase, as npm writes them): npm_config_*, npm_package_*, npm_lifecycle_*,
//   npm_command, npm_execpath, npm_node_execpath. npm writes every one of them; a user's own
//   `npm_config_*` is written over or kept by npm alike, so it cannot be told apart and goes too
//   (upper-case names such as NPM_TOKEN or NPM_CONFIG_REGISTRY are never npm's and stay).
// - INIT_CWD and COLOR (npm sets both every time), NODE when it is npm's `npm_node_execpath`, and
//   EDITOR when it is what npm puts there for a user with none (VISUAL, else `vi`).
// `npm run <script>` is left as it is: a package's scripts run with its bins first by design.

import { delimiter, sep } from "node:path"

/** The folder run-script adds after its bin folders (its `node-gyp` shim). */
const NODE_GYP_BIN = `${sep}@npmcli${sep}run-script${sep}lib${sep}node-gyp-bin`

/**
 * The user's environment from `env` (this process's): `env` itself when `npm exec` did not start
 * the command, otherwise a copy without what npm added (see above).
 *
 * @param {Readonly<Record<string, string | undefined>>} env
 * @returns {Readonly<Record<string, string | undefined>>}
 */
export const userEnvironment = (env) => {
  if (env.npm_lifecycle_event !== "npx") return env
  /** @type {Record<string, string>} */
  const user = {}
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || name.startsWith("npm_") || name === "INIT_CWD" || name === "COLOR") continue
    if (name === "NODE" && value === env.npm_node_execpath) continue
    if (name === "EDITOR" && value === (env.VISUAL || "vi")) continue
    if (/^path$/i.test(name)) {
      const entries = value.split(delimiter)
      const added = entries.findIndex((entry) => entry.endsWith(NODE_GYP_BIN))
      user[name] = added < 0 ? value : entries.slice(added + 1).join(delimiter)
    } else {
      user[name] = value
    }
  }
  return user
}
