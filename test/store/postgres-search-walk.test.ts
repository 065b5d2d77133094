import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import {
  SEARCH_QUERIES,
  searchWalk,
  tsquery,
  walkArgs,
  walkCall,
  walksCall,
} from '../../src/store/postgres/search.js';
import { PgStore } from '../../src/store/postgres/store.js';
import { ENGINES, withPgDatabase } from '../helpers/engines.js';
import { type PlanNode, planChoices, planNodes, untypedLiterals } from '../helpers/pg-plans.js';
import { until } from '../helpers/wait.js';

// Search on PostgreSQL across a caller's gardens (search.ts): the walk's prepared statement answers
// what one statement over every match answers, whether the walk fills the page or stops at its
// budget and the planned statement finishes it, alone or with the other searches of its turn in one
// statement (searchWalks, or searchWalksTag for those with a tag); and the walk's generic plan,
// alone or batched, walks the gardens'
// index in order, never a bitmap scan, so that the index entries of deleted plants are marked dead
// by the first search that meets them.

const skip = ENGINES.find((e) => e.name === 'postgres')?.skip ?? 'no postgres engine';

/** How a store's plants are laid out: how many, the garden of plant `i` (SQL), and the 'Zebrina's. */
interface Layout {
  plants: number;
  garden: string;
  zebrinas: string;
}
// Garden 0 holds half the plants, garden 1 three tenths, gardens 2-5 a twentieth each.
const SPREAD: Layout = {
  plants: 12000,
  garden: `'gdn_s' || CASE WHEN i % 10 < 5 THEN 0 WHEN i % 10 < 8 THEN 1 ELSE 2 + i % 4 END`,
  zebrinas: '9000, 11990, 11995',
};

/**
 * A migrated store on a database of its own with its plants laid out (SPREAD: 12,000 plants in 6
 * gardens), and a client beside it. Words: 'monstera' every 7th, 'delphinium' every 11th (both
 * every 77th), 'zebrina' a few plants deep in the store, 'fern' the rest; every third plant tagged
 * 'a'; versions ≠ ids.
 */
const withPlants = (fn: (store: PgStore, db: pg.Client) => Promise<void>, layout = SPREAD) =>
  withPgDatabase(async (url) => {
    const store = new PgStore({ url, poolSize: 2 });
    const db = new pg.Client({ connectionString: url });
    try {
      await store.migrate();
      await db.connect();
      await db.query(`INSERT INTO plants (id, owner, garden, name, tag, version, search)
          SELECT i, 'u', garden, name, CASE WHEN i % 3 = 0 THEN 'a' END, i * 5 + 2,
            array_to_tsvector(string_to_array(lower(name), ' '))
          FROM generate_series(1, ${layout.plants}) i,
            LATERAL (SELECT ${layout.garden} AS garden,
              CASE WHEN i IN (${layout.zebrinas}) THEN 'Zebrina ' || i
                   WHEN i % 77 = 0 THEN 'Monstera Delphinium ' || i
                   WHEN i % 7 = 0 THEN 'Monstera ' || i
                   WHEN i % 11 = 0 THEN 'Delphinium ' || i
                   ELSE 'Fern ' || i END AS name) x`);
      await db.query('VACUUM ANALYZE plants');
      await fn(store, db);
    } finally {
      await db.end();
      await store.close();
    }
  });

const g = (...k: number[]) => k.map((i) => `gdn_s${i}`);

/**
 * The searches asked together, TOGETHER at a time (those in one turn of the event loop, so that
 * their walks share statements): all at once, hundreds of searches on the store's two connections
 * queued past its 3-s wait for a connection on a slow machine.
 */
const TOGETHER = 6;
const together = async <Q, R>(cases: readonly Q[], ask: (q: Q) => Promise<R>): Promise<R[]> => {
  const answers: R[] = [];
  for (let i = 0; i < cases.length; i += TOGETHER)
    answers.push(...(await Promise.all(cases.slice(i, i + TOGETHER).map(ask))));
  return answers;
};

