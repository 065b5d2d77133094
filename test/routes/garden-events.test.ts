// Contract 8, version 3: events of plants in gardens. data.garden on every event; the live stream
// shows a member only its gardens' events, and nothing more of a garden once it is removed;
// webhooks go to endpoints whose owner was a member when the event was written and still is when
// it is delivered. Negatives are proven with a later sentinel event, never after a pause.
// Membership changes are events of the garden too (version 5, member.*): what they show and to
// whom is member-events.test.ts's; here the streams and receivers are read for plant events only.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Dispatcher } from '../../src/events/dispatcher.js';
import { type Client, errorBody, type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  homeOf,
  JSON_TYPE,
  MERGE,
  newGarden,
  newPlant,
  plantIn,
  share,
  unshare,
} from '../helpers/gardens.js';
import { type Received, type Receiver, startReceiver } from '../helpers/receiver.js';
import { eventStreams, type SseReader } from '../helpers/sse.js';
import { until } from '../helpers/wait.js';
import {
  acknowledged,
  attempts,
  delivered,
  deliveredMember,
  eventId,
  register,
} from '../helpers/webhooks.js';

const T = { timeout: 30_000 };
const HOUR = 3_600_000;

interface EventBody {
  type: string;
  timestamp: string;
  data: { id: number; name: string; tag?: string; garden: string; previous?: Record<string, unknown> };
}
const eventOf = (d: Received): EventBody => JSON.parse(d.body);
const isPlantEvent = (e: EventBody) => e.type.startsWith('plant.');
const names = (r: Receiver) =>
  r.received
    .map(eventOf)
    .filter(isPlantEvent)
    .map((e) => e.data.name);

const streamed = (s: SseReader) =>
  s.messages
    .filter((m) => m.data !== undefined)
    .map((m) => JSON.parse(m.data!) as EventBody)
    .filter(isPlantEvent);

/** Waits until the stream holds an event of this plant name; returns every event so far. */
const streamedUntil = (s: SseReader, name: string): Promise<EventBody[]> =>
  until(`${name} on the stream`, () => {
    const got = streamed(s);
    return got.some((e) => e.data.name === name) && got;
  });

