import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { historyJson } from '../../src/events/event.js';
import { EVENT_QUERIES } from '../../src/store/postgres/events.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PgStore } from '../../src/store/postgres/store.js';
import { TRASH_QUERIES } from '../../src/store/postgres/trash.js';
import { HISTORY_SQL } from '../../src/store/sqlite/events.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import {
  EVENT_TYPES,
  type EventRecord,
  type EventType,
  isMemberEvent,
  type JsonPage,
  type Role,
  type Store,
} from '../../src/store/store.js';
import { createPgDatabase, ENGINES, pgAtVersion, sqliteAtVersion } from '../helpers/engines.js';
import { garden, plant, user } from '../helpers/gardens.js';
import { until } from '../helpers/wait.js';

// History and activity (contract 13.3) on every engine, against a brute-force model: the log as
// readEvents gives it, filtered and turned newest first. Every page sequence, whatever its limit,
// must be exactly the model's.

// A small seeded generator: a failure names its seed and can be run again.
function rng(seed: number) {
  let s = seed >>> 0;
  return (n: number) => {
    s = (s * 1_664_525 + 1_013_904_223) >>> 0;
    return s % n;
  };
}

const plantIdOf = (e: EventRecord): number | null =>
  isMemberEvent(e.type) ? null : (e.data as { id: number }).id;

