// Contract 13.1 and 13.3 through the API: every event carries who did it (actor, and the request's
// X-Request-Id as its answer gave it), on the live stream and in webhook deliveries; a garden's
// membership changes are events (member.added, member.changed, member.removed) shown to the
// garden's members as plant events are, never to anyone else. A member removed (or leaving) is no
// member when the event is read: its own stream and endpoints do not get that member.removed.
// Negatives are proven with a later sentinel event, never after a pause.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { type Client, type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  homeOf,
  JSON_TYPE,
  MERGE,
  newGarden,
  newPlant,
  putMember,
  removeMember,
} from '../helpers/gardens.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { eventStreams, type SseReader } from '../helpers/sse.js';
import { until } from '../helpers/wait.js';
import { delivered, register } from '../helpers/webhooks.js';

const T = { timeout: 30_000 };

interface Body {
  type: string;
  timestamp: string;
  actor: string | null;
  requestId: string | null;
  data: Record<string, unknown>;
}

const bodies = (s: SseReader): Body[] =>
  s.messages.filter((m) => m.data !== undefined).map((m) => JSON.parse(m.data!) as Body);
/** Waits until the stream shows an event `pick` finds; answers every event so far. */
const streamedUntil = (s: SseReader, what: string, pick: (b: Body) => boolean) =>
  until(what, () => {
    const got = bodies(s);
    return got.some(pick) && got;
  });
const named = (name: string) => (b: Body) => b.data.name === name;
const members = (got: Body[]) => got.filter((b) => b.type.startsWith('member.'));
const rid = (res: LightMyRequestResponse) => res.headers['x-request-id'] as string;

