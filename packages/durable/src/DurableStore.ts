/**
 * What durable runs keep beside the workflow journal: start markers of tool calls (so a call
 * that was running when its process died is known as such), the inbox of steering and
 * follow-up messages sent from any process, and the list of runs started.
 *
 * @since 0.1.0
 */
import { ToolCall, UserMessage } from "@agentloop/core"
import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"

/**
 * @since 0.1.0
 * @category models
 */
export type InboxKind = "steering" | "followUp"

/**
 * A call of a run waiting for an approval: answer it with `approve(runId, call.id, answer)`.
 *
 * @since 0.1.0
 * @category models
 */
export interface PendingApproval {
  readonly runId: string
  readonly call: ToolCall
  /** When the approval was requested, in epoch milliseconds. */
  readonly requestedAt: number
}

/**
 * @since 0.1.0
 * @category errors
 */
export class DurableStoreError extends Schema.TaggedError<DurableStoreError>()("DurableStoreError", {
  message: Schema.String
}) {}

/**
 * @since 0.1.0
 * @category services
 */
export class DurableStore extends Context.Service<DurableStore, {
  /** Records that a call starts; true the first time for `key`, false when it had started before. */
  readonly claimStart: (key: string) => Effect.Effect<boolean, DurableStoreError>
  /** Appends a message to a run's inbox. */
  readonly push: (runId: string, kind: InboxKind, message: UserMessage) => Effect.Effect<void, DurableStoreError>
  /** The messages of a run's inbox of `kind` from position `from` on, in the order they were pushed. */
  readonly read: (
    runId: string,
    kind: InboxKind,
    from: number
  ) => Effect.Effect<ReadonlyArray<UserMessage>, DurableStoreError>
  /** Records that a run was started (once per run id; `startedAt` in epoch milliseconds). */
  readonly register: (runId: string, startedAt: number) => Effect.Effect<void, DurableStoreError>
  /** Every run recorded, oldest first. */
  readonly runs: Effect.Effect<ReadonlyArray<{ readonly runId: string; readonly startedAt: number }>, DurableStoreError>
  /** Records that a call waits for an approval (once per run and call id). */
  readonly requestApproval: (approval: PendingApproval) => Effect.Effect<void, DurableStoreError>
  /** Records that a call's approval was settled (answered, timed out or aborted). */
  readonly settleApproval: (runId: string, callId: string) => Effect.Effect<void, DurableStoreError>
  /** The approvals requested and not settled yet, oldest first; of one run, or of every run. */
  readonly pendingApprovals: (runId?: string) => Effect.Effect<ReadonlyArray<PendingApproval>, DurableStoreError>
}>()("@agentloop/durable/DurableStore") {}

/**
 * A store in memory (for `WorkflowEngine.layerMemory`).
 *
 * @since 0.1.0
 * @category layers
 */
export const memoryStoreLayer: Layer.Layer<DurableStore> = Layer.sync(DurableStore)(() => {
  const starts = new Set<string>()
  const inbox = new Map<string, Array<UserMessage>>()
  const runs = new Map<string, number>()
  const approvals = new Map<string, PendingApproval>()
  return DurableStore.of({
    requestApproval: (approval) =>
      Effect.sync(() => {
        const key = `${approval.runId}|${approval.call.id}`
        if (!approvals.has(key)) approvals.set(key, approval)
      }),
    settleApproval: (runId, callId) => Effect.sync(() => void approvals.delete(`${runId}|${callId}`)),
    pendingApprovals: (runId) =>
      Effect.sync(() =>
        [...approvals.values()].filter((a) => runId === undefined || a.runId === runId)
          .sort((a, b) => a.requestedAt - b.requestedAt)
      ),
    register: (runId, startedAt) => Effect.sync(() => void (runs.has(runId) || runs.set(runId, startedAt))),
    runs: Effect.sync(() => [...runs].map(([runId, startedAt]) => ({ runId, startedAt }))),
    claimStart: (key) =>
      Effect.sync(() => {
        if (starts.has(key)) return false
        starts.add(key)
        return true
      }),
    push: (runId, kind, message) =>
      Effect.sync(() => {
        const key = `${kind}|${runId}`
        const list = inbox.get(key) ?? []
        list.push(message)
        inbox.set(key, list)
      }),
    read: (runId, kind, from) => Effect.sync(() => (inbox.get(`${kind}|${runId}`) ?? []).slice(from))
  })
})

const encodeMessage = Schema.encodeSync(Schema.fromJsonString(UserMessage))
const decodeMessage = Schema.decodeUnknownEffect(Schema.fromJsonString(UserMessage))
const encodeCall = Schema.encodeSync(Schema.fromJsonString(ToolCall))
const decodeCall = Schema.decodeUnknownEffect(Schema.fromJsonString(ToolCall))

