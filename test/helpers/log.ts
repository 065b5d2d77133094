import type pg from 'pg';
import type { Store } from '../../src/store/store.js';

/**
 * Waits until every event committed so far is readable from the store's log. On PostgreSQL the
 * log is read only below the oldest transaction still running anywhere on the server (another
 * test's, in another database, included): an event just committed may not be readable yet. The
 * next transaction id not yet given out now is past every committed event's; once the readable end
 * (headPosition) has reached it, they all are. SQLite's one writer: at once.
 */
export async function logSettled(store: Store): Promise<void> {
  if (store.engine !== 'postgres') return;
  const pool = (store as unknown as { pool: pg.Pool }).pool;
  const next = BigInt(
    (await pool.query<{ x: string }>('SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS x')).rows[0]!.x,
  );
  const deadline = Date.now() + 20_000;
  for (;;) {
    const head = BigInt((await store.headPosition()).split('.')[0]!);
    if (head >= next) return;
    if (Date.now() >= deadline) throw new Error(`the log's readable end stayed before ${next} for 20 s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
