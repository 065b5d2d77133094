import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createToken } from '../../src/identity/tokens.js';
import {
  type DeliveryJob,
  type EventRecord,
  type FinishedAttempt,
  NOT_SENT_ADMIN,
  type Store,
} from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';
import { plantOf } from '../helpers/events.js';
import { claimAll, endpoint, garden, plant, takeAll, user } from '../helpers/gardens.js';
import { logSettled } from '../helpers/log.js';
import { until } from '../helpers/wait.js';

// Events in gardens, on every engine (contract 8, version 3): the log read by gardens, webhook
// deliveries read from the log for the endpoints of the garden's members (members now, and when the
// event was written), the membership asked again when a queued delivery is claimed, and recover by
// the memberships of now.

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
        seen.push(...r.events.map((e) => plantOf(e.data).name));
        at = r.position;
        return seen.length >= mine.length;
      });
      assert.deepEqual(seen, mine);
      const rest = await store.readEvents({ after: at, gardens: [quiet], limit: 3 });
      assert.deepEqual(rest.events, []);
      // No gardens at all: nothing, from wherever the reader was.
      assert.deepEqual((await store.readEvents({ after: start, gardens: [], limit: 3 })).events, []);
    });

    it("deliveries come from the log to the endpoints of the garden's members (and admin ones)", async () => {
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
      // Times a second apart: membership is compared with the event's time, to the millisecond.
      const t0 = Date.now();
      const p = await plant(store, o, g, { at: new Date(t0) });
      // Joining after the event was written brings none of it.
      assert.ok('ok' in (await store.putMember(g, o, outsider, 'viewer', new Date(t0 + 1000))));
      const jobs = (await takeAll(store)).filter((j) => ours.has(j.endpoint.id));
      assert.deepEqual(jobs.map((j) => j.endpoint.id).sort(), [mine.id, viewers.id, admins.id].sort());
      for (const j of jobs) {
        assert.equal(j.id, null, 'a first attempt from the log');
        assert.equal(j.event.type, 'plant.created');
        assert.equal(j.event.garden, g);
        assert.deepEqual(j.event.data, { id: p.id, name: p.name, garden: g });
        assert.equal(j.attempts, 0);
      }
      // A delete now reaches the new member too, and the endpoint that wants deletes; the event
      // taken already is not taken again.
      assert.deepEqual(await store.deletePlant(p.id, o, { at: new Date(t0 + 2000) }), { ok: true });
      const later = (await takeAll(store)).filter((j) => ours.has(j.endpoint.id));
      assert.deepEqual(
        later.map((j) => j.endpoint.id).sort(),
        [mine.id, viewers.id, admins.id, outsiders.id, deletesOnly.id].sort(),
      );
      assert.ok(later.every((j) => j.event.type === 'plant.deleted'));
      // Nothing passed over was logged as an attempt.
      for (const e of [outsiders, disabled, deletesOnly]) {
        assert.deepEqual(await store.listAttempts(e.id, { limit: 10, beforeId: null }), []);
      }
    });

    it("an event whose endpoint's owner left the garden is not sent; a queued retry of one ends failed, logged", async () => {
      const o = user();
      const leaver = user();
      const rejoiner = user();
      const retrier = user();
      const g = await garden(store, o, [
        [leaver, 'editor'],
        [rejoiner, 'viewer'],
        [retrier, 'viewer'],
      ]);
      const leavers = await endpoint(store, leaver);
      const rejoiners = await endpoint(store, rejoiner);
      const admins = await endpoint(store, leaver, { admin: true });
      const retriers = await endpoint(store, retrier);
      const ours = new Set([leavers.id, rejoiners.id, admins.id]);
      const p = await plant(store, o, g, { at: new Date() });
      // The retrier's first attempt fails while it is a member: its retry is queued.
      const t0 = Date.now() + 365 * 86_400_000;
      const [first] = (await claimAll(store, new Date(t0), 'retry-holder')).filter(
        (j) => j.endpoint.id === retriers.id,
      );
      assert.ok(first);
      await store.finishDeliveries(
        [attemptOf(first, 'retry-holder', 'retrying', new Date(t0 + 1000), new Date(t0 + 2000))],
        [
          {
            endpointId: retriers.id,
            leaseOwner: 'retry-holder',
            position: first.event.position,
            leaseUntil: null,
          },
        ],
      );
      assert.ok('ok' in (await store.removeMember(g, leaver, leaver)));
      assert.ok('ok' in (await store.removeMember(g, o, rejoiner)));
      assert.ok('ok' in (await store.removeMember(g, o, retrier)));
      assert.ok('ok' in (await store.putMember(g, o, rejoiner, 'viewer', new Date())));
      // After the first claim's leases ran out.
      const claimedAt = new Date(t0 + 120_000);
      const jobs = (await claimAll(store, claimedAt)).filter((j) => ours.has(j.endpoint.id));
      // Admin endpoints see every garden; one whose owner is no member now, or was not one when the
      // event was written (a member again since), does not: passed over, logging nothing.
      assert.deepEqual(
        jobs.map((j) => j.endpoint.id),
        [admins.id],
      );
      assert.deepEqual(await store.listAttempts(leavers.id, { limit: 10, beforeId: null }), []);
      assert.deepEqual(await store.listAttempts(rejoiners.id, { limit: 10, beforeId: null }), []);
      // The queued retry: ended unsent, logged with the reason, its endpoint not marked failing for it.
      const log = await store.listAttempts(retriers.id, { limit: 10, beforeId: null });
      assert.equal(log.length, 2);
      const [attempt] = log;
      assert.ok(attempt!.deliveryId !== null, 'the queued delivery’s attempt');
      assert.deepEqual(
        { ...attempt!, id: '', deliveryId: '', durationMs: 0 },
        {
          id: '',
          deliveryId: '',
          endpointId: retriers.id,
          eventId: first.event.id,
          eventType: 'plant.created',
          attempt: 2,
          at: claimedAt,
          status: null,
          outcome: 'failed',
          error: `not sent: the endpoint's owner is no longer a member of garden ${g}`,
          durationMs: 0,
          nextAttemptAt: null,
        },
      );
      assert.equal(log[1]!.deliveryId, null, 'the first attempt came from the log');
      // Ended: not claimed again; the admin's lease runs out and its event comes again (it was not
      // acknowledged: at least once).
      const again = await claimAll(store, new Date(claimedAt.getTime() + 3_600_000));
      assert.deepEqual(
        again
          .filter((j) => ours.has(j.endpoint.id) || j.endpoint.id === retriers.id)
          .map((j) => j.endpoint.id),
        [admins.id],
      );
      const after = await store.getEndpoint(leavers.id);
      assert.equal(after?.status, 'enabled');
      assert.equal(after?.failingSince, null);
      assert.ok(jobs.every((j) => plantOf(j.event.data).id === p.id));
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
      // Endpoints made after the events: their logs start after them, nothing of them is queued.
      const members = await endpoint(store, m);
      const admins = await endpoint(store, user(), { admin: true });
      const now = new Date();
      assert.equal(await store.recoverDeliveries(members.id, since, now), 2);
      assert.equal(await store.recoverDeliveries(admins.id, since, now), 5);
      // Already queued: not again.
      assert.equal(await store.recoverDeliveries(members.id, since, now), 0);
      const jobs = (await claimAll(store, new Date(now.getTime() + 1000), 'recoverer')).filter(
        (j) => j.endpoint.id === members.id || j.endpoint.id === admins.id,
      );
      assert.ok(
        jobs.every((j) => j.id !== null && j.attempts === 0),
        'queued deliveries, none from the log',
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
      // Acknowledged ones are not queued again; the others are once their deliveries have ended.
      const [acked, ...rest] = jobs.filter((j) => j.endpoint.id === admins.id);
      const t = new Date(now.getTime() + 2000);
      await store.finishDeliveries([
        attemptOf(acked!, 'recoverer', 'succeeded', t, null),
        ...rest.map((j) => attemptOf(j, 'recoverer', 'failed', t, null)),
      ]);
      assert.equal(await store.recoverDeliveries(admins.id, since, t), 4);
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
      const written = await plant(store, o, g, { at: new Date() });
      // Its first attempt fails while the token is valid: queued for a retry.
      const t0 = Date.now() + 4 * 365 * 86_400_000;
      const [first] = (await claimAll(store, new Date(t0), 'reach-holder')).filter(
        (j) => j.endpoint.id === admins.id,
      );
      assert.equal(first && plantOf(first.event.data).id, written.id);
      await store.finishDeliveries(
        [attemptOf(first!, 'reach-holder', 'retrying', new Date(t0 + 1), new Date(t0 + 2))],
        [
          {
            endpointId: admins.id,
            leaseOwner: 'reach-holder',
            position: first!.event.position,
            leaseUntil: null,
          },
        ],
      );
      assert.deepEqual(await store.revokeToken(record.id, new Date()), { ok: true });
      const after = await plant(store, o, g, { at: new Date() });
      const mine = await plant(store, a, own, { at: new Date() });
      // Claimed after the revocation: the reach is asked at the claim. The queued retry is ended
      // unsent, logged with the reason; the other user's later event is passed over, logging nothing.
      const claimedAt = new Date(t0 + 10_000);
      const jobs = (await claimAll(store, claimedAt)).filter((j) => j.endpoint.id === admins.id);
      assert.deepEqual(
        jobs.map((j) => plantOf(j.event.data).id),
        [mine.id],
        'the revoked token’s reach: only the owner’s event goes out',
      );
      const log = await store.listAttempts(admins.id, { limit: 10, beforeId: null });
      assert.deepEqual(
        log.map((x) => [x.outcome, x.error]),
        [
          ['failed', `${NOT_SENT_ADMIN}${g}`],
          ['retrying', 'the receiver answered 500'],
        ],
      );
      assert.ok(after.id !== written.id);
      // Recover replays the owner's events only, and only up to the endpoint's position (the job
      // above is in its leased window, after it: it comes from the log, not again from recover).
      assert.equal(await store.recoverDeliveries(admins.id, since, new Date()), 0);
    });

    it('admin reach ends at the credential’s expiry (a JWT’s exp): at the claim, and for recover', async () => {
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
      // Before the expiry: every garden's events of the log.
      const early = (await claimAll(store, new Date(t0 + 5_000))).filter((j) => j.endpoint.id === admins.id);
      assert.deepEqual(
        early.map((j) => plantOf(j.event.data).id),
        [before.id, ownBefore.id, afterExp.id, ownAfter.id],
      );
      // After it (the lease ran out, nothing was acknowledged): the owner's events only.
      const late = (await claimAll(store, new Date(t0 + 200_000))).filter((j) => j.endpoint.id === admins.id);
      assert.deepEqual(
        late.map((j) => plantOf(j.event.data).id),
        [ownBefore.id, ownAfter.id],
      );
      assert.deepEqual(await store.listAttempts(admins.id, { limit: 10, beforeId: null }), []);
      // Recover after the expiry: nothing (the owner's events lie after the position: the log has them).
      assert.equal(await store.recoverDeliveries(admins.id, new Date(t0 - 1), new Date(t0 + 300_000)), 0);
      // Before it: every user's, for an endpoint made after them.
      const fresh = await endpoint(store, a, { admin: true, adminUntil: until });
      assert.equal(await store.recoverDeliveries(fresh.id, new Date(t0 - 1), new Date(t0 + 5_000)), 4);
    });
  });
}

