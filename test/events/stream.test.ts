import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { EventStreams } from '../../src/events/stream.js';
import { createToken } from '../../src/identity/tokens.js';
import type { Store } from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';

/** A reader that takes nothing: a real Writable whose writes never complete, like a stalled socket. */
function stalledReader(highWaterMark = 4096): Writable {
  return new Writable({ highWaterMark, write() {} });
}

/** Watches every write to `w`: the most it ever held unsent, and when it first refused more. */
function watchWrites(w: Writable): { maxBuffered: number; fullSince: number } {
  const seen = { maxBuffered: 0, fullSince: 0 };
  const write = w.write.bind(w) as (...args: unknown[]) => boolean;
  w.write = ((...args: unknown[]) => {
    const ok = write(...args);
    seen.maxBuffered = Math.max(seen.maxBuffered, w.writableLength);
    if (!ok && seen.fullSince === 0) seen.fullSince = Date.now();
    return ok;
  }) as Writable['write'];
  return seen;
}

describe('EventStreams: a reader too slow to keep up', () => {
  let store: Store;
  before(async () => {
    store = await ENGINES[0]!.open();
    // Each reader's garden, its user its owner; plants go in as plants:admin.
    for (const [id, owner] of [
      ['gdn_slow', 'slow-reader'],
      ['gdn_fast', 'fast-reader'],
    ] as const)
      await store.createGarden({ id, name: id, owner, at: new Date() });
  });
  after(() => store?.close());

  it('is not buffered without bound, and is disconnected once it has taken nothing for stallMs', async () => {
    const streams = new EventStreams(store, { pollMs: 20, stallMs: 300, maxBufferedBytes: 1 << 20 });
    const reader = stalledReader();
    const seen = watchWrites(reader);
    const head = await store.headPosition();
    let endedAt = 0;
    const served = streams
      .serve(reader as unknown as ServerResponse, {
        user: 'slow-reader',
        visible: async () => ['gdn_slow'],
        authorized: async () => true,
        position: head,
        slot: streams.reserve('reader')!,
      })
      .then(() => {
        endedAt = Date.now();
      });
    // Together, so that they commit in one batch, well within stallMs even with an fsync each.
    await Promise.all(
      Array.from({ length: 400 }, (_, i) =>
        store.createPlant(
          {
            id: null,
            owner: 'slow',
            garden: 'gdn_slow',
            admin: true,
            name: `${'x'.repeat(150)}${i}`,
            tag: null,
          },
          undefined,
          {
            at: new Date(),
          },
        ),
      ),
    );
    streams.nudge();
    await until('the stalled reader disconnected', () => endedAt > 0, 3_000);
    await served;
    assert.equal(reader.destroyed, true);
    assert.equal(streams.open, 0);
    // Reading stopped at the socket's high-water mark: memory stayed bounded while it stalled.
    assert.ok(seen.fullSince > 0, 'the reader filled up');
    assert.ok(seen.maxBuffered < 64 * 1024, `${seen.maxBuffered} bytes buffered at most`);
    // Cut off for having taken nothing for stallMs, not before.
    assert.ok(
      endedAt - seen.fullSince >= 300,
      `disconnected ${endedAt - seen.fullSince} ms after it filled up`,
    );
  });

  it('a reader that keeps up is never cut off', async () => {
    const streams = new EventStreams(store, { pollMs: 20, stallMs: 200 });
    let bytes = 0;
    let text = '';
    const reader = new Writable({
      write(chunk: Buffer, _enc, done) {
        bytes += chunk.length;
        text += chunk.toString();
        done();
      },
    });
    const head = await store.headPosition();
    let ended = false;
    const served = streams
      .serve(reader as unknown as ServerResponse, {
        user: 'fast-reader',
        visible: async () => ['gdn_fast'],
        authorized: async () => true,
        position: head,
        slot: streams.reserve('reader')!,
      })
      .then(() => {
        ended = true;
      });
    // Events keep coming for well over stallMs, so that a reader would be cut off by then if
    // keeping up were not enough.
    const started = Date.now();
    for (let i = 0; i < 50 || Date.now() - started < 3 * 200; i++) {
      await store.createPlant(
        { id: null, owner: 'fast', garden: 'gdn_fast', admin: true, name: `p${i}`, tag: null },
        undefined,
        {
          at: new Date(),
        },
      );
    }
    const events = (await store.readEvents({ after: head, gardens: ['gdn_fast'], limit: 10_000 })).events;
    assert.ok(events.length >= 50);
    const ids = events.map((e) => e.id);
    const received = () => [...text.matchAll(/^id: (.+)$/gm)].map((m) => m[1]);
    // Until every byte has arrived, or the stream ended short of that.
    await until(`all ${ids.length} events at the reader`, () => ended || received().length >= ids.length);
    assert.equal(ended, false, 'never cut off');
    assert.deepEqual(received(), ids);
    assert.equal(reader.destroyed, false);
    assert.equal(streams.open, 1);
    assert.ok(bytes > 50 * 100);
    streams.closeAll();
    await served;
  });
});

