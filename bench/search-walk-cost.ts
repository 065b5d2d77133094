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
 *       [--pg postgres://postgres@127.0.0.1:5432/postgres] [--one-phase]
 *
 * `--one-phase` times, with the same values, a walk the service does not run (docs/benchmarks.md,
 * "A walk in one phase over a covering index"): each garden's plants and their match read by an
 * index-only scan, merged in id order, cut at the budget, numbered, and filtered to the matches and
 * the marker, streaming, so that it stops at the page's last match. It needs an index PostgreSQL
 * can read it from, made by hand on the store first:
 *   CREATE INDEX plants_walk_cover ON plants (garden, id) INCLUDE (name, tag, version, search);
 *   VACUUM plants;
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
    'one-phase': { type: 'boolean', default: false },
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
// The one-phase walk of `n` gardens, with walksStatement's values (search.ts): $1 … $n the gardens,
// then the terms, cursor, budget and limit, each an array of one.
const onePhase = (n: number): string => {
  const slots = Array.from({ length: n }, (_, i) => i + 1);
  const branches = slots
    .map(
      (i) => `(SELECT id, garden, name, tag, version, search @@ q.terms AS hit FROM plants
        WHERE q.g${i} IS NOT NULL AND garden = q.g${i} AND id > q.after_id ORDER BY id LIMIT q.budget)`,
    )
    .join(' UNION ALL ');
  const arrays = slots.map((i) => `(SELECT $${i}::text[])`).join(', ');
  const [t, a, b, l] = [1, 2, 3, 4].map((k) => `(SELECT $${n + k}::${k === 1 ? 'tsquery' : 'bigint'}[])`);
  return `WITH q AS (SELECT * FROM unnest(${arrays}, ${t}, ${a}, ${b}, ${l})
      WITH ORDINALITY AS q(${slots.map((i) => `g${i}`).join(', ')}, terms, after_id, budget, lim, n))
    SELECT q.n, u.* FROM q CROSS JOIN LATERAL (
      SELECT m.id, m.garden, m.name, m.tag, m.version, m.hit, m.k = q.budget AS cut FROM (
        SELECT u.*, row_number() OVER (ORDER BY u.id) AS k FROM (
          SELECT * FROM (${branches}) b ORDER BY id LIMIT q.budget) u) m
      WHERE m.hit OR m.k = q.budget ORDER BY m.id LIMIT q.lim) u`;
};
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
  const text = opt['one-phase'] ? onePhase(4) : SEARCH_QUERIES[name];
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
