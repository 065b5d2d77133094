import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Dispatcher } from '../../src/events/dispatcher.js';
import type { Store } from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';
import { endpoint, home, plant, user } from '../helpers/gardens.js';
import { startReceiver } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';

// One busy endpoint: the dispatcher reads its log ahead of its free slots, yet never has more than
// perEndpoint requests open at the receiver, sends every delivery once (no crash, no retry), records
// every attempt once (many per write), and the endpoint's progress with them.
for (const engine of ENGINES) {
  describe(`dispatcher, one busy endpoint (${engine.name})`, { skip: engine.skip }, () => {
    let store: Store;
    let server: Server;
    let url = '';
    let open = 0;
    let most = 0;
    const received: string[] = [];
    before(async () => {
      store = await engine.open();
      server = createServer((req, res) => {
        most = Math.max(most, ++open);
        req.resume().on('end', () => {
          received.push(req.headers['webhook-id'] as string);
          // Answered on the next turn: requests that overlap are seen overlapping.
          setImmediate(() => {
            open--;
            res.writeHead(204).end();
          });
        });
      });
      await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    });
    after(async () => {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
      await store?.close();
    });

    it('sends each delivery once, at most perEndpoint at a time, and logs each attempt once', async () => {
      const o = user();
      const g = await home(store, o);
      const e = await endpoint(store, o, { events: ['plant.created'] });
      // The endpoint's URL: the helper's is a placeholder, so register one of our own.
      const mine = { ...e, id: `${e.id}-local`, url };
      await store.insertEndpoint(mine);
      await store.deleteEndpoint(e.id);
      const n = 60;
      await Promise.all(
        Array.from({ length: n }, (_, i) => plant(store, o, g, { name: `p${i}`, at: new Date() })),
      );
      const dispatcher = new Dispatcher({
        store,
        timeoutMs: 5_000,
        schedule: [60_000],
        allowPrivate: true,
        pollMs: 20,
        concurrency: 8,
        perEndpoint: 3,
      });
      dispatcher.start();
      try {
        await until('every delivery to arrive', () => received.length >= n, 30_000);
        const logged = await until(
          'every attempt to be logged',
          async () => {
            const got = await store.listAttempts(mine.id, { limit: 1000, beforeId: null });
            return got.length >= n && got;
          },
          30_000,
        );
        assert.equal(new Set(received).size, n, 'each event once');
        assert.equal(received.length, n, 'no delivery twice');
        assert.equal(logged.length, n);
        assert.equal(new Set(logged.map((a) => a.eventId)).size, n, 'each attempt logged once');
        assert.ok(logged.every((a) => a.outcome === 'succeeded' && a.attempt === 1 && a.deliveryId === null));
        assert.ok(most <= 3, `at most perEndpoint open at once (saw ${most})`);
      } finally {
        await dispatcher.stop();
      }
      // Its progress was recorded to the end: an hour on (every lease run out), nothing is left.
      assert.deepEqual(await claimMine(mine.id), []);
    });

    it('a delivery in flight holds the position back while later ones finish; it times out, is retried, nothing is lost', async () => {
      const o = user();
      const g = await home(store, o);
      const receiver = await startReceiver();
      try {
        const e = await endpoint(store, o, { events: ['plant.created'] });
        const mine = { ...e, id: `${e.id}-local`, url: receiver.url };
        await store.insertEndpoint(mine);
        await store.deleteEndpoint(e.id);
        const n = 8;
        for (let i = 0; i < n; i++) await plant(store, o, g, { name: `h${i}`, at: new Date() });
        // The first never answers (it times out); the rest answer at once.
        receiver.answers.push('hang');
        const dispatcher = new Dispatcher({
          store,
          timeoutMs: 500,
          schedule: [20],
          allowPrivate: true,
          pollMs: 20,
          concurrency: 8,
          perEndpoint: 2,
        });
        dispatcher.start();
        try {
          const logged = await until(
            'every event acknowledged',
            async () => {
              const got = await store.listAttempts(mine.id, { limit: 1000, beforeId: null });
              const acked = new Set(got.filter((a) => a.outcome === 'succeeded').map((a) => a.eventId));
              return acked.size >= n && got;
            },
            30_000,
          );
          const retried = logged.filter((a) => a.outcome === 'retrying');
          assert.equal(retried.length, 1, 'the one that timed out');
          assert.equal(retried[0]!.deliveryId, null, 'its first attempt came from the log');
          const again = logged.filter((a) => a.eventId === retried[0]!.eventId && a.outcome === 'succeeded');
          assert.equal(again.length, 1);
          assert.equal(again[0]!.attempt, 2);
          assert.ok(again[0]!.deliveryId !== null, 'retried as a queued delivery');
          assert.equal(logged.length, n + 1, 'no event sent twice besides the retry');
        } finally {
          await dispatcher.stop();
        }
        assert.deepEqual(await claimMine(mine.id), []);
      } finally {
        await receiver.close();
      }
    });

    // What another dispatcher would claim of this endpoint an hour on (every lease run out).
    const claimMine = async (id: string) =>
      (
        await store.claimDeliveries({
          now: new Date(Date.now() + 3_600_000),
          leaseMs: 1000,
          leaseOwner: 'after',
          limit: 1000,
          perEndpoint: 1000,
          skipEndpoints: [],
        })
      ).jobs.filter((j) => j.endpoint.id === id);
  });
}

