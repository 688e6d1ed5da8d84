import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as SqliteClient from "../src/SqliteClient.ts"

describe("SqliteClient", () => {
  it.effect("runs DDL, writes with parameters and reads rows back", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`create table t (id integer primary key, name text, flag integer)`
      yield* sql`insert into t ${sql.insert({ id: 1, name: "a", flag: true })}`
      yield* sql`insert into t (id, name, flag) values (${2}, ${"b"}, ${false})`
      const rows = yield* sql<{ id: number; name: string; flag: number }>`select * from t order by id`
      assert.deepStrictEqual(rows.map((r) => ({ ...r })), [{ id: 1, name: "a", flag: 1 }, {
        id: 2,
        name: "b",
        flag: 0
      }])
      const values = yield* sql`select name from t order by id`.values
      assert.deepStrictEqual(values, [["a"], ["b"]])
    }).pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:" }))))

  it.effect("rolls a failed transaction back and commits a good one", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`create table t (id integer unique)`
      const failed = yield* sql.withTransaction(
        Effect.andThen(sql`insert into t (id) values (1)`, sql`insert into t (id) values (1)`)
      ).pipe(Effect.flip)
      assert.strictEqual(failed._tag, "SqlError")
      assert.strictEqual(failed.reason._tag, "UniqueViolation")
      yield* sql.withTransaction(sql`insert into t (id) values (2)`)
      const rows = yield* sql<{ id: number }>`select id from t`
      assert.deepStrictEqual(rows.map((r) => r.id), [2])
    }).pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:" }))))

  it.effect("a syntax error is a typed SqlError", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const error = yield* sql`selec 1`.pipe(Effect.flip)
      assert.strictEqual(error._tag, "SqlError")
    }).pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:" }))))
})
