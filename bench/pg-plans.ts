/**
 * What PostgreSQL's plan choice costs the hot list and read statements: each run 300 times as a
 * prepared statement on one connection as PostgreSQL chooses (auto), with its generic plan forced,
 * and planned afresh every call (custom), printing the mean round trip and the plans it made.
 * Reads a store filled by the change-feed benchmark (1,000,000 plants; the caller `bench` in 20
 * gardens), kept with KEEP_DB=1:
 *
 *   KEEP_DB=1 npx tsx bench/changes.ts postgres 1000000 1000000 3   (prints "kept URL" on stderr)
 *   npx tsx bench/pg-plans.ts URL
 *
 * "auto" should show the generic plans kept (g) after five custom ones (c): see plant-queries.ts, P.
 */
import pg from 'pg';
import { PLANT_QUERIES as Q } from '../src/store/postgres/plant-queries.js';

const url = process.argv[2];
if (!url) throw new Error('usage: pg-plans.ts POSTGRES_URL (a store kept by KEEP_DB=1 bench/changes.ts)');
const c = new pg.Client({ connectionString: url });
await c.connect();
const gardens = (
  await c.query(`SELECT array_agg(garden_id ORDER BY garden_id) g FROM garden_members WHERE user_id='bench'`)
).rows[0].g as string[];
const ids = (
  await c.query(`SELECT array_agg(id) i FROM (SELECT id FROM plants WHERE garden = $1 LIMIT 20) x`, [
    gardens[0],
  ])
).rows[0].i as string[];
const tag = (
  await c.query(`SELECT tag FROM plants WHERE garden = $1 AND tag IS NOT NULL LIMIT 1`, [gardens[0]])
).rows[0]?.tag;
const at = new Date().toISOString();
// A create (written and rolled back: BEGIN and ROLLBACK are in every mode's round trips alike).
const create = (n: number) => [
  Array(n).fill('bench'),
  Array(n).fill(gardens[0]),
  Array(n).fill('A plant'),
  Array(n).fill(null),
  Array(n).fill(at),
  Array(n).fill(false),
  Array(n).fill('plant'),
  Array(n).fill('bench'),
  Array(n).fill('req'),
];
const cases: [keyof typeof Q, unknown[]][] = [
  ['listGardens', [gardens.slice(0, 1), 0, 51]],
  ['listGardens', [gardens, 0, 51]],
  ['listGardensTag', [gardens.slice(0, 1), tag, 0, 51]],
  ['plantsFor', [ids.slice(0, 1), ['bench']]],
  ['plantsFor', [ids, ids.map(() => 'bench')]],
  ['scopeMarks', [['bench'], [null]]],
  ['scopeMarks', [['bench'], [tag]]],
  ['gardenMarks', [gardens.slice(0, 1), null]],
  ['createPlants', create(1)],
  ['createPlants', create(8)],
];
let k = 0;
for (const [name, values] of cases) {
  const out: string[] = [];
  for (const mode of ['auto', 'force_generic_plan', 'force_custom_plan']) {
    await c.query(`SET plan_cache_mode = ${mode}`);
    const sname = `s${k++}`;
    const run = async () => {
      if (name !== 'createPlants') return c.query({ name: sname, text: Q[name], values });
      await c.query('BEGIN');
      await c.query({ name: sname, text: Q[name], values });
      return c.query('ROLLBACK');
    };
    for (let i = 0; i < 20; i++) await run();
    const t0 = performance.now();
    for (let i = 0; i < 300; i++) await run();
    const ms = (performance.now() - t0) / 300;
    const pc = (
      await c.query(`SELECT generic_plans g, custom_plans c FROM pg_prepared_statements WHERE name = $1`, [
        sname,
      ])
    ).rows[0];
    out.push(`${mode} ${ms.toFixed(3)} ms (g${pc.g}/c${pc.c})`);
  }
  console.log(name, JSON.stringify(values).slice(0, 40), '|', out.join(' | '));
}
await c.end();