for (const engine of ENGINES) {
  describe(`store history and activity: ${engine.name}`, { skip: engine.skip, timeout: 120_000 }, () => {
    let store: Store;
    before(async () => {
      store = await engine.open();
    });
    after(async () => {
      await store?.close();
    });

    // Every page of a history or activity, `limit` at a time, following each page's last position.
    async function pages(read: (before: string | null) => Promise<EventRecord[]>, limit: number) {
      const seen: EventRecord[] = [];
      for (let before: string | null = null, n = 0; n < 1000; n++) {
        const page = await read(before);
        assert.ok(page.length <= limit, `a page of ${page.length} over its limit ${limit}`);
        seen.push(...page);
        if (page.length < limit) return seen;
        before = page.at(-1)!.position;
      }
      throw new Error('paging never ended');
    }

    // The same, for an engine that writes its pages as JSON (JsonPage): every page's elements
    // parsed, each page at most `limit`, `last` the position of its last element when more follow.
    async function jsonPages(read: (before: string | null) => Promise<JsonPage>, limit: number) {
      const seen: { items: unknown[]; lasts: string[] } = { items: [], lasts: [] };
      for (let before: string | null = null, n = 0; n < 1000; n++) {
        const page = await read(before);
        const items = JSON.parse(page.json) as unknown[];
        assert.equal(items.length, Math.min(page.rows, limit), `rows ${page.rows}, limit ${limit}`);
        seen.items.push(...items);
        if (page.rows <= limit) {
          assert.equal(page.last, null);
          return seen;
        }
        assert.ok(page.last !== null);
        seen.lasts.push(page.last);
        before = page.last;
      }
      throw new Error('paging never ended');
    }
    // What historyJson writes of `events`, parsed, and the positions a JSON page sequence of
    // `limit` ends its full pages at.
    const asJson = (events: EventRecord[], limit: number) => ({
      items: JSON.parse(historyJson(events)) as unknown[],
      lasts: events.flatMap((e, k) => ((k + 1) % limit === 0 && k + 1 < events.length ? [e.position] : [])),
    });

    it('every page sequence is the newest-first filter of the log, by plant, garden, type and membership', async () => {
      const seed = Date.now() % 100_000;
      const r = rng(seed);
      const o = user('owner');
      const m = user('member');
      const gardens = [
        await garden(store, o, [[m, 'viewer']]),
        await garden(store, o),
        await garden(store, o),
      ];
      const start = await store.headPosition();
      // Random writes: plants made in random gardens, changed and deleted, ids used again after a
      // delete (a plant id's history spans both), membership changes as events.
      const live = new Map<number, string>();
      const ids = [] as number[];
      let writes = 0;
      for (let i = 0; i < 120; i++) {
        const at = new Date();
        const cause = { at, actor: o, requestId: `req-${i}` };
        const op = r(10);
        const some = [...live.keys()];
        if (op < 4 || some.length === 0) {
          const reuse = ids.filter((id) => !live.has(id));
          const id = reuse.length > 0 && r(3) === 0 ? reuse[r(reuse.length)]! : null;
          const g = gardens[r(3)]!;
          const made = await store.createPlant(
            { id, owner: o, garden: g, name: `P${i}`, tag: null },
            undefined,
            cause,
          );
          assert.ok('ok' in made, JSON.stringify(made));
          live.set(made.ok.id, g);
          if (!ids.includes(made.ok.id)) ids.push(made.ok.id);
        } else if (op < 7) {
          const id = some[r(some.length)]!;
          const u = await store.updatePlant(id, o, { name: `N${i}` }, null, undefined, cause);
          assert.ok('ok' in u && u.ok.changed);
        } else if (op < 9) {
          const id = some[r(some.length)]!;
          assert.deepEqual(await store.deletePlant(id, o, cause), { ok: true });
          live.delete(id);
        } else {
          const role: Role = (['viewer', 'editor'] as const)[r(2)]!;
          const put = await store.putMember(gardens[r(3)]!, o, user('extra'), role, at, cause);
          assert.ok('ok' in put, JSON.stringify(put));
        }
        writes++;
      }
      // The model: every event of these gardens since the start, as the log reads them.
      const log = await until('the log holds every write', async () => {
        const all: EventRecord[] = [];
        for (let after = start; ; ) {
          const read = await store.readEvents({ after, gardens, limit: 500 });
          all.push(...read.events);
          if (read.events.length < 500) break;
          after = read.position;
        }
        return all.length >= writes && all;
      });
      assert.equal(log.length, writes, `seed ${seed}`);
      const newest = [...log].reverse();
      const idsOf = (es: EventRecord[]) => es.map((e) => e.id);

      for (const id of ids) {
        for (const visible of [null, gardens, [gardens[0]!], [] as string[]]) {
          const limit = 1 + r(7);
          const got = await pages(
            (b) => store.plantHistory({ plantId: id, gardens: visible, before: b, limit }),
            limit,
          );
          const want = newest.filter(
            (e) => plantIdOf(e) === id && (visible === null || visible.includes(e.garden)),
          );
          assert.deepEqual(
            idsOf(got),
            idsOf(want),
            `seed ${seed}: plant ${id}, gardens ${visible}, limit ${limit}`,
          );
          for (const [k, e] of got.entries()) assert.deepEqual(e, want[k]);
        }
      }
      // The JSON pages (PostgreSQL), their gardens read by actor in the same statement: the same
      // events, each as historyJson writes it, the same positions.
      if (store.plantHistoryJson) {
        const stranger = user('stranger');
        const actors: [string | null, string[] | null][] = [
          [null, null],
          [o, gardens],
          [m, [gardens[0]!]],
          [stranger, []],
        ];
        for (const id of ids) {
          for (const [actor, visible] of actors) {
            const limit = 1 + r(7);
            const got = await jsonPages(
              (b) => store.plantHistoryJson!({ plantId: id, actor, before: b, limit }),
              limit,
            );
            const want = newest.filter(
              (e) => plantIdOf(e) === id && (visible === null || visible.includes(e.garden)),
            );
            assert.deepEqual(
              got,
              asJson(want, limit),
              `seed ${seed}: plant ${id}, actor ${actor}, limit ${limit}`,
            );
          }
        }
      }
      // A plant id never used: no events.
      assert.deepEqual(
        await store.plantHistory({ plantId: 9_007_199_254_740_991, gardens: null, before: null, limit: 10 }),
        [],
      );

      const typeSets: (EventType[] | null)[] = [
        null,
        ['plant.deleted'],
        ['member.added', 'plant.created'],
        ['member.removed'],
        [...EVENT_TYPES],
      ];
      for (const g of gardens) {
        for (const types of typeSets) {
          const limit = 1 + r(9);
          const got = await pages((b) => store.gardenActivity({ garden: g, types, before: b, limit }), limit);
          const want = newest.filter((e) => e.garden === g && (types === null || types.includes(e.type)));
          assert.deepEqual(
            idsOf(got),
            idsOf(want),
            `seed ${seed}: garden ${g}, types ${types}, limit ${limit}`,
          );
        }
      }
      if (store.gardenActivityJson) {
        const read = (garden: string, actor: string | null, types: EventType[] | null, limit: number) =>
          jsonPages(async (b) => {
            const page = await store.gardenActivityJson!({ garden, actor, types, before: b, limit });
            assert.equal(page.found, true);
            return page;
          }, limit);
        for (const g of gardens) {
          for (const types of typeSets) {
            const limit = 1 + r(9);
            const want = newest.filter((e) => e.garden === g && (types === null || types.includes(e.type)));
            const label = `seed ${seed}: garden ${g}, types ${types}, limit ${limit}`;
            assert.deepEqual(await read(g, o, types, limit), asJson(want, limit), label);
            assert.deepEqual(await read(g, null, types, limit), asJson(want, limit), label);
          }
        }
        // A member's role, read with the page; a stranger's none, and no rows; no such garden.
        const viewer = await store.gardenActivityJson({
          garden: gardens[0]!,
          actor: m,
          types: null,
          before: null,
          limit: 1,
        });
        assert.deepEqual([viewer.found, viewer.role, viewer.rows > 0], [true, 'viewer', true]);
        for (const [g, found] of [
          [gardens[1]!, true],
          ['gdn_00000000000000000000000000', false],
        ] as const) {
          const page = await store.gardenActivityJson({
            garden: g,
            actor: m,
            types: null,
            before: null,
            limit: 5,
          });
          assert.deepEqual(page, { found, role: null, rows: 0, last: null, json: '[]' });
        }
      }
    });

    it('a member removed stops seeing the garden in its history at once; events stay for those who remain', async () => {
      const o = user('owner');
      const m = user('member');
      const g = await garden(store, o, [[m, 'editor']]);
      const p = await plant(store, m, g, { at: new Date() });
      await store.updatePlant(p.id, m, { name: 'Moss' }, null, undefined, {
        at: new Date(),
        actor: m,
        requestId: 'r1',
      });
      assert.deepEqual(await store.deletePlant(p.id, m, { at: new Date(), actor: m, requestId: 'r2' }), {
        ok: true,
      });
      const seenBy = async (u: string) =>
        store.plantHistory({
          plantId: p.id,
          gardens: (await store.memberships(u)).map((x) => x.garden),
          before: null,
          limit: 100,
        });
      // A deleted plant's history: deleted, updated, created (newest first), actor and request id kept.
      assert.deepEqual(
        (await seenBy(m)).map((e) => [e.type, e.actor, e.requestId]),
        [
          ['plant.deleted', m, 'r2'],
          ['plant.updated', m, 'r1'],
          ['plant.created', null, null],
        ],
      );
      assert.ok('ok' in (await store.removeMember(g, o, m, { at: new Date(), actor: o, requestId: 'r3' })));
      assert.deepEqual(await seenBy(m), []);
      assert.equal((await seenBy(o)).length, 3);
      const activity = await store.gardenActivity({ garden: g, types: null, before: null, limit: 100 });
      assert.deepEqual(
        activity.map((e) => e.type),
        ['member.removed', 'plant.deleted', 'plant.updated', 'plant.created'],
      );
    });

    // Last in this store: the purge takes every event of it.
    it('what the purge removed is gone from history and activity; what it kept stays', async () => {
      const o = user('owner');
      const g = await garden(store, o);
      const old = new Date(Date.now() - 3_600_000);
      const p = await plant(store, o, g, { at: old });
      await store.updatePlant(p.id, o, { name: 'Now' }, null, undefined, {
        at: new Date(),
        actor: o,
        requestId: 'r',
      });
      assert.ok((await store.purgeEvents(new Date(Date.now() - 60_000))) >= 1);
      const history = await store.plantHistory({ plantId: p.id, gardens: [g], before: null, limit: 10 });
      assert.deepEqual(
        history.map((e) => e.type),
        ['plant.updated'],
      );
      const activity = await store.gardenActivity({ garden: g, types: null, before: null, limit: 10 });
      assert.deepEqual(
        activity.map((e) => e.type),
        ['plant.updated'],
      );
    });
  });
}

