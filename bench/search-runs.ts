/**
 * Search pages on PostgreSQL over a store filled the way imports fill one: each user's plants one
 * run of ids, going round its 4 gardens, so that each garden's plants come in runs (one per user
 * who writes there) rather than spread over the store. The walk (src/store/postgres/search.ts)
 * reads the gardens' plants in id order across them up to its budget; where the page is short
 * there, later walks go on from its stop before the planned statement is asked.
 *
 *   npx tsx bench/search-runs.ts [--users 1000] [--per-user 1000] [--callers 200]
 *        [--terms mon,mon del,zzz] [--rounds 2] [--base DIR] [--pg URL]
 *
 * The store: users u0 … u(N−1) in a fixed shuffled order, each importing --per-user plants (one
 * run of ids) into its home garden h<u> and the shared gardens s<u>, s<u−1>, s<u−2> in turn; names
 * 'Monstera deliciosa' (15.5 %), 'Delphinium x' (about 17 %) or 'Fern x', drawn with a fixed seed.
 * Written by SQL straight into `plants` after the tree's migrations (no events: only searches are
 * measured). For each term, --callers callers in 4 gardens each ask the first page of 20, then
 * five deep pages each (cursors spread over the plants they see), one call at a time through
 * `PgStore.listPlants` on a pool of 2. Reported per tree and round: how the pages were read (the
 * store's searchReads: pages the walks answered whole, later walks, pages the planned statement
 * finished), the CPU of the database's client backends a call (/proc), the calling process's CPU
 * a call, and the wall time a call. --base DIR measures another built checkout's store on the
 * same database in turn (it must know every migration this tree has).
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { BENCH_PG } from './ports.js';

const { values: opt } = parseArgs({
  options: {
    users: { type: 'string', default: '1000' },
    'per-user': { type: 'string', default: '1000' },
    callers: { type: 'string', default: '200' },
    terms: { type: 'string', default: 'mon,mon del,zzz' },
    rounds: { type: 'string', default: '2' },
    base: { type: 'string' },
    pg: { type: 'string', default: BENCH_PG },
  },
});
const USERS = Number(opt.users);
const PER_USER = Number(opt['per-user']);
const CALLERS = Math.min(Number(opt.callers), USERS);
const TERMS = opt.terms!.split(',').map((t) => t.trim().split(/\s+/));
const ROOT = join(import.meta.dirname, '..');

interface Searcher {
  listPlants(q: {
    gardens: string[];
    tag: null;
    afterId: number;
    limit: number;
    terms: string[];
  }): Promise<unknown[]>;
  searchReads: Record<string, number>;
  migrate(): Promise<void>;
  close(): Promise<void>;
}
type StoreClass = new (o: { url: string; poolSize: number }) => Searcher;
const storeOf = async (tree: string): Promise<StoreClass> =>
  (await import(pathToFileURL(join(tree, 'src/store/postgres/store.ts')).href)).PgStore;

const admin = new pg.Client({ connectionString: opt.pg });
await admin.connect();
const name = `plantstore_search_runs_${process.pid}`;
await admin.query(`CREATE DATABASE ${name}`);
const url = new URL(opt.pg!);
url.pathname = `/${name}`;
const db = new pg.Client({ connectionString: url.toString() });
try {
  const Ours = await storeOf(ROOT);
  const migrating = new Ours({ url: url.toString(), poolSize: 1 });
  await migrating.migrate();
  await migrating.close();
  await db.connect();
  const t0 = performance.now();
  await db.query('SELECT setseed(0.57)');
  await db.query(`CREATE TEMP TABLE ord AS
    SELECT u, row_number() OVER (ORDER BY random()) - 1 AS k FROM generate_series(0, ${USERS - 1}) u`);
  await db.query(`INSERT INTO plants (id, owner, garden, name, tag, search)
    SELECT x.k * ${PER_USER} + x.i + 1, 'u' || x.u,
      CASE x.i % 4 WHEN 0 THEN 'h' || x.u WHEN 1 THEN 's' || x.u
        WHEN 2 THEN 's' || ((x.u + ${USERS - 1}) % ${USERS}) ELSE 's' || ((x.u + ${USERS - 2}) % ${USERS}) END,
      x.name, NULL, array_to_tsvector(string_to_array(lower(x.name), ' '))
    FROM (SELECT o.u, o.k, i, CASE WHEN random() < 0.155 THEN 'Monstera deliciosa'
        WHEN random() < 0.2 THEN 'Delphinium x' ELSE 'Fern x' END AS name
      FROM ord o, generate_series(0, ${PER_USER - 1}) i) x`);
  await db.query('VACUUM ANALYZE plants');
  console.error(`${USERS * PER_USER} plants written in ${((performance.now() - t0) / 1000).toFixed(0)} s`);

  const gardensOf = (u: number) => [
    `h${u}`,
    `s${u}`,
    `s${(u + USERS - 1) % USERS}`,
    `s${(u + USERS - 2) % USERS}`,
  ];
  const callers = Array.from({ length: CALLERS }, (_, i) => gardensOf(Math.floor((i * USERS) / CALLERS)));
  const deepCalls: { gardens: string[]; afterId: number }[] = [];
  for (const gardens of callers) {
    const ids = (
      await db.query('SELECT id FROM plants WHERE garden = ANY($1) ORDER BY id', [gardens])
    ).rows.map((r) => Number(r.id));
    for (let k = 1; k <= 5; k++) deepCalls.push({ gardens, afterId: ids[Math.floor((k * ids.length) / 6)]! });
  }
  const backendTicks = async () => {
    const { rows } = await db.query(
      `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
      [name],
    );
    let t = 0;
    for (const { pid } of rows) {
      try {
        const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
        t += Number(f[11]) + Number(f[12]);
      } catch {}
    }
    return t;
  };
  const tick = 1e6 / 100; // µs a clock tick (USER_HZ 100)

  const trees: [string, string][] = [['this tree', ROOT]];
  if (opt.base) trees.push([`base (${opt.base})`, resolve(opt.base)]);
  console.log(
    `\n${new Date().toISOString().slice(0, 10)}, ${USERS * PER_USER} plants (${USERS} users × ${PER_USER}, one run of ids each), ${CALLERS} callers in 4 gardens, pages of 20, one call at a time\n`,
  );
  console.log(
    '| round | tree | term | pages | read (walk whole / later walks / planned) | backends µs a call | caller µs a call | wall µs a call |',
  );
  console.log('|---|---|---|---|---|---:|---:|---:|');
  for (let round = 1; round <= Number(opt.rounds); round++) {
    const order = round % 2 === 1 ? trees : [...trees].reverse();
    for (const [label, tree] of order) {
      const store = new (await storeOf(tree))({ url: url.toString(), poolSize: 2 });
      for (const terms of TERMS) {
        // Both connections open and the statements prepared before the count.
        await Promise.all(
          callers
            .slice(0, 4)
            .map((gardens) => store.listPlants({ gardens, tag: null, afterId: 0, limit: 20, terms })),
        );
        for (const [kind, calls] of [
          ['first', callers.map((gardens) => ({ gardens, afterId: 0 }))],
          ['deep', deepCalls],
        ] as const) {
          const before = { ...store.searchReads };
          const b = await backendTicks();
          const cpu = process.cpuUsage();
          const start = performance.now();
          for (const x of calls) await store.listPlants({ ...x, tag: null, limit: 20, terms });
          const wall = ((performance.now() - start) * 1000) / calls.length;
          const backends = (((await backendTicks()) - b) * tick) / calls.length;
          const own = process.cpuUsage(cpu);
          const d = (k: string) => (store.searchReads[k] ?? 0) - (before[k] ?? 0);
          console.log(
            `| ${round} | ${label} | ${terms.join(' ')} | ${calls.length} ${kind} | ${d('walk')} / ${'again' in store.searchReads ? d('again') : '–'} / ${d('planned')} | ${backends.toFixed(0)} | ${((own.user + own.system) / calls.length).toFixed(0)} | ${wall.toFixed(0)} |`,
          );
        }
      }
      await store.close();
    }
  }
} finally {
  await db.end().catch(() => {});
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
}
