import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createToken } from '../../src/identity/tokens.js';
import { type EventRecord, NOT_SENT_ADMIN, type Store } from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';
import { claimAll, endpoint, garden, plant, user } from '../helpers/gardens.js';
import { until } from '../helpers/wait.js';

// Events in gardens, on every engine (contract 8, version 3): the log read by gardens, webhook
// deliveries fanned out to the endpoints of the garden's members when the event is written, the
// membership asked again when a delivery is claimed, and recover by the memberships of now.

for (const engine of ENGINES) {
  describe(`store garden events: ${engine.name}`, { skip: engine.skip }, () => {
    let store: Store;
    before(async () => {
      store = await engine.open();
    });
    after(async () => {
      await store?.close();
    });

    // The events after `head` (every one, the log's own order), once `n` of them are readable.
    const eventsAfter = (head: string, gardens: string[] | null, n: number) =>
      until(`${n} events`, async () => {
        const got = (await store.readEvents({ after: head, gardens, limit: 1000 })).events;
        return got.length >= n && got;
      });

    it('readEvents by gardens: exactly the events of those gardens, in log order', async () => {
      const o = user();
      const gs = [await garden(store, o), await garden(store, o), await garden(store, o)];
      const head = await store.headPosition();
      for (let i = 0; i < 12; i++) {
        const p = await plant(store, o, gs[i % 3]!, { name: `e${i}`, at: new Date() });
        if (i % 4 === 0) assert.deepEqual(await store.deletePlant(p.id, o, { at: new Date() }), { ok: true });
      }
      const all = (await eventsAfter(head, null, 15)).filter((e) => gs.includes(e.garden));
      assert.equal(all.length, 15);
      const pick = (wanted: string[]) => all.filter((e) => wanted.includes(e.garden));
      for (const wanted of [[gs[0]!], [gs[2]!, gs[0]!], gs, [gs[1]!, gs[1]!]]) {
        const got = await eventsAfter(head, wanted, pick(wanted).length);
        assert.deepEqual(got, pick(wanted));
        assert.ok(got.every((e: EventRecord) => e.data.garden === e.garden));
        // From a position within: what follows it.
        const mid = got[2]!.position;
        assert.deepEqual(
          (await store.readEvents({ after: mid, gardens: wanted, limit: 1000 })).events,
          got.slice(3),
        );
        assert.deepEqual(
          (await store.readEvents({ after: head, gardens: wanted, limit: 2 })).events,
          got.slice(0, 2),
        );
      }
      assert.deepEqual((await store.readEvents({ after: head, gardens: [], limit: 10 })).events, []);
      assert.deepEqual(
        (await store.readEvents({ after: head, gardens: [await garden(store, o)], limit: 10 })).events,
        [],
      );
    });

    it('membersOf: the members of each garden asked, in one answer; comparePositions follows the log', async () => {
      const [a, b, c] = [user(), user(), user()];
      const g1 = await garden(store, a, [[b, 'viewer']]);
      const g2 = await garden(store, c);
      const got = await store.membersOf([g1, g2, 'gdn_000000000000000000000000']);
      assert.deepEqual([...got.keys()].sort(), [g1, g2].sort());
      assert.deepEqual(got.get(g1)!.sort(), [a, b].sort());
      assert.deepEqual(got.get(g2), [c]);
      assert.deepEqual(await store.membersOf([]), new Map());
      // Removed: no longer among them, at once.
      assert.deepEqual(await store.removeMember(g1, a, b), { ok: true });
      assert.deepEqual((await store.membersOf([g1])).get(g1), [a]);
      const head = await store.headPosition();
      await plant(store, a, g1, { at: new Date() });
      await plant(store, a, g1, { at: new Date() });
      const [e1, e2] = await eventsAfter(head, [g1], 2);
      assert.ok(store.comparePositions(head, e1!.position) < 0);
      assert.ok(store.comparePositions(e1!.position, e2!.position) < 0);
      assert.ok(store.comparePositions(e2!.position, e1!.position) > 0);
      assert.equal(store.comparePositions(e1!.position, e1!.position), 0);
    });

    it('activeTokens: those neither revoked nor expired, in one answer', async () => {
      const u = user();
      const make = (expiresInMs: number | null) =>
        createToken(store, { user: u, scopes: ['plants:read'], name: null, expiresInMs });
      const [live, revoked, expiring] = [await make(null), await make(null), await make(60_000)];
      assert.deepEqual(await store.revokeToken(revoked.record.id, new Date()), { ok: true });
      const ids = [live.record.id, revoked.record.id, expiring.record.id, 'tok_none'];
      assert.deepEqual(
        (await store.activeTokens(ids, new Date())).sort(),
        [live.record.id, expiring.record.id].sort(),
      );
      assert.deepEqual(await store.activeTokens(ids, new Date(Date.now() + 120_000)), [live.record.id]);
      assert.deepEqual(await store.activeTokens([], new Date()), []);
    });

    it("readEvents moves a reader past others' events it looked at, and never past one it did not return", async () => {
      const o = user();
      const quiet = await garden(store, o);
      const b = user();
      const busy = await garden(store, b);
      const start = await store.headPosition();
      for (let i = 0; i < 30; i++) await plant(store, b, busy, { name: `busy${i}`, at: new Date() });
      // Nothing of the quiet garden: the reader is moved to where the log's committed events end,
      // so the next read from there looks at none of those 30 again. On PostgreSQL that end is
      // held back by any transaction open anywhere on the server (another test's, in another
      // database): the reader may be moved part of the way first, never past an event unread.
      const idle = await until('the quiet reader moved past the busy events', async () => {
        const r = await store.readEvents({ after: start, gardens: [quiet], limit: 10 });
        assert.deepEqual(r.events, []);
        const busyRead = await store.readEvents({ after: r.position, gardens: [busy], limit: 100 });
        return r.position !== start && busyRead.events.length === 0 && r;
      });
      // Interleaved: a full page stops at its last event, a short one at the head, and following the
      // positions gives every event of the garden once, in order.
      const mine: string[] = [];
      for (let i = 0; i < 7; i++) {
        await plant(store, b, busy, { name: `noise${i}`, at: new Date() });
        mine.push((await plant(store, o, quiet, { name: `mine${i}`, at: new Date() })).name);
      }
      // Followed until all seven are read: a transaction open elsewhere on the server holds the
      // readable end back (the reader then gets a short page and waits), never past an event.
      const seen: string[] = [];
      let at = idle.position;
      await until(`the quiet garden's ${mine.length} events read`, async () => {
        const r = await store.readEvents({ after: at, gardens: [quiet], limit: 3 });
        if (r.events.length === 3) assert.equal(r.position, r.events.at(-1)!.position);
        seen.push(...r.events.map((e) => e.data.name));
        at = r.position;
        return seen.length >= mine.length;
      });
      assert.deepEqual(seen, mine);
      const rest = await store.readEvents({ after: at, gardens: [quiet], limit: 3 });
      assert.deepEqual(rest.events, []);
      // No gardens at all: nothing, from wherever the reader was.
      assert.deepEqual((await store.readEvents({ after: start, gardens: [], limit: 3 })).events, []);
    });

    it("deliveries go to the endpoints of the garden's members (and admin ones), as the event is written", async () => {
      const o = user();
      const viewer = user();
      const outsider = user();
      const g = await garden(store, o, [[viewer, 'viewer']]);
      const mine = await endpoint(store, o);
      const viewers = await endpoint(store, viewer);
      const outsiders = await endpoint(store, outsider);
      const admins = await endpoint(store, outsider, { admin: true });
      const disabled = await endpoint(store, viewer, { status: 'disabled' });
      const deletesOnly = await endpoint(store, viewer, { events: ['plant.deleted'] });
      const ours = new Set([mine, viewers, outsiders, admins, disabled, deletesOnly].map((e) => e.id));
      const p = await plant(store, o, g, { at: new Date() });
      // Joining after the event was written brings none of it.
      assert.ok('ok' in (await store.putMember(g, o, outsider, 'viewer', new Date())));
      const jobs = (await claimAll(store)).filter((j) => ours.has(j.endpoint.id));
      assert.deepEqual(jobs.map((j) => j.endpoint.id).sort(), [mine.id, viewers.id, admins.id].sort());
      for (const j of jobs) {
        assert.equal(j.event.type, 'plant.created');
        assert.equal(j.event.garden, g);
        assert.deepEqual(j.event.data, { id: p.id, name: p.name, garden: g });
        assert.equal(j.attempts, 0);
      }
      // A delete now reaches the new member too, and the endpoint that wants deletes.
      assert.deepEqual(await store.deletePlant(p.id, o, { at: new Date() }), { ok: true });
      const later = (await claimAll(store)).filter((j) => ours.has(j.endpoint.id));
      assert.deepEqual(
        later.map((j) => j.endpoint.id).sort(),
        [mine.id, viewers.id, admins.id, outsiders.id, deletesOnly.id].sort(),
      );
    });

    it("a delivery whose endpoint's owner left the garden is not sent: it ends failed, logged with the reason", async () => {
      const o = user();
      const leaver = user();
      const rejoiner = user();
      const g = await garden(store, o, [
        [leaver, 'editor'],
        [rejoiner, 'viewer'],
      ]);
      const leavers = await endpoint(store, leaver);
      const rejoiners = await endpoint(store, rejoiner);
      const admins = await endpoint(store, leaver, { admin: true });
      const ours = new Set([leavers.id, rejoiners.id, admins.id]);
      const p = await plant(store, o, g, { at: new Date() });
      assert.ok('ok' in (await store.removeMember(g, leaver, leaver)));
      assert.ok('ok' in (await store.removeMember(g, o, rejoiner)));
      assert.ok('ok' in (await store.putMember(g, o, rejoiner, 'viewer', new Date())));
      const claimedAt = new Date(Date.now() + 365 * 86_400_000);
      const jobs = (await claimAll(store, claimedAt)).filter((j) => ours.has(j.endpoint.id));
      // Admin endpoints see every garden; a member again by delivery time gets it.
      assert.deepEqual(jobs.map((j) => j.endpoint.id).sort(), [rejoiners.id, admins.id].sort());
      const log = await store.listAttempts(leavers.id, { limit: 10, beforeId: null });
      assert.equal(log.length, 1);
      const [attempt] = log;
      assert.deepEqual(
        { ...attempt!, id: '', deliveryId: '', durationMs: 0 },
        {
          id: '',
          deliveryId: '',
          endpointId: leavers.id,
          eventId: jobs[0]!.event.id,
          eventType: 'plant.created',
          attempt: 1,
          at: claimedAt,
          status: null,
          outcome: 'failed',
          error: `not sent: the endpoint's owner is no longer a member of garden ${g}`,
          durationMs: 0,
          nextAttemptAt: null,
        },
      );
      // Ended: not claimed again (the others' leases run out and they come again), and the endpoint
      // is not marked failing for what it never got.
      const again = await claimAll(store, new Date(claimedAt.getTime() + 3_600_000));
      assert.deepEqual(
        again
          .filter((j) => ours.has(j.endpoint.id))
          .map((j) => j.endpoint.id)
          .sort(),
        [rejoiners.id, admins.id].sort(),
      );
      const after = await store.getEndpoint(leavers.id);
      assert.equal(after?.status, 'enabled');
      assert.equal(after?.failingSince, null);
      assert.deepEqual(await store.listAttempts(rejoiners.id, { limit: 10, beforeId: null }), []);
      assert.ok(jobs.every((j) => j.event.data.id === p.id));
    });

    it('recover queues again only the events of gardens the owner is a member of now (admin: every one)', async () => {
      const o = user();
      const m = user();
      const [stay, left, never] = [
        await garden(store, o, [[m, 'viewer']]),
        await garden(store, o, [[m, 'editor']]),
        await garden(store, o),
      ];
      // Events at a time of their own, far ahead, so that `since` takes only these.
      const since = new Date(Date.now() + 3 * 365 * 86_400_000 + Math.floor(Math.random() * 1e9));
      const head = await store.headPosition();
      for (const [i, g] of [stay, left, never, stay, left].entries()) {
        await plant(store, o, g, { name: `r${i}`, at: new Date(since.getTime() + i * 1000) });
      }
      assert.ok('ok' in (await store.removeMember(left, o, m)));
      const events = await eventsAfter(head, [stay, left, never], 5);
      // Endpoints made after the events: none of them was queued at the time.
      const members = await endpoint(store, m);
      const admins = await endpoint(store, user(), { admin: true });
      const now = new Date();
      assert.equal(await store.recoverDeliveries(members.id, since, now), 2);
      assert.equal(await store.recoverDeliveries(admins.id, since, now), 5);
      // Already queued: not again.
      assert.equal(await store.recoverDeliveries(members.id, since, now), 0);
      const jobs = (await claimAll(store, new Date(now.getTime() + 1000))).filter(
        (j) => j.endpoint.id === members.id || j.endpoint.id === admins.id,
      );
      const of = (id: string) =>
        jobs
          .filter((j) => j.endpoint.id === id)
          .map((j) => j.event.id)
          .sort();
      assert.deepEqual(
        of(members.id),
        events
          .filter((e) => e.garden === stay)
          .map((e) => e.id)
          .sort(),
      );
      assert.deepEqual(of(admins.id), events.map((e) => e.id).sort());
    });

    it('admin reach lasts while the token that made the endpoint is valid: once revoked, only its owner’s events', async () => {
      const a = user('admin');
      const o = user();
      const own = await garden(store, a);
      const g = await garden(store, o);
      const { record } = await createToken(store, {
        user: a,
        scopes: ['plants:admin'],
        name: null,
        expiresInMs: null,
      });
      const admins = await endpoint(store, a, { admin: true, adminTokenId: record.id });
      const since = new Date(Date.now() - 1000);
      const queued = await plant(store, o, g, { at: new Date() });
      assert.deepEqual(await store.revokeToken(record.id, new Date()), { ok: true });
      const after = await plant(store, o, g, { at: new Date() });
      const mine = await plant(store, a, own, { at: new Date() });
      // Queued while the token was valid, claimed after: not sent, and the log says why.
      const claimedAt = new Date(Date.now() + 1000);
      const jobs = (await claimAll(store, claimedAt)).filter((j) => j.endpoint.id === admins.id);
      assert.deepEqual(
        jobs.map((j) => j.event.data.id),
        [mine.id],
        'the revoked token’s reach: only the owner’s event goes out, the others were not queued or not sent',
      );
      const log = await store.listAttempts(admins.id, { limit: 10, beforeId: null });
      assert.equal(log.length, 1);
      assert.equal(log[0]!.outcome, 'failed');
      assert.equal(log[0]!.error, `${NOT_SENT_ADMIN}${g}`);
      assert.ok(after.id !== queued.id);
      // Recover replays the owner's events only (the job above is still leased: not again).
      assert.equal(await store.recoverDeliveries(admins.id, since, new Date()), 0);
    });

    it('admin reach ends at the credential’s expiry (a JWT’s exp): fan-out, delivery and recover', async () => {
      const a = user('admin');
      const o = user();
      const own = await garden(store, a);
      const g = await garden(store, o);
      // Events at times of their own, far ahead: the reach ends between them.
      const t0 = Date.now() + 5 * 365 * 86_400_000 + Math.floor(Math.random() * 1e9);
      const until = new Date(t0 + 10_000);
      const admins = await endpoint(store, a, { admin: true, adminUntil: until });
      const before = await plant(store, o, g, { name: 'before', at: new Date(t0) });
      const ownBefore = await plant(store, a, own, { name: 'own before', at: new Date(t0 + 1000) });
      const afterExp = await plant(store, o, g, { name: 'after', at: new Date(t0 + 20_000) });
      const ownAfter = await plant(store, a, own, { name: 'own after', at: new Date(t0 + 21_000) });
      // Before the expiry: what was queued goes out, the other user's event included.
      const early = (await claimAll(store, new Date(t0 + 5_000))).filter((j) => j.endpoint.id === admins.id);
      assert.deepEqual(
        early.map((j) => j.event.data.id),
        [before.id, ownBefore.id],
      );
      // After it: the owner's events only. The earlier ones' leases ran out and they come again,
      // but the other user's is ended unsent now; its later one was never queued.
      const late = (await claimAll(store, new Date(t0 + 200_000))).filter((j) => j.endpoint.id === admins.id);
      assert.deepEqual(late.map((j) => j.event.data.id).sort(), [ownBefore.id, ownAfter.id].sort());
      const log = await store.listAttempts(admins.id, { limit: 10, beforeId: null });
      assert.deepEqual(
        log.map((a) => [a.outcome, a.error]),
        [['failed', `${NOT_SENT_ADMIN}${g}`]],
      );
      assert.ok(!late.some((j) => j.event.data.id === afterExp.id));
      // Recover after the expiry: the owner's events only (none of them is unacknowledged and unqueued).
      assert.equal(await store.recoverDeliveries(admins.id, new Date(t0 - 1), new Date(t0 + 300_000)), 0);
      // Before it: every user's (the other user's later event, not queued until now).
      const fresh = await endpoint(store, a, { admin: true, adminUntil: until });
      assert.equal(await store.recoverDeliveries(fresh.id, new Date(t0 - 1), new Date(t0 + 5_000)), 4);
    });
  });
}

