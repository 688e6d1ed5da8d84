/**
 * The embedded engine's `WorkflowEngine`: effect/workflow's engine on one SQLite file, without
 * effect/cluster (the distributed engine on PostgreSQL keeps effect's `ClusterWorkflowEngine`).
 *
 * Effect's in-memory engine (`WorkflowEngine.layerMemory`) runs the workflows (suspension, replay,
 * waking a run parked on a deferred); this layer keeps what they produced in the file, encoded with
 * the workflow's, activity's and deferred's own schemas:
 *
 * - an execution (its payload) when it starts, and its result when it completes;
 * - each activity's exit when it ends, so a replay after a restart takes it from the file instead
 *   of running it again;
 * - each deferred's exit when it is done (an approval, an abort), so a replay finds it;
 * - each durable clock's wake-up time, so a restart keeps the time it was scheduled for.
 *
 * When the process starts on a file again, every execution of a registered workflow without a
 * result is started again (`register`): it replays from its journal. A client-only engine (another
 * process on the same file) writes starts and deferreds; the runner reads rows it has not seen every
 * `pollInterval` and starts or wakes the executions they name.
 */
/* eslint-disable @typescript-eslint/no-explicit-any -- effect's WorkflowEngine service is generic in
   every workflow's schemas; this engine serves any workflow, so the service is built untyped and
   checked by the engine test suites */
import {
  Cause,
  Clock,
  Context,
  Duration,
  Effect,
  Exit,
  FiberMap,
  Layer,
  Option,
  Schema,
  Scope,
  Semaphore
} from "effect"
import { SqlClient } from "effect/sql"
import { DurableDeferred, Workflow, WorkflowEngine } from "effect/workflow"

type Engine = WorkflowEngine.WorkflowEngine["Service"]

type Codec = Schema.Codec<any, any, any, any>

const exitCodecs = new WeakMap<object, WeakMap<object, Codec>>()

/**
 * The JSON codec of the exits of what succeeds with `success` and fails with `error` (a workflow,
 * an activity, a deferred), made once per pair of schemas: effect makes a new activity (and
 * deferred) object for every call, but with the schemas it was given, so they key the codecs.
 */
const exitCodec = (success: Schema.Top, error: Schema.Top): Codec => {
  let byError = exitCodecs.get(success)
  if (byError === undefined) {
    byError = new WeakMap()
    exitCodecs.set(success, byError)
  }
  let codec = byError.get(error)
  if (codec === undefined) {
    codec = Schema.toCodecJson(Schema.Exit(success, error, Schema.Defect())) as Codec
    byError.set(error, codec)
  }
  return codec
}

const payloadCodecs = new WeakMap<object, Codec>()

/** The JSON codec of a workflow's payload. */
const payloadCodec = (workflow: Workflow.Any): Codec => {
  let codec = payloadCodecs.get(workflow)
  if (codec === undefined) {
    codec = Schema.toCodecJson((workflow as any).payloadSchema) as Codec
    payloadCodecs.set(workflow, codec)
  }
  return codec
}

/** The exit codec of a workflow's, activity's or deferred's results. */
const exitCodecOf = (of: any): Codec => exitCodec(of.successSchema, of.errorSchema)

/** A deferred's exit as the memory engine keeps it: its values already encoded (JSON), as any deferred's. */
const encodedDeferredExit = Schema.toCodecJson(Schema.Exit(Schema.Json, Schema.Json, Schema.Json)) as Codec

const encode = (codec: Codec, value: unknown): Effect.Effect<string> =>
  Effect.map(
    Effect.orDie(Schema.encodeUnknownEffect(codec)(value) as Effect.Effect<unknown, Schema.SchemaError>),
    (json) => JSON.stringify(json)
  )

const decode = (codec: Codec, text: string): Effect.Effect<any> =>
  Effect.orDie(Schema.decodeUnknownEffect(codec)(JSON.parse(text)) as Effect.Effect<any, Schema.SchemaError>)

/** A run that stopped only because it was interrupted (a suspension, a preempted replay): nothing to keep. */
const interruptedOnly = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)

/**
 * The tables, made when missing. `seq` orders executions and deferreds for the runner's reads of
 * what another process wrote.
 */
