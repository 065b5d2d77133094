// POST /plants/batch's ids (contract 1 and 2): a batch mixing rows without an id and rows with one
// never gets a server-assigned id equal to an id it gives, on either engine. A seeded fast-check
// property test over random batches of given, absent, repeated and existing ids checks every answer
// against the store: every answered id stored once with its one event, given ids kept, assigned ids
// distinct and clashing with nothing, a 409 naming an id that exists, a 400 naming each repeat, and
// nothing of a refused batch written.
//
// BATCH_PROPERTY_SEED and BATCH_PROPERTY_RUNS replay or widen a run.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Client, Harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { plantOf } from '../helpers/events.js';
import { logSettled } from '../helpers/log.js';
import { get, postBatch } from '../helpers/plants.js';
import { suiteHarness } from '../helpers/suite.js';

const DEFAULT_SEED = 11;
const DEFAULT_RUNS = 40;
const SEED = Number(process.env.BATCH_PROPERTY_SEED ?? DEFAULT_SEED);
const RUNS = Number(process.env.BATCH_PROPERTY_RUNS ?? DEFAULT_RUNS);

type Format = 'json' | 'csv' | 'ndjson';

/** One batch as the client writes it: each row's id (null: none), by offset from a base id. */
interface Case {
  existing: number[];
  rows: (number | null)[];
  drop: boolean;
  format: Format;
}

function body(format: Format, rows: { id: number | null; name: string }[]): [string, string] {
  if (format === 'json') {
    return [
      JSON.stringify({ plants: rows.map((r) => (r.id === null ? { name: r.name } : r)) }),
      'application/json',
    ];
  }
  if (format === 'csv')
    return [`name,id\r\n${rows.map((r) => `${r.name},${r.id ?? ''}\r\n`).join('')}`, 'text/csv'];
  return [
    rows.map((r) => `${JSON.stringify(r.id === null ? { name: r.name } : r)}\n`).join(''),
    'application/x-ndjson',
  ];
}

const batch = (c: Client, format: Format, rows: { id: number | null; name: string }[], query = '') => {
  const [payload, type] = body(format, rows);
  return postBatch(c, payload, type, query);
};

/** The caller's plants, id → name. */
async function plantsOf(c: Client): Promise<Map<number, string>> {
  const res = await get(c, '/plants?limit=1000&include=id');
  assert.equal(res.statusCode, 200, res.body);
  const list = res.json() as { id: number; name: string }[];
  const map = new Map(list.map((p) => [p.id, p.name]));
  assert.equal(map.size, list.length, 'each id listed once');
  return map;
}

/** The log's head, past every event committed so far (on PostgreSQL they become readable later). */
async function headAfterAll(h: Harness): Promise<string> {
  await logSettled(h.store);
  return h.store.headPosition();
}

/** The ids of the plant.created events of `user` after `head`, sorted. */
async function createdAfter(h: Harness, head: string, user: string): Promise<number[]> {
  await logSettled(h.store);
  const read = await h.store.readEvents({ after: head, gardens: null, limit: 10_000 });
  return read.events
    .filter((e) => e.type === 'plant.created' && e.owner === user)
    .map((e) => plantOf(e.data).id)
    .sort((a, b) => a - b);
}

const sorted = (ids: Iterable<number>) => [...ids].sort((a, b) => a - b);

const cases: fc.Arbitrary<Case> = fc.record({
  // Offsets from a base id just made: ids that exist, which also move the next server id past them.
  existing: fc.uniqueArray(fc.integer({ min: 1, max: 8 }), { maxLength: 3 }),
  // Given ids around where the server assigns next (beyond every existing one, up to 4 past it).
  rows: fc.array(fc.option(fc.integer({ min: 1, max: 12 }), { nil: null, freq: 2 }), {
    minLength: 1,
    maxLength: 8,
  }),
  drop: fc.nat(5).map((n) => n === 0),
  format: fc.constantFrom<Format>('json', 'csv', 'ndjson'),
});

