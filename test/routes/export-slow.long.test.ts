// GET /plants/export read by slow clients (contract 2; docs/operations.md, "what an export holds"):
// an export of ~10 MB, past what the sockets hold, read by clients that stop reading. In the long
// tier (npm run test:long): filling the store with 40,000 plants takes most of a minute per engine.
// They hold no connection nor snapshot, stay one snapshot, are limited per user and in all, and let
// the other requests go on while they are read.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { before, describe, it } from 'node:test';
import { buildApp } from '../../src/app.js';
import { testConfig } from '../../src/config.js';
import { type Client, clientAs, errorBody, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { createGarden, share } from '../helpers/gardens.js';
import { del, get, postBatchJson as json } from '../helpers/plants.js';
import { suiteHarness } from '../helpers/suite.js';
import { until } from '../helpers/wait.js';

/** An export read by a client that took its first bytes and then stopped reading (a slow client). */
interface SlowExport {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** Reads the rest of the answer; the whole body. */
  rest(): Promise<string>;
  close(): void;
}

function slowExport(base: string, token: string, path: string): Promise<SlowExport> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}${path}`, { agent: false, headers: { authorization: `Bearer ${token}` } });
    req.once('error', reject);
    req.once('response', (res) => {
      const chunks: Buffer[] = [];
      const ended = new Promise<string>((done, fail) => {
        res.once('end', () => done(Buffer.concat(chunks).toString('utf8')));
        res.once('error', fail);
        res.once('aborted', () => fail(new Error(`${path}: the answer was cut off`)));
      });
      ended.catch(() => {});
      res.on('data', (c: Buffer) => chunks.push(c));
      res.once('data', () => {
        res.pause();
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          rest: () => {
            res.resume();
            return ended;
          },
          close: () => req.destroy(),
        });
      });
    });
  });
}

// Names of 200 characters: an export of BULK plants is ~10 MB, past what the sockets' buffers hold
// (about 4 MB on loopback), so a client that stops reading really holds its answer back.
const BULK = 40_000;
const FEW = 4_000;
const bulkName = (i: number) => `bulk ${String(i).padStart(6, '0')} ${'x'.repeat(188)}`;

/** Ids of an NDJSON export's lines, checked to ascend. */
function idsOf(body: string): number[] {
  const ids = body
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l).id as number);
  assert.ok(
    ids.every((id, i) => i === 0 || id > ids[i - 1]!),
    'by id',
  );
  return ids;
}

for (const engine of ENGINES) {
  describe(`GET /plants/export read by slow clients (${engine.name})`, { skip: engine.skip }, () => {
    // The PostgreSQL store of the tests has a pool of 5 connections (helpers/engines.ts).
    const POOL = 5;
    const h = suiteHarness(engine, { maxExportsPerUser: 2, maxExports: POOL });
    let base: string;
    let owner: Client;
    let bulk: string;
    let first: number;
    const readers: Client[] = [];

    before(async () => {
      base = await h.app.listen({ port: 0, host: '127.0.0.1' });
      owner = await h.user();
      bulk = (await createGarden(owner, 'Bulk')).id;
      for (let i = 0; i < BULK; i += 1000) {
        const plants = Array.from({ length: 1000 }, (_, j) => ({
          name: bulkName(i + j),
          ...(i + j < FEW ? { tag: 'few' } : {}),
        }));
        const res = await json(owner, { plants, garden: bulk });
        assert.equal(res.statusCode, 201, res.body);
        if (i === 0) first = res.json().ids[0];
      }
      for (let i = 0; i < 4; i++) {
        const r = await h.user();
        await share(owner, bulk, r.user, 'viewer');
        readers.push(r);
      }
    });

    it('as many slow exports as the pool has connections hold none: another user still creates and reads', async () => {
      const [a, b, c] = readers as [Client, Client, Client];
      const other = await h.user();
      const slow: SlowExport[] = [];
      try {
        for (const r of [a, a, b, b, c])
          slow.push(await slowExport(base, r.token, `/plants/export?garden=${bulk}`));
        assert.deepEqual(
          slow.map((s) => s.status),
          [200, 200, 200, 200, 200],
        );
        const made = await other.create({ name: 'not held up' });
        assert.equal(made.statusCode, 201, made.body);
        assert.equal((await get(other, '/plants')).statusCode, 200);
        assert.equal((await get(other, `/plants/${locationId(made)}`)).statusCode, 200);
        for (const s of slow) assert.equal(idsOf(await s.rest()).length, BULK);
      } finally {
        for (const s of slow) s.close();
      }
    });

    it('a slow export stays one snapshot: plants created and deleted while it is read neither appear nor go', async () => {
      const slow = await slowExport(base, owner.token, `/plants/export?garden=${bulk}`);
      try {
        assert.equal(slow.status, 200);
        const last = first + BULK - 1;
        assert.equal((await del(owner, last)).statusCode, 204);
        assert.equal((await del(owner, first)).statusCode, 204);
        const added = await owner.create({ name: 'after the snapshot' }, {});
        assert.equal(added.statusCode, 201);
        const moved = await json(owner, { plants: [{ name: 'late' }], garden: bulk });
        assert.equal(moved.statusCode, 201);
        const ids = idsOf(await slow.rest());
        assert.equal(ids.length, BULK);
        assert.equal(ids[0], first);
        assert.equal(ids.at(-1), last);
        assert.ok(!ids.includes(moved.json().ids[0]), 'a plant made after the snapshot is not in it');
        // A new export is a new snapshot.
        const now = idsOf((await get(owner, `/plants/export?garden=${bulk}`)).body);
        assert.deepEqual([now.length, now[0], now.at(-1)], [BULK - 1, first + 1, moved.json().ids[0]]);
      } finally {
        slow.close();
      }
    });

    it('runs at most 2 exports of a user and 5 in all: one more is 429 too_many_exports with Retry-After, and an export that ends frees its place', async () => {
      const [a, b, c, d] = readers as [Client, Client, Client, Client];
      const slow: SlowExport[] = [];
      try {
        for (const r of [a, a]) slow.push(await slowExport(base, r.token, `/plants/export?garden=${bulk}`));
        let res = await get(a, `/plants/export?garden=${bulk}&format=csv`);
        assert.equal(res.statusCode, 429, 'a third export of one user');
        assert.equal(errorBody(res).code, 'too_many_exports');
        assert.equal(res.headers['retry-after'], '5');
        for (const r of [b, b, c])
          slow.push(await slowExport(base, r.token, `/plants/export?garden=${bulk}`));
        assert.ok(slow.every((s) => s.status === 200));
        res = await get(d, `/plants/export?garden=${bulk}`);
        assert.equal(res.statusCode, 429, 'a sixth export in all');
        assert.equal(errorBody(res).code, 'too_many_exports');
        assert.equal(res.headers['retry-after'], '5');
        // One read to its end, one abandoned: two places come back.
        assert.equal(idsOf(await slow.shift()!.rest()).length, BULK - 1);
        slow.shift()!.close();
        for (const r of [d, a]) {
          await until(
            `${r === d ? 'a place for another user' : 'a place for the user again'}`,
            async () => (await get(r, '/plants/export?tag=few')).statusCode === 200,
          );
        }
      } finally {
        for (const s of slow) s.close();
      }
    });

    it('the other requests go on while twenty exports are read: a write answers before any of them ends', {
      skip: engine.name !== 'sqlite' && 'SQLite reads on the event loop; PostgreSQL waits for the network',
    }, async () => {
      const app = await buildApp(testConfig({ maxExports: 0, maxExportsPerUser: 0 }), { store: h.store });
      try {
        const reader = await clientAs({ app, store: h.store }, readers[0]!.user, ['plants:read']);
        const writer = await clientAs({ app, store: h.store }, `writer-${randomUUID()}`);
        const order: string[] = [];
        const exports = Array.from({ length: 20 }, () =>
          reader.request({ method: 'GET', url: `/plants/export?garden=${bulk}&tag=few` }).then((res) => {
            order.push('export');
            return res;
          }),
        );
        const made = await writer.create({ name: 'while exports run' });
        order.push('write');
        assert.equal(made.statusCode, 201, made.body);
        for (const res of await Promise.all(exports)) {
          assert.equal(res.statusCode, 200);
          assert.equal(idsOf(res.body).length, FEW - 1);
        }
        assert.equal(order.indexOf('write'), 0, `the write came after exports: ${order.join(' ')}`);
      } finally {
        await app.close();
      }
    });
  });
}