const createTables = (sql: SqlClient.SqlClient) =>
  Effect.all([
    sql.unsafe(
      "create table if not exists agentloop_wf_executions (seq integer primary key autoincrement, " +
        "id text not null unique, workflow text not null, payload text not null, result text, " +
        "suspended integer not null default 0)"
    ),
    sql.unsafe(
      "create table if not exists agentloop_wf_activities (execution_id text not null, name text not null, " +
        "attempt integer not null, exit text not null, primary key (execution_id, name, attempt))"
    ),
    sql.unsafe(
      "create table if not exists agentloop_wf_deferreds (seq integer primary key autoincrement, " +
        "execution_id text not null, name text not null, workflow text not null, exit text not null, " +
        "unique (execution_id, name))"
    ),
    sql.unsafe(
      "create table if not exists agentloop_wf_clocks (execution_id text not null, name text not null, " +
        "wake_at integer not null, primary key (execution_id, name))"
    )
  ], { discard: true })

interface Options {
  /** How often the runner reads what other processes wrote (starts, deferreds). */
  readonly pollInterval: Duration.Duration
}

/** What both kinds of engine share: the file (its tables made when missing), and the reads and writes of its rows. */
const openJournal = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* Effect.orDie(createTables(sql))
  return { sql, rows: journal(sql) }
})

const journal = (sql: SqlClient.SqlClient) => ({
  start: (workflow: Workflow.Any, executionId: string, payload: unknown) =>
    Effect.flatMap(
      encode(payloadCodec(workflow), payload),
      (json) =>
        sql`insert into agentloop_wf_executions (id, workflow, payload) values (${executionId}, ${workflow._tag},
          ${json}) on conflict do nothing`
    ),
  /** Where an execution is, as another process sees it: complete, suspended, or (none) running. */
  polled: (workflow: Workflow.Any, executionId: string): Effect.Effect<Option.Option<Workflow.Result<any, any>>> =>
    sql<{ result: string | null; suspended: number }>`select result, suspended from agentloop_wf_executions
      where id = ${executionId}`.pipe(
      Effect.orDie,
      Effect.flatMap(([row]) =>
        row === undefined ?
          Effect.succeedNone :
          row.result !== null ?
          Effect.map(
            decode(exitCodecOf(workflow), row.result),
            (exit) => Option.some(new Workflow.Complete({ exit }))
          ) :
          Effect.succeed(Number(row.suspended) === 1 ? Option.some(new Workflow.Suspended({})) : Option.none())
      )
    ),
  /** An execution's result, once it completed. */
  result(workflow: Workflow.Any, executionId: string): Effect.Effect<Option.Option<Exit.Exit<any, any>>> {
    return Effect.map(
      this.polled(workflow, executionId),
      Option.flatMap((polled) => polled._tag === "Complete" ? Option.some(polled.exit) : Option.none())
    )
  },
  deferredDone: (options: {
    readonly workflowName: string
    readonly executionId: string
    readonly deferredName: string
    readonly json: string
  }) =>
    sql`insert into agentloop_wf_deferreds (execution_id, name, workflow, exit) values (${options.executionId},
      ${options.deferredName}, ${options.workflowName}, ${options.json}) on conflict do nothing`.pipe(
      Effect.orDie,
      Effect.asVoid
    )
})

/** The deferred's exit encoded as the file keeps it. */
const encodeDeferredExit = (deferred: DurableDeferred.Any, exit: Exit.Exit<unknown, unknown>) =>
  encode(exitCodecOf(deferred), exit)

/**
 * The runner's engine on the file behind `SqlClient`: runs the executions of the workflows
 * registered with it.
 */