for (const engine of ENGINES) {
  describe(`events of gardens (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    let base = '';
    const streams = eventStreams(() => base);
    const receivers: Receiver[] = [];
    const stream = async (c: Client, headers: Record<string, string> = {}) => {
      const r = await streams.open(c.token, headers);
      assert.equal(r.status, 200);
      return r;
    };
    const receiver = async () => {
      const r = await startReceiver();
      receivers.push(r);
      return r;
    };
    before(async () => {
      // One delivery at a time to an endpoint, claimed in the order they fell due: once the log
      // shows a later delivery acknowledged, an earlier one queued for that endpoint was sent first.
      h = await harness(
        engine,
        { webhookAllowPrivate: true, webhookRetrySchedule: [60, 60, 60], webhookTimeout: 1_000 },
        {
          dispatcher: { pollMs: 50, jitter: () => 0, perEndpoint: 1 },
          streams: { heartbeatMs: 200, pollMs: 100, maxBufferedBytes: 64 * 1024, stallMs: 1_000 },
        },
      );
      base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    });
    after(async () => {
      streams.closeAll();
      await h?.close();
      for (const r of receivers) await r.close();
    });

    describe('data.garden', () => {
      it(
        'is on plant.created, plant.updated and plant.deleted, on the stream and in webhook deliveries',
        T,
        async () => {
          const o = await h.user();
          const m = await h.user();
          const g = await newGarden(o, 'Evented');
          await share(o, g, m.user, 'viewer');
          const s = await stream(m);
          const r = await receiver();
          const e = await register(m, { url: r.url });
          const p = await newPlant(o, g, { name: 'Fern', tag: 'indoor' });
          const changed = await o.request({
            method: 'PATCH',
            url: `/plants/${p.id}`,
            headers: { ...MERGE, 'if-match': p.etag },
            payload: JSON.stringify({ name: 'Boston fern' }),
          });
          assert.equal(changed.statusCode, 200);
          assert.equal((await o.request({ method: 'DELETE', url: `/plants/${p.id}` })).statusCode, 204);
          const untagged = await newPlant(o, g, { name: 'Bare' });
          const retagged = await o.request({
            method: 'PATCH',
            url: `/plants/${untagged.id}`,
            headers: { ...MERGE, 'if-match': untagged.etag },
            payload: JSON.stringify({ tag: 'new' }),
          });
          assert.equal(retagged.statusCode, 200);
          const want = [
            { type: 'plant.created', data: { id: p.id, name: 'Fern', tag: 'indoor', garden: g } },
            {
              type: 'plant.updated',
              data: { id: p.id, name: 'Boston fern', tag: 'indoor', garden: g, previous: { name: 'Fern' } },
            },
            { type: 'plant.deleted', data: { id: p.id, name: 'Boston fern', tag: 'indoor', garden: g } },
            { type: 'plant.created', data: { id: untagged.id, name: 'Bare', garden: g } },
            {
              type: 'plant.updated',
              data: { id: untagged.id, name: 'Bare', tag: 'new', garden: g, previous: { tag: null } },
            },
          ];
          // m's own member.added may be on its stream too (the stream starts where the log's
          // committed head was when it opened): plant events only, as at the top of the file.
          const got = await until('5 plant events on the stream', () => {
            const plants = s.messages.filter((x) => x.event?.startsWith('plant.'));
            return plants.length >= 5 && plants;
          });
          assert.deepEqual(
            got.map((msg) => {
              const ev = JSON.parse(msg.data!);
              assert.equal(msg.event, ev.type);
              return { type: ev.type, data: ev.data };
            }),
            want,
          );
          const plantDeliveries = () => r.received.filter((d) => isPlantEvent(eventOf(d)));
          await until('5 plant deliveries', () => plantDeliveries().length >= 5);
          await acknowledged(m, e.id, plantDeliveries().map(eventId));
          const byWebhook = plantDeliveries().map((d) => ({ type: eventOf(d).type, data: eventOf(d).data }));
          const key = (x: { type: string; data: { name: string; id: number } }) =>
            `${x.data.id}:${x.type}:${x.data.name}`;
          assert.deepEqual(
            [...byWebhook].sort((a, b) => key(a).localeCompare(key(b))),
            [...want].sort((a, b) => key(a).localeCompare(key(b))),
          );
        },
      );
    });

    describe('the live stream', () => {
      it(
        'shows a member only the events of its gardens; refused requests make none; after removal nothing more of it',
        T,
        async () => {
          const o = await h.user();
          const m = await h.user();
          const v = await h.user();
          const n = await h.user();
          const g = await newGarden(o, 'Streamed');
          const oHome = await homeOf(o);
          const mHome = await homeOf(m);
          await share(o, g, m.user, 'viewer');
          await share(o, g, v.user, 'viewer');
          const s = await stream(m);
          await newPlant(m, mHome, { name: 'M first' });
          const first = await until('M first on the stream', () =>
            s.messages.find((x) => x.event === 'plant.created' && x.data?.includes('"M first"')),
          );
          // Others' gardens, before and between what m may see.
          await newPlant(o, oHome, { name: 'In o’s home' });
          await n.create({ name: 'In n’s home' });
          const inG = await newPlant(o, g, { name: 'In G' });
          // A viewer's refused requests record nothing.
          const refusedAll = [
            await v.request({
              method: 'POST',
              url: `/gardens/${g}/plants`,
              headers: JSON_TYPE,
              payload: '{"name":"By a viewer"}',
            }),
            await v.request({
              method: 'PATCH',
              url: `/plants/${inG.id}`,
              headers: { ...MERGE, 'if-match': inG.etag },
              payload: '{"name":"Changed by a viewer"}',
            }),
            await v.request({ method: 'DELETE', url: `/plants/${inG.id}` }),
          ];
          for (const res of refusedAll) {
            assert.equal(res.statusCode, 403);
            assert.equal(errorBody(res).code, 'insufficient_role');
          }
          await newPlant(m, mHome, { name: 'M own' });
          const before = await streamedUntil(s, 'M own');
          assert.deepEqual(
            before.map((e) => [e.type, e.data.name, e.data.garden]),
            [
              ['plant.created', 'M first', mHome],
              ['plant.created', 'In G', g],
              ['plant.created', 'M own', mHome],
            ],
          );
          // Removed: nothing more of the garden, though the stream stays open.
          await unshare(o, g, m.user);
          await newPlant(o, g, { name: 'After removal' });
          const renamed = await o.request({
            method: 'PATCH',
            url: `/plants/${inG.id}`,
            headers: { ...MERGE, 'if-match': inG.etag },
            payload: '{"name":"In G, renamed after removal"}',
          });
          assert.equal(renamed.statusCode, 200);
          assert.equal((await o.request({ method: 'DELETE', url: `/plants/${inG.id}` })).statusCode, 204);
          await newPlant(m, mHome, { name: 'M sentinel' });
          const afterRemoval = await streamedUntil(s, 'M sentinel');
          assert.deepEqual(
            afterRemoval.map((e) => e.data.name),
            ['M first', 'In G', 'M own', 'M sentinel'],
          );
          // Resuming now shows what m may see now: nothing of G, not even what it saw before.
          const resumed = await stream(m, { 'last-event-id': first!.id! });
          const again = await streamedUntil(resumed, 'M sentinel');
          assert.deepEqual(
            again.map((e) => e.data.name),
            ['M own', 'M sentinel'],
          );
          // The viewer that stayed still sees G's events, the ones after m's removal included.
          const vs = await stream(v, { 'last-event-id': first!.id! });
          const seen = await until('4 plant events on the viewer’s stream', () => {
            const got = streamed(vs);
            return got.length >= 4 && got;
          });
          // And m's removal (contract 13.3), by its owner.
          const removal = vs.messages.find((x) => x.event === 'member.removed');
          assert.deepEqual(JSON.parse(removal!.data!).data, { garden: g, user: m.user, role: 'viewer' });
          assert.deepEqual(
            seen.map((e) => [e.type, e.data.name]),
            [
              ['plant.created', 'In G'],
              ['plant.created', 'After removal'],
              ['plant.updated', 'In G, renamed after removal'],
              ['plant.deleted', 'In G, renamed after removal'],
            ],
          );
          assert.ok(!seen.some((e) => /viewer/.test(e.data.name)), 'no event of a refused request');
        },
      );

      it(
        'in a garden, a replay, a patch that changes nothing, a refusal or a 404 records no event',
        T,
        async () => {
          const o = await h.user();
          const e = await h.user();
          const m = await h.user();
          const g = await newGarden(o, 'Quiet');
          await share(o, g, e.user, 'editor');
          await share(o, g, m.user, 'viewer');
          const s = await stream(m);
          const key = { 'idempotency-key': `k-${Math.random()}` };
          const create = (headers: Record<string, string>, body: unknown) => plantIn(e, g, body, headers);
          const first = await create(key, { name: 'Keyed' });
          assert.equal(first.statusCode, 201);
          const replay = await create(key, { name: 'Keyed' });
          assert.equal(replay.headers['idempotent-replayed'], 'true');
          assert.equal((await create(key, { name: 'Other' })).statusCode, 422);
          assert.equal((await create({}, { id: locationId(first), name: 'Dup' })).statusCode, 409);
          const same = await e.request({
            method: 'PATCH',
            url: `/plants/${locationId(first)}`,
            headers: { ...MERGE, 'if-match': String(first.headers.etag) },
            payload: '{"name":"Keyed"}',
          });
          assert.equal(same.statusCode, 200);
          assert.equal(same.headers.etag, first.headers.etag, 'nothing changed');
          const stale = await e.request({
            method: 'PATCH',
            url: `/plants/${locationId(first)}`,
            headers: { ...MERGE, 'if-match': '"999999"' },
            payload: '{"name":"Stale"}',
          });
          assert.equal(stale.statusCode, 412);
          assert.equal((await e.request({ method: 'DELETE', url: '/plants/999999999998' })).statusCode, 404);
          assert.equal(
            (await m.request({ method: 'DELETE', url: `/plants/${locationId(first)}` })).statusCode,
            403,
          );
          await newPlant(o, g, { name: 'Sentinel' });
          const got = await streamedUntil(s, 'Sentinel');
          assert.deepEqual(
            got.map((x) => [x.type, x.data.name]),
            [
              ['plant.created', 'Keyed'],
              ['plant.created', 'Sentinel'],
            ],
          );
        },
      );

      it('a deleted garden’s events stop for its members at once', T, async () => {
        const o = await h.user();
        const m = await h.user();
        const g = await newGarden(o, 'Deleted');
        const mHome = await homeOf(m);
        await share(o, g, m.user, 'editor');
        const s = await stream(m);
        const p = await newPlant(m, g, { name: 'Will go' });
        await streamedUntil(s, 'Will go');
        assert.equal((await m.request({ method: 'DELETE', url: `/plants/${p.id}` })).statusCode, 204);
        const del = await until('the delete on the stream', () => {
          const got = streamed(s);
          return got.some((e) => e.type === 'plant.deleted') && got;
        });
        assert.equal(del.length, 2);
        assert.equal((await o.request({ method: 'DELETE', url: `/gardens/${g}` })).statusCode, 204);
        await newPlant(m, mHome, { name: 'Sentinel' });
        assert.deepEqual(
          (await streamedUntil(s, 'Sentinel')).map((e) => [e.type, e.data.name, e.data.garden]),
          [
            ['plant.created', 'Will go', g],
            ['plant.deleted', 'Will go', g],
            ['plant.created', 'Sentinel', mHome],
          ],
        );
      });

      it('plants:admin sees every garden’s events, with data.garden', T, async () => {
        const admin = await h.user(['plants:admin']);
        const s = await stream(admin);
        const o = await h.user();
        const g = await newGarden(o, 'Admin watches');
        await newPlant(o, g, { name: 'Admin sees G' });
        const home = await homeOf(o);
        await o.create({ name: 'Admin sees home' });
        const got = await streamedUntil(s, 'Admin sees home');
        const mine = got.filter((e) => e.data.name.startsWith('Admin sees'));
        assert.deepEqual(
          mine.map((e) => [e.data.name, e.data.garden]),
          [
            ['Admin sees G', g],
            ['Admin sees home', home],
          ],
        );
      });
    });

    describe('webhooks', () => {
      it(
        'an endpoint of a member gets its gardens’ events; never those of a garden its owner never belonged to',
        T,
        async () => {
          const o = await h.user();
          const m = await h.user();
          const n = await h.user();
          const g = await newGarden(o, 'Hooked');
          const mHome = await homeOf(m);
          await share(o, g, m.user, 'viewer');
          const r = await receiver();
          const e = await register(m, { url: r.url });
          const since = new Date(Date.now() - 1_000).toISOString();
          await o.create({ name: 'In o’s home' });
          await n.create({ name: 'In n’s home' });
          const other = await newGarden(o, 'Never m’s');
          await newPlant(o, other, { name: 'In a garden m never joined' });
          await newPlant(o, g, { name: 'In G' });
          await newPlant(m, mHome, { name: 'Sentinel' });
          // Everything else fell due before the sentinel: had it been queued, it would have been sent first.
          const log = await acknowledged(m, e.id, [
            eventId(await delivered(r, 'plant.created', 'In G')),
            eventId(await delivered(r, 'plant.created', 'Sentinel')),
          ]);
          assert.deepEqual(names(r), ['In G', 'Sentinel']);
          assert.equal(log.length, 2);
          assert.equal(eventOf(r.received[0]!).data.garden, g);
          assert.equal(eventOf(r.received[1]!).data.garden, mHome);
          // Recover re-sends nothing of gardens m never belonged to (and both of its own are acknowledged).
          const rec = await m.request({
            method: 'POST',
            url: `/webhooks/${e.id}/recover`,
            headers: JSON_TYPE,
            payload: JSON.stringify({ since }),
          });
          assert.equal(rec.statusCode, 202, rec.body);
          // Only m's own member.added: written within `since`, just before the endpoint was made, m a
          // member from that moment (contract 13.3); nothing of gardens m never belonged to.
          assert.equal(rec.json().queued, 1);
          await deliveredMember(r, 'member.added', m.user);
          // An admin endpoint gets them all.
          const ra = await receiver();
          const admin = await h.user(['plants:admin']);
          await register(admin, { url: ra.url });
          await newPlant(o, other, { name: 'For the admin' });
          const d = await delivered(ra, 'plant.created', 'For the admin');
          assert.equal(eventOf(d).data.garden, other);
        },
      );

      it(
        'an endpoint whose owner is removed after the event was written, before a dispatcher read it, gets nothing of it',
        T,
        async () => {
          // No dispatcher in the app: one is started by hand once the owner was removed, as a
          // `deliver` process that reads the log only then.
          const held = await harness(engine, { webhookAllowPrivate: true, webhookDelivery: false });
          const dispatcher = new Dispatcher({
            store: held.store,
            timeoutMs: 1_000,
            schedule: [60_000],
            allowPrivate: true,
            pollMs: 20,
          });
          try {
            const r = await receiver();
            const o = await held.user();
            const m = await held.user();
            const g = await newGarden(o, 'Left');
            const mHome = await homeOf(m);
            await share(o, g, m.user, 'editor');
            const e = await register(m, { url: r.url });
            await newPlant(o, g, { name: 'Written while a member' });
            await unshare(o, g, m.user);
            await newPlant(o, g, { name: 'Written after removal' });
            dispatcher.start();
            // Membership is asked when the log is read: neither event goes out, and (never
            // queued as a delivery) neither is logged as an attempt.
            await newPlant(m, mHome, { name: 'Sentinel' });
            await acknowledged(m, e.id, [eventId(await delivered(r, 'plant.created', 'Sentinel'))]);
            assert.deepEqual(names(r), ['Sentinel'], 'nothing of the garden it left');
            const log = await attempts(m, e.id);
            assert.deepEqual(
              log.map((x) => [x.eventType, x.outcome, x.status]),
              [['plant.created', 'succeeded', 200]],
            );
            // Not a failure of the endpoint: it stays enabled.
            const endpoint = (await m.request({ method: 'GET', url: `/webhooks/${e.id}` })).json();
            assert.equal(endpoint.status, 'enabled');
            assert.equal(endpoint.disabledReason, undefined);
          } finally {
            await dispatcher.stop();
            await held.close();
          }
        },
      );

      it(
        'a delivery retried after its owner was removed is not sent; its first attempt stays in the log',
        T,
        async () => {
          // Retries an hour apart, and a dispatcher clock the test moves past the retry.
          let offset = 0;
          const clocked = await harness(
            engine,
            { webhookAllowPrivate: true, webhookRetrySchedule: [HOUR, HOUR], webhookTimeout: 1_000 },
            { dispatcher: { pollMs: 20, jitter: () => 0, perEndpoint: 1, clock: () => Date.now() + offset } },
          );
          try {
            const r = await receiver();
            r.answers.push({ status: 500 });
            const o = await clocked.user();
            const m = await clocked.user();
            const g = await newGarden(o, 'Retried');
            const mHome = await homeOf(m);
            await share(o, g, m.user, 'viewer');
            const e = await register(m, { url: r.url });
            await newPlant(o, g, { name: 'Failed once' });
            await r.waitFor(1);
            await until('the first attempt in the log', async () => (await attempts(m, e.id)).length === 1);
            await unshare(o, g, m.user);
            offset = 2 * HOUR;
            const log = await until('the retry ended as not sent', async () => {
              const log = await attempts(m, e.id);
              return log.length === 2 && log;
            });
            assert.deepEqual(
              log.map((a) => [a.attempt, a.status, a.outcome]),
              [
                [2, null, 'failed'],
                [1, 500, 'retrying'],
              ],
            );
            assert.ok(log[0]!.error?.startsWith('not sent:'), `error: ${log[0]!.error}`);
            assert.equal(log[0]!.eventId, log[1]!.eventId);
            assert.equal(r.received.length, 1, 'the retry never reached the receiver');
            const endpoint = (await m.request({ method: 'GET', url: `/webhooks/${e.id}` })).json();
            assert.equal(endpoint.status, 'enabled');
            await newPlant(m, mHome, { name: 'Sentinel' });
            await acknowledged(m, e.id, [eventId(await delivered(r, 'plant.created', 'Sentinel'))]);
            assert.deepEqual(names(r), ['Failed once', 'Sentinel']);
          } finally {
            await clocked.close();
          }
        },
      );

      it(
        'an event written before the endpoint’s owner joined never arrives, not even by recover',
        T,
        async () => {
          const o = await h.user();
          const m = await h.user();
          const g = await newGarden(o, 'Joined later');
          const mHome = await homeOf(m);
          const r = await receiver();
          const e = await register(m, { url: r.url });
          const since = new Date(Date.now() - 1_000).toISOString();
          await newPlant(o, g, { name: 'Before joining' });
          await share(o, g, m.user, 'viewer');
          await newPlant(o, g, { name: 'After joining' });
          await newPlant(m, mHome, { name: 'Sentinel' });
          await acknowledged(m, e.id, [
            eventId(await delivered(r, 'plant.created', 'After joining')),
            eventId(await delivered(r, 'plant.created', 'Sentinel')),
          ]);
          assert.deepEqual(names(r), ['After joining', 'Sentinel']);
          // Contract 8: an endpoint gets an event when its owner was a member of the garden when the
          // event was written; recover re-sends what the endpoint has not acknowledged, of those.
          const rec = await m.request({
            method: 'POST',
            url: `/webhooks/${e.id}/recover`,
            headers: JSON_TYPE,
            payload: JSON.stringify({ since }),
          });
          assert.equal(rec.statusCode, 202, rec.body);
          const queued = rec.json().queued;
          await newPlant(m, mHome, { name: 'Second sentinel' });
          await acknowledged(m, e.id, [eventId(await delivered(r, 'plant.created', 'Second sentinel'))]);
          assert.deepEqual(
            { queued, received: names(r) },
            { queued: 0, received: ['After joining', 'Sentinel', 'Second sentinel'] },
            'nothing written before m joined is re-sent',
          );
        },
      );
    });
  });
}
