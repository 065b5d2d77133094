import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { PLANT_QUERIES } from '../../src/store/postgres/plant-queries.js';
import { PgStore } from '../../src/store/postgres/store.js';
import { ENGINES, withPgDatabase } from '../helpers/engines.js';
import { planChoices, untypedLiterals } from '../helpers/pg-plans.js';

// The hot list, read and create statements on PostgreSQL's main pool are prepared once a connection, and
// must keep their generic plan: planned afresh every call (a custom plan, which their values made
// look cheaper) they cost PostgreSQL twice the CPU and more. And the generic plan must be a good
// one whatever the values: a small garden, a big one, a rare tag — it reads about the page.

const skip = ENGINES.find((e) => e.name === 'postgres')?.skip ?? 'no postgres engine';

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}
/** Rows the plan's scans of plants read, in all: those they produced and those their filters dropped. */
function scanned(node: PlanNode): number {
  const own =
    /Scan/.test(node['Node Type']) && node['Relation Name'] === 'plants'
      ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops']
      : 0;
  return own + (node.Plans ?? []).reduce((n, p) => n + scanned(p), 0);
}

describe('postgres hot statements keep their generic plans', { skip }, () => {
  it('after five calls, each runs its generic plan and reads about its page', {
    timeout: 60_000,
  }, async () => {
    await withPgDatabase(async (url, db) => {
      const store = new PgStore({ url, poolSize: 1 });
      try {
        await store.migrate();
        // A big garden (30,000 plants; every 10,000th tagged 'rare', every other 'common') and a
        // small one (10 plants); the user is a member of both.
        await db.query(`INSERT INTO gardens (id, name, home_user, created_at, created_by)
          VALUES ('gdn_big', 'big', NULL, now(), 'u'), ('gdn_small', 'small', NULL, now(), 'u')`);
        await db.query(`INSERT INTO garden_members (garden_id, user_id, role, added_at)
          VALUES ('gdn_big', 'u', 'owner', now()), ('gdn_small', 'u', 'owner', now())`);
        await db.query(`INSERT INTO plants (id, owner, garden, name, tag, version)
          SELECT i, 'u', CASE WHEN i <= 30000 THEN 'gdn_big' ELSE 'gdn_small' END, 'Plant ' || i,
            CASE WHEN i % 10000 = 0 THEN 'rare' WHEN i % 2 = 0 THEN 'common' END, 1
          FROM generate_series(1, 30010) i`);
        await db.query('ANALYZE');

        type Name = keyof typeof PLANT_QUERIES;
        // [statement, values, the most rows of plants its page may read]
        const cases: [Name, unknown[], number][] = [
          ['listGardens', [['gdn_small'], 0, 6], 6],
          ['listGardens', [['gdn_big'], 100, 11], 11],
          ['listGardens', [['gdn_big', 'gdn_small'], 29_995, 11], 22],
          ['listGardensTag', [['gdn_big'], 'rare', 0, 11], 11],
          ['listGardensTag', [['gdn_big'], 'common', 0, 11], 11],
          ['listGardensV', [['gdn_small'], 0, 6], 6],
          ['listGardensTagV', [['gdn_big'], 'rare', 0, 11], 11],
          [
            'plantsFor',
            [
              [5, 30_005],
              ['u', 'u'],
            ],
            2,
          ],
          ['plantsFor', [[7], ['u']], 1],
          // Two pages in one statement: the small garden's first 6, the big garden's 'rare' ones.
          [
            'listPages',
            [
              [null, 'rare'],
              [0, 0],
              [6, 11],
              [1, 2],
              [1, 2],
              ['gdn_small', 'gdn_big'],
            ],
            17,
          ],
          ['scopeMarks', [['u'], [null]], 2],
          // A tag's largest id in each garden: one step down plants_garden_tag_page each.
          ['scopeMarks', [['u'], ['rare']], 2],
          ['gardenMarks', [['gdn_big'], 'rare'], 1],
          // Two creates, one in each garden (each call adds two plants; it reads none).
          [
            'createPlants',
            [
              ['u', 'u'],
              ['gdn_big', 'gdn_small'],
              ['A', 'B'],
              [null, 'rare'],
              [new Date().toISOString(), null],
              [false, false],
              ['a', 'b'],
              ['u', 'u'],
              ['r1', 'r2'],
            ],
            0,
          ],
        ];
        const c = new pg.Client({ connectionString: url });
        await c.connect();
        try {
          for (const [k, [name, values, most]] of cases.entries()) {
            const statement = `s${k}`;
            // Each case its own statement, as each connection of the pool prepares its own.
            const kept = await planChoices(c, statement, PLANT_QUERIES[name], values);
            assert.ok(
              kept.g >= 2,
              `${name} ${JSON.stringify(values)}: ${JSON.stringify(kept)} (generic, custom)`,
            );
            // The plan it keeps, run: EXPLAIN EXECUTE runs the cached (generic) plan.
            // (EXECUTE takes its values as SQL: a utility statement has no parameters of its own.)
            const plan = (
              await c.query(
                `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ${statement}(${untypedLiterals(c, values)})`,
              )
            ).rows[0]['QUERY PLAN'][0].Plan as PlanNode;
            const read = scanned(plan);
            assert.ok(
              read <= most,
              `${name} ${JSON.stringify(values)} read ${read} rows of plants (at most ${most})`,
            );
          }
        } finally {
          await c.end();
        }
      } finally {
        await store.close();
      }
    });
  });
});
