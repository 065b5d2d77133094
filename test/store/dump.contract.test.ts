import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createWriteStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { after, before, describe, it } from 'node:test';
import { createToken } from '../../src/identity/tokens.js';
import {
  StoreFileReader,
  StoreFileRefused,
  StoreFileWriter,
  StoreRecordRefused,
} from '../../src/ops/store-file.js';
import type { StoreRecord } from '../../src/schemas/store-file.js';
import { dumpStore, loadStore, RecordRefused, StoreNotEmpty, storeSchema } from '../../src/store/dump.js';
import { openStore } from '../../src/store/index.js';
import type { FinishedAttempt, Store } from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';
import { plantOf } from '../helpers/events.js';
import { claimAll, endpoint, home, plant, takeAll, team, user } from '../helpers/gardens.js';
import { logSettled } from '../helpers/log.js';
import { rewriteExport } from '../helpers/store-file.js';

// Export and import (contract section 12) between every pair of engines: a store with every kind
// of record, exported and imported, answers as the source did; new ids, versions and events come
// after the imported ones; a file that is truncated, altered or of another version, and a store
// that holds data, are refused with nothing written.

const dir = mkdtempSync(join(tmpdir(), 'plantstore-dump-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// pg 8 warns (once a process) of a query sent while another runs, which pg 9 refuses.
const warnings: string[] = [];
process.on('warning', (w) => warnings.push(`${w.name}: ${w.message}`));

interface Opened {
  url: string;
  store: Store;
  drop(): Promise<void>;
}
async function fresh(engine: (typeof ENGINES)[number]): Promise<Opened> {
  const db = await engine.database();
  const store = await openStore({ url: db.url, durability: 'full', poolSize: 4 });
  await store.migrate();
  const drop = async () => {
    await store.close();
    await db.drop();
  };
  return { url: db.url, store, drop };
}

async function exportTo(url: string, file: string): Promise<StoreRecord[]> {
  const out = createWriteStream(file, { mode: 0o600 });
  const w = new StoreFileWriter(out, await storeSchema(url));
  const records: StoreRecord[] = [];
  for await (const r of dumpStore(url)) {
    records.push(r);
    await w.write(r);
  }
  await w.end();
  out.end();
  await finished(out);
  return records;
}

const records = async (url: string) => {
  const all: StoreRecord[] = [];
  for await (const r of dumpStore(url)) all.push(r);
  return all;
};
const meaningful = (rs: StoreRecord[]) => rs.filter((r) => r.kind !== 'counters');

/** Fills a store with a record of every kind; answers what the checks need. */
async function fill(store: Store) {
  const { o, e, v, g } = await team(store);
  const h = await home(store, o);
  const ps = [];
  for (let i = 0; i < 6; i++)
    ps.push(
      await plant(store, o, i % 2 ? g : h, {
        name: `Plant ${i} Ümlaut`,
        tag: i % 3 ? 'indoor' : null,
        at: new Date(),
      }),
    );
  const changed = await store.updatePlant(ps[1]!.id, e, { name: 'Renamed' }, null, undefined, {
    at: new Date(),
    actor: e,
    requestId: 'req-rename',
  });
  assert.ok('ok' in changed);
  // A name and tag with nothing visible, as a release before version 5 took them: a store holding
  // them must still move (their events hold them too).
  await plant(store, o, h, { name: '\u200b\u2060', tag: '\u3164', at: new Date() });
  // Membership changes, each an event with who did it (contract 13.3).
  const x = user();
  const by = (requestId: string) => ({ at: new Date(), actor: o, requestId });
  assert.ok('ok' in (await store.putMember(g, o, x, 'viewer', new Date(), by('req-m1'))));
  assert.ok('ok' in (await store.putMember(g, o, x, 'editor', new Date(), by('req-m2'))));
  assert.ok('ok' in (await store.removeMember(g, o, x, by('req-m3'))));
  const gone = await plant(store, o, g, { id: 900_000, name: 'client id', at: new Date() });
  assert.deepEqual(await store.deletePlant(gone.id, o, { at: new Date() }), { ok: true });
  // The trash (contract 13.2): a plant waiting in it, with its dates, and an id deleted twice, the
  // first entry purged by the second (a plant.purged event, with the id alone).
  const trash = (by: string) => {
    const at = new Date();
    return { deletedAt: at, deletedBy: by, purgeAt: new Date(at.getTime() + 7 * 86_400_000) };
  };
  const binned = await plant(store, o, g, { id: 900_001, name: 'in the trash', tag: 'bin', at: new Date() });
  assert.deepEqual(await store.deletePlant(binned.id, e, { at: new Date(), actor: e }, null, trash(e)), {
    ok: true,
  });
  for (const name of ['twice 1', 'twice 2']) {
    const twice = await plant(store, o, h, { id: 900_002, name, at: new Date() });
    assert.deepEqual(await store.deletePlant(twice.id, o, { at: new Date(), actor: o }, null, trash(o)), {
      ok: true,
    });
  }
  const t = await createToken(store, { user: e, scopes: ['plants:read'], name: 'reader', expiresInMs: null });
  // An endpoint that has taken the log so far; one event after it waits to be retried as a
  // queued delivery, and the events after that are still in its log.
  const w = await endpoint(store, o);
  await takeAll(store);
  await plant(store, o, g, { name: 'retried', at: new Date() });
  await logSettled(store);
  const owner = `test-${randomUUID()}`;
  const claim = await store.claimDeliveries({
    now: new Date(),
    leaseMs: 60_000,
    leaseOwner: owner,
    limit: 10,
    perEndpoint: 10,
    skipEndpoints: [],
  });
  assert.equal(claim.jobs.length, 1);
  const job = claim.jobs[0]!;
  const retry: FinishedAttempt = {
    deliveryId: job.id,
    leaseOwner: owner,
    disableEndpoint: null,
    attempt: {
      deliveryId: job.id,
      endpointId: w.id,
      eventId: job.event.id,
      eventType: job.event.type,
      attempt: 1,
      at: new Date(),
      status: 500,
      outcome: 'retrying',
      error: 'HTTP 500',
      durationMs: 3,
      nextAttemptAt: new Date(Date.now() - 1000),
    },
  };
  await store.finishDeliveries(
    [retry],
    [{ endpointId: w.id, leaseOwner: owner, position: claim.windows[w.id]!, leaseUntil: null }],
  );
  await plant(store, o, g, { name: 'pending one', at: new Date() });
  await plant(store, o, h, { name: 'pending two', tag: 'indoor', at: new Date() });
  assert.ok(
    'ok' in
      (await store.claimIdempotencyKey({ user: o, key: 'k-1' }, 'hash-1', {
        now: new Date(),
        staleAfterMs: 60_000,
        retainMs: 86_400_000,
      })),
  );
  await logSettled(store);
  return { o, e, v, g, h, w, token: t, retried: job.event.id };
}

const pairs = ENGINES.flatMap((from) => ENGINES.map((to) => ({ from, to })));
for (const { from, to } of pairs) {
  describe(`export ${from.name} → import ${to.name}`, { skip: from.skip || to.skip }, () => {
    let source: Opened;
    let target: Opened;
    let file: string;
    let filled: Awaited<ReturnType<typeof fill>>;
    let exported: StoreRecord[];
    before(async () => {
      source = await fresh(from);
      target = await fresh(to);
      filled = await fill(source.store);
      file = join(dir, `${from.name}-${to.name}.ndjson`);
      exported = await exportTo(source.url, file);
    });
    after(async () => {
      await source?.drop();
      await target?.drop();
    });

    it('refuses a truncated, altered or unknown file, writing nothing', async () => {
      const lines = readFileSync(file, 'utf8').split('\n').filter(Boolean);
      const bad = {
        truncated: [lines.slice(0, -1), /truncated: no trailer/],
        altered: [lines.map((l) => l.replace('Renamed', 'Renamec')), /altered: the SHA-256/],
        'another version': [
          [lines[0]!.replace('"version":1', '"version":2'), ...lines.slice(1)],
          /format version 2/,
        ],
        'not an export': [['{"hello":1}'], /not a plantstore export/],
        'an unknown kind': [
          [lines[0]!, '{"kind":"wormhole","id":"x"}', ...lines.slice(1)],
          /line 2: .*wormhole|line 2:/,
        ],
        empty: [[], /empty/],
      } as const;
      for (const [what, [content, reason]] of Object.entries(bad)) {
        const f = join(dir, `${from.name}-${to.name}-${what}.ndjson`);
        writeFileSync(f, content.length ? `${content.join('\n')}\n` : '');
        await assert.rejects(loadStore(target.url, new StoreFileReader(f).records()), (err: Error) => {
          assert.ok(err instanceof StoreFileRefused, `${what}: ${err.stack}`);
          assert.match(err.message, reason, what);
          return true;
        });
        assert.deepEqual(meaningful(await records(target.url)), [], `${what}: nothing written`);
      }
      // A record the database refuses (a member of a garden the file does not hold) refuses the whole file.
      const orphan = lines.map((l) =>
        l.includes('"kind":"member"')
          ? l.replace(/"garden":"gdn_[0-9a-z]+"/, '"garden":"gdn_000000000000000000000000"')
          : l,
      );
      const f = join(dir, `${from.name}-${to.name}-orphan.ndjson`);
      writeFileSync(f, `${orphan.join('\n')}\n`);
      await assert.rejects(
        loadStore(target.url, new StoreFileReader(f).records()),
        (err: Error) => err instanceof RecordRefused || err instanceof StoreFileRefused,
      );
      assert.deepEqual(meaningful(await records(target.url)), []);
    });

    it('refuses a record the API would refuse, or one naming what the file does not hold, though its checksum holds', async () => {
      const absent = 'gdn_000000000000000000000000';
      type Edit = (r: StoreRecord) => StoreRecord | StoreRecord[];
      // Each edit changes the first record it returns a change for; the refusal names that line.
      const cases: [string, StoreRecord['kind'], Edit, RegExp][] = [
        ['a garden id with LF', 'garden', (r) => ({ ...r, id: 'gdn_x\nInjected: 1' }) as StoreRecord, /\/id/],
        [
          'a plant name with CR LF',
          'plant',
          (r) => ({ ...r, name: 'Fern\r\nX-Injected: 1' }) as StoreRecord,
          /\/name/,
        ],
        [
          'a plant name of 201 characters',
          'plant',
          (r) => ({ ...r, name: 'x'.repeat(201) }) as StoreRecord,
          /\/name/,
        ],
        ['a tag with NUL', 'plant', (r) => ({ ...r, tag: 'in\u0000door' }) as StoreRecord, /\/tag/],
        [
          'a plant name with a lone surrogate',
          'plant',
          (r) => ({ ...r, name: 'Fern\ud800' }) as StoreRecord,
          /name must be valid Unicode \(it holds \\ud800/,
        ],
        [
          'a garden name with a lone surrogate',
          'garden',
          (r) => ({ ...r, name: '\udc00' }) as StoreRecord,
          /name must be valid Unicode/,
        ],
        [
          'a plant event with a member instead of its plant',
          'event',
          (r) =>
            ({
              ...r,
              plant: undefined,
              member: { user: 'x', role: 'viewer', previous: null },
            }) as StoreRecord,
          /plant\.created event needs plant and no member/,
        ],
        ['an actor with a space', 'event', (r) => ({ ...r, actor: 'a b' }) as StoreRecord, /\/actor/],
        ['a garden name with LF', 'garden', (r) => ({ ...r, name: 'A\nB' }) as StoreRecord, /\/name/],
        [
          'a plant in a garden not in the file',
          'plant',
          (r) => ({ ...r, garden: absent }) as StoreRecord,
          /its garden gdn_0+ is not in the file/,
        ],
        [
          'a trashed plant in a garden not in the file',
          'trash',
          (r) => ({ ...r, garden: absent }) as StoreRecord,
          /its garden gdn_0+ is not in the file/,
        ],
        [
          'a purged plant event with a name',
          'event',
          (r) => ({ ...r, type: 'plant.purged' }) as StoreRecord,
          /plant\.purged event needs plant and no member/,
        ],
        [
          'a member of a garden not in the file',
          'member',
          (r) => ({ ...r, garden: absent }) as StoreRecord,
          /its garden gdn_0+ is not in the file/,
        ],
        [
          'a token with an unknown scope',
          'token',
          (r) => ({ ...r, scopes: ['plants:read', 'plants:everything'] }) as StoreRecord,
          /\/scopes/,
        ],
        ['a user name with a space', 'member', (r) => ({ ...r, user: 'mallory x' }) as StoreRecord, /\/user/],
        [
          'an admin endpoint tied to no credential',
          'webhook',
          (r) => ({ ...r, admin: true, adminToken: null, adminUntil: null }) as StoreRecord,
          /admin endpoint tied to no credential/,
        ],
        [
          'an admin endpoint whose token is not in the file',
          'webhook',
          (r) => ({ ...r, admin: true, adminToken: 'tok_AAAAAAAAAAAA' }) as StoreRecord,
          /admin token tok_AAAAAAAAAAAA is not in the file/,
        ],
        [
          'an admin endpoint whose token does not hold plants:admin',
          'webhook',
          (r) => ({ ...r, admin: true, adminToken: filled.token.record.id }) as StoreRecord,
          /does not hold plants:admin/,
        ],
        [
          'counters below the plants',
          'counters',
          (r) => ({ ...r, plantId: 1 }) as StoreRecord,
          /plantId 1 is below plant/,
        ],
        [
          'a version counter below a plant',
          'counters',
          (r) => ({ ...r, version: 0 }) as StoreRecord,
          /version 0 is below/,
        ],
        [
          'a garden after the plants',
          'counters',
          (r) => [exported.find((g) => g.kind === 'garden')!, r],
          /out of order: a garden record after/,
        ],
      ];
      for (const [what, kind, edit, rule] of cases) {
        const f = join(dir, `${from.name}-${to.name}-rule.ndjson`);
        let line = 0;
        await rewriteExport(file, f, (rs) => {
          const i = rs.findIndex((r) => r.kind === kind);
          line = i + 2;
          return rs.flatMap((r, j) => (j === i ? edit(r) : [r]));
        });
        await assert.rejects(loadStore(target.url, new StoreFileReader(f).records()), (err: Error) => {
          assert.ok(err instanceof StoreRecordRefused, `${what}: ${err.stack}`);
          assert.match(err.message, new RegExp(`^line ${line}: `), what);
          assert.match(err.message, rule, what);
          assert.doesNotMatch(err.message, /\n/, `${what}: one line`);
          return true;
        });
        assert.deepEqual(meaningful(await records(target.url)), [], `${what}: nothing written`);
      }
    });

    it('imports an older file, whose events have no actor and request id: they read null', async () => {
      const f = join(dir, `${from.name}-${to.name}-v4.ndjson`);
      await rewriteExport(file, f, (rs) =>
        rs
          .filter((r) => !(r.kind === 'event' && r.type.startsWith('member.')))
          .map((r) => {
            if (r.kind !== 'event') return r;
            const { actor: _a, requestId: _r, ...older } = r;
            return older as StoreRecord;
          }),
      );
      const other = await fresh(to);
      try {
        await loadStore(other.url, new StoreFileReader(f).records());
        await logSettled(other.store);
        const start = (await other.store.eventPosition(
          exported.find((r) => r.kind === 'event')!.id as string,
        ))!;
        const all = [...(await other.store.readEvents({ after: start, gardens: null, limit: 100 })).events];
        assert.ok(all.length > 3);
        assert.ok(all.every((e) => e.actor === null && e.requestId === null));
      } finally {
        await other.drop();
      }
    });

    it('imports everything: the same records, answers, tokens, log positions and pending deliveries', async () => {
      const reader = new StoreFileReader(file);
      await loadStore(target.url, reader.records());
      assert.equal(reader.summary!.counts.plant, exported.filter((r) => r.kind === 'plant').length);
      const again = await records(target.url);
      assert.deepEqual(meaningful(again), meaningful(exported));
      const [k0] = exported.filter((r) => r.kind === 'counters');
      const [k1] = again.filter((r) => r.kind === 'counters');
      assert.ok(k0 && k1 && k1.kind === 'counters' && k0.kind === 'counters');
      assert.ok(k1.plantId >= 900_000 && k1.plantId >= k0.plantId && k1.version >= k0.version);

      const s = source.store;
      const t = target.store;
      // Reads answer as before.
      for (const u of [filled.o, filled.e, filled.v]) {
        const q = {
          gardens: (await s.memberships(u)).map((m) => m.garden),
          tag: null,
          afterId: 0,
          limit: 100,
        };
        const q2 = { ...q, gardens: (await t.memberships(u)).map((m) => m.garden) };
        assert.deepEqual(q2.gardens.sort(), q.gardens.sort());
        assert.deepEqual(await t.listPlants(q2), await s.listPlants(q));
      }
      assert.deepEqual(
        await t.findTokenByHash(filled.token.record.hash),
        await s.findTokenByHash(filled.token.record.hash),
      );
      assert.deepEqual(await t.getEndpoint(filled.w.id), await s.getEndpoint(filled.w.id));

      // A stream resumes from an event id issued before the export (once the import's events are
      // readable: on PostgreSQL another test's open transaction may hold the log back a moment).
      await logSettled(t);
      const events = exported.filter((r) => r.kind === 'event');
      const mid = events[2]!.id;
      const tp = await t.eventPosition(mid);
      assert.ok(tp, 'the imported log knows the event');
      const after = async (st: Store, p: string) =>
        (await st.readEvents({ after: p, gardens: null, limit: 100 })).events.map((e) => [
          e.id,
          e.type,
          e.data,
          e.actor,
          e.requestId,
        ]);
      // Who did it and the membership changes travel in the file (contract 13.1, 13.3).
      const causes = events.map((r) => r.kind === 'event' && [r.type, r.actor, r.requestId]);
      for (const want of [
        ['plant.updated', filled.e, 'req-rename'],
        ['member.added', filled.o, 'req-m1'],
        ['member.changed', filled.o, 'req-m2'],
        ['member.removed', filled.o, 'req-m3'],
      ]) {
        assert.ok(
          causes.some((c) => JSON.stringify(c) === JSON.stringify(want)),
          JSON.stringify(want),
        );
      }
      const changedRecord = events.find((r) => r.kind === 'event' && r.type === 'member.changed');
      assert.deepEqual(changedRecord?.kind === 'event' && changedRecord.member, {
        user: changedRecord?.kind === 'event' && changedRecord.member?.user,
        role: 'editor',
        previous: 'viewer',
      });
      const early = (await t.eventPosition(events[0]!.id))!;
      const before = (await s.eventPosition(events[0]!.id))!;
      assert.deepEqual(await after(t, early), await after(s, before));
      assert.deepEqual(await after(t, tp), await after(s, (await s.eventPosition(mid))!));

      // Pending work is claimed in the target as in the source: the queued retry and the log's events.
      const jobs = async (st: Store) =>
        (await claimAll(st, new Date(Date.now() + 86_400_000)))
          .map((j) => `${j.endpoint.id} ${j.event.id} ${j.attempts}`)
          .sort();
      const wanted = await jobs(s);
      assert.equal(wanted.length, 3);
      assert.ok(wanted.some((j) => j.includes(filled.retried)));
      assert.deepEqual(await jobs(t), wanted);

      // The Idempotency-Key is still held; new ids, versions and events come after the imported ones.
      assert.deepEqual(
        await t.claimIdempotencyKey({ user: filled.o, key: 'k-1' }, 'hash-1', {
          now: new Date(),
          staleAfterMs: 60_000,
          retainMs: 86_400_000,
        }),
        { refused: 'in_flight' },
      );
      const made = await plant(t, filled.o, filled.g, { name: 'after the move', at: new Date() });
      assert.ok(made.id > k0.plantId, `id ${made.id} after ${k0.plantId}`);
      assert.ok(made.version > k0.version, `version ${made.version} after ${k0.version}`);
      await logSettled(t);
      const last = (await t.eventPosition(events.at(-1)!.id))!;
      const next = await t.readEvents({ after: last, gardens: null, limit: 10 });
      assert.deepEqual(
        next.events.map((e) => plantOf(e.data).id),
        [made.id],
      );
      assert.ok(!events.some((e) => e.id === next.events[0]!.id), 'a new event id');

      // The trash moved with its dates, and restores in the target (a new version past the counters).
      const bins = exported.filter((r) => r.kind === 'trash');
      assert.deepEqual(
        bins.map((r) => r.kind === 'trash' && [r.id, r.name, r.tag, r.deletedBy]),
        [
          [900_001, 'in the trash', 'bin', filled.e],
          [900_002, 'twice 2', null, filled.o],
        ],
      );
      assert.ok(
        events.some((r) => r.kind === 'event' && r.type === 'plant.purged' && r.plant?.id === 900_002),
      );
      const back = await t.restorePlant(900_001, filled.o);
      assert.ok('ok' in back && back.ok.version > k0.version);

      // A store that holds data is refused, and keeps what it had.
      await assert.rejects(loadStore(target.url, new StoreFileReader(file).records()), StoreNotEmpty);
      assert.ok((await t.getPlant(made.id)) !== null);
    });
  });
}

const postgres = ENGINES.find((e) => e.name === 'postgres')!;
it("the imports into PostgreSQL above never sent a query while another ran (pg's warning)", {
  skip: postgres.skip,
}, () => {
  assert.deepEqual(
    warnings.filter((w) => /already executing/.test(w)),
    [],
  );
});
