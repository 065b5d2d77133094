import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { WebhookService } from '../../src/events/webhooks.js';
import type { Caller } from '../../src/identity/caller.js';
import { clientAs, errorBody, type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { logSettled } from '../helpers/log.js';
import { type Received, type Receiver, startReceiver } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';
import { acknowledged, attempts, delivered, eventId, plantName, register } from '../helpers/webhooks.js';

const json = { 'content-type': 'application/json' };

/** Verifies a delivery the way a receiver would, with the official Standard Webhooks library. */
function verified(
  secret: string,
  d: Received,
): {
  type: string;
  timestamp: string;
  actor: string | null;
  requestId: string | null;
  data: Record<string, unknown>;
} {
  return new Webhook(secret).verify(d.body, d.headers as Record<string, string>) as never;
}

for (const engine of ENGINES) {
  describe(`webhooks on ${engine.name}`, { skip: engine.skip }, () => {
    let h: Harness;
    let strict: Harness;
    // What host names resolve to for `strict` (a name not here does not resolve): a test's own names.
    const dns = new Map<string, string[]>();
    const receivers: Receiver[] = [];
    const receiver = async () => {
      const r = await startReceiver();
      receivers.push(r);
      return r;
    };
    before(async () => {
      // One delivery at a time to an endpoint, claimed in the order they fell due: once the log
      // shows a delivery acknowledged, every one that fell due before it to that endpoint has been
      // sent. What an endpoint must not receive is asserted on this, never after a pause.
      h = await harness(
        engine,
        { webhookAllowPrivate: true, webhookRetrySchedule: [60, 60, 60], webhookTimeout: 300 },
        { dispatcher: { pollMs: 50, jitter: () => 0, perEndpoint: 1 } },
      );
      strict = await harness(
        engine,
        {},
        {
          resolver: async (name: string) => {
            const addresses = dns.get(name);
            if (!addresses)
              throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
            return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }) as const);
          },
          dispatcher: { pollMs: 50 },
        },
      );
    });
    after(async () => {
      await h?.close();
      await strict?.close();
      for (const r of receivers) await r.close();
    });

    for (const url of [
      'http://127.0.0.1:8080/hook',
      'http://localhost/hook',
      'http://[::1]/hook',
      'http://[::ffff:127.0.0.1]/hook',
      'http://[::ffff:0:127.0.0.1]/hook',
      'http://[64:ff9b::10.0.0.1]/hook',
      'http://[2002:a00:1::]/hook',
      'http://[::]/hook',
      'http://0x0a000001/hook',
      'http://012.0.0.1/hook',
      'http://10.1.2.3/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://100.64.0.1/',
      'ftp://example.com/hook',
      `https://example.com/${'x'.repeat(2000)}`,
    ]) {
      it(`refuses ${url.slice(0, 60)} with 400 invalid_webhook_url`, async () => {
        const c = await strict.user();
        const res = await c.request({
          method: 'POST',
          url: '/webhooks',
          headers: json,
          payload: JSON.stringify({ url }),
        });
        assert.equal(res.statusCode, 400);
        assert.ok(['invalid_webhook_url', 'invalid_body'].includes(errorBody(res).code));
        const list = await c.request({ method: 'GET', url: '/webhooks' });
        assert.deepEqual(list.json(), []);
      });
    }

    it('the refusal of a loopback, private or localhost URL says how to test locally: --webhook-allow-private', async () => {
      const c = await strict.user();
      dns.set('inside.hooks.test', ['10.0.0.7']);
      const hint =
        'for local testing, start the service with --webhook-allow-private (WEBHOOK_ALLOW_PRIVATE=true)';
      for (const [url, reason] of [
        [
          'http://127.0.0.1:8080/hook',
          'the URL names a private, loopback or otherwise internal address (127.0.0.1)',
        ],
        ['http://[::1]/hook', 'the URL names a private, loopback or otherwise internal address (::1)'],
        ['http://localhost:3001/hook', 'the URL names localhost'],
        [
          'http://inside.hooks.test/hook',
          'the host name resolves to a private, loopback or otherwise internal address',
        ],
      ]) {
        const res = await c.request({
          method: 'POST',
          url: '/webhooks',
          headers: json,
          payload: JSON.stringify({ url }),
        });
        assert.deepEqual(errorBody(res), {
          error: 400,
          code: 'invalid_webhook_url',
          message: `url is refused: ${reason}; ${hint}`,
          details: [{ field: '/url', message: `${reason}; ${hint}` }],
        });
      }
      // A URL refused for anything else does not send anyone to that flag.
      const scheme = await c.request({
        method: 'POST',
        url: '/webhooks',
        headers: json,
        payload: JSON.stringify({ url: 'ftp://example.com/hook' }),
      });
      assert.doesNotMatch(errorBody(scheme).message, /webhook-allow-private/);
    });

    it('a lone surrogate in any field of a webhook body is 400 naming it; nothing is registered', async () => {
      const c = await strict.user();
      for (const [payload, field] of [
        ['{"url":"https://example.com/h\\ud800"}', '/url'],
        ['{"url":"https://example.com/hook","description":"deploys \\udc00"}', '/description'],
        ['{"url":"https://example.com/hook","events":["plant.created\\ud83c"]}', '/events/0'],
      ]) {
        const res = await c.request({ method: 'POST', url: '/webhooks', headers: json, payload });
        assert.equal(res.statusCode, 400, `${payload}: ${res.body}`);
        const body = errorBody(res);
        assert.equal(body.code, 'invalid_body');
        assert.equal((body.details as { field: string }[])[0]?.field, field);
      }
      assert.deepEqual((await c.request({ method: 'GET', url: '/webhooks' })).json(), []);
    });

    it('a host name that resolves to a private address, or to none, is refused at creation without saying what it resolved to', async () => {
      const c = await strict.user();
      dns.set('inside.hooks.test', ['10.0.0.7']);
      dns.set('mixed.hooks.test', ['93.184.216.34', '192.168.4.4']);
      dns.set('mapped.hooks.test', ['::ffff:0:a9fe:a9fe']);
      dns.set('public.hooks.test', ['93.184.216.34']);
      for (const [url, says] of [
        ['http://inside.hooks.test/hook', /resolves to a private, loopback or otherwise internal address/],
        ['http://mixed.hooks.test/hook', /resolves to a private, loopback or otherwise internal address/],
        ['http://mapped.hooks.test/hook', /resolves to a private, loopback or otherwise internal address/],
        ['http://nowhere.hooks.test/hook', /nowhere\.hooks\.test does not resolve/],
      ] as const) {
        const res = await c.request({
          method: 'POST',
          url: '/webhooks',
          headers: json,
          payload: JSON.stringify({ url }),
        });
        assert.equal(res.statusCode, 400, url);
        const body = errorBody(res);
        assert.equal(body.code, 'invalid_webhook_url');
        assert.match(body.message, says);
        for (const address of ['10.0.0.7', '192.168.4.4', 'a9fe', '169.254'])
          assert.ok(!res.body.includes(address), res.body);
      }
      assert.deepEqual((await c.request({ method: 'GET', url: '/webhooks' })).json(), []);
      await register(c, { url: 'https://public.hooks.test/hook' });
    });

    it('a name that resolves to 127.0.0.1 from the hosts file is refused at creation (the system resolver)', async () => {
      const store = strict.store;
      const service = new WebhookService(store, { allowPrivate: false });
      const caller: Caller = {
        user: `user-${Math.random()}`,
        scopes: new Set(['plants:read', 'plants:write']),
        tokenId: 'tok_x',
        kind: 'token',
        expiresAt: null,
      };
      // `vm`, `runsc` or the like: any name other than localhost that the hosts file maps to 127.0.0.1.
      const { readFileSync } = await import('node:fs');
      const name = readFileSync('/etc/hosts', 'utf8')
        .split('\n')
        .map((l) => l.trim().split(/\s+/))
        .find(([ip, n]) => ip === '127.0.0.1' && n && !n.includes('localhost'))?.[1];
      for (const host of ['localhost.', ...(name ? [name] : [])]) {
        await assert.rejects(
          service.create(caller, { url: `http://${host}:8080/hook` }),
          (err: Error & { code?: string }) => {
            assert.equal(err.code, 'invalid_webhook_url');
            assert.ok(!err.message.includes('127.0.0.1'), err.message);
            return true;
          },
        );
      }
    });

    it('a name re-pointed at a private address after creation is refused at delivery: the receiver sees nothing, the log names no address', async () => {
      const r = await receiver();
      const c = await strict.user();
      const port = new URL(r.url).port;
      dns.set('moving.hooks.test', ['93.184.216.34']);
      const e = await register(c, { url: `http://moving.hooks.test:${port}/hook` });
      dns.set('moving.hooks.test', ['127.0.0.1']);
      assert.equal((await c.create({ name: 'Quiet' })).statusCode, 201);
      const log = await until('an attempt in the deliveries log', async () => {
        const log = await attempts(c, e.id);
        return log.length > 0 && log;
      });
      assert.match(log[0]!.error ?? '', /refused/);
      assert.doesNotMatch(log[0]!.error ?? '', /127\.0\.0\.1/);
      assert.equal(r.connections, 0);
    });

    it('a user has at most 20 endpoints, even when creates race: one more is 409 too_many_webhooks', async () => {
      const c = await h.user();
      const answers = await Promise.all(
        Array.from({ length: 26 }, (_, i) =>
          c.request({
            method: 'POST',
            url: '/webhooks',
            headers: json,
            payload: JSON.stringify({ url: `https://example.com/hook/${i}` }),
          }),
        ),
      );
      assert.deepEqual(answers.map((a) => a.statusCode).sort(), [
        ...Array(20).fill(201),
        ...Array(6).fill(409),
      ]);
      const refused = answers.find((a) => a.statusCode === 409)!;
      assert.equal(errorBody(refused).code, 'too_many_webhooks');
      const list = (await c.request({ method: 'GET', url: '/webhooks' })).json();
      assert.equal(list.length, 20);
      // Another user's allowance is its own; a deleted endpoint makes room.
      await register(await h.user(), { url: 'https://example.com/other' });
      assert.equal((await c.request({ method: 'DELETE', url: `/webhooks/${list[0].id}` })).statusCode, 204);
      await register(c, { url: 'https://example.com/again' });
    });

    it('deliveries to one host are shared fairly: a user’s 20 endpoints and long backlog do not hold back another user’s delivery', async () => {
      const fair = await harness(
        engine,
        { webhookAllowPrivate: true, webhookRetrySchedule: [60_000], webhookTimeout: 10_000 },
        { dispatcher: { pollMs: 50, concurrency: 4, perEndpoint: 1 } },
      );
      try {
        const r = await receiver();
        r.holding = true;
        const a = await fair.user();
        const b = await fair.user();
        for (let i = 0; i < 20; i++) await register(a, { url: `${r.url}?a=${i}` });
        await register(b, { url: `${r.url}?b` });
        const backlog = 15 * 20;
        for (let i = 0; i < 15; i++) assert.equal((await a.create({ name: `a${i}` })).statusCode, 201);
        // Every slot of the dispatcher is taken by a's deliveries, held unanswered, and 300 are due.
        await r.waitFor(4);
        assert.equal((await b.create({ name: 'b' })).statusCode, 201);
        // b's event readable before the held deliveries are let go: on PostgreSQL a transaction open
        // elsewhere on the server can hold the log's readable end back for a moment, and a's backlog
        // would be sent meanwhile (66 went first in a CI run).
        await logSettled(fair.store);
        r.release();
        const got = await delivered(r, 'plant.created', 'b');
        const ahead = r.received.indexOf(got);
        assert.ok(ahead < 40, `${ahead} of a's ${backlog} deliveries went before b's one`);
        // And a's backlog is delivered in full as well.
        await r.waitFor(backlog + 1, 60_000);
      } finally {
        await fair.close();
      }
    });

    it('create, change and delete are delivered, signed (verified by the standardwebhooks library), same user only', async () => {
      const r = await receiver();
      const c = await h.user();
      const other = await h.user();
      const e = await register(c, { url: r.url, description: 'mine' });
      assert.match(e.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      assert.deepEqual(e.events, [
        'plant.created',
        'plant.updated',
        'plant.deleted',
        'plant.restored',
        'plant.purged',
        'member.added',
        'member.changed',
        'member.removed',
      ]);
      await other.create({ name: 'Not yours' });
      const made = await c.create({ name: 'Fern', tag: 'indoor' });
      const id = locationId(made);
      const changed = await c.request({
        method: 'PATCH',
        url: `/plants/${id}`,
        headers: { 'content-type': 'application/merge-patch+json', 'if-match': String(made.headers.etag) },
        payload: JSON.stringify({ name: 'Boston fern', tag: null }),
      });
      assert.equal(changed.statusCode, 200);
      const deleted = await c.request({
        method: 'DELETE',
        url: `/plants/${id}`,
        headers: { 'x-request-id': 'del-1' },
      });
      assert.equal(deleted.statusCode, 204);
      const got = await r.waitFor(3);
      // The other user's event fell due before these: had it been queued for this endpoint,
      // it would have been sent before them.
      const log = await acknowledged(c, e.id, [
        eventId(await delivered(r, 'plant.created', 'Fern')),
        eventId(await delivered(r, 'plant.updated', 'Boston fern')),
        eventId(await delivered(r, 'plant.deleted', 'Boston fern')),
      ]);
      assert.equal(r.received.length, 3, 'nothing of the other user');
      assert.equal(log.length, 3, 'nothing of the other user');
      const bodies = got.map((d) => verified(e.secret, d));
      const byType = Object.fromEntries(bodies.map((b) => [b.type, b]));
      const garden = (await c.request({ method: 'GET', url: '/gardens' })).json()[0].id;
      assert.deepEqual(byType['plant.created']!.data, { id, name: 'Fern', tag: 'indoor', garden });
      assert.deepEqual(byType['plant.updated']!.data, {
        id,
        name: 'Boston fern',
        garden,
        previous: { name: 'Fern', tag: 'indoor' },
      });
      assert.deepEqual(byType['plant.deleted']!.data, { id, name: 'Boston fern', garden });
      // Who did it (contract 13.1): the caller, and each request's id as its answer gave it (the
      // caller's own X-Request-Id, when it sent one).
      const cause = (b: { actor: unknown; requestId: unknown }) => [b.actor, b.requestId];
      assert.deepEqual(cause(byType['plant.created']!), [c.user, made.headers['x-request-id']]);
      assert.deepEqual(cause(byType['plant.updated']!), [c.user, changed.headers['x-request-id']]);
      assert.deepEqual(cause(byType['plant.deleted']!), [c.user, 'del-1']);
      assert.equal(deleted.headers['x-request-id'], 'del-1');
      assert.deepEqual(Object.keys(byType['plant.created']!), [
        'type',
        'timestamp',
        'actor',
        'requestId',
        'data',
      ]);
      assert.match(got[0]!.headers['webhook-id'] as string, /^evt_/);
      assert.equal(got[0]!.headers['content-type'], 'application/json');
    });

    it('an admin endpoint receives every user’s events; an events filter is honoured', async () => {
      const r = await receiver();
      const onlyDeletes = await receiver();
      const admin = await h.user(['plants:admin']);
      const c = await h.user();
      await register(admin, { url: r.url });
      const d = await register(c, { url: onlyDeletes.url, events: ['plant.deleted'] });
      const id = locationId(await c.create({ name: 'Seen by admin' }));
      await c.request({ method: 'DELETE', url: `/plants/${id}` });
      const got = await r.waitFor(2);
      assert.ok(got.some((d) => JSON.parse(d.body).data.name === 'Seen by admin'));
      // The create fell due before the delete: had it been queued for this endpoint, it would
      // have been sent first.
      await acknowledged(c, d.id, [eventId(await delivered(onlyDeletes, 'plant.deleted', 'Seen by admin'))]);
      assert.deepEqual(
        onlyDeletes.received.map((d) => JSON.parse(d.body).type),
        ['plant.deleted'],
      );
    });

    it('an admin endpoint gets every user’s events only while its token is valid; then its owner’s, and recover replays only those', async () => {
      const r = await receiver();
      const admin = await h.user(['plants:admin']);
      const ordinary = await clientAs(h, admin.user);
      const c = await h.user();
      const since = new Date(Date.now() - 1000).toISOString();
      await c.create({ name: 'Before the endpoint' });
      const e = await register(admin, { url: r.url });
      await c.create({ name: 'Seen while valid' });
      await acknowledged(ordinary, e.id, [eventId(await delivered(r, 'plant.created', 'Seen while valid'))]);
      assert.deepEqual(await h.store.revokeToken(admin.tokenId, new Date()), { ok: true });
      await c.create({ name: 'After revocation' });
      await ordinary.create({ name: 'Own' });
      // Deliveries to the endpoint go one at a time, in the order they fell due: 'After revocation'
      // fell due before 'Own', so had it been queued it would be in the log before it.
      const log = await acknowledged(ordinary, e.id, [eventId(await delivered(r, 'plant.created', 'Own'))]);
      assert.deepEqual(r.received.map(plantName), ['Seen while valid', 'Own']);
      assert.equal(log.length, 2);
      // The owner's ordinary token replays nothing of the other user's: 'Before the endpoint' and
      // 'After revocation' were never sent, and stay unsent.
      const rec = await ordinary.request({
        method: 'POST',
        url: `/webhooks/${e.id}/recover`,
        headers: json,
        payload: JSON.stringify({ since }),
      });
      assert.equal(rec.statusCode, 202);
      assert.equal(rec.json().queued, 0);
    });

    it('an endpoint records the credential that gave it admin reach: a token’s id, a JWT’s exp', async () => {
      const service = new WebhookService(h.store, { allowPrivate: true });
      const exp = new Date(Date.now() + 3_600_000);
      const as = (kind: 'token' | 'jwt', scopes: string[], expiresAt: Date | null): Caller => ({
        user: `user-${Math.random()}`,
        scopes: new Set(scopes) as Caller['scopes'],
        tokenId: kind === 'token' ? 'tok_made_it' : 'jwt:someone',
        kind,
        expiresAt,
      });
      const pick = (e: { admin: boolean; adminTokenId: string | null; adminUntil: Date | null }) => [
        e.admin,
        e.adminTokenId,
        e.adminUntil?.getTime() ?? null,
      ];
      const url = 'https://example.com/hook';
      const jwt = await service.create(as('jwt', ['plants:admin'], exp), { url });
      assert.deepEqual(pick((await h.store.getEndpoint(jwt.id))!), [true, null, exp.getTime()]);
      const token = await service.create(as('token', ['plants:admin'], null), { url });
      assert.deepEqual(pick((await h.store.getEndpoint(token.id))!), [true, 'tok_made_it', null]);
      const expiring = await service.create(as('token', ['plants:admin'], exp), { url });
      assert.deepEqual(pick((await h.store.getEndpoint(expiring.id))!), [true, 'tok_made_it', exp.getTime()]);
      const plain = await service.create(as('token', ['plants:read', 'plants:write'], exp), { url });
      assert.deepEqual(pick((await h.store.getEndpoint(plain.id))!), [false, null, null]);
    });

    it('replays, refusals and 404s make no event', async () => {
      const r = await receiver();
      const c = await h.user();
      const e = await register(c, { url: r.url });
      const key = { 'idempotency-key': `k-${Math.random()}` };
      const first = await c.create({ name: 'Once', id: 900_000_000 + Math.floor(Math.random() * 1e6) }, key);
      assert.equal(first.statusCode, 201);
      const body = JSON.parse(first.payload);
      assert.equal((await c.create({ name: 'Other' }, key)).statusCode, 422);
      const again = await c.create({ ...body, id: locationId(first) }, key);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal((await c.create({ name: 'Dup', id: locationId(first) })).statusCode, 409);
      assert.equal((await c.request({ method: 'DELETE', url: '/plants/999999999999' })).statusCode, 404);
      // A later event through the same endpoint: whatever those requests made fell due before it,
      // so it was sent before it.
      await c.create({ name: 'Sentinel' });
      await acknowledged(c, e.id, [eventId(await delivered(r, 'plant.created', 'Sentinel'))]);
      assert.deepEqual(r.received.map(plantName), ['Once', 'Sentinel']);
    });

    it('failures are retried on the schedule with the same webhook-id; the deliveries log shows each attempt', async () => {
      const r = await receiver();
      r.answers.push({ status: 500 }, { status: 502 });
      const c = await h.user();
      const e = await register(c, { url: r.url });
      await c.create({ name: 'Persistent' });
      const got = await r.waitFor(3);
      assert.equal(new Set(got.map((d) => d.headers['webhook-id'])).size, 1);
      assert.notEqual(got[0]!.headers['webhook-timestamp'] === undefined, true);
      const log = await acknowledged(c, e.id, [eventId(got[2]!)]);
      assert.deepEqual(
        log.map((a) => [a.attempt, a.status, a.outcome]),
        [
          [3, 200, 'succeeded'],
          [2, 502, 'retrying'],
          [1, 500, 'retrying'],
        ],
      );
      const page = await c.request({ method: 'GET', url: `/webhooks/${e.id}/deliveries?limit=2` });
      assert.equal(page.json().length, 2);
      const next = /<([^>]+)>; rel="next"/.exec(String(page.headers.link))?.[1];
      assert.ok(next);
      const rest = (await c.request({ method: 'GET', url: next })).json();
      assert.deepEqual(
        rest.map((a: { attempt: number }) => a.attempt),
        [1],
      );
    });

    it('a Retry-After asking for longer than the schedule is honoured', async () => {
      const r = await receiver();
      r.answers.push({ status: 503, headers: { 'retry-after': '1' } });
      const c = await h.user();
      await register(c, { url: r.url });
      await c.create({ name: 'Patient' });
      const got = await r.waitFor(2, 5_000);
      assert.ok(got[1]!.at - got[0]!.at >= 900, `retried after ${got[1]!.at - got[0]!.at} ms`);
    });

    it('a receiver that never answers times out and is retried; after the schedule the delivery fails', async () => {
      const r = await receiver();
      r.answers.push('hang', 'hang', 'hang', 'hang');
      const c = await h.user();
      const e = await register(c, { url: r.url });
      await c.create({ name: 'Hung' });
      await r.waitFor(4, 8_000);
      const log = await until('the delivery marked failed in the log', async () => {
        const log = await attempts(c, e.id);
        return log[0]?.outcome === 'failed' && log;
      });
      assert.equal(log.length, 4);
      assert.equal(log[0]!.outcome, 'failed');
      assert.match(log[0]!.error ?? '', /timeout/);
    });

    it('410 Gone disables the endpoint at once; recover enables it and re-sends what was not acknowledged', async () => {
      const r = await receiver();
      r.answers.push({ status: 410 });
      const c = await h.user();
      const e = await register(c, { url: r.url });
      const since = new Date(Date.now() - 1000).toISOString();
      await c.create({ name: 'First' });
      await r.waitFor(1);
      const disabled = await until('the endpoint disabled', async () => {
        const endpoint = (await c.request({ method: 'GET', url: `/webhooks/${e.id}` })).json();
        return endpoint.status === 'disabled' && endpoint;
      });
      assert.match(disabled.disabledReason, /410/);
      await c.create({ name: 'Second' });
      const rec = await c.request({
        method: 'POST',
        url: `/webhooks/${e.id}/recover`,
        headers: json,
        payload: JSON.stringify({ since }),
      });
      assert.equal(rec.statusCode, 202);
      // Recover queues each event since `since` with no delivery acknowledged or waiting: First
      // and Second both, so nothing of Second was queued for, or sent to, the disabled endpoint.
      assert.equal(rec.json().queued, 2, 'nothing goes to a disabled endpoint');
      const got = await r.waitFor(3);
      assert.deepEqual(got.slice(1).map(plantName).sort(), ['First', 'Second']);
      // The two re-sent deliveries fell due last: once both are acknowledged, all was sent.
      await acknowledged(c, e.id, got.slice(1).map(eventId));
      assert.equal(r.received.length, 3, 'each sent once');
    });

    it('five days of failure disable an endpoint: counted from its first failure after a success, not from its creation', async () => {
      // The dispatcher's clock is the test's: a retry an hour away is due when the test moves it.
      let offset = 0;
      const HOUR = 3_600_000;
      const DAY = 24 * HOUR;
      const clocked = await harness(
        engine,
        { webhookAllowPrivate: true, webhookRetrySchedule: Array(8).fill(HOUR), webhookTimeout: 300 },
        { dispatcher: { pollMs: 20, jitter: () => 0, clock: () => Date.now() + offset } },
      );
      try {
        const r = await receiver();
        const c = await clocked.user();
        const e = await register(c, { url: r.url });
        const since = new Date(Date.now() - 1000).toISOString();
        const status = async () => (await c.request({ method: 'GET', url: `/webhooks/${e.id}` })).json();
        // An attempt is logged in the transaction that updates its endpoint: once the log shows
        // it, the endpoint is as that attempt left it.
        const logged = (n: number) =>
          until(`attempt ${n} in the deliveries log`, async () => {
            const log = await attempts(c, e.id);
            return log.length >= n && log;
          });
        // Ten days after the endpoint was made its deliveries begin to fail: not five days of failure.
        offset = 10 * DAY;
        r.answers.push({ status: 500 });
        await c.create({ name: 'First failure' });
        await r.waitFor(1);
        await logged(1);
        assert.equal((await status()).status, 'enabled');
        offset = 10 * DAY + 2 * HOUR; // its retry is due, and succeeds
        await r.waitFor(2);
        // Failing again from 10 days 2 hours; four days on, still failing: enabled.
        r.answers.push({ status: 500 });
        await c.create({ name: 'Failing' });
        await r.waitFor(3);
        await logged(3);
        r.answers.push({ status: 500 });
        offset = 14 * DAY;
        await r.waitFor(4);
        await logged(4);
        assert.equal((await status()).status, 'enabled');
        // Five days and an hour since that first failure: the next failure disables it.
        r.answers.push({ status: 500 });
        offset = 15 * DAY + 3 * HOUR;
        await r.waitFor(5);
        const log = await logged(5);
        const disabled = await status();
        assert.equal(disabled.status, 'disabled');
        assert.match(disabled.disabledReason, /5 days/);
        assert.deepEqual(
          log.map((a) => a.outcome),
          ['failed', 'retrying', 'retrying', 'succeeded', 'retrying'],
        );
        await c.create({ name: 'Not sent' });
        // Recover queues each event since `since` with no delivery acknowledged or waiting: Failing
        // (failed) and Not sent, so nothing of Not sent was queued for, or sent to, the disabled endpoint.
        const rec = await c.request({
          method: 'POST',
          url: `/webhooks/${e.id}/recover`,
          headers: json,
          payload: JSON.stringify({ since }),
        });
        assert.equal(rec.statusCode, 202);
        assert.equal(rec.json().queued, 2, 'nothing goes to a disabled endpoint');
        const got = await r.waitFor(7);
        assert.deepEqual(got.slice(5).map(plantName).sort(), ['Failing', 'Not sent']);
      } finally {
        await clocked.close();
      }
    });

    it('after a rotation, deliveries carry signatures of both secrets', async () => {
      const r = await receiver();
      const c = await h.user();
      const e = await register(c, { url: r.url });
      const rotated = (await c.request({ method: 'POST', url: `/webhooks/${e.id}/rotate-secret` })).json();
      assert.notEqual(rotated.secret, e.secret);
      await c.create({ name: 'Rotated' });
      const [d] = await r.waitFor(1);
      assert.equal(String(d!.headers['webhook-signature']).split(' ').length, 2);
      verified(e.secret, d!);
      verified(rotated.secret, d!);
    });

    it('/openapi.json describes the deliveries under `webhooks` and the endpoints API', async () => {
      const doc = (await h.app.inject('/openapi.json')).json();
      const types = [
        'plant.created',
        'plant.updated',
        'plant.deleted',
        'plant.restored',
        'plant.purged',
        'member.added',
        'member.changed',
        'member.removed',
      ];
      assert.deepEqual(Object.keys(doc.webhooks), types);
      for (const type of types) {
        const op = doc.webhooks[type].post;
        assert.equal(op.requestBody.content['application/json'].schema.$ref, '#/components/schemas/Event');
        assert.deepEqual(
          op.parameters.map((p: { name: string }) => p.name),
          ['webhook-id', 'webhook-timestamp', 'webhook-signature'],
        );
      }
      // A plant's event, a purged plant's or a membership change's, each with who did it.
      const [plantEvent, purgedEvent, memberEvent] = doc.components.schemas.Event.anyOf;
      for (const shape of [plantEvent, purgedEvent, memberEvent]) {
        assert.deepEqual(shape.required, ['type', 'timestamp', 'actor', 'requestId', 'data']);
      }
      assert.deepEqual(purgedEvent.properties.data.required, ['id', 'garden']);
      assert.deepEqual(memberEvent.properties.data.required, ['garden', 'user', 'role']);
      assert.match(doc.paths['/webhooks'].post.responses['409'].description, /too_many_webhooks/);
      for (const path of [
        '/webhooks',
        '/webhooks/{id}',
        '/webhooks/{id}/rotate-secret',
        '/webhooks/{id}/deliveries',
        '/webhooks/{id}/recover',
        '/events',
      ]) {
        assert.ok(doc.paths[path], path);
      }
    });

    it('another user’s endpoint is 404 everywhere; lists never show secrets', async () => {
      const c = await h.user();
      const other = await h.user();
      const e = await register(c, { url: 'https://example.com/hook' });
      for (const [method, url] of [
        ['GET', `/webhooks/${e.id}`],
        ['DELETE', `/webhooks/${e.id}`],
        ['POST', `/webhooks/${e.id}/rotate-secret`],
        ['GET', `/webhooks/${e.id}/deliveries`],
      ] as const) {
        assert.equal((await other.request({ method, url })).statusCode, 404, `${method} ${url}`);
      }
      const list = (await c.request({ method: 'GET', url: '/webhooks' })).json();
      assert.equal(list.length, 1);
      assert.equal(list[0].secret, undefined);
      assert.equal((await c.request({ method: 'DELETE', url: `/webhooks/${e.id}` })).statusCode, 204);
      assert.equal((await c.request({ method: 'GET', url: `/webhooks/${e.id}` })).statusCode, 404);
    });
  });
}
