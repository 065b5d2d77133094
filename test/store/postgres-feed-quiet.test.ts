// On PostgreSQL a delta asks a small statement first (feedQuiet) when the last delta found the log
// quiet: it answers an empty delta alone, exactly as the whole statement (feedDelta) would, and
// hands over to feedDelta as soon as anything follows the position, even when the write was made
// by another instance that this one never heard of. Deltas that ask it at the same time share one
// statement, which is sent only after each of them asked.
import assert from 'node:assert/strict';
import { connect, createServer, type Server as NetServer, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { buildApp } from '../../src/app.js';
import { testConfig } from '../../src/config.js';
import { createToken } from '../../src/identity/tokens.js';
import type { FeedStart } from '../../src/store/ports/changes.js';
import { PgStore } from '../../src/store/postgres/store.js';
import { ENGINES, twoInstances } from '../helpers/engines.js';
import { settled } from '../helpers/feed.js';
import { garden } from '../helpers/gardens.js';
import { until } from '../helpers/wait.js';

const skip = ENGINES.find((e) => e.name === 'postgres')?.skip ?? 'no postgres engine';
const LOG = { limit: 101, tailLimit: 101, garden: null };

/** A TCP proxy to PostgreSQL that, while `hold`, keeps what PostgreSQL sends until `release()`. */
class HoldingProxy {
  hold = false;
  private server: NetServer | null = null;
  private readonly sockets = new Set<Socket>();
  /** What was held, connection by connection. */
  private readonly kept = new Map<Socket, Buffer[]>();
  port = 0;
  constructor(private readonly target: URL) {}

  /** How many connections have answers held. */
  get held(): number {
    return this.kept.size;
  }

  async open(): Promise<void> {
    this.server = createServer((client) => {
      const upstream = connect({ host: this.target.hostname, port: Number(this.target.port || 5432) });
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {});
      }
      client.pipe(upstream);
      upstream.on('data', (chunk: Buffer) => {
        if (!this.hold) return void client.write(chunk);
        const kept = this.kept.get(client) ?? [];
        kept.push(chunk);
        this.kept.set(client, kept);
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  release(): void {
    this.hold = false;
    for (const [client, chunks] of this.kept) for (const c of chunks) client.write(c);
    this.kept.clear();
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server?.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }
}

/** A FeedStart without its head and the log's position (the cluster's xmin moves with other work). */
const shape = (s: FeedStart) => ({
  purgedUpTo: s.purgedUpTo,
  gardens: s.gardens,
  moved: s.moved,
  events: s.log?.events,
  committed: s.log?.committed,
  plants: s.log?.plants,
});

describe('postgres change feed: the quiet probe', { skip }, () => {
  it('an empty delta after a quiet one is feedQuiet alone, the same answer; a write elsewhere goes to feedDelta', {
    timeout: 60_000,
  }, async () => {
    const { stores, close } = await twoInstances('postgres');
    const [a, b] = stores as [PgStore, PgStore];
    // Writes through an app on a; b only answers deltas, with no app and no listener of its own.
    const app = await buildApp(testConfig({}), { store: a });
    try {
      const { secret } = await createToken(a, {
        user: 'quiet',
        scopes: ['plants:read', 'plants:write'],
        name: null,
        expiresInMs: null,
      });
      const create = async (name: string) => {
        const res = await app.inject({
          method: 'POST',
          url: '/plants',
          headers: { authorization: `Bearer ${secret}` },
          payload: { name },
        });
        assert.equal(res.statusCode, 201, res.body);
        return Number(String(res.headers.location).split('/').pop());
      };
      await create('Fern');
      await settled(a);
      const since = await a.headPosition();

      // The first delta: feedDelta, nothing after since; it finds the log quiet.
      const full = await b.feedStart('quiet', since, LOG);
      assert.deepEqual(b.feedReads, { quiet: 0, delta: 1 });
      assert.equal(full.log?.events.length, 0);
      assert.equal(full.gardens?.length, 1, 'the home garden');

      // The next: feedQuiet alone, the same answer.
      const quiet = await b.feedStart('quiet', since, LOG);
      assert.deepEqual(b.feedReads, { quiet: 1, delta: 1 });
      assert.deepEqual(shape(quiet), shape(full));
      assert.ok(b.comparePositions(quiet.head, full.head) >= 0);

      // A plant created through a: b's guess is still quiet, feedQuiet finds the log is not, and
      // feedDelta reads the create.
      const id = await create('Moss');
      await settled(a);
      const after = await b.feedStart('quiet', since, LOG);
      assert.deepEqual(b.feedReads, { quiet: 2, delta: 2 });
      assert.deepEqual(
        after.log?.events.map((e) => [e.type, e.plant]),
        [['plant.created', id]],
      );
      assert.deepEqual(
        after.log?.plants.map((p) => p.name),
        ['Moss'],
      );

      // That delta was not quiet: the next goes to feedDelta straight away.
      await b.feedStart('quiet', since, LOG);
      assert.deepEqual(b.feedReads, { quiet: 2, delta: 3 });

      // From the head: feedDelta (the guess was not quiet), which finds the log quiet again.
      await b.feedStart('quiet', await a.headPosition(), LOG);
      assert.deepEqual(b.feedReads, { quiet: 2, delta: 4 });
      // A position past the head is not quiet, though nothing follows it: feedDelta decides.
      const [xid] = after.head.split('.');
      await b.feedStart('quiet', `${BigInt(xid!) + 1000n}.0`, LOG);
      assert.deepEqual(b.feedReads, { quiet: 3, delta: 5 });

      // A position inside the log (the create's own, its seq not 0) with a garden named, once the
      // log is found quiet again: feedQuiet alone, and its answer is the one feedDelta gives (a,
      // which has not read a delta yet, asks feedDelta).
      await b.feedStart('quiet', await a.headPosition(), LOG);
      assert.deepEqual(b.feedReads, { quiet: 3, delta: 6 });
      const moss = after.log!.events[0]!.position;
      assert.ok(!moss.endsWith('.0'), moss);
      const home = { ...LOG, garden: full.gardens![0]! };
      const quietOne = await b.feedStart('quiet', moss, home);
      assert.deepEqual(b.feedReads, { quiet: 4, delta: 6 });
      const fullOne = await a.feedStart('quiet', moss, home);
      assert.deepEqual(a.feedReads, { quiet: 0, delta: 1 });
      assert.deepEqual(shape(quietOne), shape(fullOne));
      assert.equal(quietOne.log?.events.length, 0);
    } finally {
      await app.close();
      await close();
    }
  });
  /** An app on a, and a way for `user` to create a plant through it (its id). */
  async function writer(a: PgStore, users: string[]) {
    const app = await buildApp(testConfig({}), { store: a });
    const secrets = new Map<string, string>();
    for (const user of users) {
      const { secret } = await createToken(a, {
        user,
        scopes: ['plants:read', 'plants:write'],
        name: null,
        expiresInMs: null,
      });
      secrets.set(user, secret);
    }
    const create = async (user: string, name: string) => {
      const res = await app.inject({
        method: 'POST',
        url: '/plants',
        headers: { authorization: `Bearer ${secrets.get(user)}` },
        payload: { name },
      });
      assert.equal(res.statusCode, 201, res.body);
      return Number(String(res.headers.location).split('/').pop());
    };
    return { app, create };
  }

  it('deltas asking at the same time share one statement, each with its own memberships', {
    timeout: 60_000,
  }, async () => {
    const { stores, close } = await twoInstances('postgres');
    const [a, b] = stores as [PgStore, PgStore];
    const users = ['ann', 'bob', 'cy'];
    const { app, create } = await writer(a, users);
    try {
      // Each user's home garden; bob is also a member of a garden of ann's.
      for (const user of users) await create(user, `${user}'s fern`);
      await garden(a, 'ann', [['bob', 'viewer']]);
      await settled(a);
      const since = await a.headPosition();
      await b.feedStart('ann', since, LOG); // feedDelta, which finds the log quiet
      const before = { ...b.feedReads, statements: b.quietStatements };

      const asked = users.flatMap((user) => [user, user, user]);
      const answers = await Promise.all(asked.map((user) => b.feedStart(user, since, LOG)));
      assert.equal(b.feedReads.quiet - before.quiet, asked.length, 'each asked feedQuiet');
      assert.equal(b.feedReads.delta, before.delta, 'none needed feedDelta');
      assert.equal(b.quietStatements - before.statements, 1, 'one statement for them all');
      for (const [i, user] of asked.entries()) {
        const gardens = (await a.memberships(user)).map((m) => m.garden).sort();
        assert.deepEqual(answers[i]!.gardens, gardens, user);
        assert.deepEqual(answers[i]!.log?.events, [], user);
      }
      assert.equal(answers[asked.indexOf('bob')]!.gardens?.length, 2);
    } finally {
      await app.close();
      await close();
    }
  });

  it('a delta asked while statements read before a write are on their way sees the write', {
    timeout: 60_000,
  }, async () => {
    const { stores, url, close } = await twoInstances('postgres');
    const a = stores[0] as PgStore;
    const { app, create } = await writer(a, ['quiet']);
    // b reaches PostgreSQL through a proxy that can hold back what PostgreSQL answers.
    const proxy = new HoldingProxy(new URL(url));
    await proxy.open();
    const viaProxy = new URL(url);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    const b = new PgStore({ url: viaProxy.toString(), poolSize: 4 });
    try {
      await create('quiet', 'Fern');
      await settled(a);
      const since = await a.headPosition();
      await b.feedStart('quiet', since, LOG); // feedDelta, which finds the log quiet
      // Every feed connection open (two deltas in turns of their own), so that none is opened
      // while answers are held.
      await Promise.all([
        b.feedStart('quiet', since, LOG),
        new Promise((resolve) => setImmediate(resolve)).then(() => b.feedStart('quiet', since, LOG)),
      ]);

      // Deltas in turns of their own, their answers held: PostgreSQL has read each statement's
      // snapshot, before the create below.
      proxy.hold = true;
      const before = b.quietStatements;
      const early: Promise<FeedStart>[] = [];
      for (let i = 0; i < 6; i++) {
        early.push(b.feedStart('quiet', since, LOG));
        await new Promise((resolve) => setImmediate(resolve));
      }
      await until('the statements sent to be answered', () => {
        const sent = b.quietStatements - before;
        return sent >= 1 && proxy.held === sent;
      });
      const sent = b.quietStatements - before;
      assert.ok(sent < 6, `${sent} statements for 6 deltas: the rest wait for one to return`);

      // A plant created now, then a delta: it must see the plant, though statements that read the
      // log before the create are on their way back.
      const id = await create('quiet', 'Moss');
      const late = b.feedStart('quiet', since, LOG);
      proxy.release();
      const answer = await late;
      assert.deepEqual(
        [...(answer.log?.events ?? []), ...(answer.log?.committed ?? [])]
          .filter((e) => e.type === 'plant.created')
          .map((e) => e.plant),
        [id],
      );
      for (const e of await Promise.all(early)) assert.equal(e.gardens?.length, 1);
    } finally {
      proxy.release();
      await b.close();
      await proxy.close();
      await app.close();
      await close();
    }
  });
});
