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
  sseMessages,
  type Token,
  verifyWebhook,
} from '../../src/client/index.js';
import { createToken } from '../../src/identity/tokens.js';
import type { Scope } from '../../src/schemas/token.js';
import { type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { plantOf } from '../helpers/events.js';
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

  it('me() says who the token is: user, scopes, kind and token id', async () => {
    const c = await h.user(['plants:read']);
    const me = await new PlantStore({ url: base, token: c.token }).me();
    assert.deepEqual(me, {
      user: c.user,
      scopes: ['plants:read'],
      kind: 'token',
      tokenId: c.tokenId,
      expiresAt: null,
    });
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
          got.push(`${e.type} ${plantOf(e.data).name}`);
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

// A stream as a service might write it: CRLF, LF and CR line ends, a comment, a retry field, data
// on two lines, a name in several scripts (bytes of one character split across chunks too).
const SSE_EVENTS = [
  { id: 'evt_1', type: 'plant.created', name: 'Fougère ☘' },
  { id: 'evt_2', type: 'plant.updated', name: 'Кактус' },
  { id: 'evt_3', type: 'plant.deleted', name: '蘭花' },
];
const sseData = (e: (typeof SSE_EVENTS)[number]) =>
  JSON.stringify({ type: e.type, data: { id: 1, name: e.name }, timestamp: '2026-01-01T00:00:00.000Z' });
// The third event's data comes on two lines (joined by a line feed, still JSON): cut before "data".
const AT = sseData(SSE_EVENTS[2]!).indexOf('"data"');
const SSE_TEXT =
  `: hello\r\nretry: 1000\r\n\r\n` +
  `id: ${SSE_EVENTS[0]!.id}\r\nevent: ${SSE_EVENTS[0]!.type}\r\ndata: ${sseData(SSE_EVENTS[0]!)}\r\n\r\n` +
  `id:${SSE_EVENTS[1]!.id}\nevent:${SSE_EVENTS[1]!.type}\ndata:${sseData(SSE_EVENTS[1]!)}\n\n` +
  `: still here\r\r` +
  `id: ${SSE_EVENTS[2]!.id}\revent: ${SSE_EVENTS[2]!.type}\rdata: ${sseData(SSE_EVENTS[2]!).slice(0, AT)}\rdata: ${sseData(SSE_EVENTS[2]!).slice(AT)}\r\r`;
const SSE_BYTES = new TextEncoder().encode(SSE_TEXT);

function streamOf(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(c);
      controller.close();
    },
  });
}