export const sqliteRunnerEngineLayer = (
  options: Options
): Layer.Layer<WorkflowEngine.WorkflowEngine, never, SqlClient.SqlClient> =>
  Layer.effect(WorkflowEngine.WorkflowEngine)(Effect.gen(function*() {
    const { rows, sql } = yield* openJournal
    const scope = yield* Effect.scope
    const clocks = yield* FiberMap.make<string>()
    // the registered workflows, each with its body as the memory engines run it (see `register`)
    const workflows = new Map<string, { readonly workflow: Workflow.Any; readonly execute: any }>()

    // Each execution running in this process has a memory engine of its own, made when it starts and
    // dropped once it completes (its result is in the file then): effect's memory engine keeps every
    // execution, activity exit and deferred it saw for as long as it lives, so one engine for all of
    // a runner's executions would hold every transcript it ever ran.
    const running = new Map<string, { readonly engine: Engine; readonly scope: Scope.Closeable }>()
    const making = yield* Semaphore.make(1)
    const innerOf = (executionId: string): Effect.Effect<Engine> =>
      Effect.suspend(() => {
        const known = running.get(executionId)
        if (known !== undefined) return Effect.succeed(known.engine)
        return making.withPermits(1)(Effect.gen(function*() {
          const again = running.get(executionId)
          if (again !== undefined) return again.engine
          const own = yield* Scope.fork(scope)
          const inner = Context.get(
            yield* Layer.buildWithScope(WorkflowEngine.layerMemory, own),
            WorkflowEngine.WorkflowEngine
          )
          for (const { execute, workflow } of workflows.values()) {
            yield* Scope.provide(
              inner.register(workflow as any, execute) as Effect.Effect<void, never, Scope.Scope>,
              own
            )
          }
          running.set(executionId, { engine: inner, scope: own })
          return inner
        }))
      })
    /** The execution's memory engine, once its run has completed (it answers polls until then). */
    const release = (workflow: Workflow.Any, executionId: string) =>
      Effect.gen(function*() {
        const entry = running.get(executionId)
        if (entry === undefined) return
        while (Option.isNone(yield* entry.engine.poll(workflow as any, executionId))) yield* Effect.yieldNow
        running.delete(executionId)
        yield* Scope.close(entry.scope, Exit.void)
      })
    // what the runner has read of the rows other processes write
    let executionsSeen = 0
    let deferredsSeen = 0
    {
      const [e] = yield* Effect.orDie(sql<{ seq: number | null }>`select max(seq) as seq from agentloop_wf_executions`)
      const [d] = yield* Effect.orDie(sql<{ seq: number | null }>`select max(seq) as seq from agentloop_wf_deferreds`)
      executionsSeen = Number(e?.seq ?? 0)
      deferredsSeen = Number(d?.seq ?? 0)
    }

    // each running execution's journal of activities, read from the file once per process (a new
    // execution's is empty) and kept as its activities end, until the execution completes
    const journals = new Map<string, Map<string, string>>()
    const journalOf = (executionId: string) =>
      Effect.suspend(() => {
        const known = journals.get(executionId)
        if (known !== undefined) return Effect.succeed(known)
        return sql<{ name: string; attempt: number; exit: string }>`select name, attempt, exit
          from agentloop_wf_activities where execution_id = ${executionId}`.pipe(
          Effect.orDie,
          Effect.map((found) => {
            const journal = new Map(found.map((row) => [`${row.attempt}/${row.name}`, row.exit]))
            journals.set(executionId, journal)
            return journal
          })
        )
      })

    /** Starts (or, when it runs already, leaves alone) an execution found in the file. */
    const startStored = (workflow: Workflow.Any, executionId: string, payload: string) =>
      Effect.flatMap(
        decode(payloadCodec(workflow), payload),
        (decoded) =>
          Effect.flatMap(
            innerOf(executionId),
            (inner) => inner.execute(workflow as any, { executionId, payload: decoded, discard: true })
          )
      )

    /** The rows other processes wrote since the last read: new executions to start, deferreds to wake. */
    const readNew = Effect.gen(function*() {
      const started = yield* Effect.orDie(
        sql<{ seq: number; id: string; workflow: string; payload: string }>`select seq, id, workflow, payload
          from agentloop_wf_executions where seq > ${executionsSeen} and result is null order by seq`
      )
      for (const row of started) {
        executionsSeen = Math.max(executionsSeen, Number(row.seq))
        const registered = workflows.get(row.workflow)
        if (registered !== undefined) yield* startStored(registered.workflow, row.id, row.payload)
      }
      const done = yield* Effect.orDie(
        sql<{ seq: number; execution_id: string; name: string; workflow: string; exit: string }>`select seq,
          execution_id, name, workflow, exit from agentloop_wf_deferreds where seq > ${deferredsSeen} order by seq`
      )
      for (const row of done) {
        deferredsSeen = Math.max(deferredsSeen, Number(row.seq))
        const inner = running.get(row.execution_id)?.engine
        // not running here: it completed, or its replay finds the deferred in the file
        if (inner === undefined) continue
        // the memory engine takes the exit as its own deferredDone would have encoded it (values as
        // JSON), wakes the run, and its replay decodes it with the deferred's schema
        const exit = yield* decode(encodedDeferredExit, row.exit)
        yield* inner.deferredDone(DurableDeferred.make(row.name, { success: Schema.Json, error: Schema.Json }), {
          workflowName: row.workflow,
          executionId: row.execution_id,
          deferredName: row.name,
          exit
        })
      }
    })
    yield* readNew.pipe(
      Effect.delay(options.pollInterval),
      Effect.forever,
      Effect.forkScoped
    )

    const engine: Engine = WorkflowEngine.WorkflowEngine.of({
      register: (workflow: any, execute: any) =>
        Effect.gen(function*() {
          // the services the workflow's layer was built with (its model, tools...): the memory
          // engines it is registered on later are made where an execution starts
          const services = yield* Effect.context<never>()
          const body = (payload: any, executionId: string) =>
            Effect.flatMap(WorkflowEngine.WorkflowInstance, (instance) =>
              Effect.andThen(
                // running again (woken): no longer suspended for other processes
                Effect.orDie(sql`update agentloop_wf_executions set suspended = 0 where id = ${executionId}
                  and suspended = 1`),
                // the workflow's activities, deferreds and clocks go through this engine
                Effect.provideService(execute(payload, executionId), WorkflowEngine.WorkflowEngine, engine)
              ).pipe(
                Effect.updateContext((input: Context.Context<any>) =>
                  Context.merge(services, input) as Context.Context<any>
                ),
                Effect.onExit((exit) => {
                  if (instance.suspended) {
                    return Effect.orDie(sql`update agentloop_wf_executions set suspended = 1 where id = ${executionId}`)
                  }
                  if (interruptedOnly(exit)) {
                    return Effect.void
                  }
                  if (Exit.isFailure(exit) && Context.get(workflow.annotations, Workflow.SuspendOnFailure)) {
                    return Effect.void
                  }
                  return Effect.flatMap(
                    encode(exitCodecOf(workflow), exit),
                    (json) =>
                      Effect.orDie(sql`update agentloop_wf_executions set result = ${json} where id = ${executionId}`)
                  ).pipe(Effect.ensuring(Effect.suspend(() => {
                    journals.delete(executionId)
                    return Effect.forkIn(release(workflow, executionId), scope)
                  })))
                })
              ))
          workflows.set(workflow._tag, { workflow, execute: body })
          for (const entry of running.values()) {
            yield* Scope.provide(
              entry.engine.register(workflow, body) as Effect.Effect<void, never, Scope.Scope>,
              entry.scope
            )
          }
          // the executions a process left unfinished replay from their journal
          const unfinished = yield* Effect.orDie(
            sql<{ id: string; payload: string }>`select id, payload from agentloop_wf_executions
              where workflow = ${workflow._tag} and result is null order by seq`
          )
          for (const row of unfinished) yield* startStored(workflow, row.id, row.payload)
        }) as Effect.Effect<void, never, Scope.Scope>,
      execute: (workflow: any, opts: any) =>
        Effect.gen(function*() {
          const stored = yield* rows.result(workflow, opts.executionId)
          if (Option.isSome(stored)) return opts.discard === true ? opts.executionId : yield* stored.value
          yield* Effect.orDie(rows.start(workflow, opts.executionId, opts.payload))
          return yield* (yield* innerOf(opts.executionId)).execute(workflow, opts)
        }) as any,
      // a run of this process is where its memory engine says; any other is where the file says
      poll: (workflow: any, executionId: string) =>
        Effect.suspend(() =>
          running.get(executionId)?.engine.poll(workflow, executionId) ?? rows.polled(workflow, executionId)
        ) as any,
      interrupt: (workflow: any, executionId: string) =>
        Effect.suspend(() => running.get(executionId)?.engine.interrupt(workflow, executionId) ?? Effect.void),
      interruptUnsafe: (workflow: any, executionId: string) =>
        Effect.suspend(() => running.get(executionId)?.engine.interruptUnsafe(workflow, executionId) ?? Effect.void),
      resume: (workflow: any, executionId: string) =>
        Effect.suspend(() => running.get(executionId)?.engine.resume(workflow, executionId) ?? Effect.void),
      activityExecute: (activity: any, attempt: number) =>
        Effect.gen(function*() {
          const instance = yield* WorkflowEngine.WorkflowInstance
          const journal = yield* journalOf(instance.executionId)
          const key = `${attempt}/${activity.name}`
          const journaled = journal.get(key)
          if (journaled !== undefined) {
            return new Workflow.Complete({ exit: yield* decode(exitCodecOf(activity), journaled) })
          }
          const result = yield* (yield* innerOf(instance.executionId)).activityExecute(activity, attempt)
          if (result._tag === "Complete") {
            const json = yield* encode(exitCodecOf(activity), result.exit)
            yield* Effect.orDie(
              sql`insert into agentloop_wf_activities (execution_id, name, attempt, exit) values
                (${instance.executionId}, ${activity.name}, ${attempt}, ${json}) on conflict do nothing`
            )
            journal.set(key, json)
          }
          return result
        }) as any,
      deferredResult: (deferred: any) =>
        Effect.gen(function*() {
          const instance = yield* WorkflowEngine.WorkflowInstance
          const held = yield* (yield* innerOf(instance.executionId)).deferredResult(deferred)
          if (Option.isSome(held)) return held
          const found = yield* Effect.orDie(
            sql<{ exit: string }>`select exit from agentloop_wf_deferreds where execution_id = ${instance.executionId}
              and name = ${deferred.name}`
          )
          return found.length === 0 ? Option.none() : Option.some(yield* decode(exitCodecOf(deferred), found[0]!.exit))
        }) as any,
      deferredDone: (deferred: any, opts: any) =>
        Effect.gen(function*() {
          yield* rows.deferredDone({ ...opts, json: yield* encodeDeferredExit(deferred, opts.exit) })
          // a run of this process is woken; one that is not running here finds it in the file
          const inner = running.get(opts.executionId)?.engine
          if (inner !== undefined) yield* inner.deferredDone(deferred, opts)
        }) as any,
      scheduleClock: (workflow: any, opts: any) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const wakeAt = now + Duration.toMillis(opts.clock.duration)
          yield* Effect.orDie(
            sql`insert into agentloop_wf_clocks (execution_id, name, wake_at) values (${opts.executionId},
              ${opts.clock.name}, ${wakeAt}) on conflict do nothing`
          )
          const [row] = yield* Effect.orDie(
            sql<{ wake_at: number }>`select wake_at from agentloop_wf_clocks where execution_id = ${opts.executionId}
              and name = ${opts.clock.name}`
          )
          const wait = Math.max(0, Number(row?.wake_at ?? wakeAt) - now)
          yield* engine.deferredDone(opts.clock.deferred, {
            workflowName: workflow._tag,
            executionId: opts.executionId,
            deferredName: opts.clock.deferred.name,
            exit: Exit.void
          }).pipe(
            Effect.delay(Duration.millis(wait)),
            FiberMap.run(clocks, `${opts.executionId}/${opts.clock.name}`, { onlyIfMissing: true }),
            Effect.asVoid
          )
        })
    } as any)
    return engine
  }) as Effect.Effect<Engine, never, SqlClient.SqlClient | Scope.Scope>)

