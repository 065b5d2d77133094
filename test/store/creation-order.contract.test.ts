import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { gardenId } from '../../src/gardens/id.js';
import { PgStore } from '../../src/store/postgres/store.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import type { Store, TokenRecord } from '../../src/store/store.js';
import { createPgDatabase, ENGINES, pgAtVersion, sqliteAtVersion } from '../helpers/engines.js';
import { endpoint, home, user } from '../helpers/gardens.js';

// Gardens, webhook endpoints and tokens are listed in the order they were made (contract 3.2: "home
// first, then by creation"; 3.3: tokens "newest first"), also when many are made within one
// millisecond: every row here is made with the same timestamp, so only an order the store keeps
// itself can pass. Ids are random, so an order by (time, id) fails these with near certainty.

const SAME = new Date(1_800_000_000_000);
const N = 40;

async function tokens(store: Store, u: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const t: TokenRecord = {
      id: `tok_${randomBytes(9).toString('base64url')}`,
      user: u,
      name: `t${i}`,
      scopes: ['plants:read'],
      hash: randomBytes(32).toString('hex'),
      createdAt: SAME,
      expiresAt: null,
      revokedAt: null,
      lastUsedAt: null,
    };
    await store.insertToken(t);
    ids.push(t.id);
  }
  return ids;
}

/** Every token of `u` (null: everyone's), following the pages as the service does. */
async function pages(store: Store, u: string | null, limit: number): Promise<string[]> {
  const seen: string[] = [];
  let before: { id: string } | null = null;
  for (;;) {
    const page = await store.pageTokens({ user: u, before, limit });
    seen.push(...page.map((t) => t.id));
    if (page.length < limit) return seen;
    before = { id: page.at(-1)!.id };
  }
}

for (const engine of ENGINES) {
  describe(`store creation order: ${engine.name}`, { skip: engine.skip }, () => {
    let store: Store;
    before(async () => {
      store = await engine.open();
    });
    after(async () => {
      await store?.close();
    });

    it('lists gardens home first, then in the order they were made within one millisecond', async () => {
      const u = user();
      const made: string[] = [];
      // The home garden is made last, and still comes first.
      for (let i = 0; i < N; i++) {
        const r = await store.createGarden({ id: gardenId(randomBytes), name: `g${i}`, owner: u, at: SAME });
        assert.ok('ok' in r);
        made.push(r.ok.id);
      }
      const h = await home(store, u);
      // Gardens u is added to come in the order they were made too, not in the order u joined them.
      const other = user();
      const theirs: string[] = [];
      for (let i = 0; i < 5; i++) {
        const r = await store.createGarden({
          id: gardenId(randomBytes),
          name: `o${i}`,
          owner: other,
          at: SAME,
        });
        assert.ok('ok' in r);
        theirs.push(r.ok.id);
      }
      for (const g of [...theirs].reverse())
        assert.ok('ok' in (await store.putMember(g, other, u, 'viewer', SAME)));
      assert.deepEqual(
        (await store.gardensOf(u)).map((g) => g.id),
        [h, ...made, ...theirs],
      );
    });

    it('lists endpoints in the order they were made within one millisecond', async () => {
      // Two users' endpoints, interleaved: a user has at most 20.
      const us = [user(), user()];
      const ids: string[] = [];
      for (let i = 0; i < N; i++) {
        const e = await endpoint(store, us[i % 2]!, { at: SAME });
        ids.push(e.id);
      }
      for (const [n, u] of us.entries()) {
        assert.deepEqual(
          (await store.listEndpoints(u)).map((e) => e.id),
          ids.filter((_, i) => i % 2 === n),
        );
      }
      const all = (await store.listEndpoints(null)).map((e) => e.id).filter((id) => ids.includes(id));
      assert.deepEqual(all, ids);
    });

    it('pages tokens newest first in the order they were made within one millisecond, across cursors', async () => {
      const u = user();
      const ids = await tokens(store, u, N);
      const newestFirst = [...ids].reverse();
      for (const limit of [1, 3, 7, N, N + 1]) {
        assert.deepEqual(await pages(store, u, limit), newestFirst, `limit ${limit}`);
      }
      // Everyone's tokens: u's in the same order, among any others', with the cursor on u's.
      const v = user();
      const theirs = await tokens(store, v, 5);
      const everyone = (await pages(store, null, 6)).filter((id) => ids.includes(id) || theirs.includes(id));
      assert.deepEqual(everyone, [...theirs.reverse(), ...newestFirst]);
    });
  });
}

// Existing stores: rows made before the order was kept come in the order they were listed in before
// (created_at, then id), and every row made after comes after them.
const OLD = [
  { id: 'b', at: 1000 },
  { id: 'a', at: 2000 },
  { id: 'c', at: 2000 },
  { id: 'd', at: 1500 },
];
const OLD_ORDER = ['b', 'd', 'a', 'c'];

