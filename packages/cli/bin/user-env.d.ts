/**
 * The user's environment from `env` (this process's): `env` itself when `npm exec` did not start
 * the command, otherwise a copy without what npm added (see user-env.js).
 */
export declare const userEnvironment: (
  env: Readonly<Record<string, string | undefined>>
) => Readonly<Record<string, string | undefined>>
