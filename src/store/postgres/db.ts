import type pg from 'pg';

/** What the store lends the code of one concern: its prepared statements, transactions. */
export interface PgDb<N extends string> {
  /** Runs the prepared statement `name` (on the pool, or in the transaction of `client`). */
  q<R extends pg.QueryResultRow>(
    name: N,
    values: unknown[],
    client?: pg.PoolClient,
  ): Promise<pg.QueryResult<R>>;
  /** Runs `fn` in a transaction, committed when it resolves. */
  tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T>;
}
