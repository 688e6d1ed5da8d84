/**
 * @agentloop/durable — agent runs that survive a crash, approvals that wait for days and
 * scale-out, on effect's own workflow and cluster engines.
 *
 * Needs Node.js 22.19 or later (its `engines`): on an older one, importing the package prints one line
 * saying so and exits with status 1 (`internal/nodeSqlite.ts`, where `node:sqlite` is loaded, without
 * its experimental-feature warning).
 *
 * @since 0.1.0
 */
export * from "./DurableClient.ts"
export * from "./DurableEvent.ts"
export * from "./DurableRun.ts"
export * from "./DurableStore.ts"
/**
 * A small `SqlClient` for `effect/sql` on Node's built-in `node:sqlite` (the embedded engine's
 * database) as a namespace: `SqliteClient.layer({ filename })`, ...
 *
 * @since 0.1.0
 * @category namespaces
 */
export * from "./Engines.ts"
export * as SqliteClient from "./SqliteClient.ts"
