import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { IdSpaceExhaustedError } from '../../src/errors.js';
import { MAX_PLANT_ID } from '../../src/schemas/plant.js';
import { sqlitePath } from '../../src/store/index.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import {
  MERGE_FRACTION,
  mergeWanted,
  PACED_SEGMENTS,
  pacedWanted,
  searchLevels,
  smallMergeLevel,
} from '../../src/store/sqlite/search-merge.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import type { Store } from '../../src/store/store.js';
import { sqliteAtVersion } from '../helpers/engines.js';
import { plantOf } from '../helpers/events.js';
import { acknowledged, claimAll, endpoint, garden, plant, user } from '../helpers/gardens.js';
import { until } from '../helpers/wait.js';

// The gardens these tests put plants into as plants:admin (an admin create needs its garden to exist).
const GARDENS = ['gdn_o', 'gdn_p', 'gdn_o0', 'gdn_o1', 'gdn_o2', 'gdn_a', 'gdn_c'];
async function seedGardens(store: Store): Promise<void> {
  for (const id of GARDENS) await store.createGarden({ id, name: id, owner: 'seed', at: new Date() });
}

describe('SQLite store specifics', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-sqlite-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('creates the file and its folders on first start, in WAL mode with full sync', async () => {
    const path = join(dir, 'a', 'b', 'plants.db');
    const store = new SqliteStore({ path, durability: 'full' });
    await store.migrate();
    await seedGardens(store);
    assert.ok(existsSync(path));
    await store.createPlant({ id: null, owner: 'o', garden: 'gdn_o', admin: true, name: 'n', tag: null });
    await store.close();
    const db = new Database(path, { readonly: true });
    assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    assert.equal((db.prepare('SELECT count(*) AS n FROM plants').get() as { n: number }).n, 1);
    assert.deepEqual(db.prepare('SELECT version, name FROM schema_migrations').all(), [
      { version: 1, name: '0001_init' },
      { version: 2, name: '0002_events' },
      { version: 3, name: '0003_compact_event_log' },
      { version: 4, name: '0004_list_pages' },
      { version: 5, name: '0005_write_clock' },
      { version: 6, name: '0006_plant_versions' },
      { version: 7, name: '0007_gardens' },
      { version: 8, name: '0008_token_pages' },
      { version: 9, name: '0009_delivery_indexes' },
      { version: 10, name: '0010_creation_order' },
      { version: 11, name: '0011_garden_creators' },
      { version: 12, name: '0012_events_by_garden' },
      { version: 13, name: '0013_endpoint_admin_credential' },
      { version: 14, name: '0014_deliveries_from_the_log' },
      { version: 15, name: '0015_plant_search' },
      { version: 16, name: '0016_search_words' },
      { version: 17, name: '0017_event_actors' },
      { version: 18, name: '0018_history_pages' },
      { version: 19, name: '0019_trash' },
      { version: 20, name: '0020_change_feed' },
      { version: 21, name: '0021_event_traceparent' },
    ]);
    db.close();
  });

  it('keeps what it acknowledged across a reopen, and keeps counting ids upward', async () => {
    const path = join(dir, 'reopen.db');
    const s1 = new SqliteStore({ path, durability: 'full' });
    await s1.migrate();
    await seedGardens(s1);
    const r = await s1.createPlant({
      id: null,
      owner: 'o',
      garden: 'gdn_o',
      admin: true,
      name: 'kept',
      tag: 't',
    });
    assert.ok('ok' in r);
    await s1.deletePlant(r.ok.id, 'o');
    await s1.close();
    const s2 = new SqliteStore({ path, durability: 'normal' });
    assert.deepEqual(await s2.migrate(), []);
    const r2 = await s2.createPlant({
      id: null,
      owner: 'o',
      garden: 'gdn_o',
      admin: true,
      name: 'after',
      tag: null,
    });
    assert.ok('ok' in r2 && r2.ok.id > r.ok.id);
    await s2.close();
  });

  it('refuses a server-assigned id past 2^53−1 and writes nothing', async () => {
    const store = new SqliteStore({ path: ':memory:', durability: 'full' });
    await store.migrate();
    await seedGardens(store);
    await store.createPlant({
      id: MAX_PLANT_ID,
      owner: 'o',
      garden: 'gdn_o',
      admin: true,
      name: 'last',
      tag: null,
    });
    await assert.rejects(
      store.createPlant({ id: null, owner: 'o', garden: 'gdn_o', admin: true, name: 'x', tag: null }),
      IdSpaceExhaustedError,
    );
    assert.equal((await store.listPlants({ gardens: null, tag: null, afterId: 0, limit: 10 })).length, 1);
    await store.close();
  });

  it('fails a failing write alone when writes are committed together', async () => {
    const path = join(dir, 'group.db');
    const store = new SqliteStore({ path, durability: 'full' });
    await store.migrate();
    await seedGardens(store);
    await store.createPlant({
      id: MAX_PLANT_ID,
      owner: 'o',
      garden: 'gdn_o',
      admin: true,
      name: 'last',
      tag: null,
    });
    // Issued in one turn, so they form one batch: every server-assigned id is now past 2^53−1.
    // Each with its event: the batch runs once whole, is rolled back, and runs again write by write.
    const ev = { at: new Date() };
    const outcomes = await Promise.allSettled([
      store.createPlant(
        { id: null, owner: 'o', garden: 'gdn_o', admin: true, name: 'first fails', tag: null },
        undefined,
        ev,
      ),
      store.createPlant(
        { id: 5, owner: 'o', garden: 'gdn_o', admin: true, name: 'five', tag: null },
        undefined,
        ev,
      ),
      store.createPlant(
        { id: null, owner: 'o', garden: 'gdn_o', admin: true, name: 'middle fails', tag: null },
        undefined,
        ev,
      ),
      store.createPlant(
        { id: 5, owner: 'o', garden: 'gdn_o', admin: true, name: 'five again', tag: null },
        undefined,
        ev,
      ),
      store.deletePlant(MAX_PLANT_ID, null, ev),
      store.createPlant(
        { id: 6, owner: 'p', garden: 'gdn_p', admin: true, name: 'six', tag: 't' },
        undefined,
        ev,
      ),
      store.createPlant(
        { id: null, owner: 'o', garden: 'gdn_o', admin: true, name: 'last fails', tag: null },
        undefined,
        ev,
      ),
    ]);
    const versions: number[] = [];
    assert.deepEqual(
      outcomes.map((o) => {
        if (o.status === 'rejected') return (o.reason as Error).constructor.name;
        if (!('ok' in o.value) || o.value.ok === true) return o.value;
        const { version, ...plant } = o.value.ok;
        versions.push(version);
        return { ok: plant };
      }),
      [
        'IdSpaceExhaustedError',
        { ok: { id: 5, owner: 'o', garden: 'gdn_o', name: 'five', tag: null } },
        'IdSpaceExhaustedError',
        { refused: 'exists' },
        { ok: true },
        { ok: { id: 6, owner: 'p', garden: 'gdn_p', name: 'six', tag: 't' } },
        'IdSpaceExhaustedError',
      ],
    );
    assert.ok(versions[0]! > 1 && versions[1]! > versions[0]!, `versions ${versions} are new and distinct`);
    // Its events: one per acknowledged change, in order, and none of what was refused or rolled back.
    assert.deepEqual(
      (await store.readEvents({ after: '0', gardens: null, limit: 10 })).events.map((e) => [
        e.type,
        plantOf(e.data).name,
      ]),
      [
        ['plant.created', 'five'],
        ['plant.deleted', 'last'],
        ['plant.created', 'six'],
      ],
    );
    await store.close();
    // What the batch acknowledged is on disk, and nothing of what it refused.
    const db = new Database(path, { readonly: true });
    assert.deepEqual(db.prepare('SELECT id, name FROM plants ORDER BY id').all(), [
      { id: 5, name: 'five' },
      { id: 6, name: 'six' },
    ]);
    db.close();
  });

  it('indexes words as the last write of a transaction left them, rolled-back writes and batches leaving none', async () => {
    const path = join(dir, 'words.db');
    const store = new SqliteStore({ path, durability: 'full' });
    await store.migrate();
    await seedGardens(store);
    const found = async (term: string) =>
      (await store.listPlants({ gardens: ['gdn_o'], tag: null, afterId: 0, limit: 50, terms: [term] })).map(
        (p) => p.id,
      );
    const make = (id: number | null, name: string) => ({
      id,
      owner: 'o',
      garden: 'gdn_o',
      admin: true,
      name,
      tag: null,
    });
    // One turn, one transaction: created, renamed twice, another created and deleted.
    const [a] = await Promise.all([
      store.createPlant(make(10, 'alpha')),
      store.updatePlant(10, null, { name: 'beta' }, null),
      store.updatePlant(10, null, { name: 'gamma' }, null),
      store.createPlant(make(11, 'delta')),
      store.deletePlant(11, null),
    ]);
    assert.ok('ok' in a);
    assert.deepEqual(await found('alp'), []);
    assert.deepEqual(await found('bet'), []);
    assert.deepEqual(await found('gam'), [10]);
    assert.deepEqual(await found('del'), []);
    // A batch refused for an id that exists (here given twice) writes no words; one that fails
    // alone in a turn (its id taken by a create before it) leaves the others' words.
    const refused = await store.createPlants([make(20, 'epsilon'), make(20, 'epsilon again')]);
    assert.deepEqual(refused, { refused: 'exists', id: 20 });
    const [, batch] = await Promise.all([
      store.createPlant(make(30, 'zeta one')),
      store.createPlants([make(31, 'zeta two'), make(30, 'zeta taken')]),
      store.createPlant(make(32, 'zeta three')),
    ]);
    assert.deepEqual(batch, { refused: 'exists', id: 30 });
    assert.deepEqual(await found('eps'), []);
    assert.deepEqual(await found('zet'), [30, 32]);
    assert.deepEqual(await found('tak'), []);
    // The writer answers a batch with its ids and first version only; the plants the store gives
    // back are rebuilt from those, in one turn with other writes: each as stored.
    const [, made] = await Promise.all([
      store.createPlant(make(null, 'eta one')),
      store.createPlants([make(null, 'theta'), { ...make(40, 'iota'), tag: 'kept' }, make(null, 'kappa')]),
      store.updatePlant(32, null, { name: 'zeta renamed' }, null),
    ]);
    assert.ok('ok' in made);
    assert.deepEqual(made.ok[1]!.id, 40);
    assert.equal(new Set(made.ok.map((p) => p.version)).size, 3);
    for (const p of made.ok) assert.deepEqual(await store.getPlant(p.id), p);
    await store.close();
  });

  it('merges the search index into one segment once writes are quiet, answering the same', async () => {
    const path = join(dir, 'merge.db');
    const store = new SqliteStore({ path, durability: 'normal', searchMergeQuietMs: 100 });
    await store.migrate();
    await seedGardens(store);
    const found = async (term: string) =>
      (
        await store.listPlants({
          gardens: ['gdn_o', 'gdn_p'],
          tag: null,
          afterId: 0,
          limit: 1000,
          terms: [term],
        })
      ).map((p) => p.id);
    // 30 commits, so 30 segments before FTS5's own merging; then renames and deletes.
    const alpha: number[] = [];
    for (let b = 0; b < 30; b++) {
      const r = await store.createPlants(
        Array.from({ length: 20 }, (_, i) => ({
          id: null,
          owner: 'o',
          garden: i % 2 ? 'gdn_o' : 'gdn_p',
          admin: true,
          name: i % 3 ? `alpha ${b} ${i}` : `beta ${b}`,
          tag: null,
        })),
      );
      assert.ok('ok' in r);
      for (const p of r.ok) if (p.name.startsWith('alpha')) alpha.push(p.id);
    }
    for (const id of alpha.splice(0, 10)) await store.deletePlant(id, null);
    const renamed = alpha.splice(0, 5);
    for (const id of renamed) await store.updatePlant(id, null, { name: 'gamma' }, null);
    const want = { alp: await found('alp'), bet: await found('bet'), gam: await found('gam') };
    assert.deepEqual(want.alp, alpha);
    assert.deepEqual(want.gam, renamed);
    // FTS5's structure record (row 10 of its data table) lists every segment. The writer's paced
    // steps leave a few (fewer than 4 on each level); the quiet spell merges them into one.
    const look = new Database(path, { readonly: true });
    const segments = () =>
      searchLevels(
        look.prepare('SELECT block FROM plant_search_data WHERE id = 10').pluck().get() as Buffer,
      ).flatMap((l) => l.pages).length;
    const before = segments();
    assert.ok(before > 1, `${before} segments before the quiet spell`);
    await until('the search index merged into one segment', () => segments() === 1);
    assert.deepEqual(
      { alp: await found('alp'), bet: await found('bet'), gam: await found('gam') },
      want,
      'the same answers after merging',
    );
    look.close();
    await store.close();
  });

  it('leaves the largest search segment alone until the others hold 1/8 of its pages, merging only the small ones', async () => {
    const path = join(dir, 'merge-bound.db');
    // The quiet merger's own choices: FTS5's automerge in the commits (20 commits of one plant
    // never reach its mark of 64 pages), not the writer's paced steps, which merge any level once
    // it holds 4 segments, the largest's too (as automerge does).
    const store = new SqliteStore({
      path,
      durability: 'normal',
      searchMergeQuietMs: 50,
      searchMerge: 'automerge',
    });
    await store.migrate();
    await seedGardens(store);
    const create = async (n: number, b: number) => {
      const r = await store.createPlants(
        Array.from({ length: n }, (_, i) => ({
          id: null,
          owner: 'o',
          garden: 'gdn_o',
          admin: true,
          name: `delta${b} epsilon${i} zeta${(b * 31 + i) % 97}`,
          tag: null,
        })),
      );
      assert.ok('ok' in r);
    };
    for (let b = 0; b < 10; b++) await create(500, b);
    const look = new Database(path, { readonly: true });
    const levels = () =>
      searchLevels(look.prepare('SELECT block FROM plant_search_data WHERE id = 10').pluck().get() as Buffer);
    const pages = () => levels().flatMap((l) => l.pages);
    // The store written in 10 commits: merged into one segment (the others held more than 1/8 of the largest).
    const [largest] = await until('one segment', () => {
      const p = pages();
      return p.length === 1 && p;
    });
    // 20 commits of one plant each: their segments merge among themselves, the largest stays as it was.
    for (let b = 0; b < 20; b++) await create(1, 100 + b);
    await new Promise((r) => setTimeout(r, 500));
    const settled = await until('the small segments merged', () => {
      const l = levels();
      return smallMergeLevel(l) < 0 && !mergeWanted(l) && l;
    });
    const after = settled.flatMap((l) => l.pages);
    assert.ok(
      after.includes(largest!),
      `the largest segment (${largest} pages) kept: ${JSON.stringify(after)}`,
    );
    assert.ok(after.length >= 2 && after.length <= 6, `a few small segments: ${JSON.stringify(after)}`);
    assert.ok(after.reduce((a, p) => a + p, 0) - largest! < largest! / MERGE_FRACTION);
    // Enough written besides it: everything merged again.
    for (let b = 0; b < 3; b++) await create(500, 200 + b);
    await until('one segment again', () => pages().length === 1);
    const found = await store.listPlants({
      gardens: ['gdn_o'],
      tag: null,
      afterId: 0,
      limit: 10_000,
      terms: ['delta1'],
    });
    // delta1, delta100–119: 500 + 20 plants.
    assert.equal(found.length, 520);
    look.close();
    await store.close();
  });

  it("merges the search index in paced steps while writes go on: FTS5's automerge off, every level under 4 segments, the same answers", async () => {
    const path = join(dir, 'paced.db');
    // The quiet merger kept out of it: only the writer's paced steps merge.
    const store = new SqliteStore({ path, durability: 'full', searchMergeQuietMs: 3_600_000 });
    await store.migrate();
    await seedGardens(store);
    const look = new Database(path, { readonly: true });
    const levels = () =>
      searchLevels(look.prepare('SELECT block FROM plant_search_data WHERE id = 10').pluck().get() as Buffer);
    const automerge = (): unknown =>
      look.prepare("SELECT v FROM plant_search_config WHERE k = 'automerge'").pluck().get();
    // 300 commits of 3 plants: 300 segments as written, FTS5 merging none of them in a commit.
    const names = ['iota', 'kappa', 'lambda', 'mu', 'nu'];
    const want = new Map<string, number[]>(names.map((n) => [n, []]));
    let most = 0;
    for (let b = 0; b < 300; b++) {
      const r = await store.createPlants(
        Array.from({ length: 3 }, (_, i) => ({
          id: null,
          owner: 'o',
          garden: 'gdn_o',
          admin: true,
          name: `${names[(b + i) % 5]} batch${b}`,
          tag: null,
        })),
      );
      assert.ok('ok' in r);
      for (const p of r.ok) want.get(p.name.split(' ')[0]!)!.push(p.id);
      most = Math.max(most, ...levels().map((l) => l.pages.length));
    }
    assert.equal(automerge(), 0, "FTS5's automerge is off in the store");
    // FTS5's crisis merge (16 segments on a level, merged inside a commit) never came near.
    assert.ok(most < 16, `at most ${most} segments on a level while writing`);
    const settled = await until('the paced steps done', () => {
      const l = levels();
      return !pacedWanted(l) && l;
    });
    assert.ok(
      settled.every((l) => l.merging === 0 && l.pages.length < PACED_SEGMENTS),
      JSON.stringify(settled),
    );
    const segments = settled.reduce((n, l) => n + l.pages.length, 0);
    assert.ok(segments < 300 / 10, `${segments} segments left of 300`);
    for (const [name, ids] of want) {
      const found = await store.listPlants({
        gardens: ['gdn_o'],
        tag: null,
        afterId: 0,
        limit: 1000,
        terms: [name],
      });
      assert.deepEqual(
        found.map((p) => p.id),
        ids,
        name,
      );
    }
    await store.close();

    // A writer that leaves merging to FTS5 (the 'automerge' setting, or an inline writer) turns its automerge back on.
    for (const opts of [{ searchMerge: 'automerge' as const }, { writer: 'inline' as const }]) {
      const paced = new SqliteStore({ path, durability: 'full', searchMergeQuietMs: 3_600_000 });
      await paced.createPlant({ id: null, owner: 'o', garden: 'gdn_o', admin: true, name: 'xi', tag: null });
      await until('automerge off again', () => automerge() === 0);
      await paced.close();
      const other = new SqliteStore({ path, durability: 'full', searchMergeQuietMs: 3_600_000, ...opts });
      await other.createPlant({
        id: null,
        owner: 'o',
        garden: 'gdn_o',
        admin: true,
        name: 'omicron',
        tag: null,
      });
      await until(`automerge on again (${JSON.stringify(opts)})`, () => automerge() === 4);
      await other.close();
    }
    look.close();
  });

  it('reads the structure record and picks merges as FTS5 would', () => {
    const lv = (...levels: [number, number[]][]) => levels.map(([merging, pages]) => ({ merging, pages }));
    assert.equal(mergeWanted(lv([0, [100]])), false);
    assert.equal(mergeWanted(lv([0, [6, 7]], [0, []], [0, [100]])), true, '13 pages ≥ 100 / 8');
    assert.equal(mergeWanted(lv([0, [5]], [0, []], [0, [100]])), false);
    assert.equal(
      mergeWanted(lv([0, [5]], [2, [60, 40]], [0, [3]])),
      true,
      'a merge of the largest under way',
    );
    assert.equal(
      mergeWanted(lv([0, [1]], [1, [2]], [0, [90]])),
      true,
      'the largest being written by a merge',
    );
    assert.equal(smallMergeLevel(lv([0, [1, 1]], [0, [3]], [0, [100]])), 0);
    assert.equal(smallMergeLevel(lv([0, [1]], [0, [3, 2]], [0, []], [0, [100]])), 1);
    assert.equal(smallMergeLevel(lv([0, [1]], [0, [3, 2]], [0, [100]])), -1, 'not into the largest level');
    assert.equal(smallMergeLevel(lv([0, [1]], [0, [2]], [0, [100, 3]])), -1, 'not the largest level');
    assert.equal(smallMergeLevel(lv([0, [1]], [1, [2, 3]], [0, []], [0, [100]])), 1, 'a merge under way');
    // cookie, V2 marker, 2 levels, 3 segments, write counter 300 (2-byte varint); level 0: segment 5
    // (pages 1–1), level 1: segments 6 (2–4) and 7 (130–200, 2-byte varints), each V2 segment with 5 more varints.
    const v2 = [0, 0, 0, 0, 0xff, 0, 0, 1, 2, 3, 0x82, 0x2c];
    const seg = (id: number, ...pg: number[][]) => [id, ...pg.flat(), 0, 0, 0, 0, 0];
    const block = Uint8Array.from([
      ...v2,
      0,
      1,
      ...seg(5, [1], [1]),
      0,
      2,
      ...seg(6, [2], [4]),
      ...seg(7, [0x81, 0x02], [0x81, 0x48]),
    ]);
    assert.deepEqual(searchLevels(block), lv([0, [1]], [0, [3, 71]]));
  });

  it('search reads the rows matching a term longer than the prefix indexes, not every row sharing its first 3 letters', async () => {
    const path = join(dir, 'search-cost.db');
    const store = new SqliteStore({ path, durability: 'normal' });
    await store.migrate();
    await seedGardens(store);
    const found = async (terms: string[], limit = 50, afterId = 0) =>
      (await store.listPlants({ gardens: ['gdn_o', 'gdn_p'], tag: null, afterId, limit, terms })).map(
        (p) => p.id,
      );
    const create = async (names: string[], garden = 'gdn_o') => {
      const r = await store.createPlants(
        names.map((name) => ({ id: null, owner: 'o', garden, admin: true, name, tag: null })),
      );
      assert.ok('ok' in r);
      return r.ok.map((p) => p.id);
    };
    // 3,000 plants whose word shares "fil" (and "fille") with the terms, none of them matching.
    for (let b = 0; b < 3; b++)
      await create(Array.from({ length: 1000 }, (_, i) => `filler ${b * 1000 + i}`));
    const [z1, z2] = await create(['Fillerz one', 'fillerzz two']);
    const hidden = await create(['fillerz hidden'], 'gdn_a');
    // Rows the store read for a search: none but the matches, however many share the first letters.
    const rowsFor = async (terms: string[], limit = 50, afterId = 0) => {
      const before = store.searchRowsRead;
      const ids = await found(terms, limit, afterId);
      return { ids, read: store.searchRowsRead - before };
    };
    assert.deepEqual(await rowsFor(['fillerz']), { ids: [z1, z2], read: 2 });
    assert.deepEqual(await rowsFor(['fillerzz']), { ids: [z2], read: 1 });
    assert.deepEqual(await rowsFor(['fillerq']), { ids: [], read: 0 });
    assert.deepEqual(await rowsFor(['fillerz', 'two']), { ids: [z2], read: 1 });
    assert.deepEqual((await rowsFor(['fille'], 10)).read, 10, 'a page of a common term: its rows');
    assert.equal(hidden.length, 1);
    // A term more words begin with than a query asks FTS5 for by name: at most 100 rows (or 4
    // pages) read along its first 3 letters, then only its matches.
    const many = await create(Array.from({ length: 300 }, (_, i) => `fillerzq${i} plant`));
    assert.deepEqual(await rowsFor(['fillerzq'], 10), { ids: many.slice(0, 10), read: 100 + 10 });
    assert.deepEqual(await rowsFor(['fillerzq'], 50), { ids: many.slice(0, 50), read: 200 + 50 });
    assert.deepEqual(await rowsFor(['fillerz'], 10), { ids: [z1, z2, ...many.slice(0, 8)], read: 100 + 10 });
    // Another term read by its words narrows the walk: here to the 300 with "plant", 2 pages read.
    assert.deepEqual(await rowsFor(['fillerzq1', 'plant'], 10), {
      ids: many.filter((_, i) => String(i).startsWith('1')).slice(0, 10),
      read: 20,
    });
    // Where its matches are dense along the first 3 letters, they fill the page at once.
    assert.deepEqual(await rowsFor(['fillerzq'], 10, many[0]! - 1), { ids: many.slice(0, 10), read: 20 });
    assert.deepEqual(await rowsFor(['fillerzq'], 1000, many[0]! - 1), { ids: many, read: 300 });
    // Renames and deletes keep the words a term is looked up by.
    await store.updatePlant(z1!, null, { name: 'ficus' }, null);
    await store.deletePlant(z2!, null);
    for (const id of many) await store.deletePlant(id, null);
    assert.deepEqual(await rowsFor(['fillerz']), { ids: [], read: 0 });
    await store.updatePlant(z1!, null, { name: 'fillerzzz' }, null);
    assert.deepEqual(await rowsFor(['fillerzz']), { ids: [z1], read: 1 });
    // The words table counts the plants that have each word; a word none has any more is gone.
    const look = new Database(path, { readonly: true });
    assert.deepEqual(
      look.prepare("SELECT word, plants FROM plant_search_words WHERE word >= 'fil' AND word < 'fim'").all(),
      [
        { word: 'filler', plants: 3000 },
        { word: 'fillerz', plants: 1 },
        { word: 'fillerzzz', plants: 1 },
      ],
    );
    look.close();
    await store.close();
  });

  it('answers 503-style errors once closed', async () => {
    const store = new SqliteStore({ path: ':memory:', durability: 'full' });
    await store.migrate();
    await seedGardens(store);
    await store.close();
    await assert.rejects(store.ping(), (err: { status?: number }) => err.status === 503);
    // Batched writes and reads too, even when no statement had been prepared before the close.
    await assert.rejects(
      store.createPlant({ id: null, owner: 'o', garden: 'gdn_o', admin: true, name: 'n', tag: null }),
      (err: { status?: number }) => err.status === 503,
    );
    await assert.rejects(store.getPlant(1), (err: { status?: number }) => err.status === 503);
  });

  it('answers reads made in one turn of the event loop each with its own row, in one batch', async () => {
    const path = join(dir, 'batch.db');
    const store = new SqliteStore({ path, durability: 'full' });
    await store.migrate();
    await seedGardens(store);
    const ids: number[] = [];
    const versions: number[] = [];
    for (let i = 0; i < 50; i++) {
      const r = await store.createPlant({
        id: null,
        owner: `o${i % 3}`,
        garden: `gdn_o${i % 3}`,
        admin: true,
        name: `p${i}`,
        tag: i % 2 ? 't' : null,
      });
      assert.ok('ok' in r);
      ids.push(r.ok.id);
      versions.push(r.ok.version);
    }
    // Another connection (another process, as far as SQLite is concerned) deletes one and adds one
    // before the batch is issued: every read of the batch sees both.
    const other = new Database(path);
    other.prepare('DELETE FROM plants WHERE id = ?').run(ids[7]);
    const added = Number(
      other.prepare("INSERT INTO plants (owner, name, tag) VALUES ('x', 'from elsewhere', NULL)").run()
        .lastInsertRowid,
    );
    other.close();
    const wanted = [...ids, added, 999_999, ids[7]!];
    const [plants, page] = await Promise.all([
      Promise.all(wanted.map((id) => store.getPlant(id))),
      store.listPlants({ gardens: ['gdn_o1'], tag: null, afterId: 0, limit: 100 }),
    ]);
    wanted.forEach((id, i) => {
      const p = plants[i];
      if (id === ids[7] || id === 999_999) assert.equal(p, null, `plant ${id} is gone or never was`);
      // A plant written by hand takes the column's default version.
      else if (id === added)
        assert.deepEqual(p, { id, owner: 'x', garden: '', name: 'from elsewhere', tag: null, version: 1 });
      else {
        const n = ids.indexOf(id);
        const version = versions[n];
        const garden = `gdn_o${n % 3}`;
        assert.deepEqual(p, {
          id,
          owner: `o${n % 3}`,
          garden,
          name: `p${n}`,
          tag: n % 2 ? 't' : null,
          version,
        });
      }
    });
    assert.deepEqual(
      page.map((p) => p.name),
      ids
        .map((_, n) => n)
        .filter((n) => n % 3 === 1 && n !== 7)
        .map((n) => `p${n}`),
    );
    // The batch's read transaction has ended: a write and a later batch go through.
    await store.deletePlant(ids[0]!, null);
    assert.equal(await store.getPlant(ids[0]!), null);
    // Reads still queued when the store closes are answered first; a read after it is a 503.
    const late = [store.getPlant(ids[1]!), store.getPlant(ids[7]!)];
    await store.close();
    assert.deepEqual(await Promise.all(late), [
      { id: ids[1], owner: 'o1', garden: 'gdn_o1', name: 'p1', tag: 't', version: versions[1] },
      null,
    ]);
    await assert.rejects(store.getPlant(ids[1]!), (err: { status?: number }) => err.status === 503);
  });

  it('migration 3 keeps the ids, order and deliveries of events written before it; new ids never repeat one', async () => {
    const path = join(dir, 'v2.db');
    const old = new Database(path);
    for (const m of SQLITE_MIGRATIONS.filter((m) => m.version <= 2)) old.exec(m.sql);
    old.exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL);
      INSERT INTO schema_migrations VALUES (1, '0001_init', ''), (2, '0002_events', '');`);
    const ins = old.prepare('INSERT INTO events (id, type, owner, data, created_at) VALUES (?, ?, ?, ?, ?)');
    ins.run('evt_old1', 'plant.created', 'o', '{"id":1,"name":"Fern","tag":"green"}', 1000);
    ins.run('evt_old2', 'plant.deleted', 'o', '{"id":1,"name":"Fern","tag":"green"}', 2000);
    ins.run('evt_old3', 'plant.created', 'o', '{"id":2,"name":"Ivy"}', 3000);
    old.exec("DELETE FROM events WHERE id = 'evt_old3'"); // purged
    old.exec(`INSERT INTO webhook_endpoints (id, owner, admin, url, events, secret, status, created_at)
      VALUES ('we_1', 'o', 0, 'https://example.com/h', 3, 'whsec_x', 'enabled', 0);
      INSERT INTO deliveries (event_id, endpoint_id, state, next_attempt_at, created_at)
      VALUES ('evt_old2', 'we_1', 'pending', 0, 0);`);
    old.close();

    const store = new SqliteStore({ path, durability: 'full' });
    assert.deepEqual(await store.migrate(), [
      '0003_compact_event_log',
      '0004_list_pages',
      '0005_write_clock',
      '0006_plant_versions',
      '0007_gardens',
      '0008_token_pages',
      '0009_delivery_indexes',
      '0010_creation_order',
      '0011_garden_creators',
      '0012_events_by_garden',
      '0013_endpoint_admin_credential',
      '0014_deliveries_from_the_log',
      '0015_plant_search',
      '0016_search_words',
      '0017_event_actors',
      '0018_history_pages',
      '0019_trash',
      '0020_change_feed',
      '0021_event_traceparent',
    ]);
    const homeO = (await store.memberships('o'))[0]!.garden;
    const events = (await store.readEvents({ after: '0', gardens: null, limit: 10 })).events;
    assert.deepEqual(
      events.map((e) => [e.id, e.type, e.data, e.createdAt.getTime(), e.position]),
      [
        ['evt_old1', 'plant.created', { id: 1, name: 'Fern', tag: 'green', garden: homeO }, 1000, '1'],
        ['evt_old2', 'plant.deleted', { id: 1, name: 'Fern', tag: 'green', garden: homeO }, 2000, '2'],
      ],
    );
    assert.equal(await store.eventPosition('evt_old2'), '2');
    assert.equal(await store.headPosition(), '2');
    const { jobs } = await store.claimDeliveries({
      now: new Date(),
      leaseMs: 1000,
      leaseOwner: 't',
      limit: 10,
      perEndpoint: 4,
      skipEndpoints: [],
    });
    assert.deepEqual(
      jobs.map((j) => [j.event.id, plantOf(j.event.data).name]),
      [['evt_old2', 'Fern']],
    );
    await store.createPlant({ id: null, owner: 'o', garden: homeO, name: 'New', tag: null }, undefined, {
      at: new Date(5000),
    });
    const [fresh] = (await store.readEvents({ after: '2', gardens: [homeO], limit: 10 })).events;
    assert.equal(fresh!.position, '3');
    assert.match(fresh!.id, /^evt_[0-9a-f]{16}0{15}3$/, 'an id of the new shape, unlike any before');
    assert.equal(await store.eventPosition(fresh!.id), '3');
    assert.equal(await store.eventPosition(fresh!.id.replace(/3$/, '4')), null, 'not written');
    assert.equal(await store.eventPosition('evt_old3'), null, 'purged');
    assert.equal(await store.eventPosition('evt_nope'), null);
    // Purging everything leaves the newest row, emptied: the next seq is never one that was used.
    assert.equal(await store.purgeEvents(new Date(10_000)), 3);
    assert.deepEqual((await store.readEvents({ after: '0', gardens: null, limit: 10 })).events, []);
    assert.equal(await store.eventPosition(fresh!.id), null, 'purged');
    // Written now (after its owner's home garden was made by migration 7: the endpoint gets the
    // events of gardens its owner was a member of when they were written).
    await store.createPlant({ id: null, owner: 'o', garden: homeO, name: 'Newer', tag: null }, undefined, {
      at: new Date(),
    });
    assert.deepEqual(
      (await store.readEvents({ after: '0', gardens: [homeO], limit: 10 })).events.map((e) => e.position),
      ['4'],
    );
    assert.equal(
      plantOf((await store.readEvents({ after: '0', gardens: [homeO], limit: 10 })).events[0]!.data).name,
      'Newer',
    );
    // An hour on, every lease has run out: what is left to claim is the newest event, from the log.
    const { jobs: later } = await store.claimDeliveries({
      now: new Date(Date.now() + 3_600_000),
      leaseMs: 1000,
      leaseOwner: 'u',
      limit: 10,
      perEndpoint: 4,
      skipEndpoints: [],
    });
    assert.deepEqual(
      later.map((j) => plantOf(j.event.data).name),
      ['Newer'],
      'the purged events’ deliveries went with them',
    );
    await store.close();
  });

  it('a create writes its plant and event only, whatever the number of endpoints', async () => {
    const path = join(dir, 'fanout.db');
    const store = new SqliteStore({ path, durability: 'full' });
    await store.migrate();
    const o = user();
    const g = await garden(store, o);
    const count = (table: string) => {
      const db = new Database(path, { readonly: true });
      try {
        return db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number;
      } finally {
        db.close();
      }
    };
    await plant(store, o, g, { at: new Date() });
    for (let i = 0; i < 10; i++) await endpoint(store, o);
    for (let i = 0; i < 5; i++) await plant(store, o, g, { at: new Date() });
    assert.equal(count('events'), 6);
    assert.equal(count('deliveries'), 0, 'no delivery row per endpoint');
    // The ten endpoints each get the five events written after they were made, from the log.
    const jobs = await claimAll(store);
    assert.equal(jobs.length, 50);
    assert.ok(jobs.every((j) => j.id === null));
    assert.equal(count('deliveries'), 0);
    await store.close();
  });

  it('migration 14 sends each pending delivery once and every later event from the log, none twice', async () => {
    const path = join(dir, 'v13.db');
    // A version-13 store as the old fan-out left it: three events of o's garden and their
    // deliveries to o's endpoint, one sent, one waiting for its retry, one not yet tried.
    const db = sqliteAtVersion(path, 13);
    const o = 'o';
    const g = 'gdn_m14';
    const t = Date.now() - 60_000;
    db.exec(`INSERT INTO gardens (id, name, home_user, created_at, seq, created_by) VALUES ('${g}', 'G', NULL, ${t}, 1, '${o}');
      INSERT INTO garden_members (garden_id, user_id, role, added_at) VALUES ('${g}', '${o}', 'owner', ${t});
      INSERT INTO webhook_endpoints (id, owner, admin, url, events, secret, status, created_at, seq)
        VALUES ('we_m14', '${o}', 0, 'https://example.com/h', 7, 'whsec_x', 'enabled', ${t}, 1);`);
    const insEvent = db.prepare(
      `INSERT INTO events (type, owner, plant_id, name, tag, created_at, previous, garden) VALUES (1, ?, ?, ?, NULL, ?, NULL, ?)`,
    );
    const ids = [0, 1, 2].map((i) => Number(insEvent.run(o, i + 1, `old${i}`, t + i, g).lastInsertRowid));
    const key = db.prepare('SELECT key FROM event_log').pluck().get() as string;
    const evt = (seq: number) => `evt_${key}${seq.toString(16).padStart(16, '0')}`;
    const ins = db.prepare(
      `INSERT INTO deliveries (event_id, event_seq, endpoint_id, state, attempts, next_attempt_at, created_at)
       VALUES (?, ?, 'we_m14', ?, ?, ?, 0)`,
    );
    ins.run(evt(ids[0]!), ids[0], 'succeeded', 1, 0);
    ins.run(evt(ids[1]!), ids[1], 'pending', 1, 1000);
    ins.run(evt(ids[2]!), ids[2], 'pending', 0, 0);
    db.close();

    const store = new SqliteStore({ path, durability: 'full' });
    assert.deepEqual(await store.migrate(), [
      '0014_deliveries_from_the_log',
      '0015_plant_search',
      '0016_search_words',
      '0017_event_actors',
      '0018_history_pages',
      '0019_trash',
      '0020_change_feed',
      '0021_event_traceparent',
    ]);
    for (let i = 0; i < 2; i++) await plant(store, o, g, { name: `new${i}`, at: new Date(), id: 10 + i });
    // A dispatcher's rounds: claim, send (all acknowledged), record with the log's progress.
    const sent: string[] = [];
    for (let round = 0; round < 3; round++) {
      const claim = await store.claimDeliveries({
        now: new Date(),
        leaseMs: 60_000,
        leaseOwner: 'd',
        limit: 1,
        perEndpoint: 1,
        skipEndpoints: [],
      });
      sent.push(...claim.jobs.map((j) => plantOf(j.event.data).name));
      await store.finishDeliveries(
        claim.jobs.map((j) => acknowledged(j, 'd', new Date())),
        Object.entries(claim.windows).map(([endpointId, position]) => ({
          endpointId,
          leaseOwner: 'd',
          position,
          leaseUntil: null,
        })),
      );
    }
    // The pending ones in the order they fell due (one a round: limit 1; queued ones first), then
    // the new events from the log.
    assert.deepEqual(sent, ['old2', 'old1', 'new0']);
    for (let round = 0; round < 3; round++) {
      const claim = await store.claimDeliveries({
        now: new Date(Date.now() + 3_600_000),
        leaseMs: 60_000,
        leaseOwner: 'd',
        limit: 10,
        perEndpoint: 10,
        skipEndpoints: [],
      });
      sent.push(...claim.jobs.map((j) => plantOf(j.event.data).name));
      await store.finishDeliveries(
        [],
        Object.entries(claim.windows).map(([endpointId, position]) => ({
          endpointId,
          leaseOwner: 'd',
          position,
          leaseUntil: null,
        })),
      );
    }
    assert.deepEqual(sent, ['old2', 'old1', 'new0', 'new1'], 'each once');
    assert.deepEqual(
      (await store.listAttempts('we_m14', { limit: 10, beforeId: null })).map((a) => a.deliveryId === null),
      [true, false, false],
      'two queued deliveries, then a first attempt from the log (the last round recorded none)',
    );
    await store.close();
  });

  it('migration 6 gives every plant a version, and changes and their events work on a version-5 store', async () => {
    const path = join(dir, 'v5.db');
    const old = new Database(path);
    for (const m of SQLITE_MIGRATIONS.filter((m) => m.version <= 5)) old.exec(m.sql);
    old.exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL);
      INSERT INTO schema_migrations VALUES (1, '0001_init', ''), (2, '0002_events', ''), (3, '0003_compact_event_log', ''),
        (4, '0004_list_pages', ''), (5, '0005_write_clock', '');
      INSERT INTO plants (id, owner, name, tag) VALUES (3, 'a', 'x', 'green'), (5, 'a', 'y', NULL);
      INSERT INTO webhook_endpoints (id, owner, admin, url, events, secret, status, created_at)
        VALUES ('we_all', 'a', 0, 'https://example.com/h', 3, 'whsec_x', 'enabled', 0),
               ('we_del', 'a', 0, 'https://example.com/d', 2, 'whsec_y', 'enabled', 0);
      INSERT INTO idempotency_keys (user_id, key, request_hash, state, status, plant_id, created_at, locked_at)
        VALUES ('a', 'k', 'h', 'done', 201, 3, ${Date.now()}, ${Date.now()});`);
    old.close();
    const store = new SqliteStore({ path, durability: 'full' });
    assert.deepEqual(await store.migrate(), [
      '0006_plant_versions',
      '0007_gardens',
      '0008_token_pages',
      '0009_delivery_indexes',
      '0010_creation_order',
      '0011_garden_creators',
      '0012_events_by_garden',
      '0013_endpoint_admin_credential',
      '0014_deliveries_from_the_log',
      '0015_plant_search',
      '0016_search_words',
      '0017_event_actors',
      '0018_history_pages',
      '0019_trash',
      '0020_change_feed',
      '0021_event_traceparent',
    ]);
    const [home] = await store.memberships('a');
    assert.equal(home?.role, 'owner', 'a has its home garden');
    const homeA = home!.garden;
    assert.deepEqual(await store.getPlant(3), {
      id: 3,
      owner: 'a',
      garden: homeA,
      name: 'x',
      tag: 'green',
      version: 1,
    });
    const claim = await store.claimIdempotencyKey({ user: 'a', key: 'k' }, 'h', {
      now: new Date(),
      staleAfterMs: 60_000,
      retainMs: 86_400_000,
    });
    assert.deepEqual(
      claim,
      { refused: 'done', outcome: { status: 201, plantId: 3 } },
      'an old key replays as before',
    );
    const made = await store.createPlant({ id: null, owner: 'a', garden: homeA, name: 'z', tag: null });
    assert.ok('ok' in made && made.ok.version > 1, 'versions go on after the old plants’');
    const r = await store.updatePlant(5, 'a', { tag: 'red' }, [1], undefined, { at: new Date(7000) });
    assert.ok('ok' in r && r.ok.changed && r.ok.plant.version > made.ok.version);
    const [ev] = (await store.readEvents({ after: '0', gardens: [homeA], limit: 10 })).events;
    assert.deepEqual(
      [ev!.type, ev!.data],
      ['plant.updated', { id: 5, name: 'y', tag: 'red', garden: homeA, previous: { tag: null } }],
    );
    const endpoints = await store.listEndpoints('a');
    assert.deepEqual(
      endpoints.map((e) => [e.id, e.events]),
      [
        // Migration 6 gave it plant.updated; migration 17 leaves endpoints' types as they were.
        ['we_all', ['plant.created', 'plant.updated', 'plant.deleted']],
        ['we_del', ['plant.deleted']],
      ],
      'an endpoint that took every type takes the new one; a chosen subset stays as chosen',
    );
    await store.close();
  });

  it('migration 5 moves the list marks into memory; the list paths read only their index', async () => {
    const path = join(dir, 'v4.db');
    const old = new Database(path);
    for (const m of SQLITE_MIGRATIONS.filter((m) => m.version <= 4)) old.exec(m.sql);
    old.exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL);
      INSERT INTO schema_migrations VALUES (1, '0001_init', ''), (2, '0002_events', ''), (3, '0003_compact_event_log', ''), (4, '0004_list_pages', '');
      INSERT INTO plants (id, owner, name, tag) VALUES (3, 'a', 'x', 'green'), (5, 'a', 'y', NULL), (9, 'b', 'z', 'green'), (12, 'b', 'w', 'red');`);
    old.close();
    const store = new SqliteStore({ path, durability: 'full' });
    assert.deepEqual(await store.migrate(), [
      '0005_write_clock',
      '0006_plant_versions',
      '0007_gardens',
      '0008_token_pages',
      '0009_delivery_indexes',
      '0010_creation_order',
      '0011_garden_creators',
      '0012_events_by_garden',
      '0013_endpoint_admin_credential',
      '0014_deliveries_from_the_log',
      '0015_plant_search',
      '0016_search_words',
      '0017_event_actors',
      '0018_history_pages',
      '0019_trash',
      '0020_change_feed',
      '0021_event_traceparent',
    ]);
    const homeA = (await store.memberships('a'))[0]!.garden;
    const homeB = (await store.memberships('b'))[0]!.garden;
    const marks = (g: string | null, tag: string | null) => store.listMarks(g === null ? null : [g], tag);
    const start = await marks(homeA, null);
    // After every id: only `top` moves, for the owner, everyone, and the tag.
    await store.createPlant({ id: null, owner: 'a', garden: homeA, name: 'v', tag: 'red' });
    assert.deepEqual(await marks(homeA, null), { reorder: start.reorder, top: 13 });
    assert.deepEqual(await marks(homeA, 'red'), { reorder: start.reorder, top: 13 });
    assert.equal((await marks(homeA, 'green')).top, 0, 'no green plant created since the store opened');
    assert.deepEqual(await marks(null, 'red'), { reorder: start.reorder, top: 13 });
    const b = await marks(homeB, null);
    // Below the newest id, and a delete: `reorder` moves, for the owner and everyone, not others.
    await store.createPlant({ id: 4, owner: 'a', garden: homeA, name: 'u', tag: null });
    const a1 = await marks(homeA, null);
    assert.notEqual(a1.reorder, start.reorder);
    assert.deepEqual(await marks(homeB, null), b);
    const all1 = await marks(null, null);
    assert.deepEqual(await store.deletePlant(9, 'b'), { ok: true });
    assert.notEqual((await marks(homeB, 'green')).reorder, b.reorder);
    assert.notEqual((await marks(null, null)).reorder, all1.reorder);
    assert.deepEqual(await marks(homeA, null), a1);
    await store.close();
    const db = new Database(path, { readonly: true });
    const plan = (sql: string) =>
      (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[]).map((r) => r.detail).join('; ');
    assert.match(
      plan(
        `SELECT id, garden, name, tag FROM plants WHERE garden = '${homeA}' AND id > 0 ORDER BY id LIMIT 10`,
      ),
      /COVERING INDEX plants_garden_page/,
    );
    assert.match(
      plan(
        `SELECT id, garden, name, tag FROM plants WHERE garden = '${homeA}' AND tag = 'red' AND id > 0 ORDER BY id LIMIT 10`,
      ),
      /COVERING INDEX plants_garden_tag_page/,
    );
    assert.match(
      plan("SELECT id, garden, name, tag FROM plants WHERE tag = 'red' AND id > 0 ORDER BY id LIMIT 10"),
      /COVERING INDEX plants_tag_page/,
    );
    db.close();
  });

  for (const kept of [0, 100_000]) {
    it(`a page across gardens is exact whether the walk along ids fills it, runs out, or reaches the end (ids kept: ${kept})`, async () => {
      const path = join(dir, `window-${kept}.db`);
      const store = new SqliteStore({ path, durability: 'full', keptIdsPerList: kept });
      await store.migrate();
      await seedGardens(store);
      // The caller's gardens (o, p, a) hold a plant every 7th id up to 700, then none for 6,000 ids
      // (another garden's, c), then one every 3rd id: a walk of at most 4,096 plants fills early pages
      // and runs out in the gap; every page must still be the id-ordered merge.
      const mine = ['gdn_o', 'gdn_p', 'gdn_a'];
      const raw = new Database(path);
      const ins = raw.prepare('INSERT INTO plants (id, owner, garden, name, tag) VALUES (?, ?, ?, ?, ?)');
      const want: number[] = [];
      raw.transaction(() => {
        for (let id = 1; id <= 9000; id++) {
          const ours = (id <= 700 && id % 7 === 0) || (id > 6700 && id % 3 === 0);
          const garden = ours ? mine[id % 3]! : 'gdn_c';
          ins.run(id, 'x', garden, `p${id}`, id % 2 ? 't' : null);
          if (ours) want.push(id);
        }
      })();
      raw.close();
      for (const [limit, tag] of [
        [1, null],
        [21, null],
        [101, null],
        [1001, null],
        [21, 't'],
        [257, 't'],
      ] as const) {
        const expected = want.filter((id) => tag === null || id % 2 === 1);
        const seen: number[] = [];
        for (let after = 0; ; ) {
          const page = await store.listPlants({
            gardens: mine,
            tag,
            afterId: after,
            limit,
            withVersion: limit === 21,
          });
          seen.push(...page.map((p) => p.id));
          if (page.length < limit) break;
          after = page[page.length - 1]!.id;
        }
        assert.deepEqual(seen, expected, `limit ${limit}, tag ${tag}`);
      }
      await store.close();
    });
  }

  it('kept ids of a set of gardens follow every write: the store’s own, another store’s, one made by hand', async () => {
    const path = join(dir, 'kept-ids.db');
    const store = new SqliteStore({ path, durability: 'full' });
    await store.migrate();
    await seedGardens(store);
    const mine = ['gdn_o', 'gdn_p'];
    const make = async (s: Store, id: number | null, garden: string) => {
      const r = await s.createPlant({ id, owner: 'o', garden, admin: true, name: `n${id}`, tag: null });
      assert.ok('ok' in r);
      return r.ok.id;
    };
    const page = async () =>
      (await store.listPlants({ gardens: mine, tag: null, afterId: 0, limit: 100 })).map((p) => p.id);
    for (let i = 0; i < 6; i++) await make(store, null, i % 2 ? 'gdn_o' : 'gdn_p');
    await make(store, null, 'gdn_c');
    assert.deepEqual(await page(), [1, 2, 3, 4, 5, 6]);
    const top = await make(store, null, 'gdn_o');
    assert.deepEqual(await page(), [1, 2, 3, 4, 5, 6, top], 'a create after every other is added');
    assert.deepEqual(await store.deletePlant(3, null), { ok: true });
    assert.deepEqual(await page(), [1, 2, 4, 5, 6, top], 'a delete is seen');
    const other = new SqliteStore({ path, durability: 'full' });
    await make(other, 3, 'gdn_p');
    assert.deepEqual(await other.deletePlant(1, null), { ok: true });
    await other.close();
    assert.deepEqual(
      await page(),
      [2, 3, 4, 5, 6, top],
      'another store’s create below the newest and delete are seen',
    );
    const raw = new Database(path);
    raw.prepare('DELETE FROM plants WHERE id = 2').run();
    raw.close();
    assert.deepEqual(await page(), [3, 4, 5, 6, top], 'a delete made by hand is seen');
    await store.close();
  });

  it('list marks: another store’s write, or a hand-made one, moves every mark; the store’s own do not', async () => {
    const path = join(dir, 'clock.db');
    const store = new SqliteStore({ path, durability: 'full' });
    await store.migrate();
    await seedGardens(store);
    const mine = async () => {
      const r = await store.createPlant({
        id: null,
        owner: 'a',
        garden: 'gdn_a',
        admin: true,
        name: 'mine',
        tag: null,
      });
      return 'ok' in r ? r.ok.id : 0;
    };
    await mine();
    const b0 = await store.listMarks(['gdn_b'], null);
    for (let i = 0; i < 3; i++) await mine();
    assert.deepEqual(await store.listMarks(['gdn_b'], null), b0, 'the store’s own creates leave b alone');
    // Another store on the file (another process, as far as the file can tell).
    const other = new SqliteStore({ path, durability: 'full' });
    await other.createPlant({
      id: null,
      owner: 'c',
      garden: 'gdn_c',
      admin: true,
      name: 'elsewhere',
      tag: null,
    });
    await other.close();
    const b1 = await store.listMarks(['gdn_b'], null);
    assert.notEqual(b1.reorder, b0.reorder, 'a write by another writer moves every mark');
    // Own writes after it, and the other's write seen once, leave the marks where they are.
    await mine();
    await mine();
    assert.deepEqual(await store.listMarks(['gdn_b'], null), b1);
    // A hand-made change (sqlite3 on the file): counted by the triggers, not by a plantstore writer.
    const raw = new Database(path);
    raw.prepare("UPDATE plants SET name = 'renamed' WHERE owner = 'a'").run();
    raw.close();
    const b2 = await store.listMarks(['gdn_b'], null);
    assert.notEqual(b2.reorder, b1.reorder, 'a change made outside plantstore moves every mark');
    await mine();
    assert.deepEqual(await store.listMarks(['gdn_b'], null), b2);
    // Another writer that wrote first and then this store: still seen (its commit was not the last).
    const third = new SqliteStore({ path, durability: 'full' });
    await third.deletePlant(1, null);
    await third.close();
    await mine();
    assert.notEqual((await store.listMarks(['gdn_b'], null)).reorder, b2.reorder);
    await store.close();
  });

  it('commits from a thread of its own: a write waiting for the lock holds up no read', async () => {
    const path = join(dir, 'writer.db');
    const store = new SqliteStore({ path, durability: 'full' });
    await store.migrate();
    await seedGardens(store);
    const r = await store.createPlant({
      id: null,
      owner: 'o',
      garden: 'gdn_o',
      admin: true,
      name: 'first',
      tag: null,
    });
    const id = 'ok' in r ? r.ok.id : 0;
    const first = 'ok' in r ? r.ok.version : 0;
    // Another connection takes the write lock; the store's next write waits for it (busy_timeout).
    const other = new Database(path);
    other.exec('BEGIN IMMEDIATE');
    let written = false;
    const write = store
      .createPlant({ id: null, owner: 'o', garden: 'gdn_o', admin: true, name: 'second', tag: null })
      .then((w) => {
        written = true;
        return w;
      });
    // Reads go on meanwhile, for 150 ms of the write's wait: the event loop is not held by the
    // waiting write (it would be, for up to busy_timeout, if the commit ran on it).
    let reads = 0;
    for (const end = Date.now() + 150; Date.now() < end || reads < 3; reads++) {
      assert.deepEqual(await store.getPlant(id), {
        id,
        owner: 'o',
        garden: 'gdn_o',
        name: 'first',
        tag: null,
        version: first,
      });
      await new Promise(setImmediate);
    }
    assert.equal(written, false, 'the write still waits for the lock');
    other.exec('COMMIT');
    other.close();
    const second = await write;
    assert.ok('ok' in second);
    assert.deepEqual(await store.getPlant(second.ok.id), { ...second.ok });
    await store.close();
    await assert.rejects(
      store.createPlant({ id: null, owner: 'o', garden: 'gdn_o', admin: true, name: 'late', tag: null }),
      (err: { status?: number }) => err.status === 503,
    );
  });

  it('parses sqlite: URLs', () => {
    assert.equal(sqlitePath('sqlite:./data/plantstore.db'), './data/plantstore.db');
    assert.equal(sqlitePath('sqlite:///var/lib/p.db'), '/var/lib/p.db');
    assert.equal(sqlitePath('sqlite::memory:'), ':memory:');
  });
});
