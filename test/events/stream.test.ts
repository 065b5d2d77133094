import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { EventStreams } from '../../src/events/stream.js';
import type { Store } from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';

/** A reader that takes nothing: a real Writable whose writes never complete, like a stalled socket. */
function stalledReader(highWaterMark = 4096): Writable {
  return new Writable({ highWaterMark, write() {} });
}

describe('EventStreams: a reader too slow to keep up', () => {
  let store: Store;
  before(async () => {
    store = await ENGINES[0]!.open();
  });
  after(() => store?.close());

  it('is not buffered without bound, and is disconnected once it has taken nothing for stallMs', async () => {
    const streams = new EventStreams(store, { pollMs: 20, stallMs: 300, maxBufferedBytes: 1 << 20 });
    const reader = stalledReader();
    const head = await store.headPosition();
    const served = streams.serve(reader as unknown as ServerResponse, 'slow', head);
    // Together, so that they commit in one batch, well within stallMs even with an fsync each.
    await Promise.all(
      Array.from({ length: 400 }, (_, i) =>
        store.createPlant({ id: null, owner: 'slow', name: `${'x'.repeat(150)}${i}`, tag: null }, undefined, {
          at: new Date(),
        }),
      ),
    );
    streams.nudge();
    await sleep(100);
    // Reading stopped at the socket's high-water mark: memory stays bounded while it stalls.
    assert.ok(reader.writableLength < 64 * 1024, `${reader.writableLength} bytes buffered`);
    assert.equal(streams.open, 1);
    await Promise.race([served, sleep(3_000).then(() => assert.fail('not disconnected'))]);
    assert.equal(reader.destroyed, true);
    assert.equal(streams.open, 0);
  });

  it('a reader that keeps up is never cut off', async () => {
    const streams = new EventStreams(store, { pollMs: 20, stallMs: 200 });
    let bytes = 0;
    const reader = new Writable({
      write(chunk, _enc, done) {
        bytes += chunk.length;
        done();
      },
    });
    const served = streams.serve(reader as unknown as ServerResponse, 'fast', await store.headPosition());
    for (let i = 0; i < 50; i++) {
      await store.createPlant({ id: null, owner: 'fast', name: `p${i}`, tag: null }, undefined, {
        at: new Date(),
      });
    }
    await sleep(500);
    assert.equal(reader.destroyed, false);
    assert.ok(bytes > 50 * 100);
    streams.closeAll();
    await served;
  });
});
