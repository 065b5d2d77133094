import pg from 'pg';

/** The PostgreSQL server the tests use; each test makes its own database on it and drops it. */
export const PG_ADMIN_URL = process.env.PLANTSTORE_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432/postgres';
/** The Redis the shared-rate-limit tests use. */
export const REDIS_URL = process.env.PLANTSTORE_TEST_REDIS ?? 'redis://127.0.0.1:6379';

/** Why PostgreSQL cannot be used here, or false when it answers. */
export async function postgresUnreachable(): Promise<string | false> {
  const c = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
    await c.query('SELECT 1');
    return false;
  } catch (err) {
    return `PostgreSQL is not reachable at ${PG_ADMIN_URL} (${(err as Error).message})`;
  } finally {
    await c.end().catch(() => {});
  }
}

/** Why Redis cannot be used here, or false when it answers. */
export async function redisUnreachable(): Promise<string | false> {
  const { Redis } = await import('ioredis');
  const r = new Redis(REDIS_URL, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: 2000,
    retryStrategy: () => null,
  });
  r.on('error', () => {});
  try {
    await r.connect();
    await r.ping();
    return false;
  } catch (err) {
    return `Redis is not reachable at ${REDIS_URL} (${(err as Error).message})`;
  } finally {
    r.disconnect();
  }
}