// A page's plan on a log of 20,000 events of 50 plants in 10 gardens, its statistics gathered:
// each engine walks one plant's or one garden's events backwards along an index, with no full scan
// of the log and no sort of it.
const LOG = 20_000;
describe('history and activity plans: sqlite', { timeout: 60_000 }, () => {
  it('a page of a plant or a garden reads along its index, newest first, without a sort', () => {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-plans-'));
    const db = sqliteAtVersion(join(dir, 'plants.db'), SQLITE_MIGRATIONS.at(-1)!.version);
    try {
      db.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${LOG})
        INSERT INTO events (seq, type, owner, plant_id, name, tag, created_at, garden)
        SELECT i, 1 << (i % 3), 'o', 1 + i % 50, 'P', NULL, i, 'gdn_' || (i % 50 % 10) FROM n;
        ANALYZE;`);
      const plan = (sql: string) =>
        (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params(sql)) as { detail: string }[])
          .map((r) => r.detail)
          .join('; ');
      const params = (sql: string) => Array.from(sql.matchAll(/\?/g), () => null);
      for (const [name, sql] of Object.entries(HISTORY_SQL)) {
        const p = plan(sql);
        const index = name === 'activity' ? 'events_garden_seq' : 'events_plant_seq';
        assert.match(
          p,
          new RegExp(`SEARCH events USING INDEX ${index} \\((?:plant_id|garden)=\\? AND seq<\\?\\)`),
          `${name}: ${p}`,
        );
        assert.doesNotMatch(p, /SCAN events|TEMP B-TREE/, `${name}: ${p}`);
      }
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('history and activity plans: postgres', { skip: ENGINES[1]!.skip, timeout: 60_000 }, () => {
  it('a page of a plant or a garden is an index scan backward, without a sort', async () => {
    const db = await createPgDatabase();
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      await pgAtVersion(c, POSTGRES_MIGRATIONS.at(-1)!.version);
      await c.query(`INSERT INTO events (id, type, owner, garden, data, created_at)
        SELECT 'evt_' || i, (ARRAY['plant.created', 'plant.updated', 'plant.deleted'])[1 + i % 3], 'o',
          'gdn_' || (i % 50 % 10), json_build_object('id', 1 + i % 50, 'name', 'P')::text, now()
        FROM generate_series(1, ${LOG}) i`);
      await c.query(`INSERT INTO trash (id, garden, owner, name, tag, version, deleted_at, deleted_by, purge_at)
        SELECT i, 'gdn_' || (i % 10), 'o', 'P', NULL, 1, now() - i * interval '1 s', 'o', now() + interval '1 d'
        FROM generate_series(1, ${LOG}) i`);
      await c.query(`INSERT INTO gardens (id, name, created_at, created_by)
        SELECT 'gdn_' || i, 'G', now(), 'o' FROM generate_series(0, 9) i`);
      await c.query(`INSERT INTO garden_members (garden_id, user_id, role, added_at)
        SELECT 'gdn_' || i, 'u', 'editor', now() FROM generate_series(1, 3) i`);
      await c.query('ANALYZE events');
      await c.query('ANALYZE trash');
      // `sorted`: the planner may read the plant's own events by the index and sort those (it cannot
      // know that a plant's events are nearly all in one garden); never the log's.
      const cases: [string, unknown[], string, 'backward' | 'sorted'][] = [
        [EVENT_QUERIES.history, [7, '9223372036854775807', null, 100], 'events_plant_history', 'backward'],
        [
          EVENT_QUERIES.history,
          [7, '9223372036854775807', ['gdn_6', 'gdn_1'], 100],
          'events_plant_history',
          'sorted',
        ],
        [
          EVENT_QUERIES.activity,
          ['gdn_3', '9223372036854775807', null, 100],
          'events_garden_history',
          'backward',
        ],
        [
          EVENT_QUERIES.activity,
          ['gdn_3', '9223372036854775807', ['plant.deleted'], 100],
          'events_garden_history',
          'backward',
        ],
        // The pages written as JSON (one statement with the access facts): the same reads.
        [
          EVENT_QUERIES.historyJson,
          [7, '9223372036854775807', null, 100],
          'events_plant_history',
          'backward',
        ],
        [EVENT_QUERIES.historyJson, [7, '9223372036854775807', 'u', 100], 'events_plant_history', 'sorted'],
        [
          EVENT_QUERIES.activityJson,
          ['gdn_3', '9223372036854775807', null, 100, null],
          'events_garden_history',
          'backward',
        ],
        [
          EVENT_QUERIES.activityJson,
          ['gdn_3', '9223372036854775807', ['plant.deleted'], 100, 'u'],
          'events_garden_history',
          'backward',
        ],
      ];
      // The trash's JSON pages: one garden's, a member's gardens' (each read along the index and
      // merged: the merge sorts at most a page a garden), everyone's.
      const far = new Date(8.64e15);
      const trashCases: [string, unknown[], string, 'backward' | 'sorted'][] = [
        [TRASH_QUERIES.trashJsonGarden, ['gdn_3', 'u', far, 1e15, 100], 'trash_garden_page', 'backward'],
        [TRASH_QUERIES.trashJsonMine, ['u', far, 1e15, 100], 'trash_garden_page', 'sorted'],
        [TRASH_QUERIES.trashJsonAll, [far, 1e15, 100], 'trash_page', 'backward'],
      ];
      // Generic plans too: a prepared statement's plan must not depend on the values it is given.
      for (const mode of ['auto', 'force_generic_plan']) {
        await c.query(`SET plan_cache_mode = ${mode}`);
        for (const [sql, values, index, how] of cases) {
          const text = (await c.query(`EXPLAIN ${sql}`, values)).rows.map((r) => r['QUERY PLAN']).join('\n');
          assert.doesNotMatch(text, /Seq Scan on events/, `${mode}: ${text}`);
          assert.match(text, /Index Cond: \(\((?:plant_id|garden) = /, `${mode}: ${text}`);
          if (how === 'backward') {
            assert.match(
              text,
              new RegExp(`Index Scan Backward using ${index} on events`),
              `${mode}: ${text}`,
            );
            assert.doesNotMatch(text, /Sort/, `${mode}: ${text}`);
          } else {
            assert.match(text, new RegExp(`(?:using|Scan on) ${index}`), `${mode}: ${text}`);
          }
        }
        for (const [sql, values, index, how] of trashCases) {
          const text = (await c.query(`EXPLAIN ${sql}`, values)).rows.map((r) => r['QUERY PLAN']).join('\n');
          assert.doesNotMatch(text, /Seq Scan on trash/, `${mode}: ${text}`);
          assert.match(text, new RegExp(`Index Scan Backward using ${index} on trash`), `${mode}: ${text}`);
          if (how === 'backward') assert.doesNotMatch(text, /Sort/, `${mode}: ${text}`);
        }
      }
    } finally {
      await c.end();
      await db.drop();
    }
  });
});

describe('history and activity JSON pages: postgres', { skip: ENGINES[1]!.skip, timeout: 60_000 }, () => {
  it('write each event as historyJson does: data without its garden, odd text, microseconds', async () => {
    const db = await createPgDatabase();
    const store = new PgStore({ url: db.url, poolSize: 2 });
    const c = new pg.Client({ connectionString: db.url });
    try {
      await store.migrate();
      await c.connect();
      const o = user('owner');
      const g = await garden(store, o);
      // Events as older versions and odd callers left them: data naming no garden (written before
      // gardens), an empty object, spaces around the colons (json_build_object's text), text JSON
      // must escape, no actor, a time with microseconds.
      await c.query(
        `INSERT INTO events (id, type, owner, garden, data, created_at, actor, request_id) VALUES
          ('evt_1', 'plant.created', $1, $2, '{"id":7,"name":"Old"}', '2026-01-02T03:04:05.678999Z', NULL, NULL),
          ('evt_2', 'plant.updated', $1, $2, '{"id" : 7, "name" : "Q\\"uote", "garden" : "${g}"}', '2026-01-02T03:04:06.0005Z', $3, $4),
          ('evt_3', 'plant.deleted', $1, $2, '{"id":7,"name":"Ünï 🌿\\n","garden":"x"}', '1999-12-31T23:59:59.999Z', 'a"b\\c', 'tab\\there'),
          ('evt_4', 'member.added', $1, $2, '{}', '2026-01-02T03:04:07Z', $3, NULL)`,
        [o, g, 'actor "quoted"', 'req\u0001'],
      );
      const history = await store.plantHistory({ plantId: 7, gardens: null, before: null, limit: 10 });
      assert.equal(history.length, 3);
      for (const actor of [null, o]) {
        const page = await store.plantHistoryJson({ plantId: 7, actor, before: null, limit: 10 });
        assert.deepEqual(JSON.parse(page.json), JSON.parse(historyJson(history)), `actor ${actor}`);
        assert.deepEqual([page.rows, page.last], [3, null]);
      }
      const activity = await store.gardenActivity({ garden: g, types: null, before: null, limit: 10 });
      assert.equal(activity.length, 4);
      const page = await store.gardenActivityJson({
        garden: g,
        actor: o,
        types: null,
        before: null,
        limit: 10,
      });
      assert.deepEqual(JSON.parse(page.json), JSON.parse(historyJson(activity)));
      // The text itself: the data spliced in as stored, the garden added as the last key where missing.
      assert.match(page.json, /"data":\{"id":7,"name":"Old","garden":"gdn_[^"]+"\}\}/);
      assert.match(page.json, /"data":\{"garden":"gdn_[^"]+"\}\}/);
      assert.match(page.json, /"timestamp":"2026-01-02T03:04:05\.678Z"/);
    } finally {
      await c.end();
      await store.close();
      await db.drop();
    }
  });
});
