/**
 * node-postgres (pg) vs postgres.js on plantstore's hot statements, same pool size, same
 * concurrency, interleaved rounds. `npx tsx bench/pg-drivers.ts` (needs PostgreSQL).
 */
import pg from 'pg';
import postgres from 'postgres';
import { BENCH_PG } from './ports.js';

const ADMIN = BENCH_PG;
const POOL = 10;
const CONCURRENCY = 50;
const SECONDS = 3;
const ROUNDS = 3;

const name = `plantstore_drivers_${process.pid}`;
const admin = new pg.Client({ connectionString: ADMIN });
await admin.connect();
await admin.query(`CREATE DATABASE ${name}`);
const url = new URL(ADMIN);
url.pathname = `/${name}`;
const setup = new pg.Client({ connectionString: url.toString() });
await setup.connect();
await setup.query(`CREATE TABLE plants (id bigint PRIMARY KEY, owner text NOT NULL, name text NOT NULL, tag text);
  CREATE INDEX plants_owner_id ON plants (owner, id);
  INSERT INTO plants SELECT g, 'u' || (g % 10), 'plant ' || g, NULL FROM generate_series(1, 100000) g; ANALYZE plants;`);
await setup.end();

const pool = new pg.Pool({ connectionString: url.toString(), max: POOL });
const sql = postgres(url.toString(), { max: POOL, prepare: true });

type Runner = (i: number) => Promise<unknown>;
const drivers: Record<string, Record<string, Runner>> = {
  pg: {
    'read one': (i) =>
      pool.query({
        name: 'get',
        text: 'SELECT id, owner, name, tag FROM plants WHERE id = $1',
        values: [1 + (i % 100000)],
      }),
    'list 20': () =>
      pool.query({
        name: 'list',
        text: 'SELECT id, owner, name, tag FROM plants WHERE owner = $1 AND id > $2 ORDER BY id LIMIT $3',
        values: ['u0', 0, 21],
      }),
  },
  'postgres.js': {
    'read one': (i) => sql`SELECT id, owner, name, tag FROM plants WHERE id = ${1 + (i % 100000)}`,
    'list 20': () =>
      sql`SELECT id, owner, name, tag FROM plants WHERE owner = ${'u0'} AND id > ${0} ORDER BY id LIMIT ${21}`,
  },
};

async function run(fn: Runner): Promise<number> {
  let done = 0;
  const end = Date.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < end) await fn(done++);
    }),
  );
  return done / SECONDS;
}

const results: Record<string, number[]> = {};
for (let r = 0; r < ROUNDS; r++) {
  for (const op of ['read one', 'list 20']) {
    for (const [driver, ops] of Object.entries(drivers)) {
      const key = `${driver} ${op}`;
      const rate = await run(ops[op]!);
      results[key] = [...(results[key] ?? []), rate];
    }
  }
}
for (const [k, v] of Object.entries(results)) {
  const m = [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
  console.log(`${k.padEnd(24)} ${m.toFixed(0).padStart(7)} queries/s (median of ${v.length})`);
}
await pool.end();
await sql.end();
await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
await admin.end();
