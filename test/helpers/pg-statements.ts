import type { Store } from '../../src/store/store.js';

/**
 * The statements a PostgreSQL store sends through its pool until `stop()`: each by its name, or,
 * for one planned for its values (unnamed), by `unnamed(text)`. For a SQLite store the list stays
 * empty.
 */
export function statementsOf(
  store: Store,
  unnamed: (text: string) => string = (text) => text.slice(0, 20),
): { names: string[]; stop(): void } {
  const names: string[] = [];
  const pool = (store as unknown as { pool?: { query: (...a: unknown[]) => unknown } }).pool;
  if (store.engine !== 'postgres' || !pool) return { names, stop: () => {} };
  const query = pool.query;
  pool.query = function (this: unknown, ...a: unknown[]) {
    const q = a[0] as { name?: string; text: string };
    names.push(q.name ?? unnamed(q.text));
    return query.apply(this, a);
  };
  return {
    names,
    stop: () => {
      pool.query = query;
    },
  };
}
