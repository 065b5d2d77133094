#!/usr/bin/env node
// Runs every test file under test/ with node:test through tsx, after saying plainly which
// engine suites will run and which are skipped (no PostgreSQL or Redis on this machine).
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

function find(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? find(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : [],
  );
}

async function probePostgres() {
  const url = process.env.PLANTSTORE_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
    return { ok: true, where: url };
  } catch (err) {
    return { ok: false, where: url, why: err.message };
  } finally {
    await c.end().catch(() => {});
  }
}

const pgState = await probePostgres();
if (pgState.ok) {
  console.log(`# PostgreSQL reachable at ${pgState.where}: the postgres suites run`);
} else if (process.env.CI === 'true') {
  console.error(`# CI=true but PostgreSQL is not reachable at ${pgState.where} (${pgState.why}): failing`);
  process.exit(1);
} else {
  console.log(
    `# SKIPPED: PostgreSQL is not reachable at ${pgState.where} (${pgState.why}); the postgres suites are skipped`,
  );
}

async function probeRedis() {
  const { Redis } = await import('ioredis');
  const url = process.env.PLANTSTORE_TEST_REDIS ?? 'redis://127.0.0.1:6379';
  const r = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: 2000,
    retryStrategy: () => null,
  });
  r.on('error', () => {});
  try {
    await r.connect();
    return { ok: true, where: url };
  } catch (err) {
    return { ok: false, where: url, why: err.message };
  } finally {
    r.disconnect();
  }
}

const redisState = await probeRedis();
if (redisState.ok) {
  console.log(`# Redis reachable at ${redisState.where}: the shared rate-limit suites run`);
} else if (process.env.CI === 'true') {
  console.error(`# CI=true but Redis is not reachable at ${redisState.where} (${redisState.why}): failing`);
  process.exit(1);
} else {
  console.log(
    `# SKIPPED: Redis is not reachable at ${redisState.where} (${redisState.why}); the Redis suites are skipped`,
  );
}

const files = process.argv.length > 2 ? process.argv.slice(2) : find('test').sort();
const r = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', ...files], {
  stdio: 'inherit',
});
if (!pgState.ok)
  console.log(
    '# reminder: the postgres suites were SKIPPED (no PostgreSQL); set PLANTSTORE_TEST_PG to run them',
  );
process.exit(r.status ?? 1);