/** What one statement over every match answers: the page a search must give. */
const matching =
  (db: pg.Client) =>
  async (gardens: string[], terms: string[], tag: string | null, afterId: number, limit: number) =>
    (
      await db.query(
        `SELECT id::int, garden, name, tag, version::int FROM plants
           WHERE garden = ANY($1) AND search @@ $2::tsquery AND ($3::text IS NULL OR tag = $3) AND id > $4
           ORDER BY id LIMIT $5`,
        [gardens, tsquery(terms), tag, afterId, limit],
      )
    ).rows;

describe('postgres search across gardens: the walk', { skip }, () => {
  it('answers as one statement over every match does, walked whole or finished by the planned statement', {
    timeout: 90_000,
  }, async () => {
    await withPlants(async (store, db) => {
      const want = matching(db);
      const scopes = [
        g(0),
        g(0, 1),
        g(2, 3, 4, 5),
        g(0, 1, 2, 3, 4, 5),
        [...g(0, 1, 2), ...g(...Array.from({ length: 37 }, (_, i) => i + 6))],
        // A garden named twice is walked once.
        g(0, 0, 1),
      ];
      const cases = scopes.flatMap((gardens) =>
        [['mon'], ['mon', 'del'], ['zeb'], ['cactus'], ['fer']].flatMap((terms) =>
          [null, 'a'].flatMap((tag) =>
            (
              [
                [0, 1],
                [0, 20],
                [5_000, 20],
                [8_999, 3],
                [11_000, 200],
                [0, 201],
              ] as const
            ).map(([afterId, limit]) => ({ gardens, terms, tag, afterId, limit, withVersion: true })),
          ),
        ),
      );
      assert.equal(cases.length, 6 * 5 * 2 * 6);
      const check = async (q: (typeof cases)[number], got: Awaited<ReturnType<typeof store.listPlants>>) =>
        assert.deepEqual(
          got.map((p) => ({ ...p, id: Number(p.id), version: Number(p.version) })),
          await want(q.gardens, q.terms, q.tag, q.afterId, q.limit),
          `${q.gardens.length} gardens, ${q.terms.join(' ')}, tag ${q.tag}, after ${q.afterId}, limit ${q.limit}`,
        );
      // One at a time: each walk a statement of its own.
      for (const q of cases) await check(q, await store.listPlants(q));
      assert.equal(store.searchReads.batched, 0);
      // Together: the walks that arrive in one turn share one statement, those without a tag
      // searchWalks and those with one searchWalksTag, and each search answers as it did alone.
      const answers = await together(cases, (q) => store.listPlants(q));
      for (const [i, q] of cases.entries()) await check(q, answers[i]!);
      // Batched: every search in 8 gardens or fewer with a page of 200 or fewer, tagged or not,
      // that arrived with another of its kind.
      const walks = (q: (typeof cases)[number]) => new Set(q.gardens).size <= 8 && q.limit <= 200;
      assert.equal(cases.filter(walks).length, 5 * 5 * 2 * 5);
      let batched = 0;
      for (let i = 0; i < cases.length; i += TOGETHER) {
        const turn = cases.slice(i, i + TOGETHER).filter(walks);
        for (const tagged of [false, true]) {
          const kind = turn.filter((q) => (q.tag !== null) === tagged).length;
          if (kind > 1) batched += kind;
        }
      }
      assert.ok(batched > 200, `${batched} batched`);
      assert.equal(store.searchReads.batched, batched);

      // A term common in the gardens: the walk alone. A rare one in a garden larger than the
      // budget: the walk stops at it and the planned statement finishes the page.
      const q = { tag: null, afterId: 0, limit: 20, withVersion: true };
      const before = { ...store.searchReads };
      assert.equal((await store.listPlants({ ...q, gardens: g(0, 1), terms: ['mon'] })).length, 20);
      assert.deepEqual(store.searchReads, { ...before, walk: before.walk + 1 });
      const rare = await store.listPlants({ ...q, gardens: g(0, 1), terms: ['zeb'] });
      assert.deepEqual(
        rare.map((p) => Number(p.id)),
        [9000, 11990, 11995],
      );
      assert.deepEqual(store.searchReads, { ...before, walk: before.walk + 1, planned: before.planned + 1 });
    });
  });

  it("walks the gardens' index in order in its generic plan, so a deleted plant is read once", {
    timeout: 60_000,
  }, async () => {
    await withPlants(async (_store, db) => {
      const walk = searchWalk({ gardens: g(0, 1, 2), terms: ['mon'], tag: null, afterId: 0, limit: 20 });
      assert.ok(walk !== null);
      const [name, values] = walk;
      assert.equal(name, 'searchWalk4');
      // Past 8 gardens (the most a walk statement takes) the planned statement answers.
      assert.equal(
        searchWalk({
          gardens: g(0, 1, 2, 3, 4, 5, 6, 7, 8),
          terms: ['mon'],
          tag: null,
          afterId: 0,
          limit: 20,
        }),
        null,
      );
      await db.query('SET plan_cache_mode = force_generic_plan');
      await db.query(`PREPARE walk AS ${SEARCH_QUERIES[name]}`);
      const explain = async () =>
        (
          await db.query(
            `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE walk(${untypedLiterals(db, values)})`,
          )
        ).rows[0]['QUERY PLAN'][0].Plan as PlanNode;
      const plan = await explain();
      const types = planNodes(plan).map((n) => n['Node Type']);
      assert.ok(!types.some((t) => t.startsWith('Bitmap')), `no bitmap scan: ${types.join(', ')}`);
      // Each garden's ids along its page index, merged lazily: the branches under a Merge Append,
      // the padded one never run.
      const merge = planNodes(plan).find((n) => n['Node Type'] === 'Merge Append');
      assert.ok(merge?.Plans?.length === 4, 'a branch a garden, merged');
      assert.deepEqual(
        merge.Plans.map((b) =>
          planNodes(b)
            .filter((n) => n['Node Type'] === 'Index Only Scan')
            .map((n) => [n['Index Name'], n['Actual Loops']]),
        ),
        [
          [['plants_garden_page', 1]],
          [['plants_garden_page', 1]],
          [['plants_garden_page', 1]],
          [['plants_garden_page', 0]],
        ],
      );
      // Then each garden's plants along the same index, as many as it gave of the merged ids (the
      // budget's 200, every 7th plant a 'monstera': the page's 20 matches lie within them), each
      // plant read once, never by the primary key's walk or by id; the padded garden never read.
      const plants = planNodes(plan).filter((n) => n['Node Type'] === 'Index Scan');
      assert.deepEqual(
        plants.map((n) => [n['Index Name'], n['Actual Loops']]),
        [
          ['plants_garden_page', 1],
          ['plants_garden_page', 1],
          ['plants_garden_page', 1],
          ['plants_garden_page', 0],
        ],
      );
      const read = plants.reduce((sum, n) => sum + n['Actual Rows'], 0);
      assert.equal(read, 200, `the walk read ${read} plants`);
      const tagged = searchWalk({ gardens: g(0, 1), terms: ['mon'], tag: 'a', afterId: 0, limit: 20 });
      assert.equal(tagged?.[0], 'searchWalkTag2');
      await db.query(`PREPARE tagged AS ${SEARCH_QUERIES.searchWalkTag2}`);
      const tagPlan = (
        await db.query(`EXPLAIN (FORMAT JSON) EXECUTE tagged(${untypedLiterals(db, tagged![1])})`)
      ).rows[0]['QUERY PLAN'][0].Plan as PlanNode;
      assert.ok(
        !planNodes(tagPlan).some((n) => n['Node Type'].startsWith('Bitmap')),
        'no bitmap scan with a tag',
      );
      assert.deepEqual(
        planNodes(tagPlan)
          .filter((n) => n['Node Type'] === 'Index Only Scan' || n['Node Type'] === 'Index Scan')
          .map((n) => [n['Node Type'], n['Index Name']]),
        [
          ['Index Only Scan', 'plants_garden_tag_page'],
          ['Index Only Scan', 'plants_garden_tag_page'],
          ['Index Scan', 'plants_pkey'],
        ],
        "the tagged walk: each garden's ids by tag, merged, each plant read by its id",
      );

      // The walks of a turn in one statement keep a generic plan (no planning a call), and it is
      // the same walk of each garden's index in order for each search (three here: 3, 1 and 8
      // gardens). plan_cache_mode is back to its default: PostgreSQL itself chooses the generic plan.
      // The same for the tagged walks' statement, walking the gardens' index by tag.
      await db.query('RESET plan_cache_mode');
      // A walk alone keeps its generic plan too: its values come in arrays as the batched
      // statement's do (with bare parameters PostgreSQL planned every call of it afresh on a large
      // store, for 0.47 ms a call).
      for (const tag of [null, 'a']) {
        const [single, singleValues] = walkCall(
          walkArgs({ gardens: g(0, 1, 2), terms: ['mon'], tag, afterId: 0, limit: 20 })!,
        );
        assert.equal(single, tag === null ? 'searchWalk4' : 'searchWalkTag4');
        const plans = await planChoices(db, single, SEARCH_QUERIES[single], singleValues);
        assert.ok(plans.g >= 2, `${single}: ${JSON.stringify(plans)} (generic, custom)`);
      }
      for (const [tag, index] of [
        [null, 'plants_garden_page'],
        ['a', 'plants_garden_tag_page'],
      ] as const) {
        const walks = [g(0, 1, 2), g(3), g(0, 1, 2, 3, 4, 5, 6, 7)].map(
          (gardens) => walkArgs({ gardens, terms: ['mon'], tag, afterId: 0, limit: 20 })!,
        );
        const [statement, values] = walksCall(walks);
        assert.equal(statement, tag === null ? 'searchWalks' : 'searchWalksTag');
        const kept = await planChoices(db, statement, SEARCH_QUERIES[statement], values);
        assert.ok(kept.g >= 2, `${statement}: ${JSON.stringify(kept)} (generic, custom)`);
        const walksPlan = (
          await db.query(
            `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE "${statement}"(${untypedLiterals(db, values)})`,
          )
        ).rows[0]['QUERY PLAN'][0].Plan as PlanNode;
        const walkNodes = planNodes(walksPlan);
        assert.ok(
          !walkNodes.some((n) => n['Node Type'].startsWith('Bitmap')),
          `${statement}: no bitmap scan: ${walkNodes.map((n) => n['Node Type']).join(', ')}`,
        );
        const scans = walkNodes.filter((n) => n['Node Type'] === 'Index Only Scan');
        assert.ok(
          scans.length === 8 && scans.every((n) => n['Index Name'] === index),
          `${statement}: ${scans.map((n) => n['Index Name']).join(', ')}`,
        );
        // Without a tag each garden's plants read along its page index; with one, by id.
        const reads = walkNodes.filter((n) => n['Node Type'] === 'Index Scan').map((n) => n['Index Name']);
        assert.deepEqual(
          reads,
          tag === null ? Array(8).fill('plants_garden_page') : ['plants_pkey'],
          `${statement}: the plants read`,
        );
        // Each garden of each search walked once: 3 + 1 + 8 loops over the eight branches' scans.
        assert.equal(
          scans.reduce((sum, n) => sum + n['Actual Loops'], 0),
          12,
        );
      }
      // The two kinds never share a statement.
      assert.throws(
        () =>
          walksCall([
            walkArgs({ gardens: g(0), terms: ['mon'], tag: null, afterId: 0, limit: 20 })!,
            walkArgs({ gardens: g(0), terms: ['mon'], tag: 'a', afterId: 0, limit: 20 })!,
          ]),
        /mixed/,
      );

      await db.query('SET plan_cache_mode = force_generic_plan');

      // Delete the first 4,000 plants of garden 0 (no vacuum): a walk reads their rows in the
      // table and marks their index entries dead, once no transaction of the database can still
      // see them; the walks after it skip them. (A bitmap scan would read them on every walk.)
      // Counted in garden 0's branch of the merge: the plants the page reads after it, along the
      // gardens' index, are the same in every walk.
      await db.query(`DELETE FROM plants WHERE garden = 'gdn_s0' AND id <= 8000`);
      const blocks = (p: PlanNode) => {
        const branch = planNodes(p).find((n) => n['Node Type'] === 'Merge Append')!.Plans![0]!;
        return (branch['Shared Hit Blocks'] ?? 0) + (branch['Shared Read Blocks'] ?? 0);
      };
      const first = blocks(await explain());
      const later = await until(
        'a walk that skips the deleted plants',
        async () => {
          const b = blocks(await explain());
          return b * 1.5 < first && b;
        },
        30_000,
      );
      assert.ok(later * 1.5 < first, `a later walk read ${later} blocks, the first ${first}`);
    });
  });
  it("reads the gardens' plants in id order across them when they come in runs (one import at a time)", {
    timeout: 90_000,
  }, async () => {
    // Four gardens filled as imports fill them, a run of ids at a time: ids 1-1000 alternate
    // between c0 and c1, 1001-2000 between c2 and c3, 2001-4000 go round all four.
    const runs: Layout = {
      plants: 4000,
      garden: `'gdn_c' || CASE WHEN i <= 1000 THEN i % 2 WHEN i <= 2000 THEN 2 + i % 2 ELSE i % 4 END`,
      zebrinas: '1500, 3999',
    };
    await withPlants(async (store, db) => {
      const c = (...k: number[]) => k.map((i) => `gdn_c${i}`);
      const want = matching(db);

      // The first page of a common term across the four: the walk reads the plants in id order
      // across the gardens, wherever they lie (here the budget's ids 1 to 200, c0's and c1's run,
      // the page's 20 matches up to id 140), and the page is whole in one walk. (Each garden walked
      // on its own to 50 plants, the page took two: c0's and c1's first 50 held 14 matches.)
      const before = { ...store.searchReads };
      const q = {
        gardens: c(0, 1, 2, 3),
        terms: ['mon'],
        tag: null,
        afterId: 0,
        limit: 20,
        withVersion: true,
      };
      const page = await store.listPlants(q);
      assert.deepEqual(
        page.map((p) => ({ ...p, id: Number(p.id), version: Number(p.version) })),
        await want(q.gardens, q.terms, null, 0, 20),
      );
      assert.deepEqual(store.searchReads, { ...before, walk: before.walk + 1 });
      // A term in every 11th plant: the walk's budget (200 plants) holds 18 matches, and a second
      // walk goes on from its marker (the 200th plant) to the page's 20th.
      const del = await store.listPlants({ ...q, terms: ['del'] });
      assert.deepEqual(
        del.map((p) => Number(p.id)),
        Array.from({ length: 20 }, (_, i) => 11 * (i + 1)),
      );
      assert.deepEqual(store.searchReads, { ...before, walk: before.walk + 2, again: before.again + 1 });
      // A rare term: one walk, then the planned statement (no more rounds for a page it would
      // take many to fill).
      const rare = await store.listPlants({ ...q, terms: ['zeb'] });
      assert.deepEqual(
        rare.map((p) => Number(p.id)),
        [1500, 3999],
      );
      assert.deepEqual(store.searchReads, {
        ...before,
        walk: before.walk + 2,
        again: before.again + 1,
        planned: before.planned + 1,
      });

      // Every answer as the one statement over every match gives it, from cursors all through
      // the store, one at a time and then all at once (the first walks batched).
      const cases = [c(0, 1, 2, 3), c(0, 2), c(1), c(3, 0, 1)].flatMap((gardens) =>
        [['mon'], ['mon', 'del'], ['del'], ['zeb'], ['fer']].flatMap((terms) =>
          [null, 'a'].flatMap((tag) =>
            [0, 37, 480, 999, 1000, 1490, 2003, 3500].flatMap((afterId) =>
              [1, 20, 60].map((limit) => ({ gardens, terms, tag, afterId, limit, withVersion: true })),
            ),
          ),
        ),
      );
      const check = async (q: (typeof cases)[number], got: Awaited<ReturnType<typeof store.listPlants>>) =>
        assert.deepEqual(
          got.map((p) => ({ ...p, id: Number(p.id), version: Number(p.version) })),
          await want(q.gardens, q.terms, q.tag, q.afterId, q.limit),
          `${q.gardens.join(',')}, ${q.terms.join(' ')}, tag ${q.tag}, after ${q.afterId}, limit ${q.limit}`,
        );
      const rounds = store.searchReads.again;
      for (const q of cases) await check(q, await store.listPlants(q));
      assert.ok(store.searchReads.again > rounds, 'later rounds were walked');
      const answers = await together(cases, (q) => store.listPlants(q));
      for (const [i, q] of cases.entries()) await check(q, answers[i]!);
    }, runs);
  });
});
