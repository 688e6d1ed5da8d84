/**
 * Plain lists that the command line's flags and `Config.ts`'s schemas both read: one list each, in
 * a module that imports nothing (the flags must load without the config's schemas or the rules'
 * parser).
 */

/** The providers the CLI knows. */
export const PROVIDER_NAMES = ["scripted", "openai-compat", "anthropic"] as const

/** The permission modes, in the order `Shift+Tab` cycles through them (see `Permissions.ts`). */
export const PERMISSION_MODES = ["ask", "accept-edits", "read-only", "yes"] as const

/** The levels of `--thinking` / `/thinking` (each provider's setting: see `internal/Setup.ts`). */
export const THINKING_LEVELS = ["off", "low", "medium", "high"] as const
