import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { PgStore } from '../../src/store/postgres/store.js';
import type { Claim, DeliveryJob, FinishedAttempt, LogProgress, Store } from '../../src/store/store.js';
import { createPgDatabase, ENGINES, pgAtVersion } from '../helpers/engines.js';
import { plantOf } from '../helpers/events.js';
import { acknowledged, endpoint, home, plant, user } from '../helpers/gardens.js';
import { statementsOf } from '../helpers/pg-statements.js';
import { until } from '../helpers/wait.js';

// Webhooks from the log on PostgreSQL: the move of a store with queued deliveries (migration 11),
// and claims by several dispatchers at once.

const POSTGRES = ENGINES.find((e) => e.name === 'postgres')!;
const pgSkip = POSTGRES.skip;

// A dispatcher as the store sees it: claims (with the windows it holds), and reports every job as
// acknowledged, with its windows' progress; `keep` decides whether it keeps an endpoint's lease
// (and window) after a report.
class Claimer {
  readonly windows: Record<string, string> = {};
  constructor(
    private readonly store: Store,
    readonly name: string,
    private readonly keep: () => boolean = () => false,
  ) {}

  async round(limit = 50, perEndpoint = 10): Promise<DeliveryJob[]> {
    const now = new Date();
    const claim: Claim = await this.store.claimDeliveries({
      now,
      leaseMs: 60_000,
      leaseOwner: this.name,
      limit,
      perEndpoint,
      skipEndpoints: [],
      windows: { ...this.windows },
    });
    for (const k of Object.keys(this.windows)) delete this.windows[k];
    const f: FinishedAttempt[] = claim.jobs.map((j) => acknowledged(j, this.name, now));
    const progress: LogProgress[] = Object.entries(claim.windows).map(([endpointId, position]) => {
      const kept = this.keep();
      if (kept) this.windows[endpointId] = position;
      return {
        endpointId,
        leaseOwner: this.name,
        position,
        leaseUntil: kept ? new Date(now.getTime() + 60_000) : null,
      };
    });
    await this.store.finishDeliveries(f, progress);
    return claim.jobs;
  }
}

