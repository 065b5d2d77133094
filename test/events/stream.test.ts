import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { EventStreams } from '../../src/events/stream.js';
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
    // The readers' gardens; plants go in as plants:admin.
    for (const id of ['gdn_slow', 'gdn_fast'])
      await store.createGarden({ id, name: id, owner: 'seed', at: new Date() });
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