for (const engine of ENGINES) {
  describe(`POST /plants/batch ids (${engine.name})`, { skip: engine.skip }, () => {
    const h = suiteHarness(engine);

    it('an id given after rows without one, equal to the next server id, is kept; the others get ids of their own', async () => {
      const c = await h.user();
      const last = (await batch(c, 'json', [{ id: null, name: 'base' }])).json().ids[0] as number;
      const head = await headAfterAll(h);
      const rows = [
        { id: null, name: 'first' },
        { id: last + 1, name: 'given' },
        { id: null, name: 'third' },
      ];
      const res = await batch(c, 'json', rows);
      assert.equal(res.statusCode, 201, res.body);
      const ids = res.json().ids as number[];
      assert.equal(ids[1], last + 1, 'the given id is kept');
      assert.equal(new Set(ids).size, 3, `three distinct ids: ${ids}`);
      assert.ok(ids[0]! > last + 1 && ids[2]! > ids[0]!, `assigned ids increase past the given one: ${ids}`);
      const stored = await plantsOf(c);
      assert.deepEqual(
        ids.map((id) => stored.get(id)),
        ['first', 'given', 'third'],
      );
      assert.deepEqual(await createdAfter(h, head, c.user), sorted(ids));
    });

    it('an id given twice is a 400 naming each repeat and its id, in every body form; nothing is created', async () => {
      const c = await h.user();
      const rows = [
        { id: 77_000_001, name: 'a' },
        { id: null, name: 'b' },
        { id: 77_000_001, name: 'c' },
      ];
      for (const [format, field, first] of [
        ['json', '/plants/2/id', 'plants/0'],
        ['csv', '/rows/3/id', 'row 1'],
        ['ndjson', '/rows/3/id', 'row 1'],
      ] as const) {
        const res = await batch(c, format, rows);
        assert.equal(res.statusCode, 400, `${format}: ${res.body}`);
        assert.deepEqual(res.json().details, [{ field, message: `repeats the id 77000001 of ${first}` }]);
        assert.match(res.json().message, /77000001/);
      }
      assert.deepEqual(await plantsOf(c), new Map());
    });

    it(`random batches of given, absent, repeated and existing ids (seed ${SEED}, ${RUNS} runs)`, async (t) => {
      const outcomes = new Map<string, number>();
      const run = async (k: Case) => {
        const c = await h.user();
        const base = (await batch(c, 'json', [{ id: null, name: 'base' }])).json().ids[0] as number;
        for (const e of k.existing) {
          const made = await batch(c, 'json', [{ id: base + e, name: `old${e}` }]);
          assert.equal(made.statusCode, 201, made.body);
        }
        const before = await plantsOf(c);
        const head = await headAfterAll(h);
        const rows = k.rows.map((o, i) => ({ id: o === null ? null : base + o, name: `r${i}` }));
        const res = await batch(c, k.format, rows, k.drop ? '?ids=drop' : '');
        const given = k.drop ? [] : rows.flatMap((r) => (r.id === null ? [] : [r.id]));
        const repeats = given.length !== new Set(given).size;
        const clash = given.some((id) => before.has(id));
        const want = repeats ? 400 : clash ? 409 : 201;
        outcomes.set(
          `${want}${k.drop ? ' drop' : ''}`,
          (outcomes.get(`${want}${k.drop ? ' drop' : ''}`) ?? 0) + 1,
        );
        assert.equal(res.statusCode, want, `${JSON.stringify(k)}: ${res.body}`);
        const after = await plantsOf(c);
        const events = await createdAfter(h, head, c.user);
        if (want !== 201) {
          assert.deepEqual(after, before, 'a refused batch writes no plant');
          assert.deepEqual(events, [], 'a refused batch writes no event');
          if (want === 409) {
            const named = Number(/id (\d+)/.exec(res.json().message)?.[1]);
            assert.ok(
              before.has(named) && given.includes(named),
              `409 names an existing given id: ${res.body}`,
            );
          } else {
            const seen = new Set<number>();
            const fields = rows.flatMap((r, i) => {
              if (k.drop || r.id === null) return [];
              if (!seen.has(r.id)) {
                seen.add(r.id);
                return [];
              }
              return [k.format === 'json' ? `/plants/${i}/id` : `/rows/${i + 1}/id`];
            });
            assert.deepEqual(
              res.json().details.map((d: { field: string }) => d.field),
              fields,
            );
          }
          return;
        }
        const ids = res.json().ids as number[];
        assert.equal(ids.length, rows.length);
        assert.equal(new Set(ids).size, ids.length, `distinct ids: ${ids}`);
        rows.forEach((r, i) => {
          if (!k.drop && r.id !== null) assert.equal(ids[i], r.id, 'a given id is kept');
          else {
            assert.ok(!given.includes(ids[i]!), `assigned id ${ids[i]} is not one the batch gives`);
            assert.ok(!before.has(ids[i]!), `assigned id ${ids[i]} is not one that existed`);
          }
          assert.equal(after.get(ids[i]!), r.name, `id ${ids[i]} holds its row's plant`);
        });
        assert.equal(after.size, before.size + rows.length, 'every plant stored once, nothing else');
        assert.deepEqual(events, sorted(ids), 'one plant.created event per plant');
      };
      await fc.assert(
        fc.asyncProperty(cases, async (k) => {
          await run(k);
        }),
        { seed: SEED, numRuns: RUNS, endOnFailure: true, verbose: 1 },
      );
      t.diagnostic(`outcomes: ${JSON.stringify(Object.fromEntries([...outcomes].sort()))}`);
      if (SEED === DEFAULT_SEED && RUNS === DEFAULT_RUNS) {
        for (const must of ['201', '201 drop', '400', '409'])
          assert.ok(outcomes.has(must), `the runs reached a ${must}: ${JSON.stringify([...outcomes])}`);
      }
    });
  });
}
