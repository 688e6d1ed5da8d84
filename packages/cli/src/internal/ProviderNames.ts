/**
 * The providers the CLI knows, as plain strings: the one list that `Config.ts`'s schema and the
 * command line's `--provider` flag both read (the flag must load without the config's schemas).
 */
export const PROVIDER_NAMES = ["scripted", "openai-compat", "anthropic"] as const