/** A finished attempt of `job` by `leaseOwner`. */
function attemptOf(
  job: DeliveryJob,
  leaseOwner: string,
  outcome: 'succeeded' | 'retrying' | 'failed',
  at: Date,
  next: Date | null,
): FinishedAttempt {
  return {
    deliveryId: job.id,
    leaseOwner,
    disableEndpoint: null,
    attempt: {
      deliveryId: job.id,
      endpointId: job.endpoint.id,
      eventId: job.event.id,
      eventType: job.event.type,
      attempt: job.attempts + 1,
      at,
      status: outcome === 'succeeded' ? 204 : 500,
      outcome,
      error: outcome === 'succeeded' ? null : 'the receiver answered 500',
      durationMs: 3,
      nextAttemptAt: next,
    },
  };
}

// Finished attempts are recorded many in one write: each attempt is logged exactly once, each
// delivery rescheduled or ended as its own attempt says (unless its lease was lost), and each
// endpoint's record left as the attempts in their order would have left it. Endpoints' logs are
// leased to one claimer at a time, and what a claimer took and did not report comes again.
for (const engine of ENGINES) {
  describe(`store deliveries from the log: ${engine.name}`, { skip: engine.skip }, () => {
    let store: Store;
    before(async () => {
      store = await engine.open();
    });
    after(async () => {
      await store?.close();
    });

    const claim = async (
      leaseOwner: string,
      now: Date,
      mine: string[],
      more: { windows?: Record<string, string>; perEndpoint?: number; leaseMs?: number } = {},
    ) => {
      await logSettled(store);
      const c = await store.claimDeliveries({
        now,
        leaseMs: more.leaseMs ?? 60_000,
        leaseOwner,
        limit: 1000,
        perEndpoint: more.perEndpoint ?? 1000,
        skipEndpoints: [],
        ...(more.windows ? { windows: more.windows } : {}),
      });
      const jobs = c.jobs.filter((j) => mine.includes(j.endpoint.id));
      return {
        jobs,
        windows: Object.fromEntries(Object.entries(c.windows).filter(([id]) => mine.includes(id))),
      };
    };

    it('a create writes its event only: the log is read by endpoint, after its position', async () => {
      const o = user();
      const g = await garden(store, o);
      const e = await endpoint(store, o);
      const now = new Date(Date.now() + 365 * 86_400_000);
      // An endpoint with nothing new: nothing taken, and no lease kept.
      assert.deepEqual(await claim('a', now, [e.id]), { jobs: [], windows: {} });
      const ps = [];
      for (let i = 0; i < 3; i++) ps.push(await plant(store, o, g, { name: `p${i}`, at: new Date() }));
      const got = await until('three events in the log', async () => {
        const c = await claim('a', now, [e.id], { perEndpoint: 2 });
        return c.jobs.length > 0 && c;
      });
      // perEndpoint bounds one claim; the window reaches the last event taken.
      assert.deepEqual(
        got.jobs.map((j) => plantOf(j.event.data).id),
        [ps[0]!.id, ps[1]!.id],
      );
      assert.deepEqual(got.windows, { [e.id]: got.jobs[1]!.event.position });
      // Read on from the window: the third, then the window reaches as far as the claim looked.
      const next = await claim('a', now, [e.id], { windows: got.windows, perEndpoint: 2 });
      assert.deepEqual(
        next.jobs.map((j) => plantOf(j.event.data).id),
        [ps[2]!.id],
      );
      assert.ok(next.windows[e.id]);
    });

    it('two claimers never get the same event of an endpoint while its lease holds; one that ran out is taken over', async () => {
      const o = user();
      const g = await garden(store, o);
      const e = await endpoint(store, o);
      const mine = [e.id];
      const t0 = Date.now() + 2 * 365 * 86_400_000;
      for (let i = 0; i < 4; i++) await plant(store, o, g, { name: `l${i}`, at: new Date() });
      const a = await until('events to claim', async () => {
        const c = await claim('holder', new Date(t0), mine, { leaseMs: 10_000 });
        return c.jobs.length === 4 && c;
      });
      // Another claimer, at once and after more events: nothing of this endpoint while the lease holds.
      assert.deepEqual((await claim('other', new Date(t0 + 1), mine)).jobs, []);
      const more = await plant(store, o, g, { name: 'l4', at: new Date() });
      assert.deepEqual((await claim('other', new Date(t0 + 9_000), mine)).jobs, []);
      // The holder reads on from its window: the new event only.
      const b = await until('the new event', async () => {
        const c = await claim('holder', new Date(t0 + 9_500), mine, { windows: a.windows, leaseMs: 10_000 });
        return c.jobs.length > 0 && c;
      });
      assert.deepEqual(
        b.jobs.map((j) => plantOf(j.event.data).id),
        [more.id],
      );
      // The holder "crashes": once its lease has run out, the other takes the whole window again
      // (nothing was acknowledged: at least once).
      assert.deepEqual((await claim('other', new Date(t0 + 19_000), mine)).jobs, []);
      const c = await claim('other', new Date(t0 + 20_000), mine);
      assert.deepEqual(
        c.jobs.map((j) => j.event.id),
        [...a.jobs, ...b.jobs].map((j) => j.event.id),
      );
      // The old holder's late report moves nothing (the lease is not its own): the new holder's does.
      await store.finishDeliveries(
        [],
        [{ endpointId: e.id, leaseOwner: 'holder', position: c.windows[e.id]!, leaseUntil: null }],
      );
      assert.deepEqual((await claim('third', new Date(t0 + 21_000), mine)).jobs, []);
      await store.finishDeliveries(
        [],
        [{ endpointId: e.id, leaseOwner: 'other', position: c.windows[e.id]!, leaseUntil: null }],
      );
      assert.deepEqual((await claim('third', new Date(t0 + 21_000), mine)).jobs, []);
      assert.deepEqual(await claim('third', new Date(t0 + 200_000), mine), { jobs: [], windows: {} });
    });

    it("renewLeases extends only the caller's own leases, never shortens one, and answers which it extended", async () => {
      const o = user();
      const g = await garden(store, o);
      const e = await endpoint(store, o);
      const mine = [e.id];
      const t0 = Date.now() + 2 * 365 * 86_400_000;
      for (let i = 0; i < 3; i++) await plant(store, o, g, { name: `r${i}`, at: new Date() });
      const a = await until('events to claim', async () => {
        const c = await claim('holder', new Date(t0), mine, { leaseMs: 10_000 });
        return c.jobs.length === 3 && c;
      });
      const renew = (owner: string, ms: number) =>
        store.renewLeases({ owner, endpoints: [e.id, 'we_nobody'], until: new Date(t0 + ms) });
      assert.deepEqual(await renew('other', 60_000), [], 'not the caller’s lease');
      assert.deepEqual(await renew('holder', 60_000), [e.id]);
      // Past the claim's 10 s, within the renewed 60: nobody else takes it.
      assert.deepEqual((await claim('other', new Date(t0 + 30_000), mine)).jobs, []);
      assert.deepEqual(await renew('holder', 40_000), [e.id], 'still its own');
      assert.deepEqual((await claim('other', new Date(t0 + 50_000), mine)).jobs, [], 'never shortened');
      const taken = await claim('other', new Date(t0 + 61_000), mine);
      assert.deepEqual(
        taken.jobs.map((j) => j.event.id),
        a.jobs.map((j) => j.event.id),
      );
      assert.deepEqual(await renew('holder', 120_000), [], 'taken over: no longer the holder’s');
      await store.finishDeliveries(
        [],
        [{ endpointId: e.id, leaseOwner: 'other', position: taken.windows[e.id]!, leaseUntil: null }],
      );
    });

    it("renewQueuedLeases extends only the caller's own pending queued deliveries, never shortens one, and answers which it extended", async () => {
      const o = user();
      const g = await garden(store, o);
      const e = await endpoint(store, o);
      const mine = [e.id];
      const t0 = Date.now() + 4 * 365 * 86_400_000;
      await plant(store, o, g, { name: 'rq', at: new Date() });
      const first = await until('the event', async () => {
        const c = await claim('d1', new Date(t0), mine, { leaseMs: 10_000 });
        return c.jobs.length === 1 && c;
      });
      // Its first attempt fails: a queued delivery, due 1 s later; the log's position moves past it.
      await store.finishDeliveries(
        [attemptOf(first.jobs[0]!, 'd1', 'retrying', new Date(t0 + 100), new Date(t0 + 1_000))],
        [{ endpointId: e.id, leaseOwner: 'd1', position: first.windows[e.id]!, leaseUntil: null }],
      );
      const held = await claim('holder', new Date(t0 + 1_000), mine, { leaseMs: 10_000 });
      assert.deepEqual(
        held.jobs.map((j) => [j.id === null ? 'log' : 'queued', j.event.id]),
        [['queued', first.jobs[0]!.event.id]],
      );
      const id = held.jobs[0]!.id!;
      const renew = (owner: string, nowMs: number, ms: number, ids = [id, '999999999', 'not-an-id']) =>
        store.renewQueuedLeases({
          owner,
          deliveries: ids,
          now: new Date(t0 + nowMs),
          until: new Date(t0 + ms),
        });
      assert.deepEqual(await renew('other', 2_000, 60_000), [], 'not the caller’s lease');
      assert.deepEqual(await renew('holder', 2_000, 60_000), [id]);
      // Past the claim's 11 s, within the renewed 60: nobody else takes it.
      assert.deepEqual((await claim('other', new Date(t0 + 30_000), mine)).jobs, []);
      assert.deepEqual(await renew('holder', 35_000, 40_000), [id], 'still its own');
      assert.deepEqual((await claim('other', new Date(t0 + 50_000), mine)).jobs, [], 'never shortened');
      assert.deepEqual(await renew('holder', 60_000, 120_000), [], 'run out: anyone may claim it again');
      const taken = await claim('other', new Date(t0 + 61_000), mine);
      assert.deepEqual(
        taken.jobs.map((j) => j.id),
        [id],
      );
      assert.deepEqual(await renew('holder', 62_000, 120_000), [], 'taken over: no longer the holder’s');
      assert.deepEqual(await renew('other', 62_000, 130_000), [id]);
      await store.finishDeliveries([
        attemptOf(taken.jobs[0]!, 'other', 'succeeded', new Date(t0 + 61_100), null),
      ]);
      assert.deepEqual(await renew('other', 62_000, 200_000), [], 'no longer pending');
      assert.deepEqual(await renew('other', 62_000, 200_000, []), []);
    });

    it('a first attempt to retry becomes a queued delivery, retried on schedule; an unfinished one is never passed', async () => {
      const o = user();
      const g = await garden(store, o);
      const e = await endpoint(store, o);
      const mine = [e.id];
      const t0 = Date.now() + 3 * 365 * 86_400_000;
      for (let i = 0; i < 3; i++) await plant(store, o, g, { name: `q${i}`, at: new Date() });
      const got = await until('three events', async () => {
        const c = await claim('d1', new Date(t0), mine, { leaseMs: 10_000 });
        return c.jobs.length === 3 && c;
      });
      const [j0, j1, j2] = got.jobs as [DeliveryJob, DeliveryJob, DeliveryJob];
      // j1 and j2 end (j1 to be retried) while j0 is still in flight: the position may not pass j0,
      // so the lease is kept and the position stays.
      await store.finishDeliveries(
        [
          attemptOf(j1, 'd1', 'retrying', new Date(t0 + 100), new Date(t0 + 5_000)),
          attemptOf(j2, 'd1', 'succeeded', new Date(t0 + 100), null),
        ],
        [],
      );
      // d1 dies: its lease runs out. The window comes again, j0 with it: nothing is lost.
      const again = await claim('d2', new Date(t0 + 10_000), mine, { leaseMs: 10_000 });
      assert.deepEqual(
        again.jobs.map((j) => [j.id === null ? 'log' : 'queued', j.event.id, j.attempts]),
        [
          ['queued', j1.event.id, 1],
          ['log', j0.event.id, 0],
          ['log', j1.event.id, 0],
          ['log', j2.event.id, 0],
        ],
      );
      // d2 finishes them all: the retry (queued by d1 while it held the lease) fails again,
      // to be retried later; the log's first attempts succeed.
      const retry = again.jobs[0]!;
      await store.finishDeliveries(
        [
          attemptOf(retry, 'd2', 'retrying', new Date(t0 + 10_100), new Date(t0 + 60_000)),
          ...again.jobs.slice(1).map((j) => attemptOf(j, 'd2', 'succeeded', new Date(t0 + 10_100), null)),
        ],
        [{ endpointId: e.id, leaseOwner: 'd2', position: again.windows[e.id]!, leaseUntil: null }],
      );
      // Not due before its time; due then, as its third attempt.
      assert.deepEqual((await claim('d3', new Date(t0 + 59_000), mine)).jobs, []);
      const due = await claim('d3', new Date(t0 + 60_000), mine);
      assert.deepEqual(
        due.jobs.map((j) => [j.id, j.event.id, j.attempts]),
        [[retry.id, j1.event.id, 2]],
      );
      // A first attempt to retry reported after the lease was lost queues nothing.
      const late = await plant(store, o, g, { name: 'q3', at: new Date() });
      const l = await until('the late event', async () => {
        const c = await claim('d4', new Date(t0 + 70_000), mine, { leaseMs: 1_000 });
        return c.jobs.length > 0 && c;
      });
      assert.deepEqual(
        l.jobs.map((j) => plantOf(j.event.data).id),
        [late.id],
      );
      const taken = await claim('d5', new Date(t0 + 72_000), mine, { leaseMs: 10_000 });
      assert.deepEqual(
        taken.jobs.map((j) => plantOf(j.event.data).id),
        [late.id],
      );
      await store.finishDeliveries([
        attemptOf(l.jobs[0]!, 'd4', 'retrying', new Date(t0 + 73_000), new Date(t0 + 74_000)),
      ]);
      assert.deepEqual(
        (await claim('d6', new Date(t0 + 75_000), mine)).jobs,
        [],
        'd5 holds the log, nothing queued',
      );
    });

    it('a disabled endpoint gets nothing; enabled again, it goes on from the head (recover has the rest)', async () => {
      const o = user();
      const g = await garden(store, o);
      const e = await endpoint(store, o);
      const mine = [e.id];
      const t0 = Date.now() + 4 * 365 * 86_400_000;
      assert.ok('ok' in (await store.updateEndpoint(e.id, { status: 'disabled', disabledReason: 'test' })));
      const since = new Date(Date.now() - 1000);
      const missed = await plant(store, o, g, { name: 'while disabled', at: new Date() });
      assert.deepEqual((await claim('x', new Date(t0), mine)).jobs, []);
      assert.ok('ok' in (await store.updateEndpoint(e.id, { status: 'enabled', disabledReason: null })));
      const next = await plant(store, o, g, { name: 'after', at: new Date() });
      const got = await until('the event after', async () => {
        const c = await claim('x', new Date(t0 + 1), mine);
        return c.jobs.length > 0 && c;
      });
      assert.deepEqual(
        got.jobs.map((j) => plantOf(j.event.data).id),
        [next.id],
      );
      assert.equal(await store.recoverDeliveries(e.id, since, new Date()), 1);
      const queued = await claim('y', new Date(t0 + 2), mine);
      assert.deepEqual(
        queued.jobs.map((j) => [j.id !== null, plantOf(j.event.data).id]),
        [[true, missed.id]],
      );
    });

    it('records a batch of attempts, each exactly once, in one write', async () => {
      const o = user();
      const g = await garden(store, o);
      const ok = await endpoint(store, o, { events: ['plant.created'] });
      const flaky = await endpoint(store, o, { events: ['plant.created'] });
      const mine = [ok.id, flaky.id];
      for (let i = 0; i < 3; i++) await plant(store, o, g, { name: `b${i}`, at: new Date() });
      const later = new Date(Date.now() + 365 * 86_400_000);
      const first = await until('six deliveries to claim', async () => {
        const got = await claim('batch-a', later, mine);
        return got.jobs.length === 6 && got;
      });
      const jobs = first.jobs;
      const t0 = Date.now();
      const at = (k: number) => new Date(t0 + k * 1000);
      const okJobs = jobs.filter((j) => j.endpoint.id === ok.id);
      const flakyJobs = jobs.filter((j) => j.endpoint.id === flaky.id);
      // ok: three successes. flaky: fails, succeeds, fails (failing since that last failure); its
      // last attempt comes from a dispatcher that lost the lease: logged, and queues no retry.
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
        batch.map(({ j, k, outcome, leaseOwner }) =>
          attemptOf(j, leaseOwner, outcome, at(k), outcome === 'retrying' ? at(k) : null),
        ),
        mine.map((id) => ({
          endpointId: id,
          leaseOwner: 'batch-a',
          position: first.windows[id]!,
          leaseUntil: null,
        })),
      );
      for (const [e, js] of [
        [ok, okJobs],
        [flaky, flakyJobs],
      ] as const) {
        const logged = await store.listAttempts(e.id, { limit: 100, beforeId: null });
        assert.deepEqual(
          logged.map((a) => a.eventId).sort(),
          js.map((j) => j.event.id).sort(),
          'every attempt logged, once',
        );
        assert.ok(logged.every((a) => a.attempt === 1 && a.deliveryId === null));
      }
      const okNow = await store.getEndpoint(ok.id);
      assert.equal(okNow?.lastSuccessAt?.getTime(), at(2).getTime());
      assert.equal(okNow?.failingSince, null);
      const flakyNow = await store.getEndpoint(flaky.id);
      assert.equal(flakyNow?.lastSuccessAt?.getTime(), at(11).getTime());
      assert.equal(flakyNow?.failingSince?.getTime(), at(12).getTime());
      // Due again: the first flaky one, queued as a delivery with its first attempt made. The
      // others are done: the position moved past them, and the lease ended.
      const again = await claim('batch-b', later, mine);
      assert.deepEqual(
        again.jobs.map((j) => [j.id === null, j.event.id, j.attempts]),
        [[false, flakyJobs[0]!.event.id, 1]],
      );
    });
  });
}