/** A reader that takes what is written at once, or holds it back while paused (a slow client). */
class Reader extends Writable {
  text = '';
  paused = false;
  private held: (() => void)[] = [];
  constructor(highWaterMark = 16 * 1024) {
    super({ highWaterMark });
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.text += chunk.toString();
    if (this.paused) this.held.push(done);
    else done();
  }
  resume(): void {
    this.paused = false;
    for (const done of this.held.splice(0)) done();
  }
  ids(): string[] {
    return [...this.text.matchAll(/^id: (.+)$/gm)].map((m) => m[1]!);
  }
}

/** The store, with its reads of the log and of garden members counted. */
function counted(store: Store): { store: Store; reads: { events: number; members: number } } {
  const reads = { events: 0, members: 0 };
  const wrapped = Object.create(store) as Store;
  wrapped.onEvents = (listener) => store.onEvents(listener);
  wrapped.readEvents = (q) => {
    reads.events++;
    return store.readEvents(q);
  };
  wrapped.membersOf = (g) => {
    reads.members++;
    return store.membersOf(g);
  };
  return { store: wrapped, reads };
}

for (const engine of ENGINES) {
  describe(`EventStreams on ${engine.name}: one reader of the log for every stream`, {
    skip: engine.skip,
  }, () => {
    let store: Store;
    before(async () => {
      store = await engine.open();
    });
    after(() => store?.close());

    const garden = async (id: string, owner: string) => {
      await store.createGarden({ id, name: id, owner, at: new Date() });
    };
    const create = (g: string, name: string) =>
      store.createPlant({ id: null, owner: 'maker', garden: g, admin: true, name, tag: null }, undefined, {
        at: new Date(),
      });
    // The garden's n events after `head`, once all can be read (on PostgreSQL a transaction open
    // anywhere on the server holds the readable end of the log back while it is open).
    const readable = (head: string, g: string, n: number) =>
      until(`${n} events of ${g} readable`, async () => {
        const { events } = await store.readEvents({ after: head, gardens: [g], limit: 10_000 });
        return events.length >= n ? events.map((e) => e.id) : undefined;
      });
    const open = (streams: EventStreams, user: string, gardens: string[] | null, position: string) => {
      const reader = new Reader();
      const served = streams.serve(reader as unknown as ServerResponse, {
        user,
        visible: async () => gardens,
        authorized: async () => true,
        position,
        slot: streams.reserve(user)!,
      });
      return { reader, served };
    };

    it('reads each batch of the log once, whatever the number of streams, and hands each its own', async () => {
      const { store: s, reads } = counted(store);
      // A slow poll: on PostgreSQL a transaction open anywhere on the server may hold the readable
      // end of the log back, and the poll reads again after it.
      const pollMs = 500;
      const streams = new EventStreams(s, { pollMs });
      const n = 50;
      for (let i = 0; i < n; i++) await garden(`gdn_many${i}`, `many${i}`);
      const head = await store.headPosition();
      const readers = Array.from({ length: n }, (_, i) => open(streams, `many${i}`, [`gdn_many${i}`], head));
      const admin = open(streams, 'root', null, head);
      await until('every stream following the feed', () => streams.feedStats.live === n + 1);
      reads.events = 0;
      reads.members = 0;
      const started = Date.now();
      // Together, so that they land in one batch or a few.
      await Promise.all(Array.from({ length: n }, (_, i) => create(`gdn_many${i}`, `m${i}`)));
      streams.nudge();
      await until('each stream has its event', () => readers.every((r) => r.reader.ids().length === 1));
      await until('the admin stream has them all', () => admin.reader.ids().length === n);
      for (let i = 0; i < n; i++) assert.match(readers[i]!.reader.text, new RegExp(`"name":"m${i}"`));
      // One nudge: one read of the log (or two, had a commit raced it), and one per poll, not one
      // per stream.
      const polls = Math.ceil((Date.now() - started) / pollMs);
      assert.ok(reads.events <= 2 + polls, `${reads.events} reads of the log for ${n + 1} streams`);
      assert.ok(reads.members <= reads.events, `${reads.members} reads of members`);
      streams.closeAll();
      await Promise.all([...readers, admin].map((r) => r.served));
    });

    it('a stream resuming while events are written joins the feed with no gap and no duplicate', async () => {
      await garden('gdn_resume', 'resumer');
      const streams = new EventStreams(store, { pollMs: 50 });
      const head = await store.headPosition();
      // Keeps the feed going while the other one catches up.
      const live = open(streams, 'resumer', ['gdn_resume'], head);
      await until('the first stream follows the feed', () => streams.feedStats.live === 1);
      let stop = false;
      let written = 0;
      const writing = (async () => {
        while (!stop) {
          await create('gdn_resume', `r${written++}`);
          streams.nudge();
        }
      })();
      await until('some events written', () => written >= 30);
      // Resumes from before all of them, while they keep coming.
      const resumed = open(streams, 'resumer', ['gdn_resume'], head);
      await until('the resumed stream joined the feed', () => streams.feedStats.live === 2);
      const joinedAt = written;
      await until('events written after it joined', () => written >= joinedAt + 30);
      stop = true;
      await writing;
      const ids = await readable(head, 'gdn_resume', written);
      await until(
        'every event at both',
        () => live.reader.ids().length >= ids.length && resumed.reader.ids().length >= ids.length,
      );
      assert.deepEqual(resumed.reader.ids(), ids);
      assert.deepEqual(live.reader.ids(), ids);
      streams.closeAll();
      await Promise.all([live.served, resumed.served]);
    });

    it('a slow reader drops out of the feed, then catches up in order, while the others keep receiving', async () => {
      await garden('gdn_lag', 'lagger');
      const streams = new EventStreams(store, { pollMs: 50, stallMs: 60_000 });
      const head = await store.headPosition();
      const slow = open(streams, 'lagger', ['gdn_lag'], head);
      const fast = open(streams, 'lagger', ['gdn_lag'], head);
      await until('both follow the feed', () => streams.feedStats.live === 2);
      slow.reader.paused = true;
      const n = 120;
      // Each about 1 KiB: the slow reader's 16 KiB fill up well before the last.
      for (let i = 0; i < n; i += 20) {
        await Promise.all(
          Array.from({ length: 20 }, (_, j) => create('gdn_lag', `${'y'.repeat(900)}${i + j}`)),
        );
        streams.nudge();
      }
      // Readable once no transaction older than the writes is open anywhere on the server (PostgreSQL).
      const ids = await readable(head, 'gdn_lag', n);
      assert.equal(ids.length, n);
      await until('the fast reader has every event', () => fast.reader.ids().length >= n);
      assert.deepEqual(fast.reader.ids(), ids);
      assert.ok(slow.reader.ids().length < n, 'the slow reader is behind');
      assert.equal(streams.feedStats.live, 1, 'the slow reader left the feed');
      slow.reader.resume();
      await until('the slow reader has caught up', () => slow.reader.ids().length >= n);
      assert.deepEqual(slow.reader.ids(), ids);
      await until('the slow reader is back on the feed', () => streams.feedStats.live === 2);
      await create('gdn_lag', 'after');
      streams.nudge();
      await until(
        'both have the next one',
        () => slow.reader.ids().length === n + 1 && fast.reader.ids().length === n + 1,
      );
      streams.closeAll();
      await Promise.all([slow.served, fast.served]);
    });

    it('a member removed from a garden is shown nothing more of it from the next event on', async () => {
      await garden('gdn_shared', 'keeper');
      const actor = 'keeper';
      assert.ok('ok' in (await store.putMember('gdn_shared', actor, 'guest', 'viewer', new Date())));
      const streams = new EventStreams(store, { pollMs: 50 });
      const head = await store.headPosition();
      const guest = open(streams, 'guest', ['gdn_shared'], head);
      const keeper = open(streams, 'keeper', ['gdn_shared'], head);
      await until('both follow the feed', () => streams.feedStats.live === 2);
      await create('gdn_shared', 'before');
      streams.nudge();
      await until('the guest sees the first', () => guest.reader.ids().length === 1);
      assert.ok('ok' in (await store.removeMember('gdn_shared', actor, 'guest')));
      await create('gdn_shared', 'after');
      streams.nudge();
      await until('the keeper sees both', () => keeper.reader.ids().length === 2);
      assert.equal(guest.reader.ids().length, 1);
      streams.closeAll();
      await Promise.all([guest.served, keeper.served]);
    });

    // A stream's first read of the log asks the reader's gardens, then reads their events in a
    // later snapshot. A garden joined in between (another instance made the reader's home garden at
    // its first create there, and the plant in it) has its event in that snapshot: the stream must
    // show it, not pass over it. One left in between, with an event after the leaving, must not be.
    /** A stream of `user` whose first ask of its gardens answers them as they were before `change`. */
    const racing = (streams: EventStreams, user: string, head: string, change: () => Promise<void>) => {
      let first = true;
      const reader = new Reader();
      const served = streams.serve(reader as unknown as ServerResponse, {
        user,
        visible: async () => {
          const gardens = (await store.memberships(user)).map((m) => m.garden);
          if (first) {
            first = false;
            await change();
          }
          return gardens;
        },
        authorized: async () => true,
        position: head,
        slot: streams.reserve(user)!,
      });
      const plants = () =>
        [...reader.text.matchAll(/^data: (.+)$/gm)].map((m) => String(JSON.parse(m[1]!).data.id));
      return { served, plants };
    };
    const made = async (g: string, name: string) => {
      const r = await create(g, name);
      assert.ok('ok' in r);
      return String(r.ok.id);
    };

    it('a garden joined while a stream first reads the log: the event it was joined for is shown', async () => {
      const streams = new EventStreams(store, { pollMs: 50 });
      let joined = '';
      const s = racing(streams, 'joiner', await store.headPosition(), async () => {
        await store.createGarden({ id: 'gdn_joined', name: 'joined', owner: 'joiner', at: new Date() });
        joined = await made('gdn_joined', 'in the garden joined');
      });
      await until('the stream to show the plant of the garden joined', () => s.plants().includes(joined));
      streams.closeAll();
      await s.served;
    });

    it('a garden left while a stream first reads the log: an event after the leaving is not shown', async () => {
      await garden('gdn_left', 'keeper2');
      await garden('gdn_own', 'leaver');
      assert.ok('ok' in (await store.putMember('gdn_left', 'keeper2', 'leaver', 'viewer', new Date())));
      const streams = new EventStreams(store, { pollMs: 50 });
      let after = '';
      const s = racing(streams, 'leaver', await store.headPosition(), async () => {
        assert.ok('ok' in (await store.removeMember('gdn_left', 'keeper2', 'leaver')));
        after = await made('gdn_left', 'after leaving');
      });
      // A later event of the reader's own: once it is shown, everything before it was read.
      await until('the leaving and the plant after it to be committed', () => after !== '');
      const marker = await made('gdn_own', 'marker');
      streams.nudge();
      await until('the stream to show the marker', () => s.plants().includes(marker));
      assert.deepEqual(s.plants(), [marker], 'only the marker: not the plant made after leaving');
      streams.closeAll();
      await s.served;
    });

    it('built-in tokens are asked about in statements of their own: a revoked one ends its streams, a valid one counts as used', async () => {
      await garden('gdn_tokens', 'token-user');
      const used = new Set<string>();
      const streams = new EventStreams(store, {
        pollMs: 20,
        authCheckMs: 50,
        tokenUsed: (id) => used.add(id),
      });
      const head = await store.headPosition();
      const tokens = await Promise.all(
        [0, 1, 2].map(() =>
          createToken(store, { user: 'token-user', scopes: ['plants:read'], name: null, expiresInMs: null }),
        ),
      );
      let verifierAsked = 0;
      const ended = new Map<string, number>();
      const served = tokens.flatMap((t) =>
        [0, 1].map(() =>
          streams
            .serve(new Reader() as unknown as ServerResponse, {
              user: 'token-user',
              visible: async () => ['gdn_tokens'],
              authorized: async () => {
                verifierAsked++;
                return true;
              },
              credential: `Bearer ${t.secret}`,
              tokenId: t.record.id,
              position: head,
              slot: streams.reserve('token-user')!,
            })
            .then(() => ended.set(t.record.id, (ended.get(t.record.id) ?? 0) + 1)),
        ),
      );
      await until('each token counted as used', () => tokens.every((t) => used.has(t.record.id)));
      assert.deepEqual(await store.revokeToken(tokens[1]!.record.id, new Date()), { ok: true });
      await until("the revoked token's two streams ended", () => ended.get(tokens[1]!.record.id) === 2);
      assert.equal(streams.open, 4);
      assert.equal(verifierAsked, 0, 'built-in tokens are not asked one by one');
      streams.closeAll();
      await Promise.all(served);
    });

    it('asks once per credential, whatever the number of streams sharing it, and ends them all when it fails', async () => {
      await garden('gdn_cred', 'cred-user');
      const streams = new EventStreams(store, { pollMs: 20, authCheckMs: 50 });
      const head = await store.headPosition();
      let asked = 0;
      let inFlight = 0;
      let mostInFlight = 0;
      let valid = true;
      // Each check takes a moment: checks made per stream would overlap.
      const authorized = async () => {
        asked++;
        mostInFlight = Math.max(mostInFlight, ++inFlight);
        await new Promise((resolve) => setTimeout(resolve, 5));
        inFlight--;
        return valid;
      };
      const served = Array.from({ length: 10 }, () =>
        streams.serve(new Reader() as unknown as ServerResponse, {
          user: 'cred-user',
          visible: async () => ['gdn_cred'],
          authorized,
          credential: 'Bearer same',
          position: head,
          slot: streams.reserve('cred-user')!,
        }),
      );
      await until('asked a few times', () => asked >= 5);
      // Ten streams, one credential: one check at a time, not ten together.
      assert.equal(mostInFlight, 1);
      valid = false;
      // The streams' timers do not hold the process open: wait with one that does (else the test
      // runner may find nothing left to run and fail the pending wait).
      await until('every stream ended by the failed check', () => streams.open === 0);
      await Promise.all(served);
      assert.equal(streams.open, 0);
    });
  });
}