/**
 * A client-only engine on the file: starts executions, reads their results, completes deferreds;
 * the runner (another process) runs them.
 */
export const sqliteClientEngineLayer = (
  options: Options
): Layer.Layer<WorkflowEngine.WorkflowEngine, never, SqlClient.SqlClient> =>
  Layer.effect(WorkflowEngine.WorkflowEngine)(Effect.gen(function*() {
    const { rows } = yield* openJournal
    const clientOnly = (what: string) =>
      Effect.die(new Error(`agentloop: a client-only engine cannot ${what}: the runner process does`))
    return WorkflowEngine.WorkflowEngine.of({
      register: () => clientOnly("run workflows"),
      execute: (workflow: any, opts: any) =>
        Effect.gen(function*() {
          yield* Effect.orDie(rows.start(workflow, opts.executionId, opts.payload))
          if (opts.discard === true) return opts.executionId
          while (true) {
            const stored = yield* rows.result(workflow, opts.executionId)
            if (Option.isSome(stored)) return yield* stored.value
            yield* Effect.sleep(options.pollInterval)
          }
        }),
      poll: (workflow: any, executionId: string) => rows.polled(workflow, executionId),
      interrupt: () => clientOnly("interrupt an execution"),
      interruptUnsafe: () => clientOnly("interrupt an execution"),
      resume: () => clientOnly("resume an execution"),
      activityExecute: () => clientOnly("run an activity"),
      deferredResult: () => clientOnly("read a deferred inside a workflow"),
      deferredDone: (deferred: any, opts: any) =>
        Effect.flatMap(
          encodeDeferredExit(deferred, opts.exit),
          (json) => rows.deferredDone({ ...opts, json })
        ),
      scheduleClock: () => clientOnly("schedule a clock")
    } as any)
  }))
