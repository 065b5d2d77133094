import pg from 'pg';

/** The PostgreSQL server the tests use; each test makes its own database on it and drops it. */
export const PG_ADMIN_URL = process.env.PLANTSTORE_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432/postgres';
/** The Redis the shared-rate-limit tests use. */
export const REDIS_URL = process.env.PLANTSTORE_TEST_REDIS ?? 'redis://127.0.0.1:6379';

/**
 * `probe` up to three times, 5 s each: on a loaded machine one connection may take seconds, and
 * with CI=true a service judged unreachable fails the whole run. The last attempt's reason, or false.
 */
async function tried(probe: () => Promise<string | false>): Promise<string | false> {
  let why: string | false = false;
  for (let attempt = 0; attempt < 3; attempt++) {
    why = await probe();
    if (!why) return false;
  }
  return why;
}

/** Why PostgreSQL cannot be used here, or false when it answers. */
export const postgresUnreachable = () => tried(postgresProbe);

/** Why Redis cannot be used here, or false when it answers. */
export const redisUnreachable = () => tried(redisProbe);

async function postgresProbe(): Promise<string | false> {
  const c = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 5000 });
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

async function redisProbe(): Promise<string | false> {
  const { Redis } = await import('ioredis');
  const r = new Redis(REDIS_URL, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: 5000,
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
