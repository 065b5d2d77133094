import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { clientTeam, newGarden, plantIn } from '../helpers/gardens.js';
import { eventStreams, openStream } from '../helpers/sse.js';
import { until } from '../helpers/wait.js';

for (const engine of ENGINES) {
  describe(`GET /events, the live stream, on ${engine.name}`, { skip: engine.skip }, () => {
    let h: Harness;
    let base = '';
    const streams = eventStreams(() => base);
    const stream = streams.open;
    before(async () => {
      h = await harness(
        engine,
        {},
        { streams: { heartbeatMs: 200, pollMs: 100, maxBufferedBytes: 64 * 1024, stallMs: 1_000 } },
      );
      base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    });
    after(async () => {
      streams.closeAll();
      await h?.close();
    });

    it('streams the caller’s creates and deletes as they commit, as id/event/data messages', async () => {
      const c = await h.user();
      const other = await h.user();
      const s = await stream(c.token);
      assert.equal(s.status, 200);
      await other.create({ name: 'Not mine' });
      const id = locationId(await c.create({ name: 'Ivy', tag: 'vine' }));
      const garden = (await c.request({ method: 'GET', url: '/gardens' })).json()[0].id;
      await c.request({ method: 'DELETE', url: `/plants/${id}` });
      const got = await s.waitFor(2);
      assert.deepEqual(
        got.map((m) => m.event),
        ['plant.created', 'plant.deleted'],
      );
      for (const m of got) {
        assert.match(m.id!, /^evt_/);
        const body = JSON.parse(m.data!);
        assert.equal(body.type, m.event);
        assert.deepEqual(body.data, { id, name: 'Ivy', tag: 'vine', garden });
        assert.ok(!Number.isNaN(Date.parse(body.timestamp)));
      }
      // The stream follows the log in order: a later event of the caller's comes after anything
      // committed before it, the other user's included.
      await c.create({ name: 'Sentinel' });
      const all = await s.waitFor(3, 10_000);
      assert.deepEqual(
        all.map((m) => JSON.parse(m.data!).data.name),
        ['Ivy', 'Ivy', 'Sentinel'],
        'nothing of another user',
      );
    });

    it('a viewer’s stream carries a shared plant’s delete, restore and purge (contract 13.2), a stranger’s none', async () => {
      const { e, v, n, g } = await clientTeam(h);
      const viewer = await stream(v.token);
      const stranger = await stream(n.token);
      // The stranger's own plant, made last, shows its stream is live and got nothing before it.
      const own = await newGarden(n);
      const made = await plantIn(e, g, { name: 'Shared fern' });
      assert.equal(made.statusCode, 201, made.body);
      const id = locationId(made);
      assert.equal((await e.request({ method: 'DELETE', url: `/plants/${id}` })).statusCode, 204);
      assert.equal((await e.request({ method: 'POST', url: `/trash/${id}/restore` })).statusCode, 200);
      assert.equal((await e.request({ method: 'DELETE', url: `/plants/${id}` })).statusCode, 204);
      assert.equal((await e.request({ method: 'DELETE', url: `/trash/${id}` })).statusCode, 204);
      // A stream starts where the log's committed prefix ended when it opened: on PostgreSQL, while
      // another transaction is open, that can be just before the viewer's own member.added (written
      // by clientTeam), which then comes first. Only the plant's events are compared.
      const plantEvents = () =>
        viewer.messages.filter((m) => m.data !== undefined && m.event?.startsWith('plant.'));
      const got = await until(
        'the plant’s 5 events on the viewer’s stream',
        () => plantEvents().length >= 5 && plantEvents(),
        10_000,
      );
      assert.deepEqual(
        got.map((m) => m.event),
        ['plant.created', 'plant.deleted', 'plant.restored', 'plant.deleted', 'plant.purged'],
      );
      const others = viewer.messages.filter((m) => m.data !== undefined && !m.event?.startsWith('plant.'));
      assert.ok(
        others.every((m) => m.event === 'member.added' && JSON.parse(m.data!).data.user === v.user),
        `nothing but the viewer's own membership besides: ${others.map((m) => m.event).join(', ')}`,
      );
      const bodies = got.map((m) => JSON.parse(m.data!));
      for (const b of bodies) assert.equal(b.actor, e.user, `${b.type}: the editor did it`);
      assert.deepEqual(bodies[2].data, { id, name: 'Shared fern', garden: g });
      assert.deepEqual(bodies[4].data, { id, garden: g });
      assert.equal((await plantIn(n, own, { name: 'Stranger sentinel' })).statusCode, 201);
      const theirs = await stranger.waitFor(1, 10_000);
      assert.deepEqual(
        theirs.map((m) => JSON.parse(m.data!).data.name),
        ['Stranger sentinel'],
        'nothing of a garden the stranger is not in',
      );
    });

    it('the 200 carries the RateLimit-* headers its OpenAPI declares, counted like any request', async () => {
      const c = await h.user();
      const abort = new AbortController();
      try {
        const res = await fetch(`${base}/events`, {
          headers: { authorization: `Bearer ${c.token}`, accept: 'text/event-stream' },
          signal: abort.signal,
        });
        assert.equal(res.status, 200);
        assert.match(String(res.headers.get('content-type')), /^text\/event-stream/);
        assert.equal(res.headers.get('ratelimit-limit'), '6000');
        assert.equal(res.headers.get('ratelimit-remaining'), '5999');
        assert.match(String(res.headers.get('ratelimit-reset')), /^[1-9][0-9]*$/);
        assert.match(String(res.headers.get('x-request-id')), /.+/);
      } finally {
        abort.abort();
      }
    });

    it('plants:admin sees every user’s events', async () => {
      const admin = await h.user(['plants:admin']);
      const s = await stream(admin.token);
      const c = await h.user();
      await c.create({ name: 'For the admin' });
      const got = await s.waitFor(1);
      assert.equal(JSON.parse(got[0]!.data!).data.name, 'For the admin');
    });

    it('Last-Event-ID resumes right after that event, missing nothing', async () => {
      const c = await h.user();
      const first = await stream(c.token);
      await c.create({ name: 'one' });
      const [one] = await first.waitFor(1);
      first.close();
      for (const name of ['two', 'three', 'four']) await c.create({ name });
      const resumed = await stream(c.token, { 'last-event-id': one!.id! });
      const got = await resumed.waitFor(3);
      assert.deepEqual(
        got.map((m) => JSON.parse(m.data!).data.name),
        ['two', 'three', 'four'],
      );
    });

    it('an unknown or expired Last-Event-ID is 410 events_expired; no Accept for a stream is 406', async () => {
      const c = await h.user();
      const gone = await fetch(`${base}/events`, {
        headers: {
          authorization: `Bearer ${c.token}`,
          accept: 'text/event-stream',
          'last-event-id': 'evt_nope',
        },
      });
      assert.equal(gone.status, 410);
      assert.equal(((await gone.json()) as { code: string }).code, 'events_expired');
      const wrong = await fetch(`${base}/events`, {
        headers: { authorization: `Bearer ${c.token}`, accept: 'application/json' },
      });
      assert.equal(wrong.status, 406);
      const anon = await fetch(`${base}/events`, { headers: { accept: 'text/event-stream' } });
      assert.equal(anon.status, 401);
    });

    it('retention purges events; resuming from a purged one is 410 events_expired', async () => {
      const c = await h.user();
      const s = await stream(c.token);
      await c.create({ name: 'short-lived' });
      const [m] = await s.waitFor(1);
      s.close();
      assert.ok((await h.store.purgeEvents(new Date(Date.now() - 60_000))) >= 0);
      const kept = await fetch(`${base}/events`, {
        headers: { authorization: `Bearer ${c.token}`, accept: 'text/event-stream', 'last-event-id': m!.id! },
      });
      assert.equal(kept.status, 200, 'an event younger than the retention is kept');
      await kept.body?.cancel();
      assert.ok((await h.store.purgeEvents(new Date(Date.now() + 1_000))) >= 1);
      const gone = await fetch(`${base}/events`, {
        headers: { authorization: `Bearer ${c.token}`, accept: 'text/event-stream', 'last-event-id': m!.id! },
      });
      assert.equal(gone.status, 410);
      assert.equal(((await gone.json()) as { code: string }).code, 'events_expired');
    });

    it('sends comment lines while idle, and counts open streams in /metrics', async () => {
      const c = await h.user();
      const s = await stream(c.token);
      await until(
        'two keep-alive comments',
        () => s.messages.filter((m) => m.comment === 'keep-alive').length >= 2,
      );
      const metrics = (await h.app.inject('/metrics')).body;
      const open = Number(/plantstore_event_streams_open (\d+)/.exec(metrics)?.[1]);
      assert.ok(open >= 1, metrics.slice(0, 200));
    });
  });
}

describe('closing the app ends open streams cleanly', () => {
  it('app.close() while a stream is open ends it and returns', async () => {
    const h = await harness(ENGINES[0]!);
    const base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    const c = await h.user();
    const s = await openStream(`${base}/events`, { authorization: `Bearer ${c.token}` });
    assert.equal(s.status, 200);
    const started = Date.now();
    await h.close();
    await s.ended;
    assert.ok(Date.now() - started < 5_000);
  });
});