describe('the typed client reads Server-Sent Events however the bytes are cut', () => {
  const want = SSE_EVENTS.map((e, i) => ({
    id: e.id,
    event: e.type,
    data: i === 2 ? `${sseData(e).slice(0, AT)}\n${sseData(e).slice(AT)}` : sseData(e),
  }));

  it('cut in two at every byte: every event arrives with its id', async () => {
    for (let k = 1; k < SSE_BYTES.length; k++) {
      const got = [];
      for await (const m of sseMessages(streamOf([SSE_BYTES.slice(0, k), SSE_BYTES.slice(k)]))) got.push(m);
      assert.deepEqual(got, want, `cut after byte ${k}: ${JSON.stringify(SSE_TEXT.slice(0, k).slice(-12))}`);
    }
  });

  it('one byte at a time: every event arrives with its id', async () => {
    const got = [];
    for await (const m of sseMessages(streamOf([...SSE_BYTES].map((b) => Uint8Array.of(b))))) got.push(m);
    assert.deepEqual(got, want);
  });

  it('events() over HTTP, each chunk ending in a CR flushed on its own: no event or id is lost', async () => {
    // The test's own server: the first stream cut after every CR (and in the middle of each
    // character of more than one byte), each piece written and flushed before the next; later
    // connections are held open with nothing sent, until the test aborts.
    const pieces: Uint8Array[] = [];
    let from = 0;
    for (let i = 0; i < SSE_BYTES.length; i++) {
      if (SSE_BYTES[i] === 0x0d || SSE_BYTES[i]! >= 0xc0) {
        pieces.push(SSE_BYTES.slice(from, i + 1));
        from = i + 1;
      }
    }
    pieces.push(SSE_BYTES.slice(from));
    let served = 0;
    const lastIds: (string | undefined)[] = [];
    const server = createServer(async (req, res) => {
      lastIds.push(req.headers['last-event-id'] as string | undefined);
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.flushHeaders();
      if (served++ > 0) return;
      for (const p of pieces) {
        await new Promise<void>((r) => res.write(p, () => r()));
        await new Promise((r) => setImmediate(r));
      }
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const abort = new AbortController();
    try {
      const store = new PlantStore({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        token: 'pst_test',
      });
      const got: { id: string; type: string; name: string }[] = [];
      const reading = (async () => {
        for await (const e of store.events({ signal: abort.signal })) {
          got.push({ id: e.id, type: e.type, name: (e.data as { name: string }).name });
          if (got.length === SSE_EVENTS.length) break;
        }
      })();
      await Promise.race([
        reading,
        new Promise((_, no) => setTimeout(() => no(new Error(`timeout: ${JSON.stringify(got)}`)), 10_000)),
      ]);
      assert.deepEqual(got, SSE_EVENTS);
    } finally {
      abort.abort();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

for (const engine of ENGINES)
  describe(`gardens through the typed client on ${engine.name} (CONTRACT.md section 3.2)`, {
    skip: engine.skip,
  }, () => {
    let h: Harness;
    let base: string;
    before(async () => {
      h = await harness(engine);
      base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    });
    after(() => h?.close());

    const as = async () => {
      const c = await h.user();
      return { user: c.user, store: new PlantStore({ url: base, token: c.token }) };
    };
    const refused = (status: number, code: string) => (e: unknown) =>
      e instanceof PlantStoreError && e.status === status && e.code === code;

    it('list, create, get, rename and delete a garden', async () => {
      const { store } = await as();
      const [home, ...rest] = await store.gardens.list();
      assert.deepEqual(rest, []);
      assert.deepEqual(
        { ...home!, id: '', createdAt: '' },
        { id: '', name: 'Home', home: true, role: 'owner', createdAt: '' },
      );
      assert.match(home!.id, /^gdn_/);
      assert.ok(!Number.isNaN(Date.parse(home!.createdAt)));

      const g = await store.gardens.create('Greenhouse');
      assert.deepEqual(
        { name: g.name, home: g.home, role: g.role },
        { name: 'Greenhouse', home: false, role: 'owner' },
      );
      assert.match(g.id, /^gdn_/);
      assert.deepEqual(await store.gardens.get(g.id), g);
      assert.deepEqual(
        (await store.gardens.list()).map((x) => x.id),
        [home!.id, g.id],
        'home first, then by creation',
      );
      const renamed = await store.gardens.rename(g.id, 'Glasshouse');
      assert.deepEqual(renamed, { ...g, name: 'Glasshouse' });
      assert.deepEqual(await store.gardens.get(g.id), renamed);

      await assert.rejects(store.gardens.delete(home!.id), refused(409, 'home_garden'));
      await store.gardens.delete(g.id);
      await assert.rejects(store.gardens.get(g.id), refused(404, 'garden_not_found'));
      await assert.rejects(store.gardens.delete(g.id), refused(404, 'garden_not_found'));
      await assert.rejects(store.gardens.create(' '), refused(400, 'invalid_body'));
      await assert.rejects(store.gardens.get(''), TypeError);
    });

    it('members, share (added, then changed) and unshare; the shared user sees the garden until removed', async () => {
      const owner = await as();
      const other = await as();
      const g = await owner.store.gardens.create('Shared');
      assert.deepEqual(
        (await owner.store.gardens.members(g.id)).map((m) => [m.user, m.role]),
        [[owner.user, 'owner']],
      );
      await assert.rejects(other.store.gardens.get(g.id), refused(404, 'garden_not_found'));

      const added = await owner.store.gardens.share(g.id, other.user);
      assert.equal(added.created, true);
      assert.deepEqual([added.member.user, added.member.role], [other.user, 'viewer'], 'viewer by default');
      assert.ok(!Number.isNaN(Date.parse(added.member.addedAt)));
      const seen = await other.store.gardens.get(g.id);
      assert.deepEqual({ ...seen, role: 'owner' }, g);
      assert.equal(seen.role, 'viewer');
      assert.deepEqual(
        (await other.store.gardens.list()).map((x) => [x.name, x.role]),
        [
          ['Home', 'owner'],
          ['Shared', 'viewer'],
        ],
      );
      await assert.rejects(other.store.gardens.rename(g.id, 'Mine now'), refused(403, 'insufficient_role'));
      await assert.rejects(other.store.gardens.share(g.id, 'someone'), refused(403, 'insufficient_role'));

      const changed = await owner.store.gardens.share(g.id, other.user, 'editor');
      assert.equal(changed.created, false);
      assert.deepEqual([changed.member.role, changed.member.addedAt], ['editor', added.member.addedAt]);
      assert.deepEqual(
        (await other.store.gardens.members(g.id)).map((m) => [m.user, m.role]),
        [
          [owner.user, 'owner'],
          [other.user, 'editor'],
        ],
      );
      // A user who has never signed in may be added; its name is URL-encoded in the path.
      const odd = 'ann/o%b?c#d@example';
      assert.equal((await owner.store.gardens.share(g.id, odd, 'owner')).member.user, odd);
      assert.ok((await owner.store.gardens.members(g.id)).some((m) => m.user === odd && m.role === 'owner'));
      await owner.store.gardens.unshare(g.id, odd);

      await assert.rejects(owner.store.gardens.unshare(g.id, owner.user), refused(409, 'last_owner'));
      await assert.rejects(
        owner.store.gardens.unshare(g.id, 'nobody-here'),
        refused(404, 'member_not_found'),
      );
      await owner.store.gardens.unshare(g.id, other.user);
      await assert.rejects(other.store.gardens.get(g.id), refused(404, 'garden_not_found'));
      assert.deepEqual(
        (await other.store.gardens.list()).map((x) => x.name),
        ['Home'],
      );

      // Leaving: any member may remove itself.
      await owner.store.gardens.share(g.id, other.user, 'viewer');
      await other.store.gardens.unshare(g.id, other.user);
      await assert.rejects(other.store.gardens.members(g.id), refused(404, 'garden_not_found'));
    });

    it('plants: create into a garden, list one garden with its garden and version, every page, all()', async () => {
      const owner = await as();
      const viewer = await as();
      const stranger = await as();
      const g = await owner.store.gardens.create('Beds');
      await owner.store.gardens.share(g.id, viewer.user, 'viewer');
      const [home] = await owner.store.gardens.list();

      const inHome = await owner.store.create({ name: 'At home', tag: 'x' });
      const made = [];
      for (let i = 0; i < 7; i++)
        made.push(
          await owner.store.create({ name: `Bed ${i}`, ...(i % 2 ? { tag: 'odd' } : {}) }, { garden: g.id }),
        );
      assert.ok(made.every((p) => Number.isSafeInteger(p.id) && /^"[^"]+"$/.test(p.etag)));
      assert.deepEqual(await owner.store.get(made[0]!.id), { name: 'Bed 0', etag: made[0]!.etag });

      // One garden's plants, page after page, each with its garden and version.
      const pages = await owner.store.page({ garden: g.id, limit: 3, include: ['garden', 'version'] });
      assert.equal(pages.plants.length, 3);
      assert.ok(pages.next, 'a next page');
      assert.deepEqual(
        { ...pages.plants[0]!, version: 0 },
        { id: made[0]!.id, garden: g.id, version: 0, name: 'Bed 0' },
      );
      assert.equal(`"${pages.plants[0]!.version}"`, made[0]!.etag, 'the version is what the ETag quotes');
      const second = await owner.store.page({ next: pages.next });
      assert.deepEqual(
        second.plants.map((p) => [p.id, (p as { garden?: string }).garden]),
        made.slice(3, 6).map((p) => [p.id, g.id]),
        'the next link keeps the garden and include',
      );
      const everyPage = [];
      for await (const p of owner.store.list({ garden: g.id, limit: 2, include: ['garden'] }))
        everyPage.push(p);
      assert.deepEqual(
        everyPage.map((p) => [p.id, p.garden]),
        made.map((p) => [p.id, g.id]),
      );
      assert.deepEqual(
        (await owner.store.all({ garden: g.id, tag: 'odd', limit: 1 })).map((p) => [p.name, p.tag]),
        [
          ['Bed 1', 'odd'],
          ['Bed 3', 'odd'],
          ['Bed 5', 'odd'],
        ],
      );
      // Across the caller's gardens, in id order, each with its own garden.
      const everything = await owner.store.all({ limit: 4, include: ['garden'] });
      assert.deepEqual(
        everything.map((p) => [p.id, p.garden]),
        [[inHome.id, home!.id], ...made.map((p) => [p.id, g.id])],
      );
      assert.deepEqual(
        (await viewer.store.all({ include: ['garden'] })).map((p) => p.id),
        made.map((p) => p.id),
        'a viewer sees the shared garden’s plants',
      );

      // A viewer may not create there; a stranger does not see the garden at all.
      const denied = await viewer.store.create({ name: 'Weed' }, { garden: g.id }).catch((e: unknown) => e);
      assert.ok(refused(403, 'insufficient_role')(denied), String(denied));
      assert.equal(
        (denied as PlantStoreError).message,
        'only an editor or owner of this garden may change its plants',
      );
      await assert.rejects(
        stranger.store.create({ name: 'Weed' }, { garden: g.id }),
        refused(404, 'garden_not_found'),
      );
      await assert.rejects(stranger.store.page({ garden: g.id }), refused(404, 'garden_not_found'));
      await assert.rejects(owner.store.gardens.delete(g.id), refused(409, 'garden_not_empty'));
    });

    it('a garden create is tried again after a 503 (nothing was made), never after a lost answer', async () => {
      const { store: direct, user } = await as();
      const token = (
        await createToken(h.store, {
          user,
          scopes: ['plants:read', 'plants:write'],
          name: null,
          expiresInMs: null,
        })
      ).secret;
      const proxy = await startProxy(base);
      try {
        const store = new PlantStore({ url: proxy.url, token });
        proxy.rules.push(answer(503, { 'retry-after': '0' }));
        const g = await store.gardens.create('After a 503');
        assert.equal(proxy.seen.filter((s) => s.method === 'POST').length, 2);
        // The service makes it; its answer is lost: not tried again (it might make a second).
        proxy.seen.length = 0;
        proxy.rules.push((req, res) => {
          const up = httpRequest(`${base}${req.url}`, { method: req.method, headers: req.headers }, (r) => {
            r.resume().on('end', () => res.socket?.destroy());
          });
          req.pipe(up);
          return true;
        });
        const lost = await store.gardens.create('Lost answer').catch((e: unknown) => e);
        assert.ok(
          lost instanceof PlantStoreError && lost.status === 0 && lost.code === 'unreachable',
          String(lost),
        );
        assert.equal(proxy.seen.length, 1, 'one attempt');
        assert.deepEqual(
          (await direct.gardens.list()).map((x) => x.name),
          ['Home', 'After a 503', 'Lost answer'],
        );
        // A share is safe to repeat: a retry after a 503 adds the member once.
        proxy.rules.push(answer(503, { 'retry-after': '0' }));
        const shared = await store.gardens.share(g.id, 'retried-user', 'editor');
        assert.deepEqual([shared.created, shared.member.role], [true, 'editor']);
      } finally {
        await proxy.close();
      }
    });
  });

for (const engine of ENGINES)
  describe(`tokens through the typed client on ${engine.name} (CONTRACT.md section 3.3)`, {
    skip: engine.skip,
  }, () => {
    let h: Harness;
    let base: string;
    before(async () => {
      h = await harness(engine);
      base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    });
    after(() => h?.close());

    const MANAGER: Scope[] = ['plants:read', 'plants:write', 'tokens:manage'];
    const as = async (scopes: Scope[] = MANAGER) => {
      const c = await h.user(scopes);
      return { ...c, store: new PlantStore({ url: base, token: c.token }) };
    };
    const refused = (status: number, code: string) => (e: unknown) =>
      e instanceof PlantStoreError && e.status === status && e.code === code;
    const newestFirst = (a: Token, b: Token) =>
      Date.parse(b.createdAt) - Date.parse(a.createdAt) || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

    it('create answers the secret once; get, list and all never do; the new token works', async () => {
      const me = await as();
      const before = Date.now();
      const made = await me.store.tokens.create({ scopes: ['plants:read'], expiresIn: '30d', name: 'dash' });
      assert.deepEqual(Object.keys(made).sort(), [
        'createdAt',
        'expiresAt',
        'id',
        'name',
        'scopes',
        'token',
        'user',
      ]);
      assert.match(made.token, /^pst_[A-Za-z0-9_-]{43,}$/);
      assert.match(made.id, /^tok_/);
      assert.deepEqual(
        { user: made.user, scopes: made.scopes, name: made.name },
        { user: me.user, scopes: ['plants:read'], name: 'dash' },
      );
      const life = Date.parse(made.expiresAt!) - before;
      assert.ok(life >= 30 * 86_400_000 && life < 30 * 86_400_000 + 60_000, `expires in 30 days: ${life}`);

      const shown = await me.store.tokens.get(made.id);
      const { token: _secret, ...rest } = made;
      assert.deepEqual(shown, { ...rest, lastUsedAt: null, status: 'active' });

      const viaNew = new PlantStore({ url: base, token: made.token });
      assert.deepEqual(await viaNew.me(), {
        user: me.user,
        scopes: ['plants:read'],
        kind: 'token',
        tokenId: made.id,
        expiresAt: made.expiresAt,
      });
      // Without tokens:manage, the new token may not manage tokens itself.
      await assert.rejects(viaNew.tokens.list(), refused(403, 'insufficient_scope'));
      await assert.rejects(viaNew.tokens.create(), refused(403, 'insufficient_scope'));

      const defaults = await me.store.tokens.create();
      assert.deepEqual(
        { user: defaults.user, scopes: defaults.scopes, name: defaults.name, expiresAt: defaults.expiresAt },
        { user: me.user, scopes: ['plants:read', 'plants:write'], name: null, expiresAt: null },
      );
      const all = await me.store.tokens.all();
      assert.ok(
        all.every((t) => !('token' in t)),
        'no secret in a list',
      );
      assert.deepEqual(all.map((t) => t.id).sort(), [me.tokenId, made.id, defaults.id].sort());
    });

    it('list pages newest first through Link (next, or its cursor); all() reads every page', async () => {
      const me = await as();
      const made: string[] = [];
      for (let i = 0; i < 6; i++) made.push((await me.store.tokens.create({ name: `t${i}` })).id);
      const every = await me.store.tokens.all();
      assert.equal(every.length, 7, 'the six and the token in use');
      assert.deepEqual(every, [...every].sort(newestFirst), 'newest first');
      assert.equal(every.at(-1)!.id, me.tokenId, 'the oldest, made first, is last');
      assert.deepEqual(new Set(every.slice(0, 6).map((t) => t.id)), new Set(made));

      const first = await me.store.tokens.list({ limit: 3 });
      assert.deepEqual(
        first.tokens.map((t) => t.id),
        every.slice(0, 3).map((t) => t.id),
      );
      assert.ok(first.next, 'a next page');
      const second = await me.store.tokens.list({ next: first.next });
      assert.deepEqual(
        second.tokens.map((t) => t.id),
        every.slice(3, 6).map((t) => t.id),
        'the next link keeps the page size',
      );
      const cursor = new URL(first.next, base).searchParams.get('cursor')!;
      assert.deepEqual(await me.store.tokens.list({ limit: 3, cursor }), second);
      const last = await me.store.tokens.list({ next: second.next });
      assert.deepEqual([last.tokens.map((t) => t.id), last.next], [[me.tokenId], null]);
      assert.deepEqual(await me.store.tokens.all({ limit: 2 }), every, 'the same, two at a time');
      assert.deepEqual(await me.store.tokens.all({ user: me.user }), every, 'its own user named');
      await assert.rejects(me.store.tokens.list({ limit: 0 }), refused(400, 'invalid_parameter'));
    });

    it('revoke: the token stops working at once, shows as revoked, and a second revoke succeeds again', async () => {
      const me = await as();
      const made = await me.store.tokens.create({ scopes: ['plants:read'] });
      const other = new PlantStore({ url: base, token: made.token, retries: 0 });
      await other.me();
      await me.store.tokens.revoke(made.id);
      await assert.rejects(other.me(), refused(401, 'invalid_token'));
      assert.equal((await me.store.tokens.get(made.id)).status, 'revoked');
      await me.store.tokens.revoke(made.id);
      // Revoking the token in use is allowed; it is the last thing it does.
      await me.store.tokens.revoke(me.tokenId);
      await assert.rejects(me.store.tokens.get(made.id), refused(401, 'invalid_token'));
    });

    it('refusals: 403 scope_not_held for more than the maker holds, 404 token_not_found for another user’s token', async () => {
      const reader = await as(['plants:read', 'tokens:manage']);
      const stranger = await as();
      await assert.rejects(
        reader.store.tokens.create(),
        refused(403, 'scope_not_held'),
        'the default has plants:write',
      );
      const err = await reader.store.tokens.create({ scopes: ['plants:admin'] }).catch((e: unknown) => e);
      assert.ok(refused(403, 'scope_not_held')(err), String(err));
      assert.ok((err as PlantStoreError).details?.some((d) => d.field === '/scopes'));
      await assert.rejects(
        reader.store.tokens.create({ user: stranger.user, scopes: ['plants:read'] }),
        refused(403, 'scope_not_held'),
      );
      await assert.rejects(reader.store.tokens.list({ user: stranger.user }), refused(403, 'scope_not_held'));
      await assert.rejects(reader.store.tokens.create({ expiresIn: 'soon' }), refused(400, 'invalid_body'));

      await assert.rejects(reader.store.tokens.get(stranger.tokenId), refused(404, 'token_not_found'));
      await assert.rejects(reader.store.tokens.revoke(stranger.tokenId), refused(404, 'token_not_found'));
      await assert.rejects(reader.store.tokens.get('tok_AAAAAAAAAAAA'), refused(404, 'token_not_found'));
      await assert.rejects(reader.store.tokens.get('not a token/..'), refused(404, 'token_not_found'));
      assert.equal((await stranger.store.tokens.get(stranger.tokenId)).status, 'active', 'still working');
      await assert.rejects(reader.store.tokens.get(''), TypeError);

      const plain = await as(['plants:read', 'plants:write']);
      const denied = await plain.store.tokens.all().catch((e: unknown) => e);
      assert.ok(refused(403, 'insufficient_scope')(denied), String(denied));
    });

    it('an admin sees, lists and revokes another user’s tokens, and makes tokens for it', async () => {
      const admin = await as(['plants:admin', 'tokens:manage']);
      const user = await as(['plants:read']);
      const made = await admin.store.tokens.create({
        user: user.user,
        scopes: ['plants:read', 'plants:write'],
      });
      assert.equal(made.user, user.user);
      assert.equal((await admin.store.tokens.get(user.tokenId)).user, user.user);
      assert.deepEqual(
        (await admin.store.tokens.all({ user: user.user })).map((t) => t.id),
        [made.id, user.tokenId],
      );
      await admin.store.tokens.revoke(user.tokenId);
      assert.equal((await admin.store.tokens.get(user.tokenId)).status, 'revoked');
    });

    it('a create is tried again after a 503 (nothing was made), never after a lost answer', async () => {
      const me = await as();
      const proxy = await startProxy(base);
      try {
        const store = new PlantStore({ url: proxy.url, token: me.token });
        proxy.rules.push(answer(503, { 'retry-after': '0' }));
        const once = await store.tokens.create({ name: 'after a 503' });
        assert.equal(proxy.seen.filter((s) => s.method === 'POST').length, 2);
        proxy.seen.length = 0;
        proxy.rules.push((req, res) => {
          const up = httpRequest(`${base}${req.url}`, { method: req.method, headers: req.headers }, (r) => {
            r.resume().on('end', () => res.socket?.destroy());
          });
          req.pipe(up);
          return true;
        });
        const lost = await store.tokens.create({ name: 'lost answer' }).catch((e: unknown) => e);
        assert.ok(refused(0, 'unreachable')(lost), String(lost));
        assert.equal(proxy.seen.length, 1, 'one attempt');
        const names = (await me.store.tokens.all()).map((t) => t.name);
        assert.deepEqual(names.slice(0, 2).sort(), ['after a 503', 'lost answer'], 'each made once');
        assert.equal(names.length, 3);
        assert.equal((await me.store.tokens.get(once.id)).name, 'after a 503');
      } finally {
        await proxy.close();
      }
    });
  });
