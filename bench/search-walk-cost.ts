/**
 * What one search walk costs PostgreSQL, alone: the walk statement the service prepares for a
 * search across 4 gardens (SEARCH_QUERIES.searchWalk4, src/store/postgres/search.ts), prepared on
 * one connection and called `--calls` times in a row for one caller's gardens and term, with the
 * backend's CPU (utime + stime from /proc, so PostgreSQL must run on this machine) divided by the
 * calls. No HTTP, no server: the statement's own cost, to set beside a search's in "How cost grows
 * with size" (docs/benchmarks.md).
 *
 * The store is one `bench/size.ts --engine postgres --keep` left (database plantstore_size_N, its
 * layout in .tmp/size-pg-N-v1.json); the caller is user u5000 of that layout, as in size.ts.
 *
 *   npx tsx bench/size.ts --size 100000 --engine postgres --keep     # once, to make the store
 *   npx tsx bench/search-walk-cost.ts --size 100000 [--calls 2000] [--term mon] [--rounds 3]
 *       [--pg postgres://postgres@127.0.0.1:5432/postgres]
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { SEARCH_QUERIES, searchWalk } from '../src/store/postgres/search.js';
import { BENCH_PG } from './ports.js';

const { values: opt } = parseArgs({
  options: {
    size: { type: 'string', default: '100000' },
    calls: { type: 'string', default: '2000' },
    term: { type: 'string', default: 'mon' },
    rounds: { type: 'string', default: '3' },
    pg: { type: 'string', default: BENCH_PG },
  },
});
const ROOT = resolve(import.meta.dirname, '..');
const plants = Number(opt.size);
const layout = JSON.parse(readFileSync(join(ROOT, '.tmp', `size-pg-${plants}-v1.json`), 'utf8')).layout as {
  gardens: string[][];
};
const gardens = layout.gardens[5000]!;
const url = new URL(opt.pg!);
url.pathname = `/plantstore_size_${plants}`;
// Without JIT, as the service's connections run (src/store/postgres/store.ts): the walk's generic
// plan is estimated past jit_above_cost on a large store, and each call would compile it (42 ms).
const client = new pg.Client({ connectionString: url.toString(), options: '-c jit=off' });
await client.connect();
const ticks = 100; // USER_HZ, as on every Linux this runs on
const backendCpuMs = (pid: number): number => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return ((Number(rest[11]) + Number(rest[12])) * 1000) / ticks;
};
try {
  const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
  const walk = searchWalk({
    gardens,
    terms: opt.term!.split(/\s+/),
    afterId: 0,
    limit: 20,
    tag: null,
  } as Parameters<typeof searchWalk>[0]);
  if (walk === null || walk[0] !== 'searchWalk4') throw new Error('the caller is not in 4 gardens');
  const [name, values] = walk;
  const text = SEARCH_QUERIES[name];
  const rows = (await client.query({ name, text, values })).rows as { hit: boolean }[];
  console.log(
    `plantstore_size_${plants}, u5000's 4 gardens, term ${JSON.stringify(opt.term)}: the walk answers ${rows.filter((r) => r.hit).length} matches (${rows.length} rows)`,
  );
  for (let round = 1; round <= Number(opt.rounds); round++) {
    const calls = Number(opt.calls);
    const cpu0 = backendCpuMs(pid);
    const t0 = performance.now();
    for (let i = 0; i < calls; i++) await client.query({ name, text, values });
    const cpu = backendCpuMs(pid) - cpu0;
    const wall = performance.now() - t0;
    console.log(
      `round ${round}: ${calls} calls, the backend's CPU ${((cpu * 1000) / calls).toFixed(0)} µs a call (wall ${((wall * 1000) / calls).toFixed(0)} µs)`,
    );
  }
} finally {
  await client.end();
}
