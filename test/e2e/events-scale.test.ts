import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ENGINES } from '../helpers/engines.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { openStream, type SseReader } from '../helpers/sse.js';
import { until } from '../helpers/wait.js';
import { cli, type Server, serve } from './process.js';

const pg = ENGINES.find((e) => e.name === 'postgres')!;

describe('events across two instances on PostgreSQL', { skip: pg.skip }, () => {
  const servers: Server[] = [];
  const readers: SseReader[] = [];
  let receiver: Receiver;
  let drop = async () => {};
  let token = '';
  const env: Record<string, string> = { WEBHOOK_ALLOW_PRIVATE: 'true', RATE_LIMIT: '0' };

  before(async () => {
    const db = await pg.database();
    env.DATABASE_URL = db.url;
    drop = db.drop;
    receiver = await startReceiver();
    servers.push(await serve([], env), await serve([], env));
    token = (await cli(['token', 'create', '--user', 'scale-events'], env)).stdout.trim();
  });
  after(async () => {
    for (const r of readers) r.close();
    for (const s of servers) await s.stop();
    await receiver?.close();
    await drop();
  });

  const create = (i: number, name: string) =>
    fetch(`${servers[i]!.url}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name }),
    });

  it('a create on one instance reaches a stream on the other within 1 s', async (t) => {
    const stream = await openStream(`${servers[1]!.url}/events`, { authorization: `Bearer ${token}` });
    readers.push(stream);
    assert.equal(stream.status, 200);
    const lags: number[] = [];
    for (let i = 0; i < 5; i++) {
      const sent = Date.now();
      assert.equal((await create(0, `across-${i}`)).status, 201);
      const got = await stream.waitFor(i + 1, 5_000);
      assert.equal(JSON.parse(got[i]!.data!).data.name, `across-${i}`);
      lags.push(Date.now() - sent);
    }
    lags.sort((a, b) => a - b);
    t.diagnostic(`create → other instance's stream: ${lags.join(', ')} ms`);
    assert.ok(lags[2]! <= 1_000, `median ${lags[2]} ms`);
  });

  it('a member removed on one instance sees nothing more of the garden on the other, from the next event on', async () => {
    const guest = (await cli(['token', 'create', '--user', 'scale-guest'], env)).stdout.trim();
    const call = (i: number, bearer: string, method: string, path: string, body?: object) =>
      fetch(`${servers[i]!.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
    const made = await call(0, token, 'POST', '/gardens', { name: 'shared with a guest' });
    assert.equal(made.status, 201);
    const gid = ((await made.json()) as { id: string }).id;
    assert.equal(
      (await call(0, token, 'PUT', `/gardens/${gid}/members/scale-guest`, { role: 'viewer' })).status,
      201,
    );
    const stream = await openStream(`${servers[1]!.url}/events`, { authorization: `Bearer ${guest}` });
    readers.push(stream);
    assert.equal(stream.status, 200);
    assert.equal(
      (await call(0, token, 'POST', `/gardens/${gid}/plants`, { name: 'while a member' })).status,
      201,
    );
    // Plant events only: the stream may also show the guest's member.added, written just before it
    // opened (a stream starts at the log's readable end, which on PostgreSQL may lie before it).
    const plantEvents = async (n: number) => {
      for (let k = n; ; k++) {
        const shown = (await stream.waitFor(k, 5_000)).filter((m) =>
          (JSON.parse(m.data!) as { type: string }).type.startsWith('plant.'),
        );
        if (shown.length >= n) return shown;
      }
    };
    const first = await plantEvents(1);
    assert.equal(JSON.parse(first[0]!.data!).data.name, 'while a member');
    assert.equal((await call(0, token, 'DELETE', `/gardens/${gid}/members/scale-guest`)).status, 204);
    assert.equal(
      (await call(0, token, 'POST', `/gardens/${gid}/plants`, { name: 'after leaving' })).status,
      201,
    );
    // The guest's own plant comes after it in the log: once it has arrived, the one before was
    // either shown already or never will be.
    assert.equal((await call(0, guest, 'POST', '/plants', { name: 'marker' })).status, 201);
    const got = await plantEvents(2);
    assert.deepEqual(
      got.map((m) => JSON.parse(m.data!).data.name),
      ['while a member', 'marker'],
    );
  });

  it('two dispatchers share one queue: every event delivered, none twice', async () => {
    const res = await fetch(`${servers[0]!.url}/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: receiver.url }),
    });
    assert.equal(res.status, 201);
    const endpoint = res.headers.get('location')!;
    const n = 60;
    await Promise.all(Array.from({ length: n }, (_, i) => create(i % 2, `shared-${i}`)));
    await receiver.waitFor(n, 15_000);
    // An attempt is logged once the receiver has answered it, by whichever dispatcher made it, so
    // once the log holds n succeeded attempts, n is every send either one made by then: a second
    // send of an event would be a second attempt for it here as well as a second delivery.
    const attempts = await until(`${n} succeeded attempts in the endpoint's attempt log`, async () => {
      const page = await fetch(`${servers[1]!.url}${endpoint}/deliveries?limit=1000`, {
        headers: { authorization: `Bearer ${token}` },
      });
      const list = (await page.json()) as { eventId: string; attempt: number; outcome: string }[];
      return list.filter((a) => a.outcome === 'succeeded').length >= n ? list : undefined;
    });
    assert.deepEqual(
      attempts.map((a) => [a.attempt, a.outcome]),
      Array.from({ length: n }, () => [1, 'succeeded']),
    );
    assert.equal(new Set(attempts.map((a) => a.eventId)).size, n);
    const ids = receiver.received.map((d) => d.headers['webhook-id']);
    assert.equal(ids.length, n);
    assert.equal(new Set(ids).size, n);
    assert.deepEqual(new Set(ids), new Set(attempts.map((a) => a.eventId)));
  });
});
