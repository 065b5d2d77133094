// TurnBatch (src/store/turn-batch.ts): the operations queued in one turn of the event loop are
// drained together after its I/O; with follow-ups, what a batch's callers queue next (a request's
// next read) is drained in the same turn, a bounded number of times.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TurnBatch } from '../../src/store/turn-batch.js';

const T = { timeout: 10_000 };

/** A batch that records its drains; each drain also notes whether the next turn has begun. */
function recording(followUps?: { batches: number; hops: number }) {
  const drains: { items: number; turn: number }[] = [];
  let turn = 0;
  const batch = new TurnBatch((items) => {
    drains.push({ items: items.length, turn });
    for (const item of items) item.resolve(item.fn());
  }, followUps);
  // The turn counter moves in a setImmediate queued after the first drain: a later turn.
  const nextTurn = () => setImmediate(() => turn++);
  return { batch, drains, nextTurn };
}

/** A caller that reads, awaits through a few async layers, and reads again, `reads` times. */
async function chain(batch: TurnBatch, reads: number, onFirst?: () => void): Promise<number> {
  let done = 0;
  const layer = async () => batch.push(() => ++done);
  const deeper = async () => layer();
  for (let i = 0; i < reads; i++) {
    await deeper();
    if (i === 0) onFirst?.();
  }
  return done;
}

describe('TurnBatch', () => {
  it('drains what is queued in one turn together', T, async () => {
    const { batch, drains } = recording();
    const all = await Promise.all([batch.push(() => 1), batch.push(() => 2), batch.push(() => 3)]);
    assert.deepEqual(all, [1, 2, 3]);
    assert.deepEqual(
      drains.map((d) => d.items),
      [3],
    );
  });

  it('without follow-ups, a read queued after a batch settles waits for the next turn', T, async () => {
    const { batch, drains, nextTurn } = recording();
    assert.equal(await chain(batch, 2, nextTurn), 2);
    assert.equal(drains.length, 2);
    assert.ok(drains[1]!.turn > drains[0]!.turn, 'the second read drained in a later turn');
  });

  it('with follow-ups, a caller’s next reads are drained in the same turn', T, async () => {
    const { batch, drains } = recording({ batches: 4, hops: 8 });
    let turn = 0;
    let firstTurn = -1;
    const read = async () => {
      await chain(batch, 3, () => {
        firstTurn = turn;
        setImmediate(() => turn++);
      });
      return turn;
    };
    const [a, b] = await Promise.all([read(), read()]);
    // Both callers' three reads: three batches of two, all before the next turn began.
    assert.deepEqual(
      drains.map((d) => d.items),
      [2, 2, 2],
    );
    assert.equal(a, firstTurn);
    assert.equal(b, firstTurn);
  });

  it('drains at most `batches` follow-ups in one turn, then yields', T, async () => {
    const { batch, drains, nextTurn } = recording({ batches: 2, hops: 8 });
    assert.equal(await chain(batch, 7, nextTurn), 7);
    assert.equal(drains.length, 7);
    // The first turn drained the first read and two follow-ups; the rest came in later turns.
    assert.equal(drains.filter((d) => d.turn === drains[0]!.turn).length, 3);
  });

  it('a read queued after the follow-ups are over is drained in the next turn', T, async () => {
    const { batch, drains } = recording({ batches: 4, hops: 2 });
    await batch.push(() => 1);
    // Well after the batch's microtasks: a timer, so the follow-ups have ended.
    await new Promise((r) => setTimeout(r, 1));
    assert.equal(await batch.push(() => 2), 2);
    assert.equal(drains.length, 2);
  });
});
