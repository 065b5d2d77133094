import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { ENGINES } from '../helpers/engines.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { openStream } from '../helpers/sse.js';
import { rewriteExport } from '../helpers/store-file.js';
import { until } from '../helpers/wait.js';
import { cli, type Server, serve } from './process.js';

// Moving a store from SQLite to PostgreSQL with the commands of contract section 12, as an operator
// would: a store filled through the API (gardens shared, plants made, changed and deleted, tokens,
// an endpoint whose deliveries wait for a retry, a stream's position), `plantstore export` while it
// serves and once it has stopped, `plantstore import` into PostgreSQL, and a service on PostgreSQL
// that answers every recorded request as before, takes the same tokens, resumes the stream from a
// Last-Event-ID issued before the move and delivers what was pending, signed with the same secret.

const postgres = ENGINES.find((e) => e.name === 'postgres')!;

describe('moving a store from SQLite to PostgreSQL', { skip: postgres.skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-move-'));
  const common = {
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s,1s,1s,1s,1s,1s,1s,1s',
    RATE_LIMIT: '0',
  };
  const sqliteEnv = { ...common, DATABASE_URL: `sqlite:${join(dir, 'live.db')}` };
  let pgEnv: Record<string, string>;
  let drop = async () => {};
  let receiver: Receiver;
  const servers: Server[] = [];
  before(async () => {
    const db = await postgres.database();
    pgEnv = { ...common, DATABASE_URL: db.url };
    drop = db.drop;
    receiver = await startReceiver();
  });
  after(async () => {
    for (const s of servers) await s.stop();
    await receiver?.close();
    await drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers, tokens, a resumed stream and pending deliveries survive export and import', async () => {
    const sqlite = await serve([], sqliteEnv);
    servers.push(sqlite);
    const tokenOf = async (u: string) =>
      (await cli(['token', 'create', '--user', u], sqliteEnv)).stdout.trim();
    const alice = await tokenOf('alice');
    const bob = await tokenOf('bob');
    const call = async (
      base: string,
      token: string,
      method: string,
      path: string,
      body?: unknown,
      extra = {},
    ) => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...extra,
          ...(body
            ? { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }
            : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return {
        status: res.status,
        etag: res.headers.get('etag'),
        location: res.headers.get('location'),
        body: await res.text(),
      };
    };
    const json = async (token: string, method: string, path: string, body?: unknown) =>
      JSON.parse((await call(sqlite.url, token, method, path, body)).body);

    const stream = await openStream(`${sqlite.url}/events`, { authorization: `Bearer ${alice}` });
    const garden = await json(alice, 'POST', '/gardens', { name: 'Greenhouse' });
    const home = (await json(alice, 'GET', '/gardens')).find((g: { home: boolean }) => g.home);
    for (const g of [garden.id, home.id]) {
      const shared = await call(sqlite.url, alice, 'PUT', `/gardens/${g}/members/bob`, { role: 'editor' });
      assert.ok(shared.status === 200 || shared.status === 201, shared.body);
    }
    receiver.answers.push(...Array.from({ length: 200 }, () => ({ status: 503 })));
    const hook = await json(alice, 'POST', '/webhooks', {
      url: `${receiver.url}/hook`,
      events: ['plant.created', 'plant.updated', 'plant.deleted'],
    });
    // Alice's plants go to her home garden, which Bob may change; Bob's to his, which she cannot see.
    const ids: number[] = [];
    for (let i = 0; i < 8; i++) {
      const made = await call(sqlite.url, i % 2 ? bob : alice, 'POST', '/plants', {
        name: `Plant ${i}`,
        ...(i % 3 ? { tag: 'indoor' } : {}),
      });
      assert.equal(made.status, 201, made.body);
      ids.push(Number(made.location!.split('/').pop()));
    }
    assert.equal(
      (await call(sqlite.url, bob, 'PATCH', `/plants/${ids[0]}`, { name: 'Renamed' }, { 'if-match': '*' }))
        .status,
      200,
    );
    assert.equal((await call(sqlite.url, alice, 'DELETE', `/plants/${ids[2]}`)).status, 204);
    // Alice sees Bob's two member.added (contract 13.3) and the plants of her home garden: four
    // made, one changed, one deleted.
    const seen = await stream.waitFor(8, 10_000);
    stream.close();
    // Every delivery so far is refused (503): they wait for a retry when the store moves.
    await until('a delivery of each event refused', () => receiver.received.length >= 6);

    const exportedLive = join(dir, 'live.ndjson');
    const live = await cli(['export', '--to', exportedLive], sqliteEnv);
    assert.equal(live.code, 0, live.stderr);
    assert.match(live.stderr, /webhook secrets/);
    assert.equal(statSync(exportedLive).mode & 0o777, 0o600);

    const requests: [string, string][] = [
      [alice, '/plants?limit=100'],
      [bob, '/plants?limit=100'],
      [alice, '/plants?tag=indoor'],
      [alice, `/plants/${ids[0]}`],
      [bob, `/plants/${ids[1]}`],
      [alice, `/plants/${ids[2]}`],
      // The deleted plant waits in Alice's trash (contract 13.2): it moves with its dates.
      [alice, '/trash'],
      [alice, '/gardens'],
      [bob, `/gardens/${garden.id}/members`],
      [alice, `/webhooks/${hook.id}`],
      [alice, '/tokens'],
    ];
    const recorded = [];
    for (const [t, path] of requests) recorded.push(await call(sqlite.url, t, 'GET', path));
    await sqlite.stop();
    servers.pop();

    const file = join(dir, 'store.ndjson');
    const out = await cli(['export', '--to', file], sqliteEnv);
    assert.equal(out.code, 0, out.stderr);
    assert.equal((await cli(['export', '--to', file], sqliteEnv)).code, 2, 'never over an existing file');
    // A tampered file whose checksum was made again: a plant in a garden it does not hold.
    const tampered = join(dir, 'tampered.ndjson');
    let line = 0;
    await rewriteExport(file, tampered, (rs) => {
      const i = rs.findIndex((r) => r.kind === 'plant');
      line = i + 2;
      return rs.map((r, j) => (j === i ? { ...r, garden: 'gdn_000000000000000000000000' } : r));
    });
    const refused = await cli(['import', tampered], pgEnv);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(
      refused.stderr,
      new RegExp(`^plantstore: line ${line}: plant \\d+: its garden gdn_0+ is not in the file\n$`),
    );
    const imported = await cli(['import', file], pgEnv);
    assert.equal(imported.code, 0, imported.stderr);
    // pg 8 warns of a query sent while another runs (pg 9 refuses it): the import never does.
    assert.doesNotMatch(imported.stderr, /already executing a query|Warning/);
    assert.match(
      imported.stdout,
      // 10 plant events and the two member.added of Bob's sharing (contract 13.3).
      /imported 3 gardens, 5 members, 7 plants, 1 trashed plants, 2 tokens, 12 events, 1 webhooks, \d+ deliveries/,
    );
    const again = await cli(['import', file], pgEnv);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /holds data/);

    receiver.answers.length = 0;
    const moved = receiver.received.length;
    const pg = await serve([], pgEnv);
    servers.push(pg);
    for (const [i, [t, path]] of requests.entries()) {
      const now = await call(pg.url, t, 'GET', path);
      // Tokens were last used a minute later, maybe: compare what does not move.
      const norm = (b: string) => b.replace(/"lastUsedAt":"[^"]*"/g, '');
      assert.deepEqual(
        { ...now, body: norm(now.body) },
        { ...recorded[i], body: norm(recorded[i]!.body) },
        path,
      );
    }

    // The stream resumes after an event issued before the move.
    const resumed = await openStream(`${pg.url}/events`, {
      authorization: `Bearer ${alice}`,
      'last-event-id': seen[3]!.id!,
    });
    const rest = await resumed.waitFor(seen.length - 4, 10_000);
    resumed.close();
    assert.deepEqual(
      rest.map((m) => [m.id, m.data]),
      seen.slice(4).map((m) => [m.id, m.data]),
    );

    // What was pending is delivered from PostgreSQL, signed with the endpoint's secret.
    const pending = new Set(receiver.received.slice(0, moved).map((d) => d.headers['webhook-id'] as string));
    const done = await until('the pending deliveries', () => {
      const got = receiver.received
        .slice(moved)
        .filter((d) => pending.has(d.headers['webhook-id'] as string));
      return new Set(got.map((d) => d.headers['webhook-id'])).size === pending.size && got;
    });
    const wh = new Webhook(hook.secret);
    for (const d of done) wh.verify(d.body, d.headers as Record<string, string>);

    // New plants get ids after every imported one.
    const made = await call(pg.url, bob, 'POST', '/plants', { name: 'After the move' });
    assert.equal(made.status, 201, made.body);
    const id = Number(made.location!.split('/').pop());
    assert.ok(id > Math.max(...ids), `id ${id}`);
  });
});