for (const engine of ENGINES) {
  describe(`who did it, and membership events (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    let base = '';
    const streams = eventStreams(() => base);
    const receivers: Receiver[] = [];
    const stream = async (c: Client) => {
      const r = await streams.open(c.token);
      assert.equal(r.status, 200);
      return r;
    };
    const receiver = async () => {
      const r = await startReceiver();
      receivers.push(r);
      return r;
    };
    before(async () => {
      h = await harness(
        engine,
        { webhookAllowPrivate: true, webhookRetrySchedule: [60, 60, 60], webhookTimeout: 1_000 },
        {
          // One delivery at a time to an endpoint, in log order: a later one seen means the earlier were sent.
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

    it('a create, change and delete carry their actor and X-Request-Id on the live stream', T, async () => {
      const o = await h.user();
      const e = await h.user();
      const g = await newGarden(o, 'Who did it');
      const s = await stream(o);
      assert.equal((await putMember(o, g, e.user, 'editor')).statusCode, 201);
      const made = await e.request({
        method: 'POST',
        url: `/gardens/${g}/plants`,
        headers: { ...JSON_TYPE, 'x-request-id': 'mine-1' },
        payload: '{"name":"Fern"}',
      });
      assert.equal(made.statusCode, 201);
      assert.equal(rid(made), 'mine-1');
      const id = locationId(made);
      const changed = await o.request({
        method: 'PATCH',
        url: `/plants/${id}`,
        headers: { ...MERGE, 'if-match': String(made.headers.etag) },
        payload: '{"name":"Boston fern"}',
      });
      assert.equal(changed.statusCode, 200);
      const gone = await e.request({ method: 'DELETE', url: `/plants/${id}` });
      assert.equal(gone.statusCode, 204);
      const got = await streamedUntil(s, 'the delete', (b) => b.type === 'plant.deleted');
      assert.deepEqual(
        got.filter((b) => b.type.startsWith('plant.')).map((b) => [b.type, b.actor, b.requestId]),
        [
          ['plant.created', e.user, 'mine-1'],
          ['plant.updated', o.user, rid(changed)],
          ['plant.deleted', e.user, rid(gone)],
        ],
      );
      // A request id the service made (none sent): a UUID, the one the answer carried.
      assert.match(rid(gone), /^[0-9a-f-]{36}$/);
    });

    it('membership changes reach the garden’s members on the stream, never a stranger', T, async () => {
      const o = await h.user();
      const m = await h.user();
      const stranger = await h.user();
      const g = await newGarden(o, 'Membership');
      const [so, sm, sx] = [await stream(o), await stream(m), await stream(stranger)];
      const added = await putMember(o, g, m.user, 'viewer');
      assert.equal(added.statusCode, 201);
      // The role it has already: 200, and no event.
      assert.equal((await putMember(o, g, m.user, 'viewer')).statusCode, 200);
      const promoted = await putMember(o, g, m.user, 'editor');
      assert.equal(promoted.statusCode, 200);
      // A member sees what it may when the stream reads: m's stream has read these before m leaves.
      await streamedUntil(sm, 'the change on m’s stream', (b) => b.type === 'member.changed');
      const left = await removeMember(m, g, m.user);
      assert.equal(left.statusCode, 204);
      // Refused: no event (the last owner).
      assert.equal((await putMember(o, g, o.user, 'viewer')).statusCode, 409);
      await newPlant(o, g, { name: 'O sentinel' });
      const want = [
        ['member.added', o.user, rid(added), { garden: g, user: m.user, role: 'viewer' }],
        [
          'member.changed',
          o.user,
          rid(promoted),
          { garden: g, user: m.user, role: 'editor', previous: 'viewer' },
        ],
        ['member.removed', m.user, rid(left), { garden: g, user: m.user, role: 'editor' }],
      ];
      const cause = (b: Body) => [b.type, b.actor, b.requestId, b.data];
      assert.deepEqual(members(await streamedUntil(so, 'O sentinel', named('O sentinel'))).map(cause), want);
      // m saw its membership while it had one; not its own removal, read after it was gone.
      const mHome = await homeOf(m);
      await newPlant(m, mHome, { name: 'M sentinel' });
      assert.deepEqual(
        members(await streamedUntil(sm, 'M sentinel', named('M sentinel'))).map(cause),
        want.slice(0, 2),
      );
      const xHome = await homeOf(stranger);
      await newPlant(stranger, xHome, { name: 'X sentinel' });
      assert.deepEqual(members(await streamedUntil(sx, 'X sentinel', named('X sentinel'))), []);
      // The SSE message names the type and the id, as for a plant event.
      const msg = so.messages.find((x) => x.event === 'member.changed');
      assert.match(msg?.id ?? '', /^evt_/);
    });

    it(
      'membership changes are delivered to the members’ endpoints with who did it; not to a stranger’s',
      T,
      async () => {
        const o = await h.user();
        const m = await h.user();
        const stranger = await h.user();
        const g = await newGarden(o, 'Hooked members');
        const [ro, rm, rx] = [await receiver(), await receiver(), await receiver()];
        await register(o, { url: ro.url });
        await register(m, { url: rm.url });
        await register(stranger, { url: rx.url });
        const onlyRemovals = await receiver();
        await register(o, { url: onlyRemovals.url, events: ['member.removed'] });
        const added = await putMember(o, g, m.user, 'editor');
        assert.equal(added.statusCode, 201);
        // Delivered while m is a member (an endpoint gets what its owner may see when it is sent).
        await until('member.added at m’s endpoint', () =>
          rm.received.some((d) => JSON.parse(d.body).type === 'member.added'),
        );
        const removed = await removeMember(o, g, m.user);
        assert.equal(removed.statusCode, 204);
        await newPlant(o, g, { name: 'Sentinel' });
        await delivered(ro, 'plant.created', 'Sentinel');
        const kinds = (r: Receiver) =>
          r.received
            .map((d) => JSON.parse(d.body) as Body)
            .filter((b) => b.type.startsWith('member.'))
            .map((b) => [b.type, b.actor, b.requestId, b.data.user, b.data.role]);
        assert.deepEqual(
          kinds(ro).sort(),
          [
            ['member.added', o.user, rid(added), m.user, 'editor'],
            ['member.removed', o.user, rid(removed), m.user, 'editor'],
          ].sort(),
        );
        await until('the removal at the filtered endpoint', () => onlyRemovals.received.length > 0);
        // m's endpoint: its own member.added (a member from that moment); its removal is not its to see.
        const mHome = await homeOf(m);
        await newPlant(m, mHome, { name: 'M sentinel' });
        await delivered(rm, 'plant.created', 'M sentinel');
        assert.deepEqual(kinds(rm), [['member.added', o.user, rid(added), m.user, 'editor']]);
        const xHome = await homeOf(stranger);
        await newPlant(stranger, xHome, { name: 'X sentinel' });
        await delivered(rx, 'plant.created', 'X sentinel');
        assert.deepEqual(kinds(rx), []);
        await newPlant(o, g, { name: 'Second sentinel' });
        await delivered(ro, 'plant.created', 'Second sentinel');
        assert.deepEqual(
          onlyRemovals.received.map((d) => JSON.parse(d.body).type),
          ['member.removed'],
        );
      },
    );
  });
}