/**
 * A store in the run's SQL database (SQLite or PostgreSQL): tables `agentloop_call_starts`,
 * `agentloop_inbox`, `agentloop_runs` and `agentloop_approvals`, created when missing.
 *
 * @since 0.1.0
 * @category layers
 */
export const sqlStoreLayer: Layer.Layer<DurableStore, DurableStoreError, SqlClient.SqlClient> = Layer.effect(
  DurableStore
)(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const fail = (what: string) => (error: unknown) =>
      new DurableStoreError({ message: `durable store: ${what} failed: ${String((error as Error)?.message ?? error)}` })
    const serial = sql.onDialectOrElse({
      pg: () => "bigserial primary key",
      orElse: () => "integer primary key autoincrement"
    })
    yield* sql.unsafe(
      "create table if not exists agentloop_call_starts (call_key varchar(512) primary key)"
    ).pipe(Effect.mapError(fail("creating agentloop_call_starts")))
    yield* sql.unsafe(
      `create table if not exists agentloop_inbox (seq ${serial}, run_id varchar(512) not null, ` +
        "kind varchar(16) not null, message text not null)"
    ).pipe(Effect.mapError(fail("creating agentloop_inbox")))
    yield* sql.unsafe(
      "create table if not exists agentloop_runs (run_id varchar(512) primary key, started_at bigint not null)"
    ).pipe(Effect.mapError(fail("creating agentloop_runs")))
    yield* sql.unsafe(
      "create table if not exists agentloop_approvals (run_id varchar(512) not null, call_id varchar(512) not null, " +
        "call text not null, requested_at bigint not null, settled integer not null default 0, " +
        "primary key (run_id, call_id))"
    ).pipe(Effect.mapError(fail("creating agentloop_approvals")))
    return DurableStore.of({
      requestApproval: (approval) =>
        sql`insert into agentloop_approvals (run_id, call_id, call, requested_at) values (${approval.runId},
          ${approval.call.id}, ${encodeCall(approval.call)}, ${approval.requestedAt}) on conflict do nothing`.pipe(
          Effect.asVoid,
          Effect.mapError(fail("recording an approval request"))
        ),
      settleApproval: (runId, callId) =>
        sql`update agentloop_approvals set settled = 1 where run_id = ${runId} and call_id = ${callId}`.pipe(
          Effect.asVoid,
          Effect.mapError(fail("settling an approval"))
        ),
      pendingApprovals: (runId) =>
        (runId === undefined ?
          sql<{ run_id: string; call: string; requested_at: number | string }>`select run_id, call, requested_at
            from agentloop_approvals where settled = 0 order by requested_at, run_id, call_id` :
          sql<{ run_id: string; call: string; requested_at: number | string }>`select run_id, call, requested_at
            from agentloop_approvals where settled = 0 and run_id = ${runId} order by requested_at, call_id`).pipe(
            Effect.mapError(fail("listing approvals")),
            Effect.flatMap((rows) =>
              Effect.forEach(rows, (row) =>
                Effect.map(decodeCall(row.call), (call) => ({
                  runId: row.run_id,
                  call,
                  requestedAt: Number(row.requested_at)
                }))).pipe(Effect.mapError(fail("decoding an approval request")))
            )
          ),
      register: (runId, startedAt) =>
        sql`insert into agentloop_runs (run_id, started_at) values (${runId}, ${startedAt}) on conflict do nothing`
          .pipe(
            Effect.asVoid,
            Effect.mapError(fail("recording a run"))
          ),
      runs: sql<{ run_id: string; started_at: number | string }>`select run_id, started_at from agentloop_runs
        order by started_at, run_id`.pipe(
        Effect.map((rows) => rows.map((row) => ({ runId: row.run_id, startedAt: Number(row.started_at) }))),
        Effect.mapError(fail("listing runs"))
      ),
      claimStart: (key) =>
        sql<{ call_key: string }>`insert into agentloop_call_starts (call_key) values (${key})
          on conflict do nothing returning call_key`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.mapError(fail("recording a call start"))
        ),
      push: (runId, kind, message) =>
        sql`insert into agentloop_inbox (run_id, kind, message) values (${runId}, ${kind}, ${encodeMessage(message)})`
          .pipe(Effect.asVoid, Effect.mapError(fail("pushing a message"))),
      read: (runId, kind, from) =>
        sql<{ message: string }>`select message from agentloop_inbox where run_id = ${runId} and kind = ${kind}
          order by seq`.pipe(
          Effect.mapError(fail("reading the inbox")),
          Effect.flatMap((rows) =>
            Effect.forEach(rows.slice(from), (row) => decodeMessage(row.message)).pipe(
              Effect.mapError(fail("decoding an inbox message"))
            )
          )
        )
    })
  })
)