describe('store creation order: sqlite migration 10 keeps the order of existing rows', () => {
  it('numbers existing gardens, endpoints and tokens by (created_at, id)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-order-'));
    try {
      const path = join(dir, 'v9.db');
      const old = sqliteAtVersion(path, 9);
      for (const r of OLD) {
        old
          .prepare('INSERT INTO gardens (id, name, home_user, created_at) VALUES (?, ?, NULL, ?)')
          .run(`gdn_${r.id}`, r.id, r.at);
        old
          .prepare(
            `INSERT INTO garden_members (garden_id, user_id, role, added_at) VALUES (?, 'u', 'owner', ?)`,
          )
          .run(`gdn_${r.id}`, r.at);
        old
          .prepare(`INSERT INTO webhook_endpoints (id, owner, admin, url, events, secret, status, created_at)
            VALUES (?, 'u', 0, 'https://example.com/h', 7, 'whsec_x', 'enabled', ?)`)
          .run(`we_${r.id}`, r.at);
        old
          .prepare(
            `INSERT INTO tokens (id, user_id, scopes, hash, created_at) VALUES (?, 'u', 'plants:read', ?, ?)`,
          )
          .run(`tok_${r.id}`, randomUUID(), r.at);
      }
      old.close();

      const store = new SqliteStore({ path, durability: 'full' });
      try {
        await store.migrate();
        await checkMigrated(store);
        // The gardens' maker is their owner: u may make as many more as its allowance leaves.
        const db = new Database(path, { readonly: true });
        assert.deepEqual(db.prepare('SELECT DISTINCT created_by FROM gardens').pluck().all(), ['u']);
        db.close();
      } finally {
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

const pgSkip = ENGINES.find((e) => e.name === 'postgres')?.skip ?? 'no postgres engine';

describe('store creation order: postgres migration 8 keeps the order of existing rows', {
  skip: pgSkip,
}, () => {
  it('numbers existing gardens, endpoints and tokens by (created_at, id)', async () => {
    const db = await createPgDatabase();
    const c = new pg.Client({ connectionString: db.url });
    let store: PgStore | undefined;
    try {
      await c.connect();
      await pgAtVersion(c, 7);
      for (const r of OLD) {
        const at = new Date(r.at);
        await c.query('INSERT INTO gardens (id, name, home_user, created_at) VALUES ($1, $2, NULL, $3)', [
          `gdn_${r.id}`,
          r.id,
          at,
        ]);
        await c.query(
          `INSERT INTO garden_members (garden_id, user_id, role, added_at) VALUES ($1, 'u', 'owner', $2)`,
          [`gdn_${r.id}`, at],
        );
        await c.query(
          `INSERT INTO webhook_endpoints (id, owner, admin, url, events, secret, status, created_at)
            VALUES ($1, 'u', false, 'https://example.com/h', 7, 'whsec_x', 'enabled', $2)`,
          [`we_${r.id}`, at],
        );
        await c.query(
          `INSERT INTO tokens (id, user_id, scopes, hash, created_at) VALUES ($1, 'u', 'plants:read', $2, $3)`,
          [`tok_${r.id}`, randomUUID(), at],
        );
      }
      store = new PgStore({ url: db.url, poolSize: 2 });
      await store.migrate();
      await checkMigrated(store);
      assert.deepEqual((await c.query('SELECT DISTINCT created_by FROM gardens')).rows, [
        { created_by: 'u' },
      ]);
    } finally {
      await store?.close();
      await c.end();
      await db.drop();
    }
  });
});

async function checkMigrated(store: Store) {
  assert.deepEqual(
    (await store.gardensOf('u')).map((g) => g.id),
    OLD_ORDER.map((id) => `gdn_${id}`),
  );
  assert.deepEqual(
    (await store.listEndpoints('u')).map((e) => e.id),
    OLD_ORDER.map((id) => `we_${id}`),
  );
  assert.deepEqual(
    await pages(store, 'u', 3),
    [...OLD_ORDER].reverse().map((id) => `tok_${id}`),
  );
  // Made after, within the same millisecond as the oldest: after every one of them.
  const r = await store.createGarden({
    id: gardenId(randomBytes),
    name: 'new',
    owner: 'u',
    at: new Date(1000),
  });
  assert.ok('ok' in r);
  const e = await endpoint(store, 'u', { at: new Date(1000) });
  const [t] = await tokens(store, 'u', 1);
  assert.deepEqual((await store.gardensOf('u')).at(-1)?.id, r.ok.id);
  assert.deepEqual((await store.listEndpoints('u')).at(-1)?.id, e.id);
  assert.deepEqual((await pages(store, 'u', 2))[0], t);
}