// Finished attempts are recorded many in one write: each attempt is logged exactly once, each
// delivery rescheduled or ended as its own attempt says (unless its lease was lost), and each
// endpoint's record left as the attempts in their order would have left it.
for (const engine of ENGINES) {
  describe(`store finishDeliveries: ${engine.name}`, { skip: engine.skip }, () => {
    let store: Store;
    before(async () => {
      store = await engine.open();
    });
    after(async () => {
      await store?.close();
    });

    it('records a batch of attempts, each exactly once, in one write', async () => {
      const o = user();
      const g = await garden(store, o);
      const ok = await endpoint(store, o, { events: ['plant.created'] });
      const flaky = await endpoint(store, o, { events: ['plant.created'] });
      const mine = [ok.id, flaky.id];
      for (let i = 0; i < 3; i++) await plant(store, o, g, { name: `b${i}`, at: new Date() });
      const later = new Date(Date.now() + 365 * 86_400_000);
      const claim = (leaseOwner: string) =>
        store
          .claimDeliveries({
            now: later,
            leaseMs: 60_000,
            leaseOwner,
            limit: 1000,
            perEndpoint: 1000,
            skipEndpoints: [],
          })
          .then((jobs) => jobs.filter((j) => mine.includes(j.endpoint.id)));
      const jobs = await until('six deliveries to claim', async () => {
        const got = await claim('batch-a');
        return got.length === 6 && got;
      });
      const t0 = Date.now();
      const at = (k: number) => new Date(t0 + k * 1000);
      const okJobs = jobs.filter((j) => j.endpoint.id === ok.id);
      const flakyJobs = jobs.filter((j) => j.endpoint.id === flaky.id);
      // ok: three successes. flaky: fails, succeeds, fails (failing since that last failure); its
      // last attempt comes from a dispatcher that lost the lease: logged, its delivery left alone.
      const outcomes: ['succeeded' | 'retrying', string][] = [
        ['retrying', 'batch-a'],
        ['succeeded', 'batch-a'],
        ['retrying', 'someone-else'],
      ];
      const batch = [
        ...okJobs.map((j, k) => ({ j, k, outcome: 'succeeded' as const, leaseOwner: 'batch-a' })),
        ...flakyJobs.map((j, k) => ({ j, k: 10 + k, outcome: outcomes[k]![0], leaseOwner: outcomes[k]![1] })),
      ];
      await store.finishDeliveries(
        batch.map(({ j, k, outcome, leaseOwner }) => ({
          deliveryId: j.id,
          leaseOwner,
          disableEndpoint: null,
          attempt: {
            deliveryId: j.id,
            endpointId: j.endpoint.id,
            eventId: j.event.id,
            eventType: j.event.type,
            attempt: j.attempts + 1,
            at: at(k),
            status: outcome === 'succeeded' ? 204 : 500,
            outcome,
            error: outcome === 'succeeded' ? null : 'the receiver answered 500',
            durationMs: 3,
            nextAttemptAt: outcome === 'retrying' ? at(k) : null,
          },
        })),
      );
      for (const [e, js] of [
        [ok, okJobs],
        [flaky, flakyJobs],
      ] as const) {
        const logged = await store.listAttempts(e.id, { limit: 100, beforeId: null });
        assert.deepEqual(
          logged.map((a) => a.deliveryId).sort(),
          js.map((j) => j.id).sort(),
          'every attempt logged, once',
        );
        assert.ok(logged.every((a) => a.attempt === 1));
      }
      const okNow = await store.getEndpoint(ok.id);
      assert.equal(okNow?.lastSuccessAt?.getTime(), at(2).getTime());
      assert.equal(okNow?.failingSince, null);
      const flakyNow = await store.getEndpoint(flaky.id);
      assert.equal(flakyNow?.lastSuccessAt?.getTime(), at(11).getTime());
      assert.equal(flakyNow?.failingSince?.getTime(), at(12).getTime());
      // Due again: the first flaky one (retrying). The succeeded ones are done, and the one whose
      // lease was lost stays leased to batch-a until its lease runs out.
      const again = await claim('batch-b');
      assert.deepEqual(
        again.map((j) => [j.id, j.attempts]),
        [[flakyJobs[0]!.id, 1]],
      );
    });
  });
}
