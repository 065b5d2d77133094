import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createToken } from '../../src/identity/tokens.js';
import { type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { startTestIssuer, type TestIssuer } from '../helpers/issuer.js';
import { eventStreams, type SseReader } from '../helpers/sse.js';
import { until } from '../helpers/wait.js';

// The live stream's limits (contract 3 and 8, version 4): a stream ends within 5 s of its token
// being revoked or expiring, as every other request with it would be refused; a user has at most
// so many open streams at once; a Last-Event-ID that is not an event id is 400 invalid_event_id.
// The service's own timings (token cache, credential checks) are the production defaults here.

const CONTRACT_MS = 5_000;

/** Resolves with how long after `since` the stream ended; throws if it is still open after `ms`. */
async function endsWithin(s: SseReader, since: number, ms = 15_000): Promise<number> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the stream was still open ${ms} ms later`)), ms);
  });
  try {
    await Promise.race([s.ended, timeout]);
  } finally {
    clearTimeout(timer);
  }
  return Date.now() - since;
}

for (const engine of ENGINES) {
  describe(`GET /events limits on ${engine.name}`, { skip: engine.skip }, () => {
    let h: Harness;
    let base = '';
    const streams = eventStreams(() => base);
    const stream = streams.open;
    before(async () => {
      h = await harness(engine, { maxStreamsPerUser: 3, authFailureLimit: 0 });
      base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    });
    after(async () => {
      streams.closeAll();
      await h?.close();
    });

    it('a stream ends within 5 s of its token being revoked over HTTP, or by another instance', async () => {
      const c = await h.user(['plants:read', 'plants:write', 'tokens:manage']);
      const s = await stream(c.token);
      assert.equal(s.status, 200);
      await c.create({ name: 'Before' });
      await s.waitFor(1);
      // Revoking the token in use is allowed; the stream it opened ends.
      const revoked = await c.request({ method: 'DELETE', url: `/tokens/${c.tokenId}` });
      assert.equal(revoked.statusCode, 204);
      const took = await endsWithin(s, Date.now());
      assert.ok(took <= CONTRACT_MS, `ended ${took} ms after the revocation`);
      assert.equal((await stream(c.token)).status, 401);

      // Revoked in the store, as another instance would: this process learns of it from the store.
      const d = await h.user();
      const t = await stream(d.token);
      assert.equal(t.status, 200);
      assert.deepEqual(await h.store.revokeToken(d.tokenId, new Date()), { ok: true });
      const since = Date.now();
      const tookThere = await endsWithin(t, since);
      assert.ok(tookThere <= CONTRACT_MS, `ended ${tookThere} ms after the revocation in the store`);
    });

    it('a stream ends within 5 s of its token expiring', async () => {
      const u = await h.user();
      const made = await createToken(h.store, {
        user: u.user,
        scopes: ['plants:read'],
        name: 'short',
        expiresInMs: 1_500,
      });
      const s = await stream(made.secret);
      assert.equal(s.status, 200);
      const took = await endsWithin(s, made.record.expiresAt!.getTime());
      assert.ok(took <= CONTRACT_MS, `ended ${took} ms after the token expired`);
      assert.equal((await stream(made.secret)).status, 401);
    });

    it('a user has at most so many open streams: one more is 429 too_many_streams; closing one frees a place', async () => {
      const u = await h.user();
      const open = [await stream(u.token), await stream(u.token), await stream(u.token)];
      for (const s of open) assert.equal(s.status, 200);
      const res = await fetch(`${base}/events`, {
        headers: { authorization: `Bearer ${u.token}`, accept: 'text/event-stream' },
      });
      assert.equal(res.status, 429);
      assert.ok(Number(res.headers.get('retry-after')) > 0);
      const body = (await res.json()) as { code: string; message: string };
      assert.equal(body.code, 'too_many_streams');
      assert.match(body.message, /at most 3/);
      // Another user, and the same user's other requests, are not held back.
      const other = await h.user();
      assert.equal((await stream(other.token)).status, 200);
      assert.equal((await u.request({ method: 'GET', url: '/plants' })).statusCode, 200);
      // Once a stream is closed (the server sees the socket go), a new one is taken.
      open[0]!.close();
      const again = await until('a place freed by the closed stream', async () => {
        const s = await stream(u.token);
        if (s.status === 200) return s;
        s.close();
        return false;
      });
      assert.equal(again.status, 200);
    });

    it('a Last-Event-ID that is not an event id is 400 invalid_event_id; one no longer kept is 410', async () => {
      const u = await h.user();
      for (const bad of ['x'.repeat(201), `evt_${'a'.repeat(197)}`, 'nope', 'evt_', 'evt_a b', 'evt_%00']) {
        const res = await fetch(`${base}/events`, {
          headers: { authorization: `Bearer ${u.token}`, accept: 'text/event-stream', 'last-event-id': bad },
        });
        assert.equal(res.status, 400, bad);
        const body = (await res.json()) as { code: string };
        assert.equal(body.code, 'invalid_event_id', bad);
      }
      const gone = await fetch(`${base}/events`, {
        headers: {
          authorization: `Bearer ${u.token}`,
          accept: 'text/event-stream',
          'last-event-id': 'evt_gone',
        },
      });
      assert.equal(gone.status, 410);
      assert.equal(((await gone.json()) as { code: string }).code, 'events_expired');
      // None of these refusals kept a place: the user still opens its three.
      for (let i = 0; i < 3; i++) assert.equal((await stream(u.token)).status, 200);
    });
  });
}

const sqlite = ENGINES.find((e) => e.name === 'sqlite')!;

describe('GET /events with a JWT', () => {
  let issuer: TestIssuer;
  let h: Harness;
  let base = '';
  const streams = eventStreams(() => base);
  before(async () => {
    issuer = await startTestIssuer('https://plants.test');
    h = await harness(sqlite, {
      jwtIssuer: issuer.issuer,
      jwtAudience: 'https://plants.test',
      jwtClockTolerance: 0,
      authFailureLimit: 0,
    });
    base = await h.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(async () => {
    streams.closeAll();
    await h?.close();
    await issuer?.close();
  });

  it('a stream opened with a JWT ends within 5 s of its exp', async () => {
    const exp = Math.floor(Date.now() / 1000) + 2;
    const jwt = await issuer.sign({ sub: `jwt-${Date.now()}`, scope: 'plants:read', exp });
    const s = await streams.open(jwt);
    assert.equal(s.status, 200);
    const took = await endsWithin(s, exp * 1000);
    assert.ok(took <= CONTRACT_MS, `ended ${took} ms after exp`);
  });
});
