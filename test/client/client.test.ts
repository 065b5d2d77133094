import assert from 'node:assert/strict';
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import {
  clientCredentials,
  PlantStore,
  PlantStoreError,
  signWebhook,
  verifyWebhook,
} from '../../src/client/index.js';
import { type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { startIssuer } from '../helpers/oidc.js';
import { startReceiver } from '../helpers/receiver.js';

type Rule = (req: IncomingMessage, res: ServerResponse) => boolean;

/**
 * A proxy of the test's own in front of the service: each request is offered to `rules` first (a
 * rule that answers returns true), else forwarded. Records every request's method, path and
 * Idempotency-Key.
 */
async function startProxy(target: string) {
  const seen: { method: string; url: string; key: string | undefined }[] = [];
  const rules: Rule[] = [];
  const server: Server = createServer((req, res) => {
    seen.push({
      method: req.method!,
      url: req.url!,
      key: req.headers['idempotency-key'] as string | undefined,
    });
    const rule = rules.shift();
    if (rule?.(req, res)) return;
    const up = httpRequest(`${target}${req.url}`, { method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode!, r.headers);
      r.pipe(res);
    });
    req.pipe(up);
  });
  const sockets = new Set<Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    rules,
    /** Cuts every open connection (a lost network, as the client sees it). */
    cut: () => {
      for (const s of sockets) s.destroy();
    },
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    },
  };
}

const answer =
  (
    status: number,
    headers: Record<string, string> = {},
    body = { error: status, code: 'x', message: 'x' },
  ): Rule =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
    return true;
  };