describe('postgres: webhooks from the log', { skip: pgSkip }, () => {
  it('migration 11: each pending delivery is sent once, later events come from the log, none twice', async () => {
    const db = await createPgDatabase();
    const c = new pg.Client({ connectionString: db.url });
    let store: PgStore | undefined;
    try {
      await c.connect();
      await pgAtVersion(c, 10);
      // A store of the version before: alice's endpoint, three events (each its own transaction)
      // with a delivery each: the first succeeded, the second pending (a retry), the third pending
      // (never tried).
      await c.query(`INSERT INTO gardens (id, name, home_user, created_at, created_by)
        VALUES ('gdn_a', 'Home', 'alice', now() - interval '1 hour', 'alice')`);
      await c.query(`INSERT INTO garden_members (garden_id, user_id, role, added_at)
        VALUES ('gdn_a', 'alice', 'owner', now() - interval '1 hour')`);
      await c.query(`INSERT INTO webhook_endpoints (id, owner, admin, url, events, secret, status, created_at)
        VALUES ('we_a', 'alice', false, 'https://example.com/a', 7, 'whsec_a', 'enabled', now() - interval '1 hour')`);
      for (const [i, state, attempts] of [
        [1, 'succeeded', 1],
        [2, 'pending', 1],
        [3, 'pending', 0],
      ] as const) {
        await c.query(`INSERT INTO events (id, type, owner, garden, data, created_at)
          VALUES ('evt_old${i}', 'plant.created', 'alice', 'gdn_a', '{"id":${i},"name":"old${i}","garden":"gdn_a"}', now())`);
        await c.query(`INSERT INTO deliveries (event_id, endpoint_id, state, attempts, next_attempt_at, created_at)
          VALUES ('evt_old${i}', 'we_a', '${state}', ${attempts}, now(), now())`);
      }
      store = new PgStore({ url: db.url, poolSize: 4 });
      assert.deepEqual(await store.migrate(), [
        '0011_deliveries_from_the_log',
        '0012_plant_search',
        '0013_event_actors',
        '0014_history_pages',
        '0015_trash',
        '0016_change_feed',
        '0017_event_traceparent',
      ]);
      const { rows } = await c.query<{ state: string }>('SELECT state FROM deliveries ORDER BY id');
      assert.deepEqual(
        rows.map((r) => r.state),
        ['pending', 'pending'],
        'finished rows go, pending ones stay',
      );
      const fresh = [];
      for (let i = 0; i < 5; i++)
        fresh.push(await plant(store, 'alice', 'gdn_a', { name: `new${i}`, at: new Date() }));
      const a = new Claimer(store, 'a');
      const b = new Claimer(store, 'b', () => true);
      const sent: DeliveryJob[] = [];
      const want = ['old2', 'old3', ...fresh.map((p) => p.name)].sort();
      await until(
        'every pending delivery and every new event sent',
        async () => {
          sent.push(...(await a.round(3, 2)), ...(await b.round(3, 2)));
          return sent.length >= want.length;
        },
        15_000,
      );
      // Anything still to come would come now.
      sent.push(...(await a.round()), ...(await b.round()));
      assert.deepEqual(sent.map((j) => plantOf(j.event.data).name).sort(), want);
      assert.ok(sent.every((j) => j.endpoint.id === 'we_a'));
      assert.deepEqual(
        sent
          .filter((j) => j.id !== null)
          .map((j) => [j.event.id, j.attempts])
          .sort(),
        [
          ['evt_old2', 1],
          ['evt_old3', 0],
        ],
        'the pending ones as the queued deliveries they were',
      );
      const attempts = await store.listAttempts('we_a', { limit: 100, beforeId: null });
      assert.equal(attempts.length, want.length);
      assert.deepEqual(
        attempts
          .filter((x) => x.deliveryId === null)
          .map((x) => x.eventId)
          .sort(),
        sent
          .filter((j) => j.id === null)
          .map((j) => j.event.id)
          .sort(),
        'first attempts from the log are logged without a delivery',
      );
    } finally {
      await c.end().catch(() => {});
      await store?.close();
      await db.drop();
    }
  });

  it('a lot costs two statements: one claim (jobs, their endpoints, windows) and one finish', async () => {
    const store = await POSTGRES.open();
    try {
      const o = user();
      const g = await home(store, o);
      for (let i = 0; i < 3; i++) await endpoint(store, o, { events: ['plant.created'] });
      for (let i = 0; i < 4; i++) await plant(store, o, g, { name: `p${i}`, at: new Date() });
      const claimer = new Claimer(store, 'one');
      const pool = (store as unknown as { pool: { query: (...a: unknown[]) => unknown } }).pool;
      const query = pool.query;
      let n = 0;
      pool.query = function (this: unknown, ...args: unknown[]) {
        // Whether an endpoint is enabled is read at most once a second, not once a lot (its own test below).
        if ((args[0] as { name?: string }).name !== 'anyEnabled') n++;
        return query.apply(this, args);
      };
      try {
        // The log shows the events once every older transaction on the server has ended.
        let jobs = 0;
        await until('the twelve deliveries', async () => {
          n = 0;
          const got = await claimer.round();
          jobs += got.length;
          // (A claim that found nothing has nothing to finish.)
          assert.equal(n, got.length > 0 ? 2 : 1, 'a claim and a finish');
          return jobs >= 12;
        });
        assert.equal(jobs, 12);
      } finally {
        pool.query = query;
      }
    } finally {
      await store.close();
    }
  });

  it('with no endpoint enabled a claim sends no claim statement; one enabled here or by another instance is claimed', async () => {
    const db = await createPgDatabase();
    const a = new PgStore({ url: db.url, poolSize: 2 });
    const b = new PgStore({ url: db.url, poolSize: 2 });
    try {
      await a.migrate();
      // The statements each store sends, by name (a claim is planned for its values: its text).
      const sent = (store: PgStore) =>
        statementsOf(store, (text) => (text.includes('due AS (') ? 'claim' : text.slice(0, 20))).names;
      const byA = sent(a);
      const byB = sent(b);
      // A claimer's rounds until one takes jobs.
      const jobsOf = (claimer: Claimer, what: string) =>
        until(what, async () => {
          const jobs = await claimer.round();
          return jobs.length > 0 && jobs;
        });
      const o = user();
      const g = await home(a, o);
      await plant(a, o, g, { name: 'before any endpoint', at: new Date() });
      const claims = new Claimer(a, 'a');
      byA.length = 0;
      assert.deepEqual(await claims.round(), []);
      assert.deepEqual(await claims.round(), []);
      assert.deepEqual(byA, ['anyEnabled'], 'one check, then nothing until it is a second old');

      // A disabled endpoint is not enabled; enabled here, the next claim takes its events at once.
      const e = await endpoint(a, o, { status: 'disabled', events: ['plant.created'] });
      byA.length = 0;
      assert.deepEqual(await claims.round(), []);
      assert.deepEqual(byA, ['anyEnabled'], 'its write dropped the answer; still none enabled');
      assert.ok('ok' in (await a.updateEndpoint(e.id, { status: 'enabled', disabledReason: null })));
      const p = await plant(a, o, g, { name: 'after', at: new Date() });
      byA.length = 0;
      const got = await jobsOf(claims, 'the event after');
      assert.deepEqual(
        got.map((j) => plantOf(j.event.data).id),
        [p.id],
      );
      assert.equal(byA[0], 'anyEnabled');
      assert.ok(byA.includes('claim'));

      // Another instance that last saw none enabled claims the endpoint's events once its answer is
      // a second old (none is lost meanwhile: they wait in the log after the endpoint's position).
      const other = new Claimer(b, 'b');
      await a.updateEndpoint(e.id, { status: 'disabled', disabledReason: 'test' });
      byB.length = 0;
      assert.deepEqual(await other.round(), []);
      assert.deepEqual(byB, ['anyEnabled']);
      assert.ok('ok' in (await a.updateEndpoint(e.id, { status: 'enabled', disabledReason: null })));
      const q = await plant(a, o, g, { name: 'seen by the other instance', at: new Date() });
      const later = await jobsOf(other, 'the other instance claims it');
      assert.deepEqual(
        later.map((j) => plantOf(j.event.data).id),
        [q.id],
      );
    } finally {
      await a.close();
      await b.close();
      await db.drop();
    }
  });

  it("a dispatcher's claim and record racing on one endpoint: its window is neither lost nor ended under it", async () => {
    const store = await POSTGRES.open();
    const url = (store as unknown as { pool: { options: { connectionString: string } } }).pool.options
      .connectionString;
    const other = new pg.Client({ connectionString: url });
    try {
      await other.connect();
      const o = user();
      const g = await home(store, o);
      const e = await endpoint(store, o, { events: ['plant.created'] });
      const head = await store.headPosition();
      for (let i = 0; i < 6; i++) await plant(store, o, g, { name: `p${i}`, at: new Date() });
      // The log shows them once every transaction older than them, anywhere on the server, has ended.
      await until('the six events readable', async () => {
        return (await store.readEvents({ after: head, gardens: [g], limit: 10 })).events.length === 6;
      });
      const q = (leaseOwner: string, windows: Record<string, string> = {}) =>
        store.claimDeliveries({
          now: new Date(),
          leaseMs: 60_000,
          leaseOwner,
          limit: 2,
          perEndpoint: 2,
          skipEndpoints: [],
          windows,
        });
      const first = await until('two events of the log', async () => {
        const c = await q('a');
        return c.jobs.length === 2 && c;
      });
      const reach = first.windows[e.id]!;
      // The endpoint's row held by another write (as the dispatcher's own record, on another
      // connection, holds it): the claim waits for it rather than passing over its own window.
      await other.query('BEGIN');
      await other.query('SELECT 1 FROM webhook_endpoints WHERE id = $1 FOR UPDATE', [e.id]);
      const claiming = q('a', { [e.id]: reach });
      await until('the claim to wait for the row', async () => {
        const { rows } = await other.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        return rows[0]!.n > 0;
      });
      await other.query('ROLLBACK');
      // The claim goes on past `reach`; a record made before it (ending the lease at `reach`) lands
      // after it: the lease stays, so nobody else takes what the claim handed out.
      const second = await claiming;
      assert.deepEqual(
        second.jobs.map((j) => plantOf(j.event.data).name),
        ['p2', 'p3'],
      );
      await store.finishDeliveries(
        [],
        [{ endpointId: e.id, leaseOwner: 'a', position: reach, leaseUntil: null }],
      );
      assert.deepEqual((await q('b')).jobs, [], 'the lease is still a’s');
      await store.finishDeliveries(
        [],
        [{ endpointId: e.id, leaseOwner: 'a', position: second.windows[e.id]!, leaseUntil: null }],
      );
      const third = await q('b');
      assert.deepEqual(
        third.jobs.map((j) => plantOf(j.event.data).name),
        ['p4', 'p5'],
        'once a’s window ended, b goes on after it',
      );
    } finally {
      await other.end().catch(() => {});
      await store.close();
    }
  });

  it('claims by four dispatchers at once never hand out one event to one endpoint twice', async () => {
    const store = await POSTGRES.open();
    try {
      const o = user();
      const g = await home(store, o);
      const endpoints = [];
      for (let i = 0; i < 3; i++)
        endpoints.push((await endpoint(store, o, { events: ['plant.created'] })).id);
      const claimers = [0, 1, 2, 3].map(
        (i) => new Claimer(store, `c${i}`, () => i % 2 === 1 && Math.random() < 0.5),
      );
      const seen = new Map<string, string>();
      const twice: string[] = [];
      let writing = true;
      const N = 150;
      const writer = (async () => {
        for (let i = 0; i < N; i += 5) {
          await Promise.all(
            [0, 1, 2, 3, 4].map((k) => plant(store, o, g, { name: `p${i + k}`, at: new Date() })),
          );
        }
        writing = false;
      })();
      await Promise.all(
        claimers.map(async (cl) => {
          const deadline = Date.now() + 30_000;
          while ((writing || seen.size < N * endpoints.length) && Date.now() < deadline) {
            for (const j of await cl.round(20, 5)) {
              const key = `${j.endpoint.id} ${j.event.id}`;
              if (seen.has(key)) twice.push(`${key} to ${seen.get(key)} and ${cl.name}`);
              seen.set(key, cl.name);
            }
          }
        }),
      );
      await writer;
      assert.deepEqual(twice, []);
      assert.equal(seen.size, N * endpoints.length, 'every event to every endpoint');
      assert.ok(new Set(seen.values()).size > 1, 'the work was shared');
    } finally {
      await store.close();
    }
  });

  it("a deliver process's store plans with bitmap scans off; any other keeps the planner's choice", async () => {
    const db = await createPgDatabase();
    const stores = [
      new PgStore({ url: db.url, poolSize: 1, orderedScans: true }),
      new PgStore({ url: db.url, poolSize: 1 }),
    ];
    try {
      const setting = async (s: PgStore) => {
        const pool = (s as unknown as { pool: pg.Pool }).pool;
        return (await pool.query<{ v: string }>("SELECT current_setting('enable_bitmapscan') AS v")).rows[0]!
          .v;
      };
      assert.equal(await setting(stores[0]!), 'off');
      assert.equal(await setting(stores[1]!), 'on');
    } finally {
      for (const s of stores) await s.close();
      await db.drop();
    }
  });
});