// Receivers that answer slowly: what a dispatcher claims ahead waits for a slot, and must still be
// covered by its lease when sent. Neither of these lets a delivery go unsent (which the dispatcher
// reports with a warning), and each event arrives once. Each takes about 10 s: a delivery's lease
// covers 8 s of waiting from its claim, and the waits here would pass that.
for (const engine of ENGINES) {
  describe(`dispatcher, slow receivers (${engine.name})`, { skip: engine.skip }, () => {
    let store: Store;
    let server: Server;
    let base = '';
    let delayMs = 0;
    // While set, answers to paths beginning with gated wait for it as well.
    let gate: Promise<void> | null = null;
    let gated = '/';
    // Paths whose receiver answers each event's first attempt 500 at once (its retry as any other).
    const failFirst = new Set<string>();
    const received = new Map<string, string[]>();
    before(async () => {
      store = await engine.open();
      server = createServer((req, res) => {
        req.resume().on('end', () => {
          const list = received.get(req.url!) ?? [];
          const id = req.headers['webhook-id'] as string;
          const first = !list.includes(id);
          list.push(id);
          received.set(req.url!, list);
          if (first && failFirst.has(req.url!)) return res.writeHead(500).end();
          const answer = () => setTimeout(() => res.writeHead(204).end(), delayMs);
          if (gate && req.url!.startsWith(gated)) void gate.then(answer);
          else answer();
        });
      });
      await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(async () => {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
      await store?.close();
    });

    /** `events` plants created in the home garden of a new user with an endpoint at /{path}. */
    const slowEndpoint = async (path: string, events: number) => {
      const o = user();
      const g = await home(store, o);
      const e = await endpoint(store, o, { events: ['plant.created'] });
      await store.insertEndpoint({ ...e, id: `${e.id}-local`, url: `${base}/${path}` });
      await store.deleteEndpoint(e.id);
      for (let i = 0; i < events; i++) await plant(store, o, g, { name: `${path}-${i}`, at: new Date() });
    };

    const run = async (
      {
        attempts = 1,
        ...opts
      }: {
        concurrency: number;
        perEndpoint: number;
        clock?: () => number;
        timeoutMs?: number;
        schedule?: number[];
        store?: Store;
        /** How many times each event reaches its endpoint (2: a first attempt failed, and its retry). */
        attempts?: number;
      },
      paths: string[],
      want: number,
      meanwhile?: () => Promise<void>,
    ) => {
      const warnings: string[] = [];
      const dispatcher = new Dispatcher({
        store,
        timeoutMs: 3_000,
        schedule: [60_000],
        allowPrivate: true,
        pollMs: 50,
        ...opts,
        warn: (_obj, msg) => warnings.push(msg),
      });
      dispatcher.start();
      const got = () => paths.reduce((n, p) => n + (received.get(`/${p}`)?.length ?? 0), 0);
      try {
        await meanwhile?.();
        await until('every delivery to arrive', () => got() >= want, 60_000);
      } finally {
        await dispatcher.stop();
      }
      for (const p of paths) {
        const ids = received.get(`/${p}`) ?? [];
        for (const id of new Set(ids)) {
          assert.equal(
            ids.filter((x) => x === id).length,
            attempts,
            `${id} sent to /${p} ${attempts} time(s)`,
          );
        }
      }
      assert.equal(got(), want);
      assert.deepEqual(
        warnings.filter((m) => m.includes('let go')),
        [],
        'no delivery waited past what its lease covers',
      );
    };

    it("an endpoint given more than its slots: its window's lease is renewed as its deliveries are recorded", async () => {
      // One slot for the endpoint, and a claim gives it 4 (ENDPOINT_HOLD × perEndpoint): the 4th waits
      // three answers, 8.1 s, past the 8 s its claim's lease covers; its window was renewed by the records meanwhile.
      delayMs = 2_700;
      await slowEndpoint('renewed', 4);
      await run({ concurrency: 8, perEndpoint: 1 }, ['renewed'], 4);
    });

    it("queued retries waiting for their endpoint's slot past their claim's lease: their leases are renewed, not let go and claimed again", async () => {
      // Each event's first attempt fails at once; its retry (a queued delivery, due 100 ms later) is
      // answered after 3.5 s. The four retries wait behind the endpoint's one slot and start about
      // 0, 3.5, 7 and 10.5 s after the first's claim, the last 2.5 s past the 8 s a claim covers
      // (the 5 s timeout + 10 s, less 5 s + 2 s), however the four were spread over claims. Were it
      // let go, it would be claimed again once its lease had run out: each must be claimed once.
      delayMs = 3_500;
      failFirst.add('/retried');
      await slowEndpoint('retried', 4);
      const claimed = new Map<string, number>();
      const counting = new Proxy(store, {
        get(target, key) {
          if (key !== 'claimDeliveries') {
            const v = Reflect.get(target, key);
            return typeof v === 'function' ? v.bind(target) : v;
          }
          return async (q: Parameters<Store['claimDeliveries']>[0]) => {
            const c = await target.claimDeliveries(q);
            for (const j of c.jobs) if (j.id !== null) claimed.set(j.id, (claimed.get(j.id) ?? 0) + 1);
            return c;
          };
        },
      });
      try {
        await run(
          { concurrency: 8, perEndpoint: 1, timeoutMs: 5_000, schedule: [100], store: counting, attempts: 2 },
          ['retried'],
          8,
        );
      } finally {
        failFirst.clear();
      }
      assert.equal(claimed.size, 4, 'four queued deliveries');
      assert.deepEqual([...claimed.values()], [1, 1, 1, 1], 'each claimed once');
    });

    it('many endpoints behind few slots: what is claimed ahead is sent while its lease covers it', async () => {
      // One slot in all and 8 endpoints of one delivery each, answering in 1.2 s: what is claimed
      // is held to what the slot starts in time, each answer slower than SLOW_SLOT_MS (1 s) gives
      // the slot back, and none waits past what its claim's lease covers, in a window nothing renews.
      delayMs = 1_200;
      const paths = Array.from({ length: 8 }, (_, i) => `ahead-${i}`);
      for (const p of paths) await slowEndpoint(p, 1);
      await run({ concurrency: 1, perEndpoint: 1 }, paths, 8);
    });

    /**
     * Two slots in all, one each endpoint: `count` endpoints of `each` deliveries whose receiver
     * answers nothing until an endpoint that answers at once, made after them (so claimed after
     * them), has had all six of its deliveries. The receivers' timeout, 30 s, is longer than the
     * six are waited for: no timeout frees a slot.
     */
    const behindHeld = async (count: number, each: number) => {
      delayMs = 0;
      let open = () => {};
      gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      gated = '/held';
      const held = Array.from({ length: count }, (_, i) => `held-${each}-${i}`);
      for (const p of held) await slowEndpoint(p, each);
      await slowEndpoint(`quick-${each}`, 6);
      try {
        await run(
          { concurrency: 2, perEndpoint: 1, timeoutMs: 30_000 },
          [...held, `quick-${each}`],
          count * each + 6,
          async () => {
            try {
              await until(
                'the held endpoints to take the slots',
                () => held.filter((p) => received.has(`/${p}`)).length >= 2,
                30_000,
              );
              await until(
                'the fast endpoint to have all six',
                () => (received.get(`/quick-${each}`)?.length ?? 0) >= 6,
                15_000,
              );
            } finally {
              open();
            }
          },
        );
      } finally {
        gate = null;
        gated = '/';
        open();
      }
    };

    it('receivers that do not answer give their slots back: an endpoint that answers at once behind them is not held up', async () => {
      // Were the slots theirs until they answered, the six would wait for the gate.
      await behindHeld(4, 1);
    });

    it("a process stopped longer than its waiting deliveries' lease covers renews the lease before sending them", async () => {
      // The first of 4 is held at the receiver; then the dispatcher's clock jumps 9 s, as if the
      // process had been stopped: the claim's lease (the 3 s timeout + 10 s) no longer covers an
      // attempt (3 s + 2 s) for the 3 waiting, so their window's lease is renewed first.
      delayMs = 0;
      let offset = 0;
      let open = () => {};
      gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      await slowEndpoint('paused', 4);
      try {
        await run(
          { concurrency: 8, perEndpoint: 1, clock: () => Date.now() + offset },
          ['paused'],
          4,
          async () => {
            await until(
              'the first delivery at the receiver',
              () => (received.get('/paused')?.length ?? 0) >= 1,
              30_000,
            );
            offset = 9_000;
            open();
          },
        );
      } finally {
        gate = null;
        open();
      }
    });
  });
}
