import type pg from 'pg';

/**
 * What every PostgreSQL session the service opens sets before its first
 * statement: no JIT compilation.
 *
 * Why. Every statement the service runs is bounded OLTP work (a push, a
 * lookup, a step, a status read): it runs in milliseconds and is planned
 * again and again. PostgreSQL decides to compile a statement from the
 * planner's cost estimate alone (jit_above_cost and its siblings), and
 * estimates that grow with the number of partitions cross those thresholds
 * long before the work does. Compiling then costs far more than running:
 * the queue status read (`queue_retention_get_v2`, one index probe per
 * partition) at 2 000 partitions a queue was estimated at 3.5 M, compiled
 * with inlining and optimisation, and took 1.19 s, 1.03 s of it in JIT
 * (docs/history/2026-12-07-no-jit-in-any-session.md). The push, lookup and
 * compaction functions carry `SET jit = off` for the same reason; this
 * covers every other statement, present and future, including the
 * statements written in TypeScript.
 *
 * How. A SET on the session, sent as the first statement of each new
 * connection, not a startup parameter (`options=-c jit=off`): PgBouncer
 * refuses startup parameters it does not track, so the connection itself
 * would fail behind it. It changes no result, only how a plan is executed.
 */
export const SESSION_SETUP_SQL = 'SET jit = off';

/**
 * The session's setting, awaited: for a client the caller opened itself,
 * and as a pool's `onConnect` hook, which pg-pool awaits before it hands the
 * new client out, so no statement of the caller runs before it (a SET
 * queued behind the 'connect' event instead would pipeline two statements
 * on one client, which pg deprecates). A failed SET fails that connection
 * (pg-pool ends the client and the caller's connect fails, as when the
 * server refuses it), so no session runs without the setting.
 */
export async function setUpSession(client: pg.ClientBase): Promise<void> {
  await client.query(SESSION_SETUP_SQL);
}

/**
 * setUpSession as a pg.Pool `onConnect` option. pg-pool awaits the promise
 * the hook returns (pg-pool 3.14, `_promiseTry(onConnect)`); @types/pg
 * declares the hook as returning void, hence the cast.
 * test/integration/session-settings.test.ts checks every pooled session.
 */
export const onPoolConnect = setUpSession as (client: pg.ClientBase) => void;