describe('the typed client (plantstore/client)', () => {
  let h: Harness;
  let base: string;
  let token: string;
  before(async () => {
    h = await harness(ENGINES[0]!, { webhookAllowPrivate: true }, { dispatcher: { pollMs: 50 } });
    base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    token = (await h.user()).token;
  });
  after(() => h?.close());

  it('creates, reads, lists every page through Link, and deletes', async () => {
    const store = new PlantStore({ url: base, token });
    const made = [];
    for (let i = 0; i < 23; i++)
      made.push(await store.create({ name: `Fern ${i}`, tag: i % 2 ? 'odd' : 'even' }));
    assert.ok(made.every((p) => Number.isSafeInteger(p.id)));
    const read = await store.get(made[3]!.id);
    assert.deepEqual(read, { name: 'Fern 3', tag: 'odd', etag: made[3]!.etag });
    assert.match(read.etag, /^"[^"]+"$/);
    const all = [];
    for await (const p of store.list({ limit: 5 })) all.push(p);
    assert.deepEqual(
      all.map((p) => p.id),
      made.map((p) => p.id),
    );
    const odd = [];
    for await (const p of store.list({ limit: 4, tag: 'odd' })) odd.push(p.name);
    assert.equal(odd.length, 11);
    await store.delete(made[0]!.id);
    await assert.rejects(
      store.get(made[0]!.id),
      (e: PlantStoreError) => e.status === 404 && e.code === 'plant_not_found',
    );
  });

  it('refusals are PlantStoreErrors with code, message, details and the request id', async () => {
    const store = new PlantStore({ url: base, token });
    const err = await store.create({ name: ' ' }).catch((e: unknown) => e);
    assert.ok(err instanceof PlantStoreError);
    assert.equal(err.status, 400);
    assert.equal(err.code, 'invalid_body');
    assert.ok(err.details?.some((d) => d.field === '/name'));
    assert.match(err.requestId ?? '', /.+/);
    const denied = await new PlantStore({ url: base, token: 'pst_nope' }).get(1).catch((e: unknown) => e);
    assert.ok(denied instanceof PlantStoreError && denied.status === 401);
    const gone = await new PlantStore({ url: 'http://127.0.0.1:1', token, retries: 0 })
      .get(1)
      .catch((e) => e);
    assert.ok(gone instanceof PlantStoreError && gone.status === 0 && gone.code === 'unreachable');
  });

  it('retries 503, 429 and a lost answer under one Idempotency-Key: one plant', async () => {
    const proxy = await startProxy(base);
    try {
      const store = new PlantStore({ url: proxy.url, token });
      proxy.rules.push(answer(503, { 'retry-after': '0' }), answer(429, { 'retry-after': '0' }));
      // The third attempt reaches the service, which creates the plant; its answer is lost.
      proxy.rules.push((req, res) => {
        const up = httpRequest(`${base}${req.url}`, { method: req.method, headers: req.headers }, (r) => {
          r.resume().on('end', () => res.socket?.destroy());
        });
        req.pipe(up);
        return true;
      });
      const p = await store.create({ name: 'Once only' });
      const posts = proxy.seen.filter((s) => s.method === 'POST');
      assert.equal(posts.length, 4);
      assert.equal(new Set(posts.map((s) => s.key)).size, 1, 'one key on every attempt');
      const named = [];
      for await (const x of new PlantStore({ url: base, token }).list())
        if (x.name === 'Once only') named.push(x.id);
      assert.deepEqual(named, [p.id]);
    } finally {
      await proxy.close();
    }
  });

  it('update changes by merge patch with If-Match; a stale ETag is a 412; delete takes an ETag too', async () => {
    const store = new PlantStore({ url: base, token });
    const p = await store.create({ name: 'Aloe', tag: 'sun' });
    const changed = await store.update(p.id, { name: 'Aloe vera', tag: null }, { ifMatch: p.etag });
    assert.equal(changed.name, 'Aloe vera');
    assert.equal(changed.tag, undefined);
    assert.notEqual(changed.etag, p.etag);
    assert.deepEqual(await store.get(p.id), changed);
    const stale = await store
      .update(p.id, { name: 'Lost edit' }, { ifMatch: p.etag })
      .catch((e: unknown) => e);
    assert.ok(
      stale instanceof PlantStoreError && stale.status === 412 && stale.code === 'precondition_failed',
    );
    await assert.rejects(store.delete(p.id, { ifMatch: p.etag }), (e: PlantStoreError) => e.status === 412);
    await store.delete(p.id, { ifMatch: changed.etag });
    await assert.rejects(store.get(p.id), (e: PlantStoreError) => e.status === 404);
  });

  it('an update whose answer is lost is retried with the same Idempotency-Key and If-Match: applied once', async () => {
    const proxy = await startProxy(base);
    try {
      const direct = new PlantStore({ url: base, token });
      const p = await direct.create({ name: 'Cactus' });
      // The first attempt reaches the service, which applies it; its answer is lost.
      proxy.rules.push((req, res) => {
        const up = httpRequest(`${base}${req.url}`, { method: req.method, headers: req.headers }, (r) => {
          r.resume().on('end', () => res.socket?.destroy());
        });
        req.pipe(up);
        return true;
      });
      const store = new PlantStore({ url: proxy.url, token });
      const changed = await store.update(p.id, { tag: 'desert' }, { ifMatch: p.etag });
      assert.deepEqual({ name: changed.name, tag: changed.tag }, { name: 'Cactus', tag: 'desert' });
      const patches = proxy.seen.filter((s) => s.method === 'PATCH');
      assert.equal(patches.length, 2, 'retried once');
      assert.equal(new Set(patches.map((s) => s.key)).size, 1, 'one key on every attempt');
      assert.deepEqual(await direct.get(p.id), changed, 'the replayed answer is the applied change');
    } finally {
      await proxy.close();
    }
  });

  it('gives up within its deadline, honouring Retry-After, and does not retry a 400', async () => {
    const proxy = await startProxy(base);
    try {
      for (let i = 0; i < 5; i++) proxy.rules.push(answer(503, { 'retry-after': '1' }));
      const store = new PlantStore({ url: proxy.url, token, deadlineMs: 1500 });
      const started = Date.now();
      const err = await store.get(1).catch((e: unknown) => e);
      assert.ok(err instanceof PlantStoreError && err.status === 503);
      assert.ok(Date.now() - started < 1500, 'within the deadline');
      assert.equal(proxy.seen.length, 2, 'the first try, then one after Retry-After: 1 s');
      proxy.seen.length = 0;
      proxy.rules.length = 0;
      proxy.rules.push(answer(400));
      await assert.rejects(
        new PlantStore({ url: proxy.url, token }).get(1),
        (e: PlantStoreError) => e.status === 400,
      );
      assert.equal(proxy.seen.length, 1);
    } finally {
      await proxy.close();
    }
  });

  it('events() streams as changes commit and resumes after a lost connection, missing nothing', async () => {
    const proxy = await startProxy(base);
    const abort = new AbortController();
    try {
      const store = new PlantStore({ url: proxy.url, token });
      const direct = new PlantStore({ url: base, token });
      const got: string[] = [];
      let opened: () => void = () => {};
      const open = new Promise<void>((r) => {
        opened = r;
      });
      const reading = (async () => {
        for await (const e of store.events({ signal: abort.signal, onOpen: () => opened() })) {
          got.push(`${e.type} ${e.data.name}`);
          if (got.length === 1) {
            // Cut the stream's connection; the next events are written while it is down.
            proxy.rules.push(answer(503, { 'retry-after': '0' }));
            proxy.cut();
            await direct.create({ name: 'while away 1' });
            await direct.create({ name: 'while away 2' });
          }
          if (got.length === 3) break;
        }
      })();
      await open;
      await direct.create({ name: 'first' });
      await Promise.race([reading, new Promise((_, no) => setTimeout(() => no(new Error('timeout')), 5000))]);
      assert.deepEqual(got, [
        'plant.created first',
        'plant.created while away 1',
        'plant.created while away 2',
      ]);
      const resumed = proxy.seen.filter((s) => s.url === '/events');
      assert.ok(resumed.length >= 3, 'reconnected (past a 503)');
    } finally {
      abort.abort();
      await proxy.close();
    }
  });

  it('verifyWebhook accepts a real delivery and the Standard Webhooks test vector, and refuses forgeries', async () => {
    // The specification's published vector.
    const vector = {
      'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      'webhook-timestamp': '1614265330',
      'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    };
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    assert.equal(
      await signWebhook(secret, vector['webhook-id'], 1614265330, '{"test": 2432232314}'),
      vector['webhook-signature'],
    );
    await verifyWebhook(secret, vector, '{"test": 2432232314}', { now: 1614265330_000 }).catch((e) => {
      // The vector's body is not a plant event, but its signature must pass: only parsing may differ.
      assert.fail(`refused the test vector: ${e}`);
    });
    await assert.rejects(verifyWebhook(secret, vector, '{"test": 2432232315}', { now: 1614265330_000 }));
    await assert.rejects(verifyWebhook(secret, vector, '{"test": 2432232314}'), /tolerance/);

    const r = await startReceiver();
    try {
      const c = await h.user();
      const reg = await c.request({
        method: 'POST',
        url: '/webhooks',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ url: r.url }),
      });
      const { secret: whsec } = reg.json() as { secret: string };
      await new PlantStore({ url: base, token: c.token }).create({ name: 'Signed', tag: 'x' });
      const [d] = await r.waitFor(1);
      const event = await verifyWebhook(whsec, d!.headers as Record<string, string>, d!.body);
      assert.equal(event.type, 'plant.created');
      assert.deepEqual({ name: event.data.name, tag: event.data.tag }, { name: 'Signed', tag: 'x' });
      assert.equal(event.id, d!.headers['webhook-id']);
      await assert.rejects(
        verifyWebhook(whsec, d!.headers as Record<string, string>, d!.body.replace('Signed', 'Forged')),
      );
    } finally {
      await r.close();
    }
  });

  it('clientCredentials gets JWTs from a real OpenID provider for a JWT-configured service', async () => {
    const issuer = await startIssuer({ scopes: ['plants:read', 'plants:write'] });
    const jwtApp = await harness(ENGINES[0]!, { jwtIssuer: issuer.issuer, jwtAudience: issuer.audience });
    try {
      const url = await jwtApp.app.listen({ port: 0, host: '127.0.0.1' });
      let tokenRequests = 0;
      const counting: typeof fetch = (input, init) => {
        if (String(input).includes('token')) tokenRequests++;
        return fetch(input, init);
      };
      const clientId = issuer.clients[0]!;
      const provider = clientCredentials({
        issuer: issuer.issuer,
        clientId,
        clientSecret: issuer.clientSecret(clientId),
        scope: 'plants:read plants:write',
        resource: issuer.audience,
        fetch: counting,
      });
      const store = new PlantStore({ url, token: provider });
      const p = await store.create({ name: 'Via JWT' });
      assert.deepEqual(await store.get(p.id), { name: 'Via JWT', etag: p.etag });
      assert.equal(tokenRequests, 1, 'the token is kept until it expires');
    } finally {
      await jwtApp.close();
      await issuer.close();
    }
  });
});
